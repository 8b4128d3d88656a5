"""An SDXL run's settings: a LoRA on every attention projection of the UNet, as kohya's and
diffusers' SDXL LoRA trainers make it (docs/conventions/sdxl.md), or another adapter type
(`adapters.py`: PEFT's DoRA, LyCORIS's LoCon, LoKr, LoHa; kohya's `conv_dim`), and LoRA on
both text encoders with `train_text_encoder` (kohya's `--train_text_encoder`).

The loss, noise, schedule, batch and optimizer options carry kohya sd-scripts' names and
meanings (its train_network.py arguments, library/train_util.py and
library/custom_train_functions.py; `options.py` computes them), each at the value that trains
as the run did before it was added (`LATER`). So do its data options, from `SdxlDataOptions`
(data_options.py: buckets, long captions, caption variants and dropout, flips, masks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from tunesmith.families.sdxl import data_options
from tunesmith.families.sdxl.adapter_spec import ADAPTER_TYPES, AdapterSpec
from tunesmith.families.sdxl.data_options import SdxlDataOptions
from tunesmith.train.config import AdapterConfig, DemoConfig, TrainConfig
from tunesmith.train.schema import (
    Count,
    Ge,
    Interval,
    MultipleOf,
    NonNegative,
    Number,
    Positive,
    Share,
    Whole,
)

LOSS_TYPES = ("l2", "l1", "huber", "smooth_l1")  # kohya's --loss_type choices
HUBER_SCHEDULES = ("snr", "exponential", "constant")  # kohya's --huber_schedule choices
# diffusers.optimization.get_scheduler's names (kohya's, transformers', are the same)
LR_SCHEDULERS = ("constant", "constant_with_warmup", "cosine", "cosine_with_restarts", "polynomial")
OPTIMIZERS = ("AdamW", "AdamW8bit", "Prodigy", "Adafactor")  # kohya's --optimizer_type names


@dataclass(frozen=True)
class SdxlAdapter(AdapterConfig):
    # lora (PEFT's, as before), dora (PEFT's use_dora), locon, lokr, loha (LyCORIS's modules)
    type: Literal[ADAPTER_TYPES] = "lora"
    rank: Count = 16  # kohya's common network_dim for SDXL styles; alpha None: alpha = rank
    # kohya's networks/lora.py and LyCORIS's conv_dim: the resnets' and samplers'
    # convolutions; 0: none, as kohya's networks/lora.py without conv_dim
    conv_dim: Whole = 0
    conv_alpha: Positive | None = None  # None: conv_dim (a scale of 1, as alpha None)
    # LoKr's Kronecker factor; -1: LyCORIS's default, the most even split of each side
    factor: Literal[-1] | Annotated[int, Ge(2)] = -1


@dataclass(frozen=True)
class SdxlTrain(TrainConfig, SdxlDataOptions):
    lr: Positive = 1e-4  # diffusers' train_text_to_image_lora_sdxl default
    size: Annotated[int, Ge(8), MultipleOf(8)] = 1024  # the square side pictures are fitted to
    # (SDXL's own 1024; the VAE halves a side three times)
    # -- kohya's loss and noise options (options.py); 0 / false / "l2": off, as before --
    min_snr_gamma: NonNegative = 0.0  # min-SNR weighting; 5 is the paper's and kohya's advice
    noise_offset: NonNegative = 0.0  # kohya: about 0.1 where used
    adaptive_noise_scale: Number = 0.0  # adds |mean of the latent| × this to noise_offset
    multires_noise_iterations: Whole = 0  # kohya: 6 to 10 where used
    multires_noise_discount: Positive = 0.3  # kohya's default
    debiased_estimation: bool = False  # kohya's --debiased_estimation_loss
    loss_type: Literal[LOSS_TYPES] = "l2"  # kohya's default
    huber_c: Annotated[Number, Interval(gt=0, le=1)] = 0.1  # kohya's default
    huber_schedule: Literal[HUBER_SCHEDULES] = "snr"  # kohya's default (train_util.py)
    # -- the learning rate's schedule: diffusers.optimization.get_scheduler, per update --
    lr_scheduler: Literal[LR_SCHEDULERS] = "constant"  # kohya's and diffusers' default
    lr_warmup_steps: Whole = 0
    lr_scheduler_num_cycles: Count = 1  # cosine_with_restarts' cycles (kohya's default)
    lr_scheduler_power: Positive = 1.0  # polynomial's power (kohya's default)
    # micro-batches of batch_size pictures per step; a step is one optimizer update
    gradient_accumulation_steps: Count = 1
    # the EMA of the adapter (diffusers' EMAModel, as SimpleTuner keeps it) is what is
    # validated, rendered and written; 0: off
    ema_decay: Share = 0.0
    optimizer: Literal[OPTIMIZERS] = "AdamW"  # kohya's names; torch's AdamW as before
    # -- the text encoders (kohya's --train_text_encoder, --text_encoder_lr) --
    train_text_encoder: bool = False  # the run's adapter on both CLIPs' attention and MLP
    text_encoder_lr: Positive | None = None  # None: train.lr (kohya's default)


@dataclass(frozen=True)
class SdxlDemo(DemoConfig):
    steps: Count = 50
    cfg: Number = 7.0


def problems(run) -> list[str]:
    """The settings that hang together, refused as kohya refuses them (train_util.py)."""
    t, found = run.train, []
    if t.adaptive_noise_scale and not t.noise_offset:
        found.append(
            f"train.adaptive_noise_scale {t.adaptive_noise_scale:g} needs train.noise_offset "
            "(it is added to the offset; kohya refuses it alone too)"
        )
    if t.lr_warmup_steps and t.lr_scheduler == "constant":
        found.append(
            f"train.lr_warmup_steps {t.lr_warmup_steps} has no effect with train.lr_scheduler "
            '"constant": use "constant_with_warmup" (kohya refuses the pair too)'
        )
    if t.lr_scheduler == "polynomial" and t.steps is not None and t.lr_warmup_steps >= t.steps:
        found.append(
            f"train.lr_warmup_steps {t.lr_warmup_steps} leaves the polynomial schedule no steps "
            f"to decay over in train.steps {t.steps} (diffusers' schedule divides by their "
            "difference): fewer warmup steps, or more steps"
        )
    found += data_options.problems(t)  # the bucket steps and sides, as kohya checks them
    found += AdapterSpec.of(run.adapter).problems()  # conv_dim and factor where they apply
    a = run.adapter
    if a.conv_alpha is not None and not a.conv_dim:
        found.append(
            f"adapter.conv_alpha {a.conv_alpha:g} needs adapter.conv_dim (the conv layers' "
            "rank; 0 trains no conv layer)"
        )
    if t.text_encoder_lr is not None and not t.train_text_encoder:
        found.append(
            f"train.text_encoder_lr {t.text_encoder_lr:g} has no effect without "
            "train.train_text_encoder = true"
        )
    return found


# The settings added to runs that were already keyed, at the defaults that train as before
# (`ConfigSections.later`): kohya's loss, noise, schedule, batch and optimizer options, its
# data options (data_options.py), the adapter types' settings and the text encoders'.
LATER = {
    "adapter": {"conv_dim": 0, "conv_alpha": None, "factor": -1},
    "train": {
        "min_snr_gamma": 0.0,
        "noise_offset": 0.0,
        "adaptive_noise_scale": 0.0,
        "multires_noise_iterations": 0,
        "multires_noise_discount": 0.3,
        "debiased_estimation": False,
        "loss_type": "l2",
        "huber_c": 0.1,
        "huber_schedule": "snr",
        "lr_scheduler": "constant",
        "lr_warmup_steps": 0,
        "lr_scheduler_num_cycles": 1,
        "lr_scheduler_power": 1.0,
        "gradient_accumulation_steps": 1,
        "ema_decay": 0.0,
        "optimizer": "AdamW",
        **data_options.LATER["train"],
        "train_text_encoder": False,
        "text_encoder_lr": None,
    },
}
