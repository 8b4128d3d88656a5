"""A Stable Audio 3 run's settings: underfit's defaults, each with its source.

underfit is dada-bots' Stable Audio 3 LoRA trainer (its dashboard, `defaults.ini` and README);
its conventions are written up in docs/conventions/stable-audio-3.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Literal

from tunesmith.adapters.underfit_types import ADAPTER_TYPES
from tunesmith.train.config import AdapterConfig, DemoConfig, TrainConfig
from tunesmith.train.schema import (
    Count,
    Fraction,
    Gt,
    Le,
    NonNegative,
    Number,
    Positive,
    Seed,
    Share,
)

# underfit's dashboard default excludes the conditioners and every module outside the
# transformer layers (embedders, projections, convolutions).
DEFAULT_INCLUDE = ("model.transformer.layers.",)

# underfit's adapter types (`tunesmith.adapters.underfit_types`); "dora", its legacy name, is
# read as dora-rows (stable-audio-3 `resolve_adapter_type`).
LEGACY_TYPES = {"dora": "dora-rows"}
# Named include/exclude sets. "dashboard": what underfit's dashboard fills in for a new run
# (index.html `_applyDefaultExclusions`): no include, and excluded every "conditioning" and
# "other" module pattern of the model's registry (dashboard/models/<id>/registry.json,
# ui.module_structure; the same for sa3-medium, sa3-sm-music and sa3-sm-sfx).
INCLUDE_PRESETS = {
    "dashboard": (
        (),
        (
            "to_timestep_embed",
            "to_cond_embed",
            "to_global_embed",
            "to_local_embed",
            "global_cond_embedder",
            "project_in",
            "project_out",
            "preprocess_conv",
            "postprocess_conv",
        ),
    ),
}
# underfit's loss.py: per-element MSE, optionally divided by a detached variance.
LOSS_NORMALIZATIONS = ("none", "timestep", "sample", "sample_channel")
TIMESTEP_SAMPLERS = ("uniform", "logit_normal", "trunc_logit_normal", "log_snr", "log_snr_uniform")
LR_SCHEDULES = ("inverse_lr", "constant")  # constant: underfit's loop given no scheduler
MAX_DEMO_SECONDS = 600.0  # Stable Audio 3 is trained on up to 600 s (underfit's cap)


@dataclass(frozen=True)
class Sa3Adapter(AdapterConfig):
    # underfit's product default (its dashboard), not its config-layer lora
    type: Literal[(*ADAPTER_TYPES, *LEGACY_TYPES)] = "dora-rows"
    rank: Count = 16  # underfit's README default; alpha None: alpha = rank (underfit)
    include: tuple[str, ...] = ()  # substrings of underfit's layer names; [i-j] ranges
    exclude: tuple[str, ...] = ()
    # A named include/exclude set, used where `include` and `exclude` are both empty; None:
    # DEFAULT_INCLUDE (the transformer layers).
    include_preset: Literal[tuple(INCLUDE_PRESETS)] | None = None

    def __post_init__(self) -> None:
        if self.type in LEGACY_TYPES:  # the resolved run says what is trained
            object.__setattr__(self, "type", LEGACY_TYPES[self.type])


@dataclass(frozen=True)
class Sa3Train(TrainConfig):
    lr: Positive = 1e-4  # underfit's dashboard default
    batch_size: Count = 1  # underfit defaults.ini
    seed: Seed = 42  # underfit
    timestep_sampler: Literal[TIMESTEP_SAMPLERS] = "uniform"  # underfit's default
    cfg_dropout: Share = 0.1  # underfit dit.py: whole cross-attention conditioning zeroed
    latent_crop_length: Count = 1300  # underfit: sm-music/sfx ≈ 120 s
    checkpoint_every: Count = 1000  # underfit
    trigger_probability: Fraction = 0.8  # underfit prompt templates: trigger prepended 80%
    # underfit's prompt options, each at the default of its prompt templates
    # (dataset_processing/prompt_templates.py, the `prompt_config` its dashboard writes); the
    # names flatten underfit's (balance.tags → balance_tags, path_opts.hide_ext →
    # path_hide_ext), the rules are in prompts.py. The sources a training prompt is drawn from
    # and their weights: with only the tags in use the paths' 50 weighs nothing.
    use_tags: bool = True
    use_paths: bool = False
    use_fixed: bool = False
    balance_tags: NonNegative = 50
    balance_paths: NonNegative = 50
    balance_fixed: NonNegative = 0
    fixed_text: str = ""  # the fixed source's prompt
    path_hide_ext: bool = False
    path_hide_dirs: bool = False
    path_hide_topmost_dir: bool = False
    # "key=Name": a tag's name in the prompt instead of underfit's (prompts.DISPLAY), e.g.
    # "date=Date"; a list rather than a table, so that the frozen section stays hashable.
    tag_display: tuple[str, ...] = ()
    # AdamW and the lr schedule of underfit's Stable Audio 3 model templates
    # (dashboard/models/<model>/training_template.json, training.optimizer_configs.diffusion;
    # the same for sa3-medium, sa3-sm-music and sa3-sm-sfx). torch's AdamW defaults differ:
    # betas (0.9, 0.999).
    betas: tuple[Share, Share] = (0.9, 0.95)
    eps: Positive = 1e-8
    weight_decay: NonNegative = 0.01
    # stable-audio-tools' InverseLR, the templates' scheduler: lr · (1 − warmup^(k+1)) ·
    # (1 + k/inv_gamma)^−power at optimizer step k (tunesmith.train.schedules.inverse_lr).
    lr_schedule: Literal[LR_SCHEDULES] = "inverse_lr"
    inv_gamma: Positive = 1e6
    power: NonNegative = 0.5
    warmup: Share = 0.995  # 0: no warmup
    # underfit's loss options (training/loop.py, loss.py), each at underfit's default: the
    # loss's normalisation by a detached variance (eps 1e-6), the weight of padded frames in
    # the loss (0: the signal only), whether attention skips padded frames, and the shift's
    # sequence length from each item's full duration, ceil(seconds_total · 44100 / 4096),
    # instead of the crop length.
    loss_normalization: Literal[LOSS_NORMALIZATIONS] = "none"
    mask_loss_weight: Fraction = 0.0
    mask_padding_attention: bool = False
    use_effective_length_for_schedule: bool = False
    # The ARC (rf_denoiser) model demos with `arc = true` render on: a folder in the models
    # folder; "" takes the base model's ARC sibling (`arc_model_name`).
    arc_model: str = ""


def include_and_exclude(adapter: Sa3Adapter) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The layer filters a run trains with: its own include/exclude where it has any, else its
    preset's, else DEFAULT_INCLUDE."""
    if adapter.include or adapter.exclude or adapter.include_preset is None:
        return tuple(adapter.include or DEFAULT_INCLUDE), tuple(adapter.exclude)
    return INCLUDE_PRESETS[adapter.include_preset]


