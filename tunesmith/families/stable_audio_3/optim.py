"""The optimizer, the learning-rate schedule and the loss scaling of a Stable Audio 3 run.

underfit's Stable Audio 3 model templates (`dashboard/models/<model>/training_template.json`,
`training.optimizer_configs.diffusion`) train with AdamW, betas (0.9, 0.95), eps 1e-8, weight
decay 0.01, and stable-audio-tools' `InverseLR` (inv_gamma 1e6, power 0.5, warmup 0.995);
they are the run's defaults (`config.Sa3Train`), each overridable. underfit's loop
(`underfit/training/loop.py`) steps the scheduler once after every optimizer step, also when
the loss scaler skipped the update, and logs `param_groups[0]["lr"]` after that: the lr the
next step will use. Both trainers do the same; the schedule's step is part of their state.

Loss scaling. underfit trains a half-precision base under Lightning's "16-mixed" (its
`_resolve_amp` in `training/loop.py`, `make_grad_scaler` and `autocast_context` in
`utils/device.py`): the forward under fp16 autocast, the loss multiplied by a dynamic scale
before the backward (so that small gradients survive fp16's range), the gradients divided by
it before clipping and the update, and an update skipped when one came out inf/nan (the scale
then halves; it doubles after 2000 clean steps). Here the same with torch's own
`torch.amp.GradScaler` wherever the base is float16: on CUDA, on MPS and on the CPU (torch has
both CPU fp16 autocast and a CPU GradScaler; underfit switches them off on the CPU, where it
never trains in half precision). A bfloat16 base gets neither: bfloat16 has float32's
exponent range, so gradients do not underflow where fp16's do, and Lightning's "bf16-mixed"
has no scaler either. The scaler's state is five numbers (`state_dict()`), kept as JSON.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

import torch

from tunesmith.train import schedules


def lr_schedule(train) -> schedules.Schedule:
    """The run's schedule, a multiplier of the peak lr per optimizer step."""
    if train.lr_schedule == "constant":
        return schedules.constant()
    return schedules.inverse_lr(train.inv_gamma, train.power, train.warmup)


def torch_adamw(params: Iterable[torch.nn.Parameter], train) -> torch.optim.AdamW:
    """torch's AdamW with the run's lr, betas, eps and weight decay."""
    return torch.optim.AdamW(
        params,
        lr=train.lr,
        betas=tuple(train.betas),
        eps=train.eps,
        weight_decay=train.weight_decay,
    )


def scaled(dtype: torch.dtype) -> bool:
    """Whether a base of `dtype` trains under fp16 autocast with a loss scaler."""
    return dtype == torch.float16


def autocast(device: torch.device, dtype: torch.dtype):
    """fp16 autocast around the forward over a float16 base; nothing otherwise, nor on `meta`
    (the memory estimate's trace, where torch has no autocast: a float16 base computes in
    float16 there anyway)."""
    if not scaled(dtype) or device.type == "meta":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.float16)


def grad_scaler(device: torch.device, dtype: torch.dtype) -> torch.amp.GradScaler | None:
    """torch's dynamic loss scaler (its defaults: 2^16, ×2 every 2000 clean steps, ×½ on an
    overflow) over a float16 base; None over float32 or bfloat16."""
    if not scaled(dtype):
        return None
    return torch.amp.GradScaler(device.type)
