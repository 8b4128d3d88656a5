"""Prompts from tags, as underfit builds them at train time.

underfit's prompt templates (`dataset_processing/prompt_templates.py`, the tag template and
its display names): each tag becomes `Key: value` under a display name (Title, Artist, Album,
Genre, Label, Year, Composer, BPM, Prompt), joined by ", ". Every draw, half the time all tags
in a shuffled order, half the time a random subset of 1..n of them; the trigger word is
prepended 80% of the time. A `.txt` caption is the `prompt` tag (underfit's pre-encoder reads a
`.txt` sidecar so). Validation uses the full, ordered prompt so that its loss measures the same
text every time.

The sidecar beside the latents holds the tags (`sidecar_tags`) so that underfit's tag template
composes the very pieces tunesmith trains with: `prompt` is written only where the caption is
text of its own, never a caption composed from the other tags (the template would then say the
same tags twice) or taken from the file name of an item that has tags.
"""

from __future__ import annotations

import random

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


def training_prompt(
    pieces: list[str], rng: random.Random, trigger: str = "", trigger_probability: float = 0.8
) -> str:
    """One random prompt from the pieces; every random number comes from `rng`."""
    if rng.random() < 0.5:
        chosen = rng.sample(pieces, len(pieces))  # all, shuffled
    else:
        chosen = rng.sample(pieces, rng.randint(1, len(pieces)))  # a random subset
    if trigger and rng.random() < trigger_probability:
        chosen = [trigger, *chosen]
    return ", ".join(chosen)
