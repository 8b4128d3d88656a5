"""One label record per item: every field from the highest source that states it.

Precedence, highest first (what a person wrote always wins over what was measured):

1. `json`: underfit's `<stem>.json` tags (or ACE-Step 1.5's `<stem>.json`), beside the
   file or in the sibling `json/` folder;
2. `caption.txt` and `lyrics.txt`: ACE-Step 1.5's `<stem>.caption.txt`, `<stem>.lyrics.txt`;
3. `txt`: `<stem>.txt` beside the file or in `txt/`, a caption (kohya, diffusers,
   underfit) or Side-Step's `key: value` sidecar;
4. `dataset.json`: the item's sample in Side-Step's `dataset.json`;
5. `embedded`: ID3 / Vorbis / MP4 tags in the file;
6. `analysis`: what Essentia measured (bpm, key; duration and format always come from it);
7. `filename`: the caption, from the file name;
8. `tunesmith.toml` / `dataset.json metadata`: the dataset's declared language, trigger;
9. `assumed`: a time signature nobody stated and the analysis did not find (no tempo) is "4"
   (ACE-Step's spelling of 4/4), and is listed for review when the analysis looked for one;
   a language nobody declared is "unknown"; `none`: no value (no lyrics, instrumental or
   not unknown).

The analysis's time signature (analysis.meter: "3", "4" or "6") is used with source
`analysis` and its confidence, and listed for review under CONFIDENCE_FLOOR like bpm and key.
A listed analysed value names the alternatives the analysis weighed (a bpm's other levels,
"86 BPM, or 172").

underfit's tags are merged from every source, a higher source winning per tag. Every field's
source goes into the record's `fields` (with the analysis value and its confidence where
there is one). A value that cannot be read (a bpm of "fast") is a warning naming the file,
and the next source is used. A field is flagged for review when the analysis is less sure
of it than CONFIDENCE_FLOOR, or when a person's value contradicts the analysis: a bpm off by
more than 4% (an octave included: 140 written where the audio says 70), or another key.
Lyrics only ever make an item not instrumental; no lyrics leave it unknown.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from tunesmith.analysis.key import PITCH_CLASSES
from tunesmith.dataset import sidecars
from tunesmith.dataset.sidecars import Source

# Sources of values a person (or the tool they used) wrote, highest first.
PRECEDENCE = ("json", "caption.txt", "lyrics.txt", "txt", "dataset.json", "embedded")
# Below this, an analysed value is listed for review: the analysis is then no surer of it
# than of the alternatives it weighed (see analysis.tempo and analysis.key).
CONFIDENCE_FLOOR = 0.5
BPM_TOLERANCE = 0.04  # MIREX's tempo tolerance
ASSUMED_TIMESIGNATURE = "4"  # ACE-Step writes a time signature as its beats a bar
_NOTE = {"c": 0, "d": 2, "e": 4, "f": 5, "g": 7, "a": 9, "b": 11}
_KEY = re.compile(r"^([a-g])\s*([#♯b♭]?)\s*(major|maj|minor|min|m)?$", re.IGNORECASE)
_TIMESIGNATURE = re.compile(r"^\d{1,2}(/\d{1,2})?$")


@dataclass(frozen=True)
class DatasetLevel:
    """Dataset-wide values and where they came from (tunesmith.toml over dataset.json)."""

    default_language: str | None = None
    custom_tag: str = ""
    custom_tag_source: str = "none"
    tag_position: str = "prepend"
    genre_ratio: int = 0


@dataclass
class Resolved:
    values: dict[str, Any] = field(default_factory=dict)
    fields: dict[str, dict[str, Any]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    review: list[dict[str, Any]] = field(default_factory=list)


def resolve(
    rel: str, kind: str, sources: list[Source], analysis: dict[str, Any], level: DatasetLevel
) -> Resolved:
    """The label values of one item from its sources (any order) and its analysis."""
    ranked = sorted(sources, key=lambda s: PRECEDENCE.index(s.name))
    out = Resolved()
    _caption_and_tags(rel, ranked, out)
    if kind != "audio":
        return out
    _bpm(rel, ranked, analysis, out)
    _key(rel, ranked, analysis, out)
    _text_fields(rel, ranked, level, out, analysis)
    return out


def _caption_and_tags(rel: str, ranked: list[Source], out: Resolved) -> None:
    tags: dict[str, str] = {}
    for source in reversed(ranked):
        tags.update(source.tags)
    out.values["tags"] = json.dumps(tags, sort_keys=True, ensure_ascii=False)
    written = next((s for s in ranked if s.name != "embedded" and s.values.get("caption")), None)
    embedded = next((s for s in ranked if s.name == "embedded" and s.tags), None)
    if written:
        _set(out, "caption", sidecars.as_text(written.values["caption"]), written.name)
    elif embedded:
        _set(out, "caption", sidecars.caption_from_tags(embedded.tags), "embedded")
    else:
        _set(out, "caption", sidecars.caption_from_name(rel), "filename")
    for source in ranked:
        if source.name in ("caption.txt", "txt") and not (source.values or source.tags):
            out.warnings.append(
                f"{source.path}: the caption file is empty; caption taken from the "
                f"{out.fields['caption']['source']}: {out.values['caption']!r}"
            )


def _bpm(rel: str, ranked: list[Source], analysis: dict[str, Any], out: Resolved) -> None:
    measured = float(analysis.get("bpm") or 0.0)
    confidence = float(analysis.get("tempo_confidence") or 0.0)
    for source in _stating(ranked, "bpm"):
        bpm = parse_bpm(source.values["bpm"])
        if bpm is None:
            out.warnings.append(_unreadable(source, rel, "bpm", "a number of beats a minute"))
            continue
        _set(out, "bpm", bpm, source.name, measured or None, confidence if measured else None)
        if measured and abs(bpm - measured) > BPM_TOLERANCE * bpm:
            octave = " (an octave apart)" if _octave_apart(bpm, measured) else ""
            _flag(out, "bpm", f"the audio says {measured:.1f}{octave}", confidence)
        return
    if measured:
        _set(out, "bpm", measured, "analysis", confidence=confidence)
        if confidence < CONFIDENCE_FLOOR:
            reason = f"analysis confidence {confidence:.2f} is under the floor"
            others = (analysis.get("tempo") or {}).get("alternatives") or []
            _flag(out, "bpm", reason, confidence, [round(float(b), 1) for b in others])
    else:
        _set(out, "bpm", None, "none")


def _key(rel: str, ranked: list[Source], analysis: dict[str, Any], out: Resolved) -> None:
    measured = (analysis.get("key") or "", analysis.get("scale") or "")
    confidence = float(analysis.get("key_confidence") or 0.0)
    for source in _stating(ranked, "keyscale"):
        written = sidecars.as_text(source.values["keyscale"])
        parsed = parse_key(written)
        if parsed is None:
            out.warnings.append(_unreadable(source, rel, "keyscale", 'a key like "E minor"'))
            continue
        _set(
            out,
            "keyscale",
            written,
            source.name,
            " ".join(measured).strip() or None,
            confidence if measured[0] else None,
        )
        out.values["key"], out.values["scale"] = parsed
        if measured[0] and parsed != measured:
            _flag(out, "keyscale", f"the audio says {' '.join(measured)}", confidence)
        return
    if measured[0]:
        _set(out, "keyscale", " ".join(measured), "analysis", confidence=confidence)
        out.values["key"], out.values["scale"] = measured
        if confidence < CONFIDENCE_FLOOR:
            reason = f"analysis confidence {confidence:.2f} is under the floor"
            _flag(out, "keyscale", reason, confidence)
    else:
        _set(out, "keyscale", "", "none")
        out.values["key"], out.values["scale"] = "", ""


def _text_fields(
    rel: str, ranked: list[Source], level: DatasetLevel, out: Resolved, analysis: dict[str, Any]
) -> None:
    lyrics = next(iter(_stating(ranked, "lyrics")), None)
    _set(
        out,
        "lyrics",
        sidecars.as_text(lyrics.values["lyrics"]) if lyrics else "",
        lyrics.name if lyrics else "none",
    )
    _instrumental(rel, ranked, out)
    for source in _stating(ranked, "timesignature"):
        written = sidecars.as_text(source.values["timesignature"])
        if _TIMESIGNATURE.match(written):
            _set(out, "timesignature", written, source.name)
            break
        out.warnings.append(_unreadable(source, rel, "timesignature", 'beats a bar like "4"'))
    else:
        _timesignature(analysis, out)
    language = next((s for s in _stating(ranked, "language") if _declared(s)), None)
    if language:
        _set(out, "language", sidecars.as_text(language.values["language"]), language.name)
    elif level.default_language:
        _set(out, "language", level.default_language, "tunesmith.toml")
    else:
        _set(out, "language", "unknown", "assumed")
    tag = next(iter(_stating(ranked, "custom_tag")), None)
    if tag:
        _set(out, "custom_tag", sidecars.as_text(tag.values["custom_tag"]), tag.name)
    else:
        _set(out, "custom_tag", level.custom_tag, level.custom_tag_source)


def _timesignature(analysis: dict[str, Any], out: Resolved) -> None:
    """The analysis's time signature when it found one, else "4" assumed; both reviewable."""
    measured = str(analysis.get("timesignature") or "")
    if not measured:
        _set(out, "timesignature", ASSUMED_TIMESIGNATURE, "assumed")
        if "timesignature" in analysis:  # measured and none found (an older analysis: absent)
            _flag(out, "timesignature", "assumed: the analysis found no metre", 0.0)
        return
    confidence = float(analysis.get("timesignature_confidence") or 0.0)
    _set(out, "timesignature", measured, "analysis", confidence=confidence)
    if confidence < CONFIDENCE_FLOOR:
        others = [ts for ts in ("4", "3", "6") if ts != measured]
        reason = f"analysis confidence {confidence:.2f} is under the floor"
        _flag(out, "timesignature", reason, confidence, others)


