"""Process parallelism: an order-preserving process-parallel map over chunks of a list (CPU-bound
pure-Python work), and what an encoder needs to cross into a spawned process."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def default_num_proc() -> int:
    """The CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def map_chunks(
    fn: Callable[[Sequence[T]], list[R]], items: Sequence[T], num_proc: int = 1, min_chunk: int = 2000
) -> list[R]:
    """``fn(items)`` computed in ``num_proc`` processes on contiguous chunks, results in input order.

    ``fn`` takes a list and returns one result per item; it must be a module-level function.
    Inputs shorter than ``2 * min_chunk`` run in this process, where start-up would cost more
    than it saves.
    """
    items = list(items)
    num_proc = min(num_proc, len(items) // min_chunk)
    if num_proc <= 1:
        return fn(items)
    bounds = [len(items) * i // num_proc for i in range(num_proc + 1)]
    chunks = [items[a:b] for a, b in zip(bounds, bounds[1:])]
    # fork (as DataLoader workers do) needs no importable __main__; spawn where fork is absent
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    with ProcessPoolExecutor(num_proc, mp_context=multiprocessing.get_context(method)) as pool:
        return [r for part in pool.map(fn, chunks) for r in part]


def drop_hidden_state_hooks(encoder) -> None:
    """Before a model is pickled into a spawned process (``ddp_spawn``): drop the forward hooks
    transformers 5 installs on first use to capture hidden states. They are closures, so they
    cannot be pickled; transformers installs them again on the next forward pass."""
    for module in encoder.modules():
        for key, hook in list(module._forward_hooks.items()):
            if getattr(hook, "__name__", "") == "output_capturing_hook":
                del module._forward_hooks[key]
        if getattr(module, "_output_capturing_hooks_installed", False):
            module._output_capturing_hooks_installed = False


def register_hidden_state_capture(encoder) -> None:
    """After a model is unpickled in a spawned process: transformers 5 records ``hidden_states``
    through a per-process registry that model construction fills, and this process never
    constructed the model, so register its modules again (else ``hidden_states`` comes back None)."""
    try:
        from transformers.utils.output_capturing import _CAN_RECORD_REGISTRY
    except ImportError:  # older transformers record hidden states without a registry
        return
    for module in encoder.modules():
        if hasattr(module, "_can_record_outputs") and getattr(module, "_can_record_outputs", None):
            _CAN_RECORD_REGISTRY[module] = module._can_record_outputs
