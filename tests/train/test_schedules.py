"""The lr schedules: values at the points that define them, InverseLR against its formula, and
resuming a LambdaLR from the step alone."""

from __future__ import annotations

import math

import pytest
import torch

from tunesmith.train.schedules import (
    constant,
    horizon_steps,
    inverse_lr,
    lr_scheduler,
    warmup_cosine,
)


def test_warmup_cosine_at_its_defining_steps():
    f = warmup_cosine(1000)  # warmup 5 %: 50 steps; cosine over the other 950
    assert f(0) == 0.0  # HOT-Step's lr(0) = 0
    assert f(25) == pytest.approx(0.5)
    assert f(50) == pytest.approx(1.0)  # end of warmup: the peak
    assert f(525) == pytest.approx(0.55)  # half way down the cosine: (1 + 0.1) / 2
    assert f(50 + 950 // 4 + 0.5) == pytest.approx(0.1 + 0.45 * (1 + math.cos(math.pi / 4)))
    assert f(1000) == pytest.approx(0.1)  # the floor at the end of the horizon
    assert f(5000) == pytest.approx(0.1)  # and after it
    values = [f(s) for s in range(1001)]
    assert all(a < b for a, b in zip(values[:50], values[1:51], strict=True))
    assert all(a >= b for a, b in zip(values[50:-1], values[51:], strict=True))


def test_horizon_counts_optimizer_steps():
    # HOT-Step's LoKr defaults on 14 songs: 250 epochs, accumulation 4.
    assert horizon_steps(250, 14, 4) == 1000
    assert horizon_steps(1, 4, 4) == 1
    with pytest.raises(ValueError, match="accumulation"):
        horizon_steps(10, 4, 0)


def test_constant_and_inverse_lr_against_its_formula():
    assert {constant()(s) for s in (0, 7, 10**6)} == {1.0}
    f = inverse_lr()  # underfit's template: inv_gamma 1e6, power 0.5, warmup 0.995
    assert f(0) == pytest.approx(0.005, rel=1e-12)  # (1 - 0.995) * 1
    for step in (1, 100, 1000, 10**6, 10**7):
        expected = (1 - 0.995 ** (step + 1)) * (1 + step / 1e6) ** -0.5
        assert f(step) == pytest.approx(expected, rel=1e-12)
    assert f(10**6) == pytest.approx(2**-0.5, rel=1e-9)  # inv_gamma steps: (1/2)^power
    floored = inverse_lr(inv_gamma=10, power=1, warmup=0.0, final=0.25)
    assert floored(90) == 0.25 and floored(10) == 0.5


@pytest.mark.parametrize("bad", [dict(warmup=1.0), dict(floor=1.5)])
def test_bad_schedule_settings_are_refused(bad):
    with pytest.raises(ValueError):
        warmup_cosine(100, **bad)


def test_a_scheduler_resumes_from_the_step_alone():
    def optimizer():
        p = torch.nn.Parameter(torch.zeros(2))
        q = torch.nn.Parameter(torch.zeros(2))
        return torch.optim.AdamW([{"params": [p], "lr": 1e-3}, {"params": [q], "lr": 2e-2}])

    schedule = warmup_cosine(60)
    first = optimizer()
    scheduler = lr_scheduler(first, schedule)
    seen = []
    for _ in range(60):
        seen.append([g["lr"] for g in first.param_groups])
        first.step()
        scheduler.step()
        if len(seen) == 25:
            saved = first.state_dict()
    assert seen[0] == [0.0, 0.0]
    second = optimizer()
    second.load_state_dict(saved)
    resumed = lr_scheduler(second, schedule, step=25)
    for step in range(25, 60):
        assert [g["lr"] for g in second.param_groups] == pytest.approx(seen[step], rel=1e-12)
        second.step()
        resumed.step()
