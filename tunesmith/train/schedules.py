"""Learning-rate schedules: pure functions of the optimizer step that return a multiplier.

A schedule is `step -> multiplier of the peak lr`, counted in OPTIMIZER steps (one per
`accumulation` micro-batches), so it plugs into `torch.optim.lr_scheduler.LambdaLR` and a run
resumes it from the step alone (`lr_scheduler(optimizer, schedule, step)`); nothing but the
step is state. LambdaLR multiplies each parameter group's own `initial_lr`, so a group whose lr
is a multiple of the shared one (Muon's `muon_lr_scale`, see `optimizers.py`) keeps that ratio
at every step.

    warmup_cosine  HOT-Step Training Studio's schedule (its `lm_lr_lambda`, shared by its LM and
                   DiT trainers, from Side-Step's): lr(0) = 0, a linear warmup over the first 5 %
                   of the horizon, then a cosine from the peak down to a floor of 0.1 x peak,
                   reached at the end of the horizon (the epochs times the optimizer steps of
                   an epoch) and held after it
    constant       what the Stable Audio 3 and SDXL runs use today (underfit's loop has none)
    inverse_lr     stable-audio-tools' `InverseLR` (training/utils.py), which underfit's config
                   template names with inv_gamma 1e6, power 0.5, warmup 0.995:
                   (1 - warmup^(step+1)) * max(final, (1 + step/inv_gamma)^-power)

Not handled: restarts, schedules of wall time or of samples seen.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

Schedule = Callable[[int], float]

WARMUP_FRACTION = 0.05  # HOT-Step's (and Side-Step's) 5 % warmup
COSINE_FLOOR = 0.1  # HOT-Step's cosine floor, a fraction of the peak


def horizon_steps(epochs: int, micro_batches_per_epoch: int, accumulation: int) -> int:
    """Optimizer steps in `epochs` epochs: an epoch's micro-batches in groups of
    `accumulation`, a last short group counting as one step."""
    for name, value in (
        ("epochs", epochs),
        ("micro_batches_per_epoch", micro_batches_per_epoch),
        ("accumulation", accumulation),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"horizon_steps: {name} must be an integer ≥ 1, got {value!r}")
    return epochs * math.ceil(micro_batches_per_epoch / accumulation)


def warmup_cosine(
    horizon: int, warmup: float = WARMUP_FRACTION, floor: float = COSINE_FLOOR
) -> Schedule:
    """lr(0) = 0, linear to 1 at step W = max(1, floor(warmup * horizon)), cosine from 1 at W to
    `floor` at `horizon`, `floor` after it."""
    if isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 2:
        raise ValueError(f"warmup_cosine: horizon must be an integer ≥ 2 steps, got {horizon!r}")
    if not 0 <= warmup < 1:
        raise ValueError(f"warmup_cosine: warmup is a fraction in [0, 1), got {warmup!r}")
    if not 0 <= floor <= 1:
        raise ValueError(f"warmup_cosine: floor is a fraction in [0, 1], got {floor!r}")
    warmup_steps = min(max(1, int(warmup * horizon)), horizon - 1)

    def multiplier(step: int) -> float:
        if step < warmup_steps:
            return step / warmup_steps  # step 0 trains nothing: HOT-Step's lr(0) = 0
        progress = min(1.0, (step - warmup_steps) / (horizon - warmup_steps))
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))

    return multiplier


def constant() -> Schedule:
    """The peak lr at every step."""
    return lambda step: 1.0


def inverse_lr(
    inv_gamma: float = 1e6, power: float = 0.5, warmup: float = 0.995, final: float = 0.0
) -> Schedule:
    """stable-audio-tools' InverseLR as a multiplier; `final` is its `final_lr` divided by the
    peak lr. Defaults: underfit's config template."""
    if not 0 <= warmup < 1:
        raise ValueError(f"inverse_lr: warmup must be in [0, 1), got {warmup!r}")
    if inv_gamma <= 0:
        raise ValueError(f"inverse_lr: inv_gamma must be > 0, got {inv_gamma!r}")

    def multiplier(step: int) -> float:
        ramp = 1 - warmup ** (step + 1)  # an exponential warmup, 0.5 % of the peak at step 0
        return ramp * max(final, (1 + step / inv_gamma) ** -power)

    return multiplier


def lr_scheduler(
    optimizer: torch.optim.Optimizer, schedule: Schedule, step: int = 0
) -> torch.optim.lr_scheduler.LambdaLR:
    """A LambdaLR that has set every group's lr for optimizer step `step` (0: a new run).

    To resume, load the optimizer's state first: its groups then carry `initial_lr`, the peak
    each group's multiplier applies to. A group without one takes its current lr as its peak.
    """
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"lr_scheduler: step must be an integer ≥ 0, got {step!r}")
    for group in optimizer.param_groups:
        group.setdefault("initial_lr", group["lr"])
    # last_epoch = step - 1: LambdaLR's own first step() lands on `step`.
    return torch.optim.lr_scheduler.LambdaLR(optimizer, schedule, last_epoch=step - 1)
