"""An ACE-Step 1.5 run's settings: HOT-Step Training Studio's DiT defaults, each overridable.

HOT-Step's defaults differ by adapter type, so a setting left out of `tunesmith.toml` takes its
type's value (`fill`): LoRA rank 128, alpha 256, lr 5e-4, 400 epochs; LoKr dim 512, alpha 512,
factor 6, lr 2e-3, 250 epochs and a target loss of 0.6. Both accumulate 4 micro-batches of one
crop, clip the global gradient norm at 1.0, run Muon beside AdamW and the warmup-cosine schedule.
The planner LM is trained by a family of its own (`tunesmith.families.ace_step_planner`).

How the epochs become the loop's steps: an epoch is one shuffled pass over the training items,
one crop each, in micro-batches of one crop; an optimizer step is `accumulation` micro-batches
(the last group of an epoch may be shorter), so the horizon is `epochs x ceil(items /
accumulation)` optimizer steps (`tunesmith.train.schedules.horizon_steps`), and the cosine
reaches its floor there. `steps` left out trains the whole horizon; set, the run stops after
that many optimizer steps on the same schedule (fewer: the start of the run; more: continued
at the floor). A target loss ends the run earlier. The sources of every default are in
docs/conventions/ace-step.md.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Annotated, Literal

from tunesmith.families.ace_step.text import LANGUAGES, TAG_POSITIONS
from tunesmith.train.config import AdapterConfig, DemoConfig, TrainConfig
from tunesmith.train.schema import (
    Count,
    Fraction,
    Ge,
    Gt,
    Interval,
    Le,
    NonNegative,
    Number,
    Positive,
    Share,
)

ADAPTER_TYPES = ("lora", "lokr")
ATTENTION = ("both", "self", "cross")  # Side-Step's attention_type
LOSS_WEIGHTINGS = ("none", "flow_snr", "min_snr")  # Side-Step's loss_weighting choices
UNREADABLE_LYRICS = ("skip", "instrumental")
OPTIMIZERS = ("adamw", "muon")  # tunesmith.train.optimizers' (not imported here: it needs torch)
MAX_DEMO_SECONDS = 600.0  # ACE-Step 1.5's DURATION_MAX

# HOT-Step's DiT defaults per adapter type (its Training Studio's TRAIN_DIT_DEFAULTS and
# TRAIN_DIT_LOKR_DEFAULTS). LoRA: r128/α256, "1e-4 measurably does not train"; LoKr: the
# 250-epoch horizon and lr 2e-3 at accumulation 4 are its measured fixes.
TYPE_DEFAULTS = {
    "lora": {
        "rank": 128,
        "alpha_per_rank": 2.0,
        "lr": 5e-4,
        "epochs": 400,
        "target_loss": 0.0,
        "loss_weighting": "flow_snr",
    },
    "lokr": {
        "rank": 512,
        "alpha_per_rank": 1.0,
        "lr": 2e-3,
        "epochs": 250,
        "target_loss": 0.6,
        "loss_weighting": "none",
    },
}
ACCUMULATION = 4  # HOT-Step's grad accumulation for both types (micro-batches)
Percent = Annotated[int, Interval(ge=0, le=100)]


@dataclass(frozen=True)
class AceStepAdapter(AdapterConfig):
    type: Literal[ADAPTER_TYPES] = "lora"  # HOT-Step trains "lora" or "lokr" on the DiT
    rank: Count | None = None  # LoRA rank / LoKr dim; None: 128 / 512 (HOT-Step)
    alpha: Positive | None = None  # None: 2 x rank for LoRA (r128/α256), = dim for LoKr (512/512)
    factor: Literal[-1] | Annotated[int, Ge(2)] = 6  # LoKr's Kronecker factor (HOT-Step); -1:
    # PEFT's automatic split
    attention: Literal[ATTENTION] = "both"  # Side-Step's attention_type
    target_mlp: bool = True  # HOT-Step: the MLP projections too (gate, up, down)


@dataclass(frozen=True)
class AceStepTrain(TrainConfig):
    steps: Count | None = None  # None: the whole epoch horizon (module docstring)
    epochs: Count | None = None  # the schedule's horizon; None: 400 LoRA / 250 LoKr (HOT-Step)
    lr: Positive | None = None  # None: 5e-4 LoRA / 2e-3 LoKr (HOT-Step)
    accumulation: Count | None = None  # micro-batches an optimizer step; None: 4 (HOT-Step)
    batch_size: Count = 1  # crops a micro-batch (HOT-Step's default; only 1, see problems)
    grad_clip: NonNegative = 1.0  # global-norm clip (HOT-Step, Side-Step)
    warmup: Share = 0.05  # share of the horizon in linear warmup from lr 0 (HOT-Step)
    lr_floor: Fraction = 0.1  # the cosine's end, a share of the peak (HOT-Step)
    optimizer: Literal[OPTIMIZERS] = "muon"  # HOT-Step's DiT default; "adamw" the alternative
    muon_min_dim: Count = 16  # 2-D parameters with a shorter side go to AdamW (HOT-Step)
    muon_lr_scale: Positive = 20.0  # Muon's lr = the schedule's x this (HOT-Step's sweep)
    target_loss: NonNegative | None = None  # stop at this 5-epoch average; None: 0.6 LoKr,
    # off LoRA; 0: off
    loss_weighting: Literal[LOSS_WEIGHTINGS] | None = None  # None: flow_snr LoRA, none LoKr
    # (HOT-Step)
    snr_gamma: Positive = 5.0  # the weights' clamp (Side-Step's snr_gamma)
    t_bias: Number = 0.5  # flow_snr's (1 - t)^bias emphasis of low noise (Side-Step)
    cfg_dropout: Share = 0.15  # share of crops trained on the null condition (Side-Step)
    timestep_mu: Number | None = None  # None: the model's config, else ACE-Step 1.5's -0.4
    timestep_sigma: Positive | None = None  # None: the model's config, else ACE-Step 1.5's 1.0
    crop_frames: Count = 750  # latent frames a crop (30 s; HOT-Step's measured crop)
    tag_position: Literal[TAG_POSITIONS] | None = None  # None: the dataset's (labels)
    genre_ratio: Percent | None = None  # percent on genre tags; None: the dataset's, else 30
    unreadable_lyrics: Literal[UNREADABLE_LYRICS] = "skip"  # a lyrics file that is not UTF-8:
    # skip the item, or "instrumental": train it as an instrumental (only when the person says so)
    eval_every: Count = 100
    checkpoint_every: Count = 500


@dataclass(frozen=True)
class AceStepDemo(DemoConfig):
    lyrics: str = ""  # "": [Instrumental], as an item without lyrics trains
    language: Literal[tuple(sorted(LANGUAGES))] = "en"  # ACE-Step's VALID_LANGUAGES
    duration: Annotated[Number, Gt(0), Le(MAX_DEMO_SECONDS)] = 30.0  # seconds
    steps: Count = 32  # ACE-Step 1.5's docs: 32-64 for base models
    cfg: Number = 7.0  # ACE-Step 1.5's guidance_scale default
    shift: Positive = 3.0  # diffusers' AceStepPipeline default


def fill(run):
    """The run with its adapter type's defaults in every setting it left out."""
    a, t = run.adapter, run.train
    # An unknown type takes LoRA's numbers, so the checks run and `problems` names the type.
    defaults = TYPE_DEFAULTS.get(a.type, TYPE_DEFAULTS["lora"])
    rank = a.rank if a.rank is not None else defaults["rank"]
    alpha = a.alpha
    if alpha is None and isinstance(rank, int | float):
        alpha = float(rank) * defaults["alpha_per_rank"]
    adapter = replace(a, rank=rank, alpha=alpha)
    train = replace(
        t,
        lr=t.lr if t.lr is not None else defaults["lr"],
        epochs=t.epochs if t.epochs is not None else defaults["epochs"],
        target_loss=t.target_loss if t.target_loss is not None else defaults["target_loss"],
        loss_weighting=t.loss_weighting or defaults["loss_weighting"],
        accumulation=t.accumulation if t.accumulation is not None else ACCUMULATION,
    )
    return replace(run, adapter=adapter, train=train)


