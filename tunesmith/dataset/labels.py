"""Stage `labels`: per item, its caption, tags and label fields, each with its source.

Two caches, both keyed by content: the analysis of a file (`dataset.analyse`) and the label
record, keyed by the analysis key, the hashes of the item's sidecars, its `dataset.json`
sample and the dataset-level settings. Editing one caption therefore builds one label record
and analyses nothing. The record's fields and their precedence are in `dataset.fields`.

Every file a record is built from is read once, and its bytes are hashed and checked against
the manifest: a file that changed after the manifest hashed it would otherwise have its new
content stored under its old hash. Such an item is skipped with a message and built on the
next run. A sidecar that cannot be read (not UTF-8, JSON that does not parse) is a warning
naming it; the item takes that field from the next source. Files that are neither media nor
a sidecar of one are listed once as ignored, each with the reason.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import pandas as pd

from tunesmith.dataset import settings as dataset_settings
from tunesmith.dataset import side_step, sidecars
from tunesmith.dataset.analyse import CHANGED, POOL_MIN_BYTES, analyse_items
from tunesmith.dataset.fields import DatasetLevel, resolve
from tunesmith.dataset.manifest import FileEntry, Manifest
from tunesmith.report import Skipped, StageResult
from tunesmith.store import Store, content_key

STAGE_VERSION = 2

COLUMNS = [
    "path",
    "kind",
    "sha256",
    "caption",
    "caption_source",
    "tags",
    "duration",
    "sample_rate",
    "channels",
    "bpm",
    "bpm_confidence",
    "key",
    "scale",
    "key_strength",
    "loudness_lufs",
    "width",
    "height",
    "mode",
    "tempo_confidence",
    "key_confidence",
    "keyscale",
    "timesignature",
    "lyrics",
    "language",
    "is_instrumental",
    "custom_tag",
    "tag_position",
    "genre_ratio",
    "fields",
    "review",
    "side_step",
]
# Analysis values copied into the row as they are.
_MEASURED = (
    "duration",
    "sample_rate",
    "channels",
    "bpm_confidence",
    "key_strength",
    "loudness_lufs",
    "width",
    "height",
    "mode",
    "tempo_confidence",
    "key_confidence",
)


class ChangedDuringBuild(Exception):
    """A file's bytes are not the ones the manifest hashed."""


@dataclass
class Labels:
    frame: pd.DataFrame  # one row per usable item, COLUMNS; JSON columns are strings
    result: StageResult
    keys: list[str]  # every store entry this materialization used (for gc roots)
    dataset: dict[str, Any]  # the dataset-level record (report.json's labels.dataset)


def build_labels(
    folder: Path,
    manifest: Manifest,
    store: Store,
    workers: int = 1,
    pool_min_bytes: int = POOL_MIN_BYTES,
) -> Labels:
    """Label every media item of `manifest`; the analysis runs on up to `workers` processes
    when there are at least `pool_min_bytes` of media to analyse."""
    start = time.perf_counter()
    files = manifest.by_path()
    items = [f for f in manifest.files if f.kind in ("audio", "image")]
    skipped: list[Skipped] = []
    level, dataset, samples, changed_json = _dataset_level(folder, files, items, skipped)
    analysed = analyse_items(folder, items, store, workers, pool_min_bytes)
    rows, keys, warnings, review = [], [], [], []
    cached = computed = 0
    for item in items:
        if item.path in analysed.changed or (changed_json and item.kind == "audio"):
            what = item.path if item.path in analysed.changed else side_step.FILE
            skipped.append(Skipped(item.path, f"{what}: {CHANGED}"))
            continue
        keys.append(analysed.keys[item.path])
        analysis = store.read_json(analysed.keys[item.path])
        if "error" in analysis:
            skipped.append(Skipped(item.path, analysis["error"]))
            continue
        found, sample = _sidecar_files(item, files), samples.get(item.path)
        label_key = _label_key(item, analysed.keys[item.path], found, sample, dataset)
        if store.has(label_key):
            cached += 1
        else:
            try:
                record = _record(folder, item, found, sample, analysis, level)
            except ChangedDuringBuild as exc:
                skipped.append(Skipped(item.path, f"{exc}: {CHANGED}"))
                continue
            store.write_json(label_key, record)
            computed += 1
        keys.append(label_key)
        record = store.read_json(label_key)
        warnings += record.pop("warnings")
        review += [{"path": item.path, **flag} for flag in json.loads(record["review"])]
        rows.append(record)
    frame = pd.DataFrame(rows, columns=COLUMNS)
    warnings += _same_name(items, files)
    ignored = _ignored(manifest, items)
    data_version = content_key(stage="labels", keys=keys, skipped=[vars(s) for s in skipped])
    extra: dict[str, Any] = {"analysed": analysed.computed, "review": review, "dataset": dataset}
    extra.update({"warnings": warnings} if warnings else {})
    extra.update({"ignored": [vars(i) for i in ignored]} if ignored else {})
    result = StageResult(
        stage="labels",
        data_version=data_version,
        items=len(items),
        cached=cached,
        computed=computed,
        skipped=skipped,
        seconds=time.perf_counter() - start,
        extra=extra,
    )
    return Labels(frame, result, keys, dataset)


