"""Which weights a fit changes, and how fast: low-rank adapters on the encoder (LoRA, through ``peft``),
the parts a fit trains (``optim.trainable``: encoder, layer mix, head), and the optimiser's parameter
groups (layer-wise decayed learning rates) with their schedule.

Adapters are added after the starting weights are loaded (their names then match the start's), and
the encoder's own weights stay frozen. Export merges them into the weights
(:func:`merge_adapters`), so an exported metric is a plain model that scores without ``peft``.
"""

from __future__ import annotations

import re

import torch

from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.models.options import Adapters, plain

PARTS = ("encoder", "layer_mix", "head")


def add_adapters(encoder: torch.nn.Module, options: Adapters) -> None:
    """LoRA adapters of ``options.rank`` on the encoder's linear layers named by ``options.modules``
    (name suffixes), in place; the encoder's own weights are frozen. Rank 0 adds nothing."""
    if options.rank <= 0:
        return
    try:
        from peft import LoraConfig, inject_adapter_in_model
    except ImportError:
        raise LightningMetricsError(
            "model.adapters needs the peft package: pip install 'lightning-metrics[adapters]'"
        ) from None
    config = LoraConfig(
        r=int(options.rank),
        lora_alpha=float(options.alpha),
        lora_dropout=float(options.dropout),
        target_modules=list(options.modules),
        bias="none",
    )
    try:
        inject_adapter_in_model(config, encoder)
    except ValueError as err:  # peft's message when no module name matches
        names = sorted({n.rsplit(".", 1)[-1] for n, m in encoder.named_modules() if isinstance(m, torch.nn.Linear)})
        raise LightningMetricsError(
            f"model.adapters.modules {list(options.modules)} match no linear layer of the encoder "
            f"(its linear layers end in: {', '.join(names)}): {str(err).splitlines()[0]}"
        ) from None


def has_adapters(encoder: torch.nn.Module) -> bool:
    return any(".lora_" in name for name, _ in encoder.named_parameters())


def merge_adapters(model) -> dict | None:
    """Fold ``model``'s adapters into the encoder's weights, in place, and record the model as one
    without adapters; returns the adapter settings that were merged (None when there were none)."""
    if not has_adapters(model.encoder):
        return None
    from peft.tuners.lora import LoraLayer

    for name, module in list(model.encoder.named_modules()):
        if isinstance(module, LoraLayer):
            module.merge(safe_merge=True)
            parent_name, _, child = name.rpartition(".")
            parent = model.encoder.get_submodule(parent_name) if parent_name else model.encoder
            setattr(parent, child, module.get_base_layer())
    merged = plain(model.adapters)
    model.adapters = Adapters()
    model._store_hparams()  # the hyper-parameters as checkpoints and exports keep them, adapters now none
    return merged


def limit_training(model) -> set[str]:
    """Freeze what ``model.optim.trainable`` leaves out; returns the encoder parameter names a fit may
    train (the ones ``nr_frozen_epochs`` thaws): none unless ``encoder`` is trainable, only the
    adapters when there are adapters, and never embeddings kept frozen."""
    trainable = set(model.optim.trainable)
    unknown = sorted(trainable - set(PARTS))
    if unknown or not trainable:
        raise LightningMetricsError(
            f"model.optim.trainable {list(model.optim.trainable)}: name one or more of {', '.join(PARTS)}"
        )
    for name, param in model.named_parameters():
        part = "encoder" if name.startswith("encoder.") else "layer_mix" if name.startswith("layer_mix.") else "head"
        if part not in trainable:
            param.requires_grad_(False)
    if not any(param.requires_grad for param in model.parameters()):
        raise LightningMetricsError(
            f"model.optim.trainable {list(model.optim.trainable)} leaves nothing to train in this model"
            + (" (model.readout.layer_mix is false)" if model.layer_mix is None else "")
        )
    return {name for name, param in model.encoder.named_parameters() if param.requires_grad}


_LAYER = re.compile(r"(?:^|\.)(?:layer|layers|block)\.(\d+)\.")


def parameter_groups(model) -> list[dict]:
    """AdamW groups of ``model``: layer-wise decayed encoder LRs (embeddings lowest), the head at ``lr_head``;
    what the fit leaves frozen (kept embeddings, adapters' base, ``optim.trainable``) is not optimised."""
    optim = model.optim
    groups: dict[tuple[float, float], list] = {}
    for name, param in model.named_parameters():
        if name.startswith("encoder."):
            if name[len("encoder.") :] not in model._tunable_encoder:
                continue  # frozen for the whole run (kept embeddings, adapters' base, trainable): not optimised
            lr = encoder_lr(model, name[len("encoder.") :])
        elif not param.requires_grad:
            continue  # a part optim.trainable leaves out
        else:
            lr = optim.lr_head
        decay = 0.0 if param.ndim == 1 else optim.weight_decay  # no decay on biases and norms
        groups.setdefault((lr, decay), []).append(param)
    return [{"params": ps, "lr": lr, "weight_decay": wd} for (lr, wd), ps in groups.items()]


def encoder_lr(model, name: str) -> float:
    """The learning rate of the encoder weight ``name``: ``lr_encoder`` decayed once per layer above it."""
    optim = model.optim
    if name.startswith("embeddings"):
        return optim.lr_encoder * optim.layerwise_decay**model.n_layers
    match = _LAYER.search(name)
    if match:
        return optim.lr_encoder * optim.layerwise_decay ** (model.n_layers - 1 - int(match.group(1)))
    return optim.lr_encoder


def optimizer_and_schedule(model, total_steps: int) -> dict:
    """AdamW over :func:`parameter_groups` (fused on CUDA: one kernel per step instead of a launch per group
    and tensor), with a linear warm-up over ``optim.warmup_ratio`` of the steps, then a linear decay to 0."""
    optimizer = torch.optim.AdamW(parameter_groups(model), fused=model.device.type == "cuda")
    total = max(1, total_steps)
    warmup = int(model.optim.warmup_ratio * total)

    def schedule(step: int) -> float:
        if step < warmup:
            return (step + 1) / (warmup + 1)
        return max(0.0, (total - step) / max(1, total - warmup))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}
