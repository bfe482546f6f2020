"""Export a trained checkpoint as a self-contained metric folder (written through ``storage.artifact``).

The folder holds the weights (safetensors), the encoder's config and tokenizer, the metadata,
a model card and a manifest; :mod:`lightning_metrics.storage.artifact` owns its layout and writes it
atomically. :class:`ExportBest` exports the best checkpoint when ``fit`` ends.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from pytorch_lightning.callbacks import Callback

from lightning_metrics.errors import LightningMetricsError
from lightning_metrics.storage.artifact import SIGNAL_ENCODER, WEIGHTS, write_export
from lightning_metrics.storage.checkpoint import read_checkpoint
from lightning_metrics.version import __version__


def model_from_checkpoint(path: str | os.PathLike):
    """The metric model stored in a Lightning checkpoint (read with ``weights_only=True``) and the checkpoint."""
    from lightning_metrics.models import FAMILIES
    from lightning_metrics.models.options import grouped

    checkpoint = read_checkpoint(path)
    family = checkpoint.get("metric_family")
    if family not in FAMILIES:
        raise LightningMetricsError(
            f"{path}: no known metric family in the checkpoint (got {family!r}; known: {sorted(FAMILIES)})"
        )
    # LightningCLI adds its own keys (_class_path, _instantiator) to the saved hyper-parameters
    hparams = {k: v for k, v in dict(checkpoint.get("hyper_parameters", {})).items() if not k.startswith("_")}
    hparams = {**grouped(hparams), "init_from": None}  # checkpoints of earlier versions hold flat keys
    model = FAMILIES[family](**hparams, encoder_weights=False)  # every weight comes from the checkpoint
    model.load_state_dict(checkpoint["state_dict"])
    return model, checkpoint


def export_checkpoint(checkpoint_path: str | os.PathLike, out: str | os.PathLike, force: bool = False) -> Path:
    """Write the metric folder for a checkpoint atomically, adapters merged into the weights; returns the folder."""
    from lightning_metrics.models.tuning import merge_adapters

    target = Path(out)
    if target.exists() and not force:
        raise LightningMetricsError(f"{target} exists; pass --force to replace it")
    model, checkpoint = model_from_checkpoint(checkpoint_path)
    merged = merge_adapters(model)  # an export is a plain model: it scores without peft
    meta = _metadata(model, checkpoint, checkpoint_path)
    if merged:
        meta["adapters_merged"] = merged
    return write_export(
        target, meta, lambda folder: save_model_files(model, folder), model_card(target.name, meta), force=force
    )


def save_model_files(model, folder: Path) -> None:
    """The weights, the encoder's config and the tokenizer of ``model``, into ``folder``."""
    from safetensors.torch import save_file

    from lightning_metrics.encoders.loading import load_encoder, load_tokenizer, no_weight_bars

    save_file({k: v.detach().contiguous() for k, v in model.state_dict().items()}, folder / WEIGHTS)
    model.encoder.config.save_pretrained(folder)
    load_tokenizer(model.hparams.encoder).save_pretrained(folder)
    spec = getattr(model, "signal_spec", None)
    if spec is not None and spec.needs_encoder:  # a hybrid model's BERTScore encoder travels with it
        encoder, tokenizer = load_encoder(spec.encoder)
        with no_weight_bars():
            encoder.save_pretrained(folder / SIGNAL_ENCODER)
        tokenizer.save_pretrained(folder / SIGNAL_ENCODER)


def _metadata(model, checkpoint: dict, source) -> dict:
    dev = {}
    for key, state in checkpoint.get("callbacks", {}).items() if isinstance(checkpoint.get("callbacks"), dict) else []:
        if key.startswith("ModelCheckpoint") and state.get("best_model_score") is not None:
            dev[state.get("monitor") or "score"] = float(state["best_model_score"])
    trained = {"epoch": checkpoint.get("epoch"), "global_step": checkpoint.get("global_step")}
    data = checkpoint.get("data_summary", {})
    meta = metadata(model, {**trained, "checkpoint": Path(source).name}, dev, data)
    if data.get("max_length"):  # scoring reads what training read, unless --max-length says otherwise
        meta["max_length"] = int(data["max_length"])
    return meta


