"""Which weights a fit changes: low-rank adapters on the encoder (LoRA, through ``peft``) and the
parts a fit trains (``optim.trainable``: encoder, layer mix, head).

Adapters are added after the starting weights are loaded (their names then match the start's), and
the encoder's own weights stay frozen. Export merges them into the weights
(:func:`merge_adapters`), so an exported metric is a plain model that scores without ``peft``.
"""

from __future__ import annotations

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
