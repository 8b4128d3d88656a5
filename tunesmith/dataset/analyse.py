"""The analysis half of the labels stage: one cached record per media file, over a pool.

A record is keyed by the file's hash from the manifest, the analyzer version and its
parameters. What is missing from the store is computed by `analyse_file`, on a pool of
worker processes (`dataset.workers`). After analysing, a worker hashes the file again: a
file that no longer has the manifest's hash changed during the build, and what was read
from it is not stored under the manifest's hash (the item is skipped and analysed on the
next build, whose manifest hashes it anew). A file that cannot be analysed gets an error
record, cached like a good one, so it is not decoded again until it changes.

An audio record also holds the tags embedded in the file (ID3, Vorbis, MP4), read here from
the same file so that they are covered by the same hash check.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunesmith import progress
from tunesmith.analysis.image import IMAGE_ANALYZER_VERSION, analyze_image
from tunesmith.dataset.manifest import FileEntry
from tunesmith.dataset.workers import each
from tunesmith.media.sniff import MediaError, check_format
from tunesmith.store import Store, content_key, sha256_file

CHANGED = "changed during the build; it is rebuilt next time"
# Below this many bytes of media to analyse, one process finishes before a pool has started:
# a worker takes about two seconds to load Essentia, and 16 MiB is about 95 s of 16-bit
# stereo WAV (ten seconds of analysis) or eight minutes of MP3.
POOL_MIN_BYTES = 16 << 20


@dataclass(frozen=True)
class Analysed:
    keys: dict[str, str]  # dataset path → store key of its record
    computed: int  # records computed in this build
    changed: set[str]  # paths whose file changed during the build (nothing stored)


def analysis_key(item: FileEntry) -> str:
    if item.kind == "audio":
        from tunesmith.analysis import audio  # Essentia loads slowly; only when needed

        version, params = audio.ANALYZER_VERSION, audio.ANALYSIS_PARAMS
    else:
        version, params = IMAGE_ANALYZER_VERSION, {}
    return content_key(
        stage="analysis", kind=item.kind, version=version, params=params, content=item.sha256
    )


def analyse_items(
    folder: Path,
    items: list[FileEntry],
    store: Store,
    workers: int,
    pool_min_bytes: int = POOL_MIN_BYTES,
) -> Analysed:
    """Make sure every item has an analysis record; the records computed run on the pool."""
    keys = {item.path: analysis_key(item) for item in items}
    todo = [item for item in items if not store.has(keys[item.path])]
    if sum(item.size for item in todo) < pool_min_bytes:
        workers = 1
    tasks = [(str(folder / item.path), item.path, item.kind, item.sha256) for item in todo]
    changed = set()
    with progress.work("analysing", len(todo)) as tick:
        for item, value in zip(todo, each(analyse_file, tasks, workers), strict=True):
            if value is None:
                changed.add(item.path)
            else:
                store.write_json(keys[item.path], value)
            tick(1)
    return Analysed(keys, len(todo) - len(changed), changed)


def analyse_file(task: tuple[str, str, str, str]) -> dict[str, Any] | None:
    """The analysis record of one file (run in a worker); None when the file changed."""
    path, rel, kind, expected = task
    try:
        check_format(Path(path), rel)
        if kind == "audio":
            from tunesmith.analysis.audio import analyze_audio
            from tunesmith.dataset.sidecars import read_embedded

            value: dict[str, Any] = analyze_audio(Path(path))
            embedded = read_embedded(path)
            value["embedded"] = {"values": embedded.values, "tags": embedded.tags}
        else:
            value = analyze_image(Path(path), rel)
    except (MediaError, ValueError) as exc:
        message = str(exc).replace(path, rel)
        value = {"error": message if rel in message else f"{rel}: {message}"}
    try:
        if sha256_file(Path(path)) != expected:
            return None
    except OSError:
        return None  # gone since the manifest: the next build's manifest will say so
    return value
