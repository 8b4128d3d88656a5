"""Run one function over many inputs on several processes, results in input order.

The labels stage's analysis and the manifest's hashing use this (`run_all`). The size of the
pool comes from the compute resource (`ComputeResource.workers`, 0 for one worker a core).
Workers are started with "forkserver" where the platform has it, else "spawn", never plain
"fork": a forked copy of a process that has already loaded Essentia, torch or Dagster's
threads is not safe to use, and a fork server is a fresh process that has loaded none of them.

The results are the same as with one worker, in the same order: each task is independent and
the pool's `map` returns results in input order.

The encode loop (`tunesmith.encoding`) shares what is missing out over `encode_workers`
processes: `deal` hands out whole batches, `pool` keeps the processes for several rounds (the
files, then the texts) so that a model a process loads for one task (`kept`) serves its later
ones, and `process_device` gives each process a GPU of its own where there are several.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")
_KEPT: dict[Hashable, Any] = {}  # in a worker process: what `kept` made, for its later tasks


def cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS reports it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows have no sched_getaffinity
        return os.cpu_count() or 1


def pool_size(workers: int) -> int:
    """`workers` as configured: 0 means one worker a core; negative is an error."""
    if workers < 0:
        raise ValueError(f"workers must be 0 (one a core) or a positive number, got {workers}")
    return workers or cores()


def run_all(function: Callable[[Any], Any], tasks: Sequence[Any], workers: int) -> list[Any]:
    """[function(task) for task in tasks], on up to `workers` processes.

    `function` must be importable by name (a module-level function), as each worker imports
    it. With one worker, or one task, nothing is started and the calls run here.
    """
    return list(each(function, tasks, workers))


def each(function: Callable[[Any], Any], tasks: Sequence[Any], workers: int) -> Iterator[Any]:
    """`run_all`'s results one by one, in the order of `tasks`, as they are ready."""
    size = min(pool_size(workers), len(tasks))
    if size <= 1:
        yield from (function(task) for task in tasks)
        return
    with ProcessPoolExecutor(max_workers=size, mp_context=_context()) as pool:
        yield from pool.map(function, tasks, chunksize=1)


def _context():
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


@contextmanager
def pool(workers: int) -> Iterator[Callable[[Callable, Sequence], list] | None]:
    """A `run_all` on one set of up to `workers` processes for several calls, or None where
    `workers` ≤ 1 (the caller works on its own). A process starts when a task first needs it,
    and all end on leaving; nothing is started where no call is made."""
    if workers <= 1:
        yield None
        return
    with ProcessPoolExecutor(max_workers=workers, mp_context=_context()) as executor:
        yield lambda function, tasks: list(executor.map(function, tasks, chunksize=1))


def kept(key: Hashable, make: Callable[[], T]) -> T:
    """In a worker process of a `pool`: what `make()` returned on the first call for `key`
    (made then), so a model the process loads serves all its tasks."""
    if key not in _KEPT:
        _KEPT[key] = make()
    return _KEPT[key]


def deal(groups: Sequence[T], workers: int) -> list[list[T]]:
    """`groups` (batches, kept whole) dealt out to `workers` processes: group j to process
    j mod `workers`, each process's in order; a process that would get nothing is left out."""
    count = max(workers, 1)
    return [list(groups[i::count]) for i in range(min(count, len(groups)))]


def process_device(device: str, number: int) -> str:
    """The device of the process that takes task `number` (0, 1, ...) first: with several CUDA
    GPUs, one each in turn; else `device` itself."""
    if device == "cuda":
        import torch

        if torch.cuda.device_count() > 1:
            return f"cuda:{number % torch.cuda.device_count()}"
    return device
