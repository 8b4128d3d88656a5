"""Run one function over many inputs on several processes, results in input order.

The labels stage's analysis and the manifest's hashing use this. The size of the pool comes
from the compute resource (`ComputeResource.workers`, 0 for one worker a core). Workers are
started with "forkserver" where the platform has it, else "spawn", never plain "fork": a
forked copy of a process that has already loaded Essentia, torch or Dagster's threads is not
safe to use, and a fork server is a fresh process that has loaded none of them.

The results are the same as with one worker, in the same order: each task is independent and
the pool's `map` returns results in input order.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any


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
    size = min(pool_size(workers), len(tasks))
    if size <= 1:
        return [function(task) for task in tasks]
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    with ProcessPoolExecutor(max_workers=size, mp_context=context) as pool:
        return list(pool.map(function, tasks, chunksize=1))