ARC_STEPS, ARC_CFG = 8, 1.0  # underfit's defaults for a demo on the ARC model


@dataclass(frozen=True)
class Sa3Demo(DemoConfig):
    duration: Annotated[Number, Gt(0), Le(MAX_DEMO_SECONDS)] = 10.0  # seconds
    # None: underfit's defaults, demo_steps 50 and cfg 7 on the base model, 8 and 1 on ARC
    steps: Count | None = None
    cfg: Number | None = None
    # Render on the ARC (rf_denoiser) model with the adapter merged and the ping-pong
    # sampler, as underfit's `arc` demo entries do; the base model and Euler otherwise.
    arc: bool = False

    def __post_init__(self) -> None:  # the resolved run holds the numbers it renders with
        if self.steps is None:
            object.__setattr__(self, "steps", ARC_STEPS if self.arc else 50)
        if self.cfg is None:
            object.__setattr__(self, "cfg", ARC_CFG if self.arc else 7.0)


WARMED = 0.9  # the share of train.lr below which a run's last step counts as still warming up


def warmup_warnings(train: Sa3Train) -> list[str]:
    """A line when InverseLR's exponential warmup (lr · (1 − warmup^(k+1)) at step k) leaves
    the run's last step under 90 % of train.lr: underfit's 0.995 reaches it at step 459, so a
    100-step run ends at 39 % of its rate and barely learns."""
    if train.lr_schedule != "inverse_lr" or not train.warmup or not train.steps:
        return []
    reached = 1 - train.warmup**train.steps
    if reached >= WARMED:
        return []
    warm_at = math.ceil(math.log(1 - WARMED) / math.log(train.warmup)) - 1
    return [
        f"train.warmup {train.warmup} reaches {WARMED:.0%} of train.lr at step {warm_at}, and "
        f"train.steps is {train.steps}: the run ends at {reached:.0%} of its learning rate. "
        f"Train more steps, or set a shorter warmup (train.warmup = "
        f"{_warmup_for(train.steps):.3g} reaches {WARMED:.0%} by a third of the run)"
    ]


def _warmup_for(steps: int) -> float:
    """The warmup whose ramp reaches WARMED at a third of `steps`."""
    return (1 - WARMED) ** (1 / max(1, steps // 3))


# The settings added to runs that were already keyed, at the defaults that train as before
# (`ConfigSections.later`): underfit's loss, prompt and layer options, and the ARC demos.
LATER = {
    "adapter": {"include_preset": None},
    "train": {
        "loss_normalization": "none",
        "mask_loss_weight": 0.0,
        "mask_padding_attention": False,
        "use_effective_length_for_schedule": False,
        "arc_model": "",
        "use_tags": True,
        "use_paths": False,
        "use_fixed": False,
        "balance_tags": 50,
        "balance_paths": 50,
        "balance_fixed": 0,
        "fixed_text": "",
        "path_hide_ext": False,
        "path_hide_dirs": False,
        "path_hide_topmost_dir": False,
        "tag_display": (),
    },
    "demo": {"arc": False},
}
