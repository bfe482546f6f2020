"""Order-preserving process-parallel map over chunks of a list, for CPU-bound pure-Python work."""

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


def map_chunks(fn: Callable[[Sequence[T]], list[R]], items: Sequence[T], num_proc: int = 1, min_chunk: int = 2000) -> list[R]:
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
