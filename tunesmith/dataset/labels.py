"""Stage `labels`: per item, its caption and tags, and what analysis measures.

Two caches, both keyed by content: the analysis of a file (Essentia for audio, Pillow for
images; keyed by the file's hash, the analyzer version and its parameters) and the label
record (keyed by the analysis key and the hashes of the item's sidecars). Editing one
caption therefore builds one label record and analyses nothing.

A bad item is skipped with a message naming its file; the others go through. A failed
analysis is cached like a good one, so a bad file is not decoded again until it changes.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from tunesmith.analysis.image import IMAGE_ANALYZER_VERSION, analyze_image
from tunesmith.dataset import sidecars
from tunesmith.dataset.manifest import FileEntry, Manifest
from tunesmith.media.sniff import MediaError, check_format
from tunesmith.report import Skipped, StageResult
from tunesmith.store import Store, content_key

STAGE_VERSION = 1

COLUMNS = [
    "path", "kind", "sha256", "caption", "caption_source", "tags",
    "duration", "sample_rate", "channels", "bpm", "bpm_confidence",
    "key", "scale", "key_strength", "loudness_lufs", "width", "height", "mode",
]  # fmt: skip


@dataclass
class Labels:
    frame: pd.DataFrame  # one row per usable item, COLUMNS; `tags` is a JSON object string
    result: StageResult
    keys: list[str]  # every store entry this materialization used (for gc roots)


def build_labels(folder: Path, manifest: Manifest, store: Store) -> Labels:
    start = time.perf_counter()
    files = manifest.by_path()
    items = [f for f in manifest.files if f.kind in ("audio", "image")]
    dataset_json, skipped = sidecars.read_dataset_json(folder, set(files))
    rows, keys, warnings = [], [], []
    cached = computed = analysed = 0
    for item in items:
        try:
            analysis_key, fresh = _analysis(folder, item, store)
            analysed += fresh
            keys.append(analysis_key)
            analysis = store.read_json(analysis_key)
            if "error" in analysis:
                raise MediaError(analysis["error"])
            json_sc, txt_sc = (files.get(_beside(item.path, ext)) for ext in (".json", ".txt"))
            label_key = content_key(
                stage="labels",
                version=STAGE_VERSION,
                path=item.path,
                analysis=analysis_key,
                json_sidecar=json_sc.sha256 if json_sc else None,
                txt_sidecar=txt_sc.sha256 if txt_sc else None,
                dataset_json=dataset_json.get(item.path),
            )
            if store.has(label_key):
                cached += 1
            else:
                record = _label(folder, item, json_sc, txt_sc, dataset_json.get(item.path))
                store.write_json(label_key, record)
                computed += 1
            keys.append(label_key)
            row = {**store.read_json(label_key), **analysis}
            if txt_sc and row["caption_source"] not in ("txt", "json"):
                warnings.append(
                    f"{txt_sc.path}: the caption file is empty; caption taken from the "
                    f"{row['caption_source']}: {row['caption']!r}"
                )
            rows.append(row)
        except (MediaError, sidecars.LabelError) as exc:
            skipped.append(Skipped(item.path, str(exc)))
    frame = pd.DataFrame(rows, columns=COLUMNS)
    data_version = content_key(stage="labels", keys=keys, skipped=[vars(s) for s in skipped])
    result = StageResult(
        stage="labels",
        data_version=data_version,
        items=len(items),
        cached=cached,
        computed=computed,
        skipped=skipped,
        seconds=time.perf_counter() - start,
        extra={"analysed": analysed, **({"warnings": warnings} if warnings else {})},
    )
    return Labels(frame, result, keys)


def _analysis(folder: Path, item: FileEntry, store: Store) -> tuple[str, bool]:
    """The store key of the item's analysis, and whether it was computed just now."""
    if item.kind == "audio":
        from tunesmith.analysis import audio  # Essentia loads slowly; only when needed

        version, params = audio.ANALYZER_VERSION, audio.ANALYSIS_PARAMS
    else:
        version, params = IMAGE_ANALYZER_VERSION, {}
    key = content_key(
        stage="analysis", kind=item.kind, version=version, params=params, content=item.sha256
    )
    if store.has(key):
        return key, False
    path = folder / item.path
    try:
        check_format(path, item.path)
        if item.kind == "audio":
            value: dict[str, Any] = audio.analyze_audio(path)
        else:
            value = analyze_image(path, item.path)
    except (MediaError, ValueError) as exc:
        message = str(exc)
        value = {"error": message if item.path in message else f"{item.path}: {message}"}
    store.write_json(key, value)
    return key, True


def _label(
    folder: Path,
    item: FileEntry,
    json_sc: FileEntry | None,
    txt_sc: FileEntry | None,
    sample: dict[str, Any] | None,
) -> dict[str, Any]:
    """Caption and tags by the precedence of `sidecars`, lowest source first."""
    tags: dict[str, str] = {}
    caption, source = sidecars.caption_from_name(item.path), "filename"
    if item.kind == "audio":
        embedded = sidecars.read_embedded_tags(folder / item.path)
        if embedded:
            tags.update(embedded)
            caption, source = sidecars.caption_from_tags(embedded), "embedded"
    if sample:
        fields = {k: sidecars.as_text(v) for k, v in sample.items() if v not in (None, "")}
        fields.pop("audio_path", None), fields.pop("filename", None)
        if fields.get("caption"):
            caption, source = fields.pop("caption"), "dataset.json"
        tags.update(fields)
    if txt_sc:
        text = sidecars.read_text_caption(folder / txt_sc.path, txt_sc.path)
        if text:
            caption, source = text, "txt"
    if json_sc:
        found = sidecars.read_json_tags(folder / json_sc.path, json_sc.path)
        for key in sidecars.CAPTION_KEYS:
            if found.get(key):
                caption, source = found.pop(key), "json"
                break
        tags.update(found)
    return {
        "path": item.path,
        "kind": item.kind,
        "sha256": item.sha256,
        "caption": caption,
        "caption_source": source,
        "tags": json.dumps(tags, sort_keys=True, ensure_ascii=False),
    }


def _beside(rel: str, ext: str) -> str:
    return str(Path(rel).with_suffix(ext).as_posix())


def side_step_dataset(frame: pd.DataFrame, name: str) -> dict[str, Any]:
    """A Side-Step/ACE-Step-compatible `dataset.json` for the audio items of `frame`."""
    samples = []
    for row in frame[frame["kind"] == "audio"].to_dict("records"):
        tags = json.loads(row["tags"])
        samples.append({
            "filename": Path(row["path"]).name,
            "audio_path": row["path"],
            "caption": row["caption"],
            "genre": tags.get("genre", ""),
            "lyrics": tags.get("lyrics", "[Instrumental]"),
            "bpm": round(float(row["bpm"])) if row["bpm"] else None,
            "keyscale": f"{row['key']} {row['scale']}" if row["key"] else "",
            "timesignature": tags.get("timesignature", "4"),
            "duration": round(float(row["duration"]), 3),
            "is_instrumental": tags.get("lyrics", "[Instrumental]") == "[Instrumental]",
        })  # fmt: skip
    metadata = {
        "name": name,
        "custom_tag": "",
        "tag_position": "prepend",
        "genre_ratio": 0,
        "all_instrumental": all(s["is_instrumental"] for s in samples),
    }
    return {"metadata": metadata, "samples": samples}
