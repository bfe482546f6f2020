"""How an encoder runs when it only infers (scoring, BERTScore): precision, batch sizes, transfers;
and the precision training defaults to (:func:`training_precision`).

- **Precision** ``fp32 | bf16 | auto``. ``bf16`` converts the encoder's weights to bfloat16 once
  (no per-op autocast casts); the head and the final scores stay in fp32. ``auto`` is bf16 on a
  CUDA device that supports it, else fp32 (a CPU without native bf16 emulates it, slowly).
- **Batches** are cut from sequences sorted by token count, so padding stays small. On the CPU a
  batch holds ``batch_size`` rows (default 64). On CUDA it holds as many rows as fit a budget of
  padded tokens (:data:`GPU_BATCH_TOKENS`), so short sentences fill the device as well as long
  ones; an explicit ``batch_size`` caps the rows there too.
- **Transfers** to CUDA come from pinned host memory and do not block, so the next batch is
  prepared while the device computes.
- **Attention kernels**: :func:`attention_kernels` keeps scaled-dot-product attention on the flash,
  memory-efficient and math kernels. cuDNN's kernel (first choice for bf16 on recent GPUs) builds
  a plan for every new sequence length, and length-sorted batches bring a new length each time.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np
import torch

from lightning_metrics.errors import LightningMetricsError

PRECISIONS = ("auto", "fp32", "bf16")
CPU_BATCH_ROWS = 64
GPU_BATCH_TOKENS = 65_536  # padded tokens per encoder batch on CUDA
GPU_BATCH_ROWS = 4096  # rows per encoder batch on CUDA, when batch_size is not given


@dataclass(frozen=True)
class ScoreOptions:
    """How a metric runs when it scores, as one value that travels from the command line to the encoder.

    ``batch_size``: rows per encoder batch (default 64 on the CPU; on CUDA, batches fill a budget of
    padded tokens); ``device``: ``auto`` (CUDA when present), ``cpu``, ``cuda``, ``cuda:1``...;
    ``devices > 1`` scores learned metrics with Lightning's DDP; ``progress``: a progress bar (None:
    on for long inputs).
    """

    batch_size: int | None = None
    device: str = "auto"
    devices: int = 1
    progress: bool | None = None

    def on_device(self) -> "ScoreOptions":
        """The same options with ``device`` resolved and checked (:func:`resolve_device`)."""
        return replace(self, device=resolve_device(self.device))

    def replace(self, **changes) -> "ScoreOptions":
        return replace(self, **changes)


def resolve_device(device: str | torch.device) -> str:
    """``auto`` is CUDA when present, else the CPU; any other name is checked: a device this machine
    does not have is one :class:`LightningMetricsError` naming it, not a traceback mid-run."""
    text = str(device)
    if text == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        target = torch.device(text)
    except (RuntimeError, ValueError):
        raise LightningMetricsError(f"--device {text}: not a device name (auto, cpu, cuda, cuda:1, ...)") from None
    if target.type == "cuda":
        if not torch.cuda.is_available():
            raise LightningMetricsError(f"--device {text}: this machine has no CUDA device; use --device cpu or auto")
        if target.index is not None and target.index >= torch.cuda.device_count():
            raise LightningMetricsError(
                f"--device {text}: this machine has {torch.cuda.device_count()} CUDA device(s), numbered from 0"
            )
    elif target.type == "mps" and not torch.backends.mps.is_available():
        raise LightningMetricsError(f"--device {text}: MPS is not available here; use --device cpu or auto")
    elif target.type not in ("cpu", "cuda", "mps"):
        raise LightningMetricsError(f"--device {text}: this framework runs on cpu, cuda or mps")
    return text


def check_precision(precision: str | None) -> str:
    """``precision`` checked against :data:`PRECISIONS` (None is ``auto``)."""
    value = "auto" if precision is None else str(precision)
    if value not in PRECISIONS:
        raise LightningMetricsError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    return value


def resolve_precision(precision: str | None, device: str | torch.device) -> str:
    """``fp32`` or ``bf16``: ``auto`` is bf16 on a CUDA device with bf16 support, else fp32."""
    value = check_precision(precision)
    if value != "auto":
        return value
    target = torch.device(device)
    return "bf16" if target.type == "cuda" and torch.cuda.is_bf16_supported() else "fp32"


def training_precision(accelerator: str = "auto", bf16_on_cpu: bool = False) -> str:
    """The Lightning precision training defaults to: ``bf16-mixed`` on a GPU; on a CPU ``32-true``,
    or with ``bf16_on_cpu`` ``bf16-mixed`` where the CPU computes bf16 natively (AVX512-BF16 or AMX:
    about 2x faster; without them bf16 is emulated, 16x slower). ``fit`` keeps fp32 on a CPU; the
    quickstart, a timed demo, takes native bf16."""
    if torch.cuda.is_available() and accelerator in ("auto", "gpu", "cuda"):
        return "bf16-mixed"
    return "bf16-mixed" if bf16_on_cpu and native_cpu_bf16() else "32-true"


NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def native_cpu_bf16() -> bool:
    """Whether this CPU computes bf16 natively (AVX512-BF16 or AMX). oneDNN calls bf16 supported on any
    AVX-512 CPU, where it is emulated (a MiniLM training step 16x slower than fp32 measured here), so
    where the CPU lists its flags (Linux) they decide; elsewhere oneDNN's answer stands."""
    flags = cpu_flags()
    if flags is not None:
        return any(flag in flags for flag in NATIVE_BF16_FLAGS)
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> set[str] | None:
    """The feature flags of this machine's first CPU, or None where the system does not list them."""
    try:
        with open(cpuinfo, encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        return None
    return None


def dtype_of(precision: str) -> torch.dtype:
    """The weight dtype of a resolved precision."""
    return torch.bfloat16 if precision == "bf16" else torch.float32


def batch_limits(
    device: str | torch.device, batch_size: int | None = None, batch_tokens: int | None = None
) -> tuple[int, int | None]:
    """``(max rows, max padded tokens)`` per encoder batch on ``device`` (see the module docstring)."""
    if batch_size is not None and int(batch_size) < 1:
        raise LightningMetricsError(f"batch_size must be at least 1, got {batch_size}")
    if torch.device(device).type == "cuda":
        return int(batch_size or GPU_BATCH_ROWS), int(batch_tokens or GPU_BATCH_TOKENS)
    return int(batch_size or CPU_BATCH_ROWS), (int(batch_tokens) if batch_tokens else None)


def length_batches(
    lengths: Sequence[int], max_rows: int, max_tokens: int | None = None, longest_first: bool = False
) -> list[np.ndarray]:
    """Indices of ``lengths`` sorted by length (stable), cut into batches of at most ``max_rows``
    rows whose row count times their longest length stays within ``max_tokens`` (a longer single
    row still makes a batch of its own)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(-lengths if longest_first else lengths, kind="stable")
    batches, start = [], 0
    while start < len(order):
        stop = min(start + max_rows, len(order))
        if max_tokens is not None:
            # padded size of order[start:k] is (k - start) * longest of them
            longest = np.maximum.accumulate(lengths[order[start:stop]])
            fits = np.nonzero(longest * np.arange(1, stop - start + 1) <= max_tokens)[0]
            stop = start + (int(fits[-1]) + 1 if len(fits) else 1)
        batches.append(order[start:stop])
        start = stop
    return batches


def to_device(tensors: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    """``tensors`` on ``device``; to CUDA from pinned memory without blocking the host."""
    if device.type != "cuda":
        return {k: v.to(device) for k, v in tensors.items()}
    return {k: v.pin_memory().to(device, non_blocking=True) for k, v in tensors.items()}


def attention_kernels():
    """A context in which scaled-dot-product attention avoids cuDNN's kernel (see the module docstring)."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:  # older torch: no cuDNN attention either
        return nullcontext()
    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])
