"""Batches for the encoders: one shape a batch, within the budget and the item cap, never more
than the budget's worth of unfinished batches held, and halving on running out of memory."""

import pytest

from tunesmith.backends import batches
from tunesmith.backends.placement import Placement


def test_items_of_one_shape_share_batches_within_the_budget_and_the_cap():
    items = [("a", 4), ("a", 4), ("b", 4), ("a", 4), ("a", 4), ("b", 4)]
    made = batches.plan(items, lambda i: i[0], lambda i: i[1], budget=100, max_items=3)
    assert [[s for s, _ in b] for b in made] == [["a", "a", "a"], ["a"], ["b", "b"]]
    made = batches.plan(items, lambda i: i[0], lambda i: i[1], budget=8)
    # a a, flushed when b makes 12 held; a a fills, so the waiting b goes; the last b, the a's
    assert [[s for s, _ in b] for b in made] == [["a", "a"], ["b"], ["a", "a"], ["b"]]


def test_an_item_over_the_budget_is_a_batch_of_one_and_nothing_piles_up():
    held = []

    def items():
        for shape in range(10):  # ten shapes: each item its own bucket
            held.append(shape)
            yield (shape, 3)

    for batch in batches.stream(items(), lambda i: i[0], lambda i: i[1], budget=7):
        assert len(batch) == 1
        assert len(held) <= 3  # at most 7 bytes' worth waits: two items, the third flushes
        held.clear()
    assert batches.plan([("x", 50), ("x", 50)], lambda i: i[0], lambda i: i[1], 10) == [
        [("x", 50)],
        [("x", 50)],
    ]


def test_halving_splits_a_batch_that_runs_out_of_memory():
    def run(batch):
        if len(batch) > 2:
            raise MemoryError
        return sum(batch)

    assert list(batches.halving(run, [1, 2, 3, 4, 5], MemoryError)) == [
        ([1, 2], 3),
        ([3], 3),
        ([4, 5], 9),
    ]
    with pytest.raises(MemoryError):
        list(batches.halving(lambda b: run(b * 3), [1], MemoryError))


def test_the_cpu_budget_is_fixed():
    cpu = Placement("torch", "cpu", "float32", "test")
    assert batches.memory_budget(cpu) == batches.CPU_BUDGET


def test_missing_keeps_one_item_per_key_and_only_what_the_store_lacks():
    items = [("a.png", "k1"), ("copy-of-a.png", "k1"), ("b.png", "k2"), ("c.png", "k3")]
    todo = batches.missing(items, lambda i: i[1], lambda key: key == "k3")
    assert todo == [("a.png", "k1"), ("b.png", "k2")]
