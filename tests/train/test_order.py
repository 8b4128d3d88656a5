"""The one resumable order: each policy's passes, the epochs it numbers, and a resume from
`state_dict()` and the generator's state that draws on exactly as the run would have."""

from __future__ import annotations

import json

import pytest
import torch

from tunesmith.train.order import DROP, SHORT, WRAP, Order, OrderPolicy


def perms(seed: int, count: int, passes: int) -> list[list[int]]:
    """The passes a generator seeded with `seed` draws: torch.randperm, one after another."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randperm(count, generator=g).tolist() for _ in range(passes)]


def test_wrap_fills_a_step_from_the_next_pass():
    order = Order(5, 2, seed=3, policy=OrderPolicy(end=WRAP))
    first, second = perms(3, 5, 2)
    steps = [order.next() for _ in range(3)]
    assert sum(steps, []) == first + second[:1]  # the third step reaches into pass 2
    assert order.epoch == 2 and not order.ends_pass


def test_short_ends_each_pass_with_what_is_left_and_says_so():
    order = Order(5, 2, seed=3, policy=OrderPolicy(end=SHORT))
    first, second = perms(3, 5, 2)
    got = [(order.next(), order.ends_pass, order.epoch) for _ in range(4)]
    assert got[:3] == [(first[:2], False, 1), (first[2:4], False, 1), (first[4:], True, 1)]
    assert got[3] == (second[:2], False, 2)
    assert order.steps_per_epoch() == 3


def test_drop_drops_the_partial_step_and_counts_epochs_from_the_policys_first():
    order = Order(5, 2, seed=3, policy=OrderPolicy(end=DROP, first_epoch=0))
    first, second = perms(3, 5, 2)
    got = [(order.next(), order.epoch) for _ in range(3)]
    assert got == [(first[:2], 0), (first[2:4], 0), (second[:2], 1)]  # first[4] is dropped


def test_fewer_items_than_a_step_oversample_with_replacement():
    order = Order(3, 4, seed=0, policy=OrderPolicy(end=DROP, oversample=100, first_epoch=0))
    g = torch.Generator().manual_seed(0)
    expected = torch.randint(3, (400,), generator=g).tolist()
    assert order.next() == expected[:4] and order.order == expected
    # a dataset as large as a step is shuffled as usual
    even = Order(4, 4, seed=0, policy=OrderPolicy(end=DROP, oversample=100, first_epoch=0))
    assert even.next() == perms(0, 4, 1)[0]


@pytest.mark.parametrize("end", [WRAP, DROP, SHORT])
def test_a_resumed_order_draws_on_exactly_as_the_run_would_have(end):
    policy = OrderPolicy(end=end)
    straight = Order(7, 3, seed=11, policy=policy)
    expected = [straight.next() for _ in range(9)]
    first = Order(7, 3, seed=11, policy=policy)
    drawn = [first.next() for _ in range(4)]
    tensors, document = first.state("sampler")
    document = json.loads(json.dumps(document))  # as the state's JSON holds it
    assert set(tensors) == {"rng.sampler"} and set(document) == {"sampler", "epoch"}
    assert set(document["sampler"]) == {"epoch", "position", "order"}
    resumed = Order(7, 3, seed=0, policy=policy)
    resumed.load_state(tensors, document, "sampler")
    assert drawn + [resumed.next() for _ in range(5)] == expected
    assert resumed.epoch == straight.epoch


def test_an_unknown_end_is_refused():
    with pytest.raises(ValueError, match="expected wrap, drop or short"):
        Order(3, 1, 0, OrderPolicy(end="loop"))
