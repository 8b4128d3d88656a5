"""An ACE-Step 1.5 planner run's settings: HOT-Step's LM defaults, each overridable.

A LoRA of rank 16, alpha 32 (HOT-Step's LmExportMeta; Side-Step's train_lm.py has the same) on
every attention and MLP projection of the planner that `adapter.planner` names, lr 1e-4,
accumulation 2 (one item a micro-batch), 75 epochs and a target loss of 4.0 on the moving
average of the token cross-entropy; the clip, optimizer and schedule are the DiT's (HOT-Step
uses one training loop for both). The epochs become the loop's steps as the DiT's do
(`tunesmith.families.ace_step.config`): `epochs x ceil(items / accumulation)` optimizer steps.

The run names the ACE-Step base model as its `base_model`: the planner learns that base model's
audio codes, and its items are the `ace-step` family's encoded rows, so the settings that make
an item's texts (`tag_position`, `genre_ratio`, `unreadable_lyrics`) are the DiT's too.

Files written before the planner was a family of its own (`family = "ace-step"` with
`adapter.target = "planner"`) are read as this family (`moved`, with a note). The sources of
every default are in docs/conventions/ace-step.md, "Training the planner LM".
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Literal

from tunesmith.families.ace_step import config as dit
from tunesmith.train.config import AdapterConfig, TrainConfig
from tunesmith.train.schema import Count, Fraction, NonNegative, Positive, Share

NAME = "ace-step-planner"
PLANNER = "acestep-5Hz-lm-1.7B"  # the planner a run trains when it names none
ALPHA_PER_RANK = 2.0  # HOT-Step's LM LoRA: alpha 32 at rank 16


@dataclass(frozen=True)
class PlannerAdapter(AdapterConfig):
    type: Literal["lora"] = "lora"  # HOT-Step trains the planner with a LoRA
    rank: Count = 16  # HOT-Step's LM rank
    alpha: Positive | None = None  # None: 2 x rank (HOT-Step's r16/α32)
    planner: str = PLANNER  # the planner folder; relative: beside the base model, else in it


@dataclass(frozen=True)
class PlannerTrain(TrainConfig):
    steps: Count | None = None  # None: the whole epoch horizon (module docstring)
    epochs: Count = 75  # HOT-Step's LM horizon
    lr: Positive = 1e-4  # HOT-Step's LM lr
    accumulation: Count = 2  # items an optimizer step (HOT-Step's LM accumulation)
    batch_size: Count = 1  # items a micro-batch: the trainer takes one at a time
    grad_clip: NonNegative = 1.0  # global-norm clip (HOT-Step, Side-Step)
    warmup: Share = 0.05  # share of the horizon in linear warmup from lr 0 (HOT-Step)
    lr_floor: Fraction = 0.1  # the cosine's end, a share of the peak (HOT-Step)
    optimizer: Literal[dit.OPTIMIZERS] = "muon"  # HOT-Step's; "adamw" the alternative
    muon_min_dim: Count = 16  # 2-D parameters with a shorter side go to AdamW (HOT-Step)
    muon_lr_scale: Positive = 20.0  # Muon's lr = the schedule's x this (HOT-Step's sweep)
    target_loss: NonNegative = 4.0  # stop at this 5-epoch average (HOT-Step's LM); 0: off
    # The share of items an epoch trained on the trigger alone instead of their captions
    # (HOT-Step's LM caption dropout; kohya's caption_dropout_rate defaults to 0 too).
    caption_dropout: Fraction = 0.0
    tag_position: Literal[dit.TAG_POSITIONS] | None = None  # None: the dataset's (labels)
    genre_ratio: dit.Percent | None = None  # percent on genre tags; None: the dataset's, else 30
    unreadable_lyrics: Literal[dit.UNREADABLE_LYRICS] = "skip"  # as the DiT's: skip the item,
    # or "instrumental"
    eval_every: Count = 100
    checkpoint_every: Count = 500


def fill(run):
    """The run with alpha at 2 x rank where it left alpha out."""
    a = run.adapter
    if a.alpha is None and isinstance(a.rank, int | float) and not isinstance(a.rank, bool):
        return replace(run, adapter=replace(a, alpha=float(a.rank) * ALPHA_PER_RANK))
    return run


def problems(run) -> list[str]:
    """The rules the schema does not say; each setting's own type and range is its."""
    found = []
    if not run.adapter.planner.strip():
        found.append("adapter.planner must name the planner folder (acestep-5Hz-lm-*)")
    if run.train.batch_size != 1:
        found.append(
            "train.batch_size must be 1 for ace-step-planner: the trainer takes one item a "
            "micro-batch; use train.accumulation for more items an update"
        )
    return found


def moved(raw: dict) -> tuple[dict, str] | None:
    """A `[[runs]]` table of the `ace-step` family with `adapter.target = "planner"`, as this
    family's table, and the note that says so; None for any other table. Its keys this family
    does not have (the DiT's settings, which a planner run ignored) are left out and named."""
    adapter = raw.get("adapter")
    if raw.get("family") != "ace-step" or not isinstance(adapter, dict):
        return None
    if adapter.get("target") != "planner":
        return None
    table = {**raw, "family": NAME}
    dropped = []
    for section, cls in (("adapter", PlannerAdapter), ("train", PlannerTrain)):
        given = raw.get(section)
        if not isinstance(given, dict):
            continue
        known = {f.name for f in fields(cls)}
        table[section] = {k: v for k, v in given.items() if k in known}
        dropped += [f"{section}.{k}" for k in given if k not in known and k != "target"]
    name = raw.get("name") or "a run"
    note = (
        f'run {name}: family = "ace-step" with adapter.target = "planner" is read as '
        f'family = "{NAME}"; write that instead'
    )
    if dropped:
        note += f" (the planner does not use {', '.join(dropped)}: left out)"
    return table, note
