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


class _ClosedFormInverseLR(torch.optim.lr_scheduler.LRScheduler):
    """stable-audio-tools' `InverseLR` (stable_audio_tools/training/utils.py; underfit keeps a
    copy in underfit/training/optim.py), rewritten from its closed form: at `last_epoch` k,
    lr = (1 − warmup^(k+1)) · max(final_lr, base_lr · (1 + k/inv_gamma)^−power)."""

    def __init__(self, optimizer, inv_gamma, power, warmup, final_lr=0.0):
        self.inv_gamma, self.power, self.warmup, self.final_lr = inv_gamma, power, warmup, final_lr
        super().__init__(optimizer)

    def get_lr(self):
        k = self.last_epoch
        ramp = 1 - self.warmup ** (k + 1)
        decay = (1 + k / self.inv_gamma) ** -self.power
        return [ramp * max(self.final_lr, base * decay) for base in self.base_lrs]


@pytest.mark.parametrize(
    "settings",
    [
        dict(inv_gamma=1e6, power=0.5, warmup=0.995),  # underfit's Stable Audio 3 templates
        dict(inv_gamma=20, power=1.0, warmup=0.9, final_lr=3e-4),
    ],  # decay and floor within reach
)
def test_inverse_lr_steps_as_stable_audio_tools_scheduler(settings):
    """The lr of every optimizer step, as a LambdaLR of `inverse_lr` and as InverseLR, both
    stepped after each optimizer step as Lightning and underfit's loop do; and resumed."""
    peak = 1e-3

    def optimizer():
        return torch.optim.AdamW([torch.nn.Parameter(torch.zeros(3))], lr=peak)

    ours_opt, theirs_opt = optimizer(), optimizer()
    final = settings.get("final_lr", 0.0) / peak
    keys = ("inv_gamma", "power", "warmup")
    schedule = inverse_lr(**{k: settings[k] for k in keys}, final=final)
    ours = lr_scheduler(ours_opt, schedule)
    theirs = _ClosedFormInverseLR(theirs_opt, **settings)
    seen = []
    for step in range(400):
        lr = ours_opt.param_groups[0]["lr"]
        assert lr == pytest.approx(theirs_opt.param_groups[0]["lr"], rel=1e-12, abs=0)
        seen.append(lr)
        if step == 150:
            saved = ours_opt.state_dict()
        for opt, scheduler in ((ours_opt, ours), (theirs_opt, theirs)):
            opt.step()
            scheduler.step()
    assert seen[0] == pytest.approx(peak * (1 - settings["warmup"]), rel=1e-12)
    resumed_opt = optimizer()
    resumed_opt.load_state_dict(saved)
    lr_scheduler(resumed_opt, schedule, step=150)
    assert resumed_opt.param_groups[0]["lr"] == seen[150]