def _instrumental(rel: str, ranked: list[Source], out: Resolved) -> None:
    """The first source that says: its is_instrumental if written, else False if it has
    lyrics. A source without lyrics says nothing."""
    for source in ranked:
        if "is_instrumental" in source.values:
            flag = parse_bool(source.values["is_instrumental"])
            if flag is not None:
                _set(out, "is_instrumental", flag, source.name)
                return
            out.warnings.append(_unreadable(source, rel, "is_instrumental", "true or false"))
        if source.values.get("lyrics"):
            _set(out, "is_instrumental", False, source.name)
            return
    _set(out, "is_instrumental", None, "none")


def _stating(ranked: list[Source], name: str) -> list[Source]:
    return [s for s in ranked if s.values.get(name) not in (None, "")]


def _declared(source: Source) -> bool:
    return sidecars.as_text(source.values["language"]).lower() != "unknown"


def _set(
    out: Resolved,
    name: str,
    value: Any,
    source: str,
    analysis: Any = None,
    confidence: float | None = None,
) -> None:
    out.values[name] = value
    entry: dict[str, Any] = {"source": source}
    if analysis is not None:
        entry["analysis"] = analysis
    if confidence is not None:
        entry["confidence"] = round(confidence, 4)
    out.fields[name] = entry


def _flag(
    out: Resolved, name: str, reason: str, confidence: float, alternatives: list | None = None
) -> None:
    entry = out.fields[name]
    extra = {"alternatives": alternatives} if alternatives else {}
    out.review.append(
        {
            **extra,
            "field": name,
            "value": out.values[name],
            "source": entry["source"],
            "analysis": entry.get("analysis"),
            "confidence": round(confidence, 4),
            "reason": reason,
        }
    )


