"""Labels from the files users already keep beside their media, each read from its bytes.

Where each convention puts them, for a media file `<dir>/<stem>.<ext>`:

- underfit's tags, `<stem>.json` beside it or in the sibling folder `<dir>/../json/`: one
  flat JSON object. ACE-Step 1.5's `<stem>.json` uses the same place with its own keys
  (caption, lyrics, bpm, keyscale, timesignature, language); both are read as one format.
- a caption, `<stem>.txt` beside it or in `<dir>/../txt/` (kohya, diffusers, underfit, Stable
  Audio 3). A `.txt` written as Side-Step's `key: value` sidecar (its first line names a
  field, e.g. `caption: ...`, and a `lyrics:` block comes last) is read field by field.
- ACE-Step 1.5's `<stem>.caption.txt` and `<stem>.lyrics.txt` beside it.
- ID3 (MP3, WAV), Vorbis comments (FLAC, Ogg) and MP4 atoms inside the file.

`read_sidecar` turns the bytes of one file into a `Source`: the label fields it states
(canonical names below) and the underfit tags it adds. A file that cannot be read as its
convention expects raises LabelError naming it; the labels stage then warns and takes the
fields from the next source. The precedence between sources is in `dataset.fields`.
"""

from __future__ import annotations

import codecs
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

# underfit's embedded-tag set (its pre-encoder's TAG_KEYS)
TAG_KEYS = ("title", "artist", "album", "genre", "label", "date", "composer", "bpm")
_ID3 = {
    "TIT2": "title",
    "TPE1": "artist",
    "TALB": "album",
    "TCON": "genre",
    "TPUB": "label",
    "TDRC": "date",
    "TCOM": "composer",
    "TBPM": "bpm",
}
_MP4 = {
    "\xa9nam": "title",
    "\xa9ART": "artist",
    "\xa9alb": "album",
    "\xa9gen": "genre",
    "\xa9day": "date",
    "\xa9wrt": "composer",
    "tmpo": "bpm",
}
CAPTION_KEYS = ("prompt", "caption")  # underfit's JSON calls it prompt, ACE's caption
# Label fields a sidecar may state, under the names used here (ACE-Step's).
FIELDS = (
    "caption",
    "lyrics",
    "bpm",
    "keyscale",
    "timesignature",
    "language",
    "is_instrumental",
    "custom_tag",
)
# Other spellings of those fields in JSON sidecars and Side-Step's `.txt` (its aliases).
ALIASES = {
    "prompt": "caption",
    "key": "keyscale",
    "scale": "keyscale",
    "signature": "timesignature",
    "time_signature": "timesignature",
    "sig": "timesignature",
    "lang": "language",
    "tempo": "bpm",
    "trigger": "custom_tag",
}
# The keys Side-Step's sidecar parser recognises at the start of a line.
SIDE_STEP_KEYS = frozenset(
    {*FIELDS, *ALIASES, "genre", "tags", "repeat", "repeats", "prompt_override", "duration"}
)
INSTRUMENTAL = "[instrumental]"  # the lyrics ACE-Step and Side-Step write for no vocals


class LabelError(ValueError):
    """A sidecar that cannot be used; the message names the file and the problem."""


@dataclass
class Source:
    """What one file says about one item."""

    name: str  # provenance: "json", "txt", "caption.txt", "lyrics.txt", "embedded", ...
    path: str  # the file, relative to the dataset folder
    values: dict[str, Any] = field(default_factory=dict)  # FIELDS as written
    tags: dict[str, str] = field(default_factory=dict)  # underfit tags to merge


def candidates(rel: str) -> dict[str, list[str]]:
    """Sidecar paths of a media file (dataset-relative), by source name, nearest first."""
    path = PurePosixPath(rel)
    stem, folder = path.stem, path.parent
    siblings = folder.parent if folder != PurePosixPath(".") else None
    json_paths = [str(folder / f"{stem}.json")]
    txt_paths = [str(folder / f"{stem}.txt")]
    if siblings is not None:  # underfit: <dir>/../json/<stem>.json and <dir>/../txt/<stem>.txt
        json_paths.append(str(siblings / "json" / f"{stem}.json"))
        txt_paths.append(str(siblings / "txt" / f"{stem}.txt"))
    clean = [[p.removeprefix("./") for p in paths] for paths in (json_paths, txt_paths)]
    return {
        "json": clean[0],
        "caption.txt": [str(folder / f"{stem}.caption.txt").removeprefix("./")],
        "lyrics.txt": [str(folder / f"{stem}.lyrics.txt").removeprefix("./")],
        "txt": clean[1],
    }


# UTF-32's marks first: UTF-32 LE's begins with UTF-16 LE's.
BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def read_sidecar(name: str, rel: str, data: bytes) -> Source:
    """The Source a sidecar's bytes make; LabelError naming `rel` when they cannot be read."""
    text = sidecar_text(rel, data)
    if name == "json":
        return _json_source(rel, text)
    if name == "caption.txt":
        return Source(name, rel, {"caption": text.strip()} if text.strip() else {})
    if name == "lyrics.txt":
        return Source(name, rel, _lyrics_values(text.strip()))
    if looks_like_side_step(text):
        return _side_step_txt(rel, text)
    return Source(name, rel, {"caption": text.strip()} if text.strip() else {})


