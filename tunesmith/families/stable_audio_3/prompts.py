"""Training prompts as underfit's prompt templates draw them: tags, paths or a fixed prompt.

underfit's prompt templates (`dataset_processing/prompt_templates.py`, driven by the
`prompt_config` its dashboard writes) draw each item's prompt from one of three sources, picked
per draw by weight among the sources in use:

    tags    each tag as `Key: value` under a display name (Title, Artist, Album, Genre, Label,
            Year, Composer, BPM, Prompt), joined by ", "; half the time all of them shuffled,
            half the time a random subset of 1..n of them
    paths   the item's `relpath` in the pre-encoded folder (the `.npy`, as the sidecar says),
            optionally without its extension, its directories or its topmost directory
    fixed   one text for every item

then prepend the trigger word 80 % of the time: after ", " for a tag prompt, after " " for the
others, alone where the prompt is empty. The template also sets every item's `lyrics` to ""
(`LYRICS`): Stable Audio 3 conditions on `prompt` and `seconds_total` only (underfit's model
templates, `cross_attention_cond_ids`), so a lyrics label never reaches the model.

The run's settings (`config.Sa3Train`) and underfit's `prompt_config` keys:

    use_tags, use_paths, use_fixed          use_tags, use_paths, use_fixed
    balance_tags, _paths, _fixed            balance.tags, .paths, .fixed
    fixed_text                              fixed_text
    path_hide_ext, _dirs, _topmost_dir      path_opts.hide_ext, .hide_dirs, .hide_topmost_dir
    trigger_probability (a fraction)        trigger_pct (a percentage)
    tag_display ("key=Name" entries)        (none: underfit's names are fixed, `DISPLAY`)

The defaults are the template's: tags only (paths and the fixed prompt not in use), so a run
that sets none of them draws exactly the prompts it drew before these options existed. Where
tunesmith differs: settings whose sources in use all weigh 0 (the template then picks one of
them uniformly), or a fixed source that weighs but has no text, are refused
(`prompt_problems`); every random number comes from the generator passed in (a run's saved
state resumes it), the source is drawn only where more than one weighs, and before the prompt.

Validation keeps one prompt per item (`validation_prompt`): all tags in order with the trigger,
under the run's display names, whatever the balance; where the tags are not drawn at all, the
heaviest source's prompt (a path or the fixed text) with the trigger, as training joins it.
The demos' prompts are the run's own and no source changes them.

The sidecar beside the latents holds the tags (`sidecar_tags`) so that underfit's tag template
composes the very pieces tunesmith trains with: `prompt` is written only where the caption is
text of its own, never a caption composed from the other tags (the template would then say the
same tags twice) or taken from the file name of an item that has tags.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tunesmith.families.stable_audio_3.data import Batch

DISPLAY = {
    "title": "Title",
    "artist": "Artist",
    "album": "Album",
    "genre": "Genre",
    "label": "Label",
    "date": "Year",
    "composer": "Composer",
    "bpm": "BPM",
    "prompt": "Prompt",
}
SOURCES = ("tags", "paths", "fixed")
LYRICS = ""  # every item's lyrics, as underfit's template returns them
# Captions that merely restate the tags or the file name are not a prompt of their own.
_DERIVED_CAPTIONS = ("embedded", "filename")


def sidecar_tags(caption: str, caption_source: str, tags: dict[str, str]) -> dict[str, str]:
    """The item's tags as the sidecar holds them: every non-empty tag as text (underfit's
    pre-encoder keeps any key), `prompt` the caption where it is a prompt of its own (or the
    only text there is)."""
    values = {k: str(v) for k, v in tags.items() if k != "prompt" and v}
    if caption_source not in _DERIVED_CAPTIONS or not any(k in DISPLAY for k in values):
        values["prompt"] = caption
    return values


def prompt_tags(caption: str, caption_source: str, tags: dict[str, str]) -> list[str]:
    """The item's `Key: value` pieces, in underfit's display order: what underfit's tag
    template makes of `sidecar_tags`."""
    values = sidecar_tags(caption, caption_source, tags)
    return [f"{DISPLAY[k]}: {values[k]}" for k in DISPLAY if k in values]


def full_prompt(pieces: list[str], trigger: str = "") -> str:
    """Every tag in order, with the trigger: the prompt validation and demos use."""
    return ", ".join(([trigger] if trigger else []) + pieces)


@dataclass(frozen=True)
class PromptOptions:
    """A run's prompt settings, checked (`prompt_options`). The defaults: tags only, under
    underfit's display names."""

    weights: tuple[tuple[str, float], ...] = (("tags", 1.0),)  # the sources in use, by weight
    fixed_text: str = ""
    hide_ext: bool = False
    hide_dirs: bool = False
    hide_topmost_dir: bool = False
    display: Mapping[str, str] = field(default_factory=lambda: MappingProxyType(DISPLAY))