def _unreadable(source: Source, rel: str, name: str, expected: str) -> str:
    where = source.path or rel
    value = sidecars.as_text(source.values[name])
    return f"{where}: {name} {value!r} is not {expected}; taken from the next source"


def _octave_apart(a: float, b: float) -> bool:
    return any(abs(a - f * b) <= BPM_TOLERANCE * a for f in (0.5, 2.0))


def parse_bpm(value: Any) -> float | None:
    """A written tempo: 120, "120", "120.5", "120 bpm"; None when it is not one."""
    if isinstance(value, bool):
        return None
    text = str(value).strip().lower().removesuffix("bpm").strip()
    try:
        bpm = float(text)
    except ValueError:
        return None
    return bpm if 0 < bpm < 1000 else None


def parse_key(text: str) -> tuple[str, str] | None:
    """("Bb", "minor") from "Bb minor", "A# min", "Bbm", "bb"; None when it is not a key.
    A bare tonic is major; "m" is minor. Spelled as the analysis spells keys."""
    match = _KEY.match(text.strip())
    if not match:
        return None
    letter, accidental, quality = match.groups()
    pitch = _NOTE[letter.lower()] + {"#": 1, "♯": 1, "b": -1, "♭": -1}.get(accidental, 0)
    minor = bool(quality) and (quality == "m" or quality.lower().startswith("min"))
    return PITCH_CLASSES[pitch % 12], "minor" if minor else "major"


def parse_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    return {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}.get(text)
