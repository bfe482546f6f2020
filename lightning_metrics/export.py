"""Export a trained metric as a self-contained folder, and load it back without training code.

Folder (format version :data:`FORMAT_VERSION`): ``metric.json`` (family, hyper-parameters,
inputs, target statistics, versions, training summary), ``model.safetensors`` (all weights),
the encoder's ``config.json`` and tokenizer files, and a ``README.md`` model card. Writing goes
to a temporary folder beside the target and ends with a rename, so an interrupted export
leaves nothing under the target name. Loading reads JSON, safetensors and tokenizer files only:
no pickle is ever opened.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import torch
from pytorch_lightning.callbacks import Callback

from lightning_metrics import __version__
from lightning_metrics.errors import LightningMetricsError

FORMAT_VERSION = 1


def _families() -> dict:
    from lightning_metrics import models

    return {name: getattr(models, name) for name in ("BleurtRegressor", "CometEstimator", "CometReferenceless", "CometRanker")}


def model_from_checkpoint(path: str | os.PathLike):
    """The metric model stored in a Lightning checkpoint (read with ``weights_only=True``)."""
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError) as e:
        raise LightningMetricsError(f"{path}: not a readable Lightning checkpoint ({str(e).splitlines()[0]})") from None
    hparams = dict(checkpoint.get("hyper_parameters", {}))
    family = checkpoint.get("metric_family")
    if family not in _families():
        raise LightningMetricsError(f"{path}: no known metric family in the checkpoint (got {family!r})")
    hparams["init_from"] = None
    model = _families()[family](**hparams)
    model.load_state_dict(checkpoint["state_dict"])
    return model, checkpoint


def export_checkpoint(checkpoint_path: str | os.PathLike, out: str | os.PathLike, force: bool = False) -> Path:
    """Write the folder for a checkpoint atomically; returns the folder."""
    from safetensors.torch import save_file

    target = Path(out)
    if target.exists() and not force:
        raise LightningMetricsError(f"{target} exists; pass --force to replace it")
    model, checkpoint = model_from_checkpoint(checkpoint_path)
    tmp = target.parent / f".{target.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
        save_file(state, tmp / "model.safetensors")
        model.encoder.config.save_pretrained(tmp)
        from lightning_metrics.encoders import load_tokenizer

        load_tokenizer(model.hparams.encoder).save_pretrained(tmp)
        meta = _metadata(model, checkpoint, checkpoint_path)
        (tmp / "metric.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        (tmp / "README.md").write_text(model_card(target.name, meta), encoding="utf-8")
        if target.exists():
            old = target.parent / f".{target.name}.old-{os.getpid()}"
            target.rename(old)
            tmp.rename(target)
            shutil.rmtree(old)
        else:
            tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _metadata(model, checkpoint: dict, source) -> dict:
    hparams = {k: v for k, v in dict(model.hparams).items() if k not in ("encoder", "init_from")}
    dev = {}
    for key, state in checkpoint.get("callbacks", {}).items() if isinstance(checkpoint.get("callbacks"), dict) else []:
        if key.startswith("ModelCheckpoint") and state.get("best_model_score") is not None:
            dev[state.get("monitor") or "score"] = float(state["best_model_score"])
    return {
        "format_version": FORMAT_VERSION,
        "family": type(model).__name__,
        "inputs": list(model.inputs),
        "targets": list(model.targets),
        "target_mean": model.target_mean.tolist(),
        "target_std": model.target_std.tolist(),
        "hyper_parameters": hparams,
        "encoder": str(model.hparams.encoder),
        "framework_version": __version__,
        "trained": {"epoch": checkpoint.get("epoch"), "global_step": checkpoint.get("global_step"), "checkpoint": Path(source).name},
        "dev_correlations": dev,
        "training_data": checkpoint.get("data_summary", {}),
    }


def model_card(name: str, meta: dict) -> str:
    """The README.md written into every export."""
    dev = ", ".join(f"{k} {v:.4f}" for k, v in meta["dev_correlations"].items()) or "none recorded"
    return f"""# {name}

A learned evaluation metric exported by lightning-metrics {meta['framework_version']}.

- **Family:** {meta['family']} (inputs: {', '.join(meta['inputs'])}); targets {', '.join(meta['targets'])};
  the score is the first target on the training data's scale (mean {meta['target_mean'][0]:.4f},
  std {meta['target_std'][0]:.4f}).
- **Base encoder:** {meta['encoder']}; trained {meta['trained']['epoch']} epoch(s), {meta['trained']['global_step']} steps.
- **Training data:** {_data_line(meta.get("training_data", {}))}.
- **Dev correlations:** {dev}.

## Use

```python
from lightning_metrics import load_metric
load_metric("path/to/{name}").score(mt=["..."], ref=["..."]).scores
```

or `lightning-metrics score --model path/to/{name} -t hyp.txt -r ref.txt`.

## Intended use and limitations

Scores are comparable only with scores from this same checkpoint (see the signature each
score carries). The metric reflects its training data: language pairs, domains and rating
protocols it never saw may rank outputs less reliably; check with `lightning-metrics evaluate`
on your own ratings before relying on it.
"""


def _data_line(data: dict) -> str:
    if not data:
        return "not recorded"
    lps = ", ".join(data.get("language_pairs") or []) or "no language-pair column"
    return f"{data['source']} ({data['kind']}): {data['train_rows']} training rows, {data['val_rows']} validation rows; language pairs: {lps}"


def folder_hash(path: Path) -> str:
    """Short sha256 of the weights, for signatures."""
    digest = hashlib.sha256()
    with (path / "model.safetensors").open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:10]


class ExportBest(Callback):
    """Export the best checkpoint (else the last) when ``fit`` ends; add it to a config's callbacks:

    ``{class_path: lightning_metrics.export.ExportBest, init_args: {out: checkpoints/NAME}}``.
    Needs a ``ModelCheckpoint`` callback; runs on global rank 0 only.
    """

    def __init__(self, out: str, force: bool = True):
        self.out, self.force = out, force

    def on_fit_end(self, trainer, pl_module) -> None:
        if not trainer.is_global_zero:
            return
        saver = trainer.checkpoint_callback
        path = (saver.best_model_path or saver.last_model_path) if saver is not None else ""
        if not path:
            raise LightningMetricsError(f"ExportBest({self.out}): no checkpoint was saved; add a ModelCheckpoint callback")
        folder = export_checkpoint(path, self.out, force=self.force)
        print(f"exported {Path(path).name} -> {folder}")