def prompt_problems(run: Any) -> list[str]:
    """One line per prompt setting of `run.train` that cannot be used, naming it."""
    return _problems(run.train)


def prompt_options(train: Any) -> PromptOptions:
    """The prompt settings of a run's train section (`config.Sa3Train`); ValueError, a line
    per problem, where they cannot be used."""
    found = _problems(train)
    if found:
        raise ValueError("\n".join(found))
    weights = tuple(
        (source, float(getattr(train, f"balance_{source}")))
        for source in SOURCES
        if getattr(train, f"use_{source}")
    )
    return PromptOptions(
        weights=weights,
        fixed_text=train.fixed_text,
        hide_ext=train.path_hide_ext,
        hide_dirs=train.path_hide_dirs,
        hide_topmost_dir=train.path_hide_topmost_dir,
        display=MappingProxyType({**DISPLAY, **dict(_display_entry(e) for e in train.tag_display)}),
    )


def _problems(train: Any) -> list[str]:
    found = []
    for source in SOURCES:
        weight = getattr(train, f"balance_{source}")
        if not (isinstance(weight, int | float) and math.isfinite(weight) and weight >= 0):
            found.append(f"train.balance_{source} = {weight!r}: must be a number ≥ 0")
    weighed = not found  # every weight a number to compare
    in_use = [s for s in SOURCES if getattr(train, f"use_{s}")]
    if not in_use:
        found.append(
            "train.use_tags, train.use_paths and train.use_fixed are all false: a training "
            "prompt needs at least one source"
        )
    elif weighed and all(getattr(train, f"balance_{s}") == 0 for s in in_use):
        names = " and ".join(f"train.balance_{s}" for s in in_use)
        found.append(
            f"{names} (the weights of the sources in use) are all 0: at least one must be > 0"
        )
    if weighed and train.use_fixed and train.balance_fixed > 0 and not train.fixed_text.strip():
        found.append(
            f"train.use_fixed with train.balance_fixed = {train.balance_fixed} needs "
            "train.fixed_text: the fixed prompt is empty"
        )
    seen = set()
    for entry in train.tag_display:
        try:
            key, _ = _display_entry(entry)
        except ValueError as exc:
            found.append(f"train.tag_display: {exc}")
            continue
        if key in seen:
            found.append(f'train.tag_display: "{key}" is named twice')
        seen.add(key)
    return found


def _display_entry(entry: str) -> tuple[str, str]:
    key, sep, name = entry.partition("=")
    key, name = key.strip(), name.strip()
    if not sep or not name:
        raise ValueError(f'"{entry}" is not key=Name (e.g. "date=Date")')
    if key not in DISPLAY:
        raise ValueError(f'"{key}" is not a tag of the prompt; they are {", ".join(DISPLAY)}')
    return key, name


def relabel(pieces: list[str], display: Mapping[str, str]) -> list[str]:
    """The `Key: value` pieces (`prompt_tags`) under the display names `display`, in their
    order; a piece under no display name of underfit's stays as it is."""
    renamed = []
    for piece in pieces:
        key = next((k for k, name in DISPLAY.items() if piece.startswith(f"{name}: ")), None)
        if key is None or display[key] == DISPLAY[key]:
            renamed.append(piece)
        else:
            renamed.append(f"{display[key]}: {piece[len(DISPLAY[key]) + 2 :]}")
    return renamed