def problems(run) -> list[str]:
    """The rules across settings; each setting's own type and range is the schema's."""
    a, t = run.adapter, run.train
    found = []
    if t.batch_size != 1:
        found.append(
            "train.batch_size must be 1 for ace-step (HOT-Step's default): diffusers' ACE-Step "
            "DiT attends to every conditioning token, so crops of different songs cannot share "
            "a micro-batch; use train.accumulation for more crops an update"
        )
    moved = (t.lr != TYPE_DEFAULTS["lokr"]["lr"], t.accumulation != ACCUMULATION)
    if a.type == "lokr" and moved[0] != moved[1]:
        found.append(
            f"a LoKr run's lr and accumulation move together: lr {t.lr:g} with accumulation "
            f"{t.accumulation} changes only one of HOT-Step's pair (2e-3 at 4). Its five-run A/B "
            "found 2e-3 at 4 and 1e-2 at 20 equal (the same lr per sample under linear scaling); "
            "one without the other is untested. Set both, e.g. lr = 2e-3 x accumulation / 4"
        )
    return found


def lokr_factor_problems(layers: dict[str, tuple[int, int]], factor: int) -> list[str]:
    """Per adapted layer (name → (out, in)) that `factor` cannot split for both PEFT and
    LyCORIS: the layer, why, and the nearest factor that splits it."""
    from tunesmith.adapters.torch_lokr import nearest_factor, split_problems

    found = []
    for name, (out_features, in_features) in layers.items():
        why = split_problems(out_features, in_features, factor)
        if why:
            nearest = nearest_factor(out_features, in_features, factor)
            hint = f"the nearest factor that splits it is {nearest}" if nearest else "none does"
            found.append(
                f"adapter.factor {factor} does not split {name} ({in_features}→"
                f"{out_features}): {'; '.join(why)}; {hint}"
            )
    return found