def metadata(model, trained: dict, dev: dict, training_data: dict) -> dict:
    """The export metadata of ``model``: ``trained`` (epoch, global_step, checkpoint name), the
    ``dev`` correlations of its best checkpoint and the summary of its ``training_data``."""
    hparams = {
        k: v for k, v in dict(model.hparams).items() if k not in ("encoder", "init_from") and not k.startswith("_")
    }
    return {
        "family": type(model).__name__,
        "inputs": list(model.inputs),
        "higher_is_better": bool(model.higher_is_better),
        "targets": list(model.targets),
        "target_mean": model.target_mean.tolist(),
        "target_std": model.target_std.tolist(),
        "hyper_parameters": hparams,
        "encoder": str(model.hparams.encoder),
        "framework_version": __version__,
        "trained": trained,
        "dev_correlations": dev,
        "training_data": training_data,
        "signals": None
        if model.signal_spec is None
        else {
            "names": list(model.signal_spec.names),
            "layer": model.signal_spec.layer,
            "encoder": str(model.signal_spec.encoder),
        },
    }


def model_card(name: str, meta: dict) -> str:
    """The README.md written into every export."""
    dev = ", ".join(f"{k} {v:.4f}" for k, v in meta["dev_correlations"].items()) or "none recorded"
    mean, std = meta["target_mean"], meta["target_std"]
    scale = f"mean {mean[0]:.4f}, std {std[0]:.4f}" if mean else "no target: the score is a distance"
    trained = meta["trained"]
    return f"""# {name}

A learned evaluation metric exported by lightning-metrics {meta["framework_version"]}.

- **Family:** {meta["family"]} (inputs: {", ".join(meta["inputs"])}); targets {", ".join(meta["targets"]) or "none"};
  the score is the first target on the training data's scale ({scale}).
- **Base encoder:** {meta["encoder"]}; trained {trained["epoch"]} epoch(s), {trained["global_step"]} steps.
- **Training data:** {_data_line(meta.get("training_data", {}))}.
- **Dev correlations:** {dev}.{_origin_line(meta.get("imported_from"))}

## Use

```python
from lightning_metrics import load_metric
load_metric("path/to/{name}").score(mt=["..."], ref=["..."]).scores
```

or `lightning-metrics score --model path/to/{name} -t hyp.txt -r ref.txt`.

Every file of this folder is listed with its sha256 in `manifest.json` and checked when it
loads, so edit nothing here (this card included): a changed file refuses to load.

## Intended use and limitations

Scores are comparable only with scores from this same checkpoint (see the signature each
score carries). The metric reflects its training data: language pairs, domains and rating
protocols it never saw may rank outputs less reliably; check with `lightning-metrics evaluate`
on your own ratings before relying on it.
"""


def _origin_line(origin: dict | None) -> str:
    if not origin:
        return ""
    return (
        f"\n- **Imported from:** {origin['peer']} {origin['class']}, `{origin['file']}` (sha256 "
        f"{origin['sha256'][:16]}...); its scores are the peer's own, on the peer's scale."
    )


def _data_line(data: dict) -> str:
    if not data:
        return "not recorded"
    lps = ", ".join(data.get("language_pairs") or []) or "no language-pair column"
    rows = f"{data['train_rows']} training rows, {data['val_rows']} validation rows"
    line = f"{data['source']} ({data['kind']}): {rows}; language pairs: {lps}"
    if data.get("sources"):
        line += (
            f"; scores normalised per source and language pair: {data.get('normalise')}; rows weighted by: "
            f"{data.get('weight_by') or 'nothing'}"
            + "".join(
                f"\n  - source `{s['name']}`: {s['path']} ({s['train_rows']} training, {s['val_rows']} validation "
                f"rows, weight {s['weight']})"
                for s in data["sources"]
            )
        )
    return line


class ExportBest(Callback):
    """Export the best checkpoint (else the last) when ``fit`` ends; add it to a config's callbacks:

    ``{class_path: lightning_metrics.training.ExportBest, init_args: {out: checkpoints/NAME}}``.
    Without a ``ModelCheckpoint`` (``enable_checkpointing: false``) it exports the weights as training
    left them. Runs on global rank 0 only.
    """

    def __init__(self, out: str, force: bool = True):
        self.out, self.force = out, force

    def on_fit_end(self, trainer, pl_module) -> None:
        saver = trainer.checkpoint_callback
        path = (saver.best_model_path or saver.last_model_path) if saver is not None else ""
        if path:
            if trainer.is_global_zero:
                print(f"exported {Path(path).name} -> {export_checkpoint(path, self.out, force=self.force)}")
            return
        with tempfile.TemporaryDirectory(prefix="lm-export-") as tmp:  # every rank takes part in the save
            final = Path(tmp) / "final.ckpt"
            trainer.save_checkpoint(final)
            if trainer.is_global_zero:
                print(f"exported the final weights -> {export_checkpoint(final, self.out, force=self.force)}")
