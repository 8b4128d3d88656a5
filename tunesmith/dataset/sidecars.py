"""Captions and tags from the files users already keep beside their media.

Precedence (DESIGN.md): underfit's `<stem>.json` > kohya/diffusers `<stem>.txt` >
Side-Step's `dataset.json` > embedded ID3/Vorbis/MP4 tags > the file name. Tags from every
source are merged, a higher source winning per key; the caption comes from the highest
source that has one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import mutagen
from mutagen.id3 import ID3

from tunesmith.report import Skipped

# underfit's embedded-tag set (shared/reference/underfit-sa3-conventions.md, section 7)
TAG_KEYS = ("title", "artist", "album", "genre", "label", "date", "composer", "bpm")
_ID3 = {"TIT2": "title", "TPE1": "artist", "TALB": "album", "TCON": "genre",
        "TPUB": "label", "TDRC": "date", "TCOM": "composer", "TBPM": "bpm"}  # fmt: skip
_MP4 = {"\xa9nam": "title", "\xa9ART": "artist", "\xa9alb": "album", "\xa9gen": "genre",
        "\xa9day": "date", "\xa9wrt": "composer", "tmpo": "bpm"}  # fmt: skip
CAPTION_KEYS = ("prompt", "caption")  # underfit's JSON calls it prompt, ACE's caption


class LabelError(ValueError):
    """A sidecar that cannot be used; the message names the file and the problem."""


def read_text_caption(path: Path, label: str) -> str | None:
    """A `.txt` caption, stripped; None when the file is empty."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise LabelError(
            f"{label}: caption is not UTF-8 (byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start}); save it as UTF-8"
        ) from exc
    return text.strip() or None


def read_json_tags(path: Path, label: str) -> dict[str, str]:
    """underfit's sidecar: one flat JSON object of tags."""
    try:
        value = json.loads(path.read_bytes().decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LabelError(f"{label}: not valid UTF-8 JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise LabelError(f"{label}: expected a JSON object of tags, got {type(value).__name__}")
    return {str(k).lower(): as_text(v) for k, v in value.items() if v is not None}


def read_embedded_tags(path: Path) -> dict[str, str]:
    """ID3 (MP3, WAV), Vorbis comments (FLAC, Ogg) or MP4 atoms, as underfit's tag keys."""
    try:
        media = mutagen.File(path)
    except mutagen.MutagenError:
        return {}
    tags = getattr(media, "tags", None)
    if not tags:
        return {}
    found: dict[str, str] = {}
    if isinstance(tags, ID3):
        for frame, key in _ID3.items():
            if frame in tags:
                found[key] = as_text(tags[frame].text)
    elif hasattr(media, "tags") and type(tags).__name__ == "MP4Tags":
        for atom, key in _MP4.items():
            if atom in tags:
                found[key] = as_text(tags[atom])
    else:  # Vorbis comments: case-insensitive keys
        for key in TAG_KEYS:
            values = tags.get(key) or tags.get(key.upper())
            if values:
                found[key] = as_text(values)
    return {k: v for k, v in found.items() if v}


def read_dataset_json(
    folder: Path, known: set[str]
) -> tuple[dict[str, dict[str, Any]], list[Skipped]]:
    """Side-Step/ACE-Step `dataset.json` samples, by dataset-relative path.

    Accepts a list of samples or `{"metadata": ..., "samples": [...]}`; each sample names
    its file as `audio_path` (relative to the folder, or absolute) or `filename`.
    """
    path = folder / "dataset.json"
    if not path.is_file():
        return {}, []
    try:
        value = json.loads(path.read_bytes().decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return {}, [Skipped("dataset.json", f"not valid UTF-8 JSON ({exc})")]
    samples = value.get("samples") if isinstance(value, dict) else value
    if not isinstance(samples, list):
        return {}, [Skipped("dataset.json", "expected a list of samples or {'samples': [...]}")]
    root = folder.resolve()
    entries, skipped = {}, []
    for i, sample in enumerate(samples):
        is_dict = isinstance(sample, dict)
        named = (sample.get("audio_path") or sample.get("filename")) if is_dict else None
        if not named:
            skipped.append(Skipped("dataset.json", f"sample {i}: no audio_path or filename"))
            continue
        target = Path(os.path.normpath(root / named))
        if not target.is_relative_to(root):
            skipped.append(
                Skipped("dataset.json", f"sample {i}: {named!r} is outside the dataset folder")
            )
            continue
        rel = target.relative_to(root).as_posix()
        if rel not in known:
            skipped.append(Skipped("dataset.json", f"sample {i}: {named!r} is not in the dataset"))
            continue
        entries[rel] = sample
    return entries, skipped


def caption_from_tags(tags: dict[str, str]) -> str:
    """underfit's tag prompt with every tag in a fixed order: `Title: x, Artist: y`."""
    return ", ".join(f"{k.capitalize()}: {tags[k]}" for k in TAG_KEYS if tags.get(k))


def caption_from_name(rel: str) -> str:
    """Side-Step's folder-only caption: the stem with `_` and `-` as spaces."""
    return " ".join(Path(rel).stem.replace("_", " ").replace("-", " ").split())


def as_text(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    return str(value).strip()