def relpath(path: str) -> str:
    """The item's `relpath` in the pre-encoded folder: its `.npy` (the sidecar's field, what
    underfit's path template reads)."""
    return str(PurePosixPath(path).with_suffix(".npy"))


def path_prompt(path: str, options: PromptOptions) -> str:
    """The paths source's prompt of the item at `path` in the dataset: its `relpath`, as
    underfit's path template cuts it. `hide_dirs` keeps the topmost directory unless
    `hide_topmost_dir` is set too (the dashboard sets both)."""
    *dirs, name = relpath(path).split("/")
    if options.hide_ext and name.rfind(".") > 0:
        name = name[: name.rfind(".")]
    if options.hide_dirs:
        dirs = [] if options.hide_topmost_dir else dirs[:1]
    elif options.hide_topmost_dir:
        dirs = dirs[1:]
    return "/".join([*dirs, name])


def _tag_prompt(pieces: list[str], rng: random.Random) -> str:
    if not pieces:
        return ""
    if rng.random() < 0.5:
        chosen = rng.sample(pieces, len(pieces))  # all, shuffled
    else:
        chosen = rng.sample(pieces, rng.randint(1, len(pieces)))  # a random subset
    return ", ".join(chosen)


def _source(options: PromptOptions, rng: random.Random) -> str:
    """A source by weight; a random number only where more than one weighs."""
    weighing = [(source, weight) for source, weight in options.weights if weight > 0]
    if len(weighing) == 1:
        return weighing[0][0]
    return rng.choices([s for s, _ in weighing], [w for _, w in weighing])[0]


def _text(source: str, pieces: list[str], path: str, options: PromptOptions, rng) -> str:
    if source == "tags":
        return _tag_prompt(relabel(pieces, options.display), rng)
    if source == "paths":
        return path_prompt(path, options)
    return options.fixed_text


def _with_trigger(trigger: str, source: str, text: str) -> str:
    if not text:
        return trigger
    return trigger + (", " if source == "tags" else " ") + text


def training_prompt(
    pieces: list[str],
    rng: random.Random,
    trigger: str = "",
    trigger_probability: float = 0.8,
    *,
    path: str = "",
    options: PromptOptions | None = None,
) -> str:
    """One random prompt for an item (its pieces and its path in the dataset); every random
    number comes from `rng`, in this order: the source (where more than one weighs), the tags'
    order and subset (a tag prompt), the trigger's coin (where there is a trigger)."""
    options = options or PromptOptions()
    source = _source(options, rng)
    text = _text(source, pieces, path, options, rng)
    if trigger and rng.random() < trigger_probability:
        return _with_trigger(trigger, source, text)
    return text


def training_prompts(batch: Batch, rng: random.Random, run: Any) -> list[str]:
    """A random prompt per item of the batch, in its order, under the run's settings."""
    train = run.train
    options = prompt_options(train)
    return [
        training_prompt(
            list(pieces),
            rng,
            run.trigger,
            train.trigger_probability,
            path=path,
            options=options,
        )
        for pieces, path in zip(batch.pieces, batch.paths, strict=True)
    ]


def validation_prompt(
    pieces: list[str], path: str, options: PromptOptions | None = None, trigger: str = ""
) -> str:
    """The item's one prompt for validation: every tag in order with the trigger, under the
    run's display names; where the tags weigh nothing, the heaviest source's (ties: tags, paths,
    fixed) with the trigger, joined as in training."""
    options = options or PromptOptions()
    weighing = [(s, w) for s, w in options.weights if w > 0]
    if any(source == "tags" for source, _ in weighing):
        return full_prompt(relabel(pieces, options.display), trigger)
    source = max(weighing, key=lambda sw: sw[1])[0]  # the first of the heaviest
    text = path_prompt(path, options) if source == "paths" else options.fixed_text
    return _with_trigger(trigger, source, text) if trigger else text
