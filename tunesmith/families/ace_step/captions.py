"""Which two strings each item trains on, per run: the caption string and the lyrics string.

From the labels stage's row (caption, genre tag, lyrics, language, bpm, keyscale, time
signature, instrumental or not, the dataset's custom_tag / tag_position / genre_ratio) and the
run's own settings:

- the trigger is the run's `trigger`, else the dataset's `custom_tag`; its position the run's
  `train.tag_position`, else the dataset's (`text.apply_trigger`);
- `genre_ratio` percent of the items (ACE-Step 1.5's and Side-Step's seeded choice over the
  items in path order, `text.genre_items`) train on their genre tag instead of their caption:
  the run's `train.genre_ratio`, else the dataset's where the dataset states one
  (`[dataset] genre_ratio` or `dataset.json`'s metadata), else HOT-Step's 30;
- the lyrics string carries the dataset's declared language (a region such as `pt-br` is
  written as ACE-Step's `pt`); an instrumental or an item without lyrics sings
  `[Instrumental]`;
- a lyrics file that is not UTF-8 (the labels stage then has no lyrics for the item) skips
  the item, unless the run says `train.unreadable_lyrics = "instrumental"` or a sidecar marks
  it instrumental: a song with words must not silently train as one without.

Pure functions, no model: the `encoded` stage encodes what they return.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from tunesmith.dataset import settings as dataset_settings
from tunesmith.dataset import side_step, sidecars
from tunesmith.families.ace_step import text
from tunesmith.families.ace_step.base_model import LATENT_RATE


class ItemError(ValueError):
    """An item that cannot train in a run; the message names the file and what to do."""


@dataclass(frozen=True)
class ItemTexts:
    """What one item trains on in one run."""

    caption: str  # the caption after the genre choice and the trigger
    caption_string: str  # the text encoder's input (SFT template with metas)
    lyrics_string: str  # the lyric encoder's input (language header + lyrics)
    use_genre: bool
    instrumental: bool
    language: str
    trigger: str
    tag_position: str


def dataset_genre_ratio(folder: Path) -> int | None:
    """The genre_ratio a dataset states (tunesmith.toml's [dataset], else dataset.json's
    metadata), or None where it states none."""
    stated = dataset_settings.read_settings(folder).genre_ratio
    if stated is not None:
        return stated
    path = folder / side_step.FILE
    try:
        document = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, ValueError):
        return None  # the labels stage reports an unreadable dataset.json
    metadata = document.get("metadata") if isinstance(document, dict) else None
    value = metadata.get("genre_ratio") if isinstance(metadata, dict) else None
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def unreadable_lyrics(folder: Path, rel: str) -> str | None:
    """Why the item's `<stem>.lyrics.txt` cannot be read as text (as the labels stage reads a
    sidecar), or None (no such file, or it reads)."""
    for candidate in sidecars.candidates(rel)["lyrics.txt"]:
        path = folder / candidate
        if path.is_file():
            try:
                sidecars.sidecar_text(candidate, path.read_bytes())
            except sidecars.LabelError as exc:
                return str(exc)
    return None


def ace_language(language: str | None, rel: str) -> str:
    """The lyrics header's code for a declared language: itself, or its primary subtag."""
    code = (language or "unknown").lower()
    for candidate in (code, code.split("-")[0]):
        if candidate in text.LANGUAGES:
            return candidate
    raise ItemError(
        f"{rel}: language {language!r} is not one ACE-Step 1.5 knows; declare one of "
        f"{', '.join(sorted(text.LANGUAGES))} ([dataset] default_language)"
    )


def item_texts(row: dict, run, frames: int, use_genre: bool, unreadable: str | None) -> ItemTexts:
    """The strings `row` (a labels row) trains on in `run`, for latents of `frames` frames."""
    rel, t = row["path"], run.train
    trigger = run.trigger or _text(row.get("custom_tag"))
    position = t.tag_position or _text(row.get("tag_position")) or "prepend"
    sample = json.loads(row["side_step"]) if _text(row.get("side_step")) else {}
    genre = _text(json.loads(row.get("tags") or "{}").get("genre"))
    caption = text.training_caption(
        _text(row.get("caption")),
        genre,
        use_genre,
        trigger,
        position,
        sample.get("prompt_override"),
    )
    metas = text.Metas(
        bpm=_number(row.get("bpm")),
        keyscale=_text(row.get("keyscale")) or None,
        timesignature=_text(row.get("timesignature")) or None,
        duration=frames / LATENT_RATE,
    )
    instrumental = _text(row.get("is_instrumental")) in ("True", "true", "1")
    lyrics = "" if instrumental else _text(row.get("lyrics"))
    if unreadable and not lyrics and not instrumental:
        if t.unreadable_lyrics != "instrumental":
            raise ItemError(
                f"{unreadable}; save it as UTF-8, or set train.unreadable_lyrics = "
                f'"instrumental" in run {run.name!r} to train this item as an instrumental'
            )
        instrumental = True
    language = ace_language(_text(row.get("language")) or None, rel)
    return ItemTexts(
        caption,
        text.caption_text(caption, metas),
        text.lyrics_text(lyrics, language),
        use_genre,
        instrumental or not lyrics.strip(),
        language,
        trigger,
        position,
    )


def genre_choice(rows: list[dict], run, stated: int | None) -> dict[str, bool]:
    """Path → whether the item trains on its genre tag in `run` (rows in path order)."""
    ratio = run.train.genre_ratio
    if ratio is None:
        ratio = int(rows[0].get("genre_ratio") or 0) if stated is not None and rows else None
    chosen = text.genre_items(len(rows), text.GENRE_RATIO if ratio is None else ratio)
    return {row["path"]: i in chosen for i, row in enumerate(rows)}


def _text(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value).strip()


def _number(value) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) or number <= 0 else number