def _label_key(
    item: FileEntry,
    analysis: str,
    found: dict[str, FileEntry],
    sample: dict[str, Any] | None,
    dataset: dict[str, Any],
) -> str:
    """Everything the record is built from: the analysis, each sidecar's path and hash, the
    dataset.json sample and the dataset-level values in force."""
    return content_key(
        stage="labels",
        version=STAGE_VERSION,
        path=item.path,
        analysis=analysis,
        sidecars={name: [e.path, e.sha256] for name, e in found.items()},
        sample=sample,
        dataset={k: v for k, v in dataset.items() if k != "metadata_read"},
    )


def _dataset_level(
    folder: Path, files: dict[str, FileEntry], items: list[FileEntry], skipped: list[Skipped]
) -> tuple[DatasetLevel, dict[str, Any], dict[str, dict], bool]:
    """Settings, the dataset record, dataset.json's samples by path, and whether
    dataset.json changed during the build."""
    settings = dataset_settings.DatasetSettings()
    config = files.get(dataset_settings.FILE)
    if config:  # its values, not its hash, go into the label keys: read as it is now
        settings = dataset_settings.read_settings(folder, (folder / config.path).read_bytes())
    found, changed = side_step.SideStepFile(), False
    entry = files.get(side_step.FILE)
    if entry:
        data = (folder / entry.path).read_bytes()
        changed = hashlib.sha256(data).hexdigest() != entry.sha256
        found = side_step.read_dataset_json(data, folder, {i.path for i in items})
        skipped += found.skipped
    meta = {**side_step.METADATA_DEFAULTS, **found.metadata}
    tag, tag_source = settings.custom_tag, "tunesmith.toml"
    if tag is None:
        tag, tag_source = str(meta.get("custom_tag") or ""), "dataset.json metadata"
    level = DatasetLevel(
        default_language=settings.default_language,
        custom_tag=tag,
        custom_tag_source=tag_source if tag else "none",
        tag_position=settings.tag_position or str(meta["tag_position"]),
        genre_ratio=meta["genre_ratio"] if settings.genre_ratio is None else settings.genre_ratio,
    )
    dataset = {
        "default_language": level.default_language,
        "custom_tag": level.custom_tag,
        "tag_position": level.tag_position,
        "genre_ratio": level.genre_ratio,
        "metadata_read": found.metadata,
    }
    return level, dataset, found.samples, changed


def _sidecar_files(item: FileEntry, files: dict[str, FileEntry]) -> dict[str, FileEntry]:
    """The item's sidecar files present in the manifest, by source name (nearest wins)."""
    found = {}
    for name, paths in sidecars.candidates(item.path).items():
        if item.kind != "audio" and name == "lyrics.txt":
            continue
        entry = next((files[p] for p in paths if p in files and p != item.path), None)
        if entry is not None:
            found[name] = entry
    return found