def sidecar_text(rel: str, data: bytes) -> str:
    """The text of a sidecar: UTF-8 (with or without a BOM), or UTF-16/32 that says so with its
    BOM (Windows' Notepad saves "Unicode" as UTF-16 LE with one): unambiguous, so read."""
    for bom, codec in BOMS:
        if data.startswith(bom):
            try:
                return data[len(bom) :].decode(codec)
            except UnicodeDecodeError as exc:
                raise LabelError(
                    f"{rel}: starts with a {codec.upper()} byte-order mark but is not {codec} "
                    f"after it ({exc.reason} at offset {exc.start + len(bom)}); save it as UTF-8"
                ) from exc
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise LabelError(
            f"{rel}: not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            "save it as UTF-8"
        ) from exc


def _json_source(rel: str, text: str) -> Source:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LabelError(f"{rel}: not valid JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise LabelError(f"{rel}: expected a JSON object of tags, got {type(value).__name__}")
    values: dict[str, Any] = {}
    tags: dict[str, str] = {}
    for raw_key, raw in value.items():
        key = str(raw_key).lower()
        if raw is None:
            continue
        canonical = ALIASES.get(key, key)
        if canonical in FIELDS and canonical not in values and raw != "":
            values[canonical] = raw
        if key not in CAPTION_KEYS:  # underfit keeps every other key as a tag
            tags[key] = as_text(raw)
    for key in CAPTION_KEYS:  # "prompt" wins over "caption" (underfit's own name)
        if value.get(key):
            values["caption"] = as_text(value[key])
            break
    if "lyrics" in values:
        values.update(_lyrics_values(as_text(values.pop("lyrics"))))
    return Source("json", rel, values, {k: v for k, v in tags.items() if v})


def looks_like_side_step(text: str) -> bool:
    """A `.txt` in Side-Step's `key: value` form: its first non-blank, non-comment line
    starts with a field name and a colon, and at least two such lines are present."""
    lines = [line.strip() for line in text.splitlines()]
    keyed = [line for line in lines if line and not line.startswith("#")]
    if not keyed or not _key_of(keyed[0]):
        return False
    return sum(1 for line in keyed if _key_of(line)) >= 2


def _key_of(line: str) -> str | None:
    match = re.match(r"^([A-Za-z_]+)\s*:", line)
    key = match.group(1).lower() if match else None
    return key if key in SIDE_STEP_KEYS else None


def _side_step_txt(rel: str, text: str) -> Source:
    """Side-Step's sidecar: `key: value` lines; a value runs on until the next key line, and
    everything after `lyrics:` is lyrics (its writer puts lyrics last)."""
    found: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        key = _key_of(line.strip()) if current != "lyrics" else None
        if key:
            current = ALIASES.get(key, key)
            first = line.split(":", 1)[1].strip()
            found[current] = [first] if first else []
        elif current == "lyrics" or (current and not line.lstrip().startswith("#")):
            found[current].append(line.rstrip())
    values: dict[str, Any] = {}
    tags: dict[str, str] = {}
    for key, lines in found.items():
        value = "\n".join(lines).strip()
        if not value:
            continue
        if key == "lyrics":
            values.update(_lyrics_values(value))
        elif key in FIELDS:
            values[key] = value
        elif key == "genre":
            tags["genre"] = value
    return Source("txt", rel, values, tags)


def _lyrics_values(text: str) -> dict[str, Any]:
    """Lyrics as written, structure tags kept; the instrumental marker alone says there are
    none, and says the item is instrumental."""
    if not text:
        return {}
    if text.lower() == INSTRUMENTAL:
        return {"is_instrumental": True}
    return {"lyrics": text}


def read_embedded(data: bytes | str) -> Source:
    """ID3 / Vorbis / MP4 tags of an audio file (its bytes or its path) as underfit's tags;
    an unreadable or untagged file gives an empty Source."""
    import mutagen  # here: a build that reads no tags need not import it (0.15 s)
    from mutagen.id3 import ID3

    try:
        media = mutagen.File(io.BytesIO(data) if isinstance(data, bytes) else data)
    except mutagen.MutagenError:
        return Source("embedded", "")
    tags = getattr(media, "tags", None)
    if not tags:
        return Source("embedded", "")
    found: dict[str, str] = {}
    if isinstance(tags, ID3):
        found = {key: as_text(tags[frame].text) for frame, key in _ID3.items() if frame in tags}
    elif type(tags).__name__ == "MP4Tags":
        found = {key: as_text(tags[atom]) for atom, key in _MP4.items() if atom in tags}
    else:  # Vorbis comments: case-insensitive keys
        for key in TAG_KEYS:
            values = tags.get(key) or tags.get(key.upper())
            if values:
                found[key] = as_text(values)
    found = {k: v for k, v in found.items() if v}
    values = {"bpm": found["bpm"]} if "bpm" in found else {}
    return Source("embedded", "", values, found)


def caption_from_tags(tags: dict[str, str]) -> str:
    """underfit's tag prompt with every tag in a fixed order: `Title: x, Artist: y`."""
    return ", ".join(f"{k.capitalize()}: {tags[k]}" for k in TAG_KEYS if tags.get(k))


def caption_from_name(rel: str) -> str:
    """Side-Step's folder-only caption: the stem with `_` and `-` as spaces."""
    return " ".join(PurePosixPath(rel).stem.replace("_", " ").replace("-", " ").split())


def as_text(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).strip()
