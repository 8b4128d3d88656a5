"""Side-Step's `dataset.json`, read from a dataset folder and written for Side-Step.

The file is `{"metadata": {...}, "samples": [...]}` (a bare list of samples is read too).
Side-Step's dataset builder (and ACE-Step 1.5's, whose format it shares) writes the fields
in this order, and its preprocessor reads them back with these defaults:

- metadata: name, custom_tag (the trigger word, ""), tag_position ("prepend", "append" or
  "replace"), created_at, num_samples, all_instrumental, genre_ratio (0-100, the percent of
  samples prompted with their genre instead of their caption, 0).
- each sample: id, audio_path (absolute as its builder writes it; a relative one is taken
  from the JSON's folder), filename (used when audio_path does not resolve), caption, genre,
  lyrics ("[Instrumental]" when there are none), raw_lyrics, formatted_lyrics, bpm (a whole
  number or null), keyscale ("E minor"), timesignature ("4" for 4/4), duration (whole
  seconds), language ("unknown" when undeclared), is_instrumental, custom_tag, labeled,
  prompt_override (null, "caption" or "genre"), repeat.

`read_dataset_json` keeps every sample as read (unknown keys too), keyed by the dataset path
of its audio file. `export` writes one back from the labels table in the same order: a field
the table took from this file is written as it was read, so read → export → read gives the
same labels, and a file Side-Step wrote comes back field for field. A value the labels stage
assumed rather than found is not written as a fact: an assumed time signature is written ""
and an unknown is_instrumental is left out (Side-Step then applies its own default).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from tunesmith.report import Skipped

FILE = "dataset.json"
METADATA_KEYS = (
    "name",
    "custom_tag",
    "tag_position",
    "created_at",
    "num_samples",
    "all_instrumental",
    "genre_ratio",
)
SAMPLE_KEYS = (
    "id",
    "audio_path",
    "filename",
    "caption",
    "genre",
    "lyrics",
    "raw_lyrics",
    "formatted_lyrics",
    "bpm",
    "keyscale",
    "timesignature",
    "duration",
    "language",
    "is_instrumental",
    "custom_tag",
    "labeled",
    "prompt_override",
    "repeat",
)
METADATA_DEFAULTS = {"custom_tag": "", "tag_position": "prepend", "genre_ratio": 0}
INSTRUMENTAL_LYRICS = "[Instrumental]"
# Caption sources a person wrote; Side-Step's `labeled` says the caption is not a file name.
PERSON_CAPTIONS = ("json", "caption.txt", "txt", "dataset.json")


@dataclass
class SideStepFile:
    metadata: dict[str, Any] = field(default_factory=dict)  # as read
    samples: dict[str, dict[str, Any]] = field(default_factory=dict)  # dataset path → sample
    skipped: list[Skipped] = field(default_factory=list)


def read_dataset_json(data: bytes, folder: Path, known: set[str]) -> SideStepFile:
    """The samples of a `dataset.json` (its bytes as read) whose audio is in `known`."""
    try:
        value = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return SideStepFile(skipped=[Skipped(FILE, f"not valid UTF-8 JSON ({exc})")])
    samples = value.get("samples") if isinstance(value, dict) else value
    metadata = value.get("metadata") if isinstance(value, dict) else None
    if not isinstance(samples, list):
        expected = "expected a list of samples or {'samples': [...]}"
        return SideStepFile(skipped=[Skipped(FILE, expected)])
    found = SideStepFile(metadata=metadata if isinstance(metadata, dict) else {})
    root = folder.resolve()
    by_name: dict[str, list[str]] = {}
    for rel in sorted(known):
        by_name.setdefault(PurePosixPath(rel).name, []).append(rel)
    for i, sample in enumerate(samples):
        if not isinstance(sample, dict):
            found.skipped.append(Skipped(FILE, f"sample {i}: expected an object"))
            continue
        rel, reason = _locate(sample, root, known, by_name)
        if rel is None:
            found.skipped.append(Skipped(FILE, f"sample {i}: {reason}"))
        elif rel in found.samples:
            found.skipped.append(Skipped(FILE, f"sample {i}: {rel} is named by an earlier sample"))
        else:
            found.samples[rel] = sample
    return found


def _locate(
    sample: dict[str, Any], root: Path, known: set[str], by_name: dict[str, list[str]]
) -> tuple[str | None, str]:
    """The dataset path a sample names: its audio_path, else its filename (as Side-Step
    falls back to it when the path is from another machine)."""
    named = sample.get("audio_path") or sample.get("filename")
    if not named or not isinstance(named, str):
        return None, "no audio_path or filename"
    reason = f"{named!r} is not in the dataset"
    for candidate in (sample.get("audio_path"), sample.get("filename")):
        if not isinstance(candidate, str) or not candidate:
            continue
        target = Path(os.path.normpath(root / candidate))
        if target.is_relative_to(root):
            rel = target.relative_to(root).as_posix()
            if rel in known:
                return rel, ""
        else:
            reason = f"{candidate!r} is outside the dataset folder"
    filename = sample.get("filename") or PurePosixPath(str(sample.get("audio_path"))).name
    matches = by_name.get(PurePosixPath(str(filename).replace("\\", "/")).name, [])
    if len(matches) == 1:
        return matches[0], ""
    if len(matches) > 1:
        return None, f"{filename!r} names {len(matches)} files ({', '.join(matches)})"
    return None, reason


def export(rows: list[dict[str, Any]], folder: Path, name: str, dataset: dict[str, Any]) -> dict:
    """A `dataset.json` for the audio rows of the labels table, laid out as Side-Step's
    builder lays it out. `dataset` is the labels stage's dataset record (metadata as read,
    and the custom_tag, tag_position and genre_ratio in force)."""
    root = folder.resolve()
    samples = [_sample(row, root) for row in rows if row["kind"] == "audio"]
    read = dataset.get("metadata_read", {})
    metadata: dict[str, Any] = {
        "name": read.get("name") or name,
        "custom_tag": dataset["custom_tag"],
        "tag_position": dataset["tag_position"],
        "created_at": read.get("created_at"),
        "num_samples": len(samples),
        "all_instrumental": all(s.get("is_instrumental") is True for s in samples),
        "genre_ratio": dataset["genre_ratio"],
    }
    if metadata["created_at"] is None:
        del metadata["created_at"]  # not invented: Side-Step's reader needs none
    metadata.update({k: v for k, v in read.items() if k not in METADATA_KEYS})
    return {"metadata": metadata, "samples": samples}


# Fields the labels stage resolves from every source; Side-Step's bookkeeping (id,
# raw_lyrics, labeled, ...) is written back as read.
RESOLVED = (
    "caption",
    "lyrics",
    "bpm",
    "keyscale",
    "timesignature",
    "language",
    "is_instrumental",
    "custom_tag",
)
NO_VALUE = (None, "", "unknown", INSTRUMENTAL_LYRICS)  # how Side-Step writes "nothing"


def _sample(row: dict[str, Any], root: Path) -> dict[str, Any]:
    read = json.loads(row["side_step"]) if isinstance(row.get("side_step"), str) else {}
    sources = {name: entry.get("source") for name, entry in json.loads(row["fields"]).items()}
    path = root / row["path"]
    audio_path = read.get("audio_path")
    if not (isinstance(audio_path, str) and Path(audio_path).is_absolute()):
        audio_path = str(path)  # the export lives outside the dataset: absolute, as Side-Step
    lyrics, instrumental = row["lyrics"] or "", row["is_instrumental"]
    made = {
        "id": hashlib.sha256(row["path"].encode()).hexdigest()[:8],
        "audio_path": audio_path,
        "filename": path.name,
        "caption": row["caption"],
        "genre": json.loads(row["tags"]).get("genre", ""),
        "lyrics": lyrics or INSTRUMENTAL_LYRICS,
        "raw_lyrics": lyrics,
        "formatted_lyrics": "",
        "bpm": _bpm(row["bpm"], sources.get("bpm")),
        "keyscale": row["keyscale"] or "",
        # What the run trains with, an assumed 4/4 included ("4"): Side-Step's prompt builder
        # writes "N/A" for an empty one, and a dataset trained again there would be
        # conditioned otherwise. That it was assumed stays in tunesmith's table (`fields`).
        "timesignature": row["timesignature"] or "",
        "duration": int(row["duration"]),  # Side-Step's whole seconds
        "language": row["language"],
        "is_instrumental": instrumental if isinstance(instrumental, bool) else None,
        "custom_tag": row["custom_tag"] or "",
        "labeled": sources.get("caption") in PERSON_CAPTIONS,
        "prompt_override": None,
        "repeat": 1,
    }
    out: dict[str, Any] = {}
    for key in [*SAMPLE_KEYS, *(k for k in read if k not in SAMPLE_KEYS)]:
        if key in read and _as_read(key, read[key], made, sources):
            out[key] = read[key]
        elif key in made:
            out[key] = made[key]
    if out.get("is_instrumental") is None:
        out.pop("is_instrumental", None)  # unknown: not written as a fact
    out["audio_path"] = audio_path
    return out


def _as_read(key: str, value: Any, made: dict[str, Any], sources: dict[str, Any]) -> bool:
    """Whether to write a field back exactly as dataset.json had it."""
    if key == "genre":
        return str(value or "").strip() == made["genre"]
    if key not in RESOLVED:
        return True
    source = sources.get(key)
    if source == "dataset.json":
        return True  # the labels hold what the file said
    if source == "assumed":
        return False  # it said nothing; the value assumed is what the run trains with
    if source == "none":
        return value in NO_VALUE  # it said nothing, and nothing was found since
    # A dataset-level trigger word: Side-Step gives it to every sample without its own.
    dataset_level = source in ("tunesmith.toml", "dataset.json metadata")
    return key == "custom_tag" and dataset_level and value in NO_VALUE


def _bpm(bpm: float | None, source: str | None) -> int | float | None:
    if bpm is None or bpm != bpm or bpm <= 0:
        return None
    if source == "analysis" or float(bpm).is_integer():
        return int(round(bpm))  # Side-Step's bpm is a whole number
    return float(bpm)