def _record(
    folder: Path,
    item: FileEntry,
    found: dict[str, FileEntry],
    sample: dict[str, Any] | None,
    analysis: dict[str, Any],
    level: DatasetLevel,
) -> dict[str, Any]:
    sources, warnings = [], []
    for name, entry in found.items():
        data = _read_checked(folder, entry)
        try:
            sources.append(sidecars.read_sidecar(name, entry.path, data))
        except sidecars.LabelError as exc:
            warnings.append(f"{exc}; its fields are taken from the next source")
    if sample is not None:
        sources.append(_sample_source(sample))
    embedded = analysis.get("embedded")
    if embedded:
        sources.append(sidecars.Source("embedded", item.path, embedded["values"], embedded["tags"]))
    resolved = resolve(item.path, item.kind, sources, analysis, level)
    record = {c: None for c in COLUMNS}
    record.update({k: analysis.get(k) for k in _MEASURED})
    record.update(resolved.values)
    record.update(
        path=item.path,
        kind=item.kind,
        sha256=item.sha256,
        caption_source=resolved.fields["caption"]["source"],
        tag_position=level.tag_position if item.kind == "audio" else None,
        genre_ratio=level.genre_ratio if item.kind == "audio" else None,
        fields=json.dumps(resolved.fields, sort_keys=True, ensure_ascii=False),
        review=json.dumps(resolved.review, ensure_ascii=False),
        side_step=json.dumps(sample, ensure_ascii=False) if sample is not None else None,
        warnings=warnings + resolved.warnings,
    )
    return record


def _sample_source(sample: dict[str, Any]) -> sidecars.Source:
    """What a Side-Step sample states, as the other sources state it."""
    values: dict[str, Any] = {}
    for name in sidecars.FIELDS:
        value = sample.get(name)
        if value is not None and value != "" and not isinstance(value, dict | list):
            values[name] = value
    if "lyrics" in values:
        lyrics = sidecars.as_text(values.pop("lyrics"))
        if lyrics.lower() != sidecars.INSTRUMENTAL:
            values["lyrics"] = lyrics
    genre = sidecars.as_text(sample.get("genre") or "")
    tags = {k: sidecars.as_text(sample[k]) for k in sidecars.TAG_KEYS if sample.get(k)}
    tags.update({"genre": genre} if genre else {})
    # Its bpm is a label field, not a tag: an exported dataset.json carries the analysed bpm,
    # which must not turn into a prompt tag when the file is read back.
    tags.pop("bpm", None)
    return sidecars.Source("dataset.json", side_step.FILE, values, tags)


def _read_checked(folder: Path, entry: FileEntry) -> bytes:
    data = (folder / entry.path).read_bytes()
    if hashlib.sha256(data).hexdigest() != entry.sha256:
        raise ChangedDuringBuild(entry.path)
    return data


NUMBERS = {2: "two", 3: "three", 4: "four"}


def _same_name(items: list[FileEntry], files: dict[str, FileEntry]) -> list[str]:
    """A warning for media files of one kind and one name in one folder (song.wav beside
    song.mp3): the folder says to build both, so both are, but it is one song trained on
    twice, and the name's sidecars describe both."""
    groups: dict[tuple[str, PurePosixPath], list[str]] = {}
    for item in items:  # a song and a picture of one name train different runs: no warning
        path = PurePosixPath(item.path)
        groups.setdefault((item.kind, path.with_suffix("")), []).append(item.path)
    warnings = []
    for paths in (sorted(g) for g in groups.values() if len(g) > 1):
        shared = [p for ps in sidecars.candidates(paths[0]).values() for p in ps if p in files]
        n = len(paths)
        every = "both" if n == 2 else f"all {n}"
        sidecar_note = (
            f", and its sidecars ({', '.join(shared)}) describe {every}" if shared else ""
        )
        warnings.append(
            f"{paths[0]}: another media file has its name ({', '.join(paths[1:])}): {every} are "
            f"trained on, as {NUMBERS.get(n, n)} items{sidecar_note}; keep one, or rename one"
        )
    return warnings


def _ignored(manifest: Manifest, items: list[FileEntry]) -> list[Skipped]:
    """Files that are neither media nor a sidecar of a media file, with the reason."""
    claimed: set[str] = {side_step.FILE, dataset_settings.FILE}
    for item in items:
        for paths in sidecars.candidates(item.path).values():
            claimed.update(paths)
    ignored = []
    for entry in manifest.files:
        if entry.kind == "other":
            suffix = PurePosixPath(entry.path).suffix or "no extension"
            ignored.append(Skipped(entry.path, f"not media or a sidecar ({suffix})"))
        elif entry.kind == "sidecar" and entry.path not in claimed:
            ignored.append(Skipped(entry.path, "a sidecar with no media file of its name"))
    return ignored


def side_step_dataset(labels: Labels, folder: Path, name: str) -> dict[str, Any]:
    """Side-Step's `dataset.json` for the audio items (see dataset.side_step)."""
    return side_step.export(labels.frame.to_dict("records"), folder, name, labels.dataset)
