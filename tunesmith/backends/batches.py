"""Batches for the encoders: items of one shape together, within a memory budget.

An encoder (a VAE, a text encoder) runs a batch of items of the same shape in one call: one
pass over the weights and one set of kernel launches for many items, where a loop pays them
per item. Items of different shapes never share a batch (padding would change what a
convolution sees near the edge), so items are grouped by a `shape` first ("buckets"), then
each bucket is cut into batches whose summed `cost` (bytes of activations, estimated by the
caller) stays within the placement's budget.

`stream` groups an iterable lazily and holds at most one unfinished batch per shape, and no
more than the budget's worth of items across them; `plan` does the same over a list. The encode
loop (`tunesmith.encoding`) plans the missing items from what they say before decoding (a
picture's size, a clip's length in its header), so each process decodes only its own batches,
one at a time, and never holds the whole dataset.

The budget (`memory_budget`) is fixed per device kind and machine, never read from the free
memory of the moment, so that the same missing items make the same batches every time:

- cuda, mps, metal: a quarter of the device's memory (total, or the recommended working set
  on Apple's unified memory); the rest is the model's weights and the caller's other work.
- cpu: CPU_BUDGET. On a CPU a batch saves the per-call overhead, which matters for small
  items; past the processor's cache a batch is slower than the same items one by one.

A batch's matrix products round differently from one item's (the kernels split the work
another way), so a batched result equals the one-at-a-time result to float rounding, not bit
for bit; each encoder states its tolerance and tests it.

Not handled: several devices (the budget is the default device's); an estimate that is too
low (the caller may catch an out-of-memory error and halve, see `halving`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from typing import TypeVar

from tunesmith.backends.placement import Placement

T = TypeVar("T")
R = TypeVar("R")

# Past this many items a batch saves little more call overhead (measured on the tiny SDXL VAE
# at 64 px, one thread: 8 items took 0.45 of one-by-one's time, 16 items 0.38), and a larger
# batch only delays the first results.
MAX_ITEMS = 16
# A CPU batch whose activations outgrow the cache is slower than one item at a time (measured
# on a 32 MiB L3, the tiny SDXL VAE at 256 px, 10 MiB a picture by `picture_cost`: batches of 8
# took 1.05 of one-by-one's time, of 16 1.8). 16 MiB keeps a batch's working set within common
# last-level caches.
CPU_BUDGET = 16 << 20
ACCELERATOR_SHARE = 0.25


def memory_budget(placement: Placement) -> int:
    """Bytes of activations one batch may take on the placement's device."""
    if placement.device == "cpu":
        return CPU_BUDGET
    if placement.backend == "torch" and placement.device == "cuda":
        import torch

        total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    elif placement.backend == "torch" and placement.device == "mps":
        import torch

        total = torch.mps.recommended_max_memory()
    elif placement.backend == "mlx":
        import mlx.core as mx

        total = mx.metal.device_info()["max_recommended_working_set_size"]
    else:
        return CPU_BUDGET
    return int(total * ACCELERATOR_SHARE)


def stream(
    items: Iterable[T],
    shape: Callable[[T], Hashable],
    cost: Callable[[T], int],
    budget: int,
    max_items: int = MAX_ITEMS,
) -> Iterator[list[T]]:
    """Yield batches of items of one shape, each within `budget` (summed `cost`) and
    `max_items`; an item over the budget by itself is a batch of one. A batch is yielded as
    soon as the next item would not fit, and while the unfinished batches together hold more
    than `budget`, the one that waited longest for an item is yielded as it is (items of many
    shapes never pile up); the rest at the end, in that order too. Within a batch items keep
    their order."""
    open_: dict[Hashable, tuple[list[T], int]] = {}
    held = 0
    for item in items:
        key, size = shape(item), cost(item)
        batch, used = open_.pop(key, ([], 0))
        if batch and (used + size > budget or len(batch) >= max_items):
            held -= used
            yield batch
            batch, used = [], 0
        open_[key] = ([*batch, item], used + size)  # last in the dict: the newest
        held += size
        while held > budget and open_:
            oldest = next(iter(open_))
            batch, used = open_.pop(oldest)
            held -= used
            yield batch
    for batch, _ in open_.values():
        yield batch


def plan(
    items: Sequence[T],
    shape: Callable[[T], Hashable],
    cost: Callable[[T], int],
    budget: int,
    max_items: int = MAX_ITEMS,
) -> list[list[T]]:
    """`stream` over a list, as a list of batches."""
    return list(stream(items, shape, cost, budget, max_items))


def missing(items: Iterable[T], key: Callable[[T], str], has: Callable[[str], bool]) -> list[T]:
    """The items whose entry (`key`) the store lacks (`has`), one per key: two files with the
    same bytes are encoded once, and the second finds the first's entry."""
    first: dict[str, T] = {}
    for item in items:
        first.setdefault(key(item), item)
    return [item for k, item in first.items() if not has(k)]


def halving(run: Callable[[list[T]], R], batch: list[T], out_of_memory: type[BaseException]):
    """`run(batch)`, and where it raises `out_of_memory`, the batch's halves, each the same way;
    yields (items, result) pairs in order. One item that does not fit raises."""
    try:
        yield batch, run(batch)
    except out_of_memory:
        if len(batch) == 1:
            raise
        middle = len(batch) // 2
        yield from halving(run, batch[:middle], out_of_memory)
        yield from halving(run, batch[middle:], out_of_memory)
