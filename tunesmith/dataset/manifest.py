"""Stage `manifest`: every file of a dataset with its sha256, kind and size.

The data version is the hash of the manifest (paths, hashes, kinds, sizes; not mtimes),
so touching a file changes nothing downstream. A file is hashed again only when its size
or mtime changed since the last scan; the remembered hashes live in the store folder. The
files to hash are spread over a pool of worker processes (`dataset.workers`) when there are
enough bytes to make starting the workers worth it (POOL_MIN_BYTES).

Folders are walked following symbolic links, since users link media in from elsewhere; a
link that leads back into a folder already walked, or a link to itself, is a loop and is
skipped with a message. Hidden files and folders (".name") are passed over.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from tunesmith.dataset.workers import run_all
from tunesmith.report import Skipped, StageResult
from tunesmith.store import canonical_json, sha256_file
from tunesmith.store.atomic import atomic_write_json

STAGE_VERSION = 1

AUDIO = frozenset({".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a", ".aiff", ".aif"})
IMAGE = frozenset({".jpg", ".jpeg", ".png", ".webp", ".bmp", ".gif", ".tif", ".tiff", ".avif"})
# Below this many bytes to hash, one process does it sooner than a pool can start: sha256
# reads several hundred MB a second on one core, and a worker takes a fraction of a second
# to start.
POOL_MIN_BYTES = 256 << 20
SIDECAR = frozenset({".txt", ".json"})
CONFIG_FILES = frozenset({"tunesmith.toml"})


def kind_of(path: Path) -> str:
    if path.name in CONFIG_FILES:
        return "config"
    suffix = path.suffix.lower()
    if suffix in AUDIO:
        return "audio"
    if suffix in IMAGE:
        return "image"
    if suffix in SIDECAR:
        return "sidecar"
    return "other"


@dataclass(frozen=True)
class FileEntry:
    path: str  # relative to the dataset folder, "/"-separated
    sha256: str
    kind: str
    size: int


@dataclass
class Manifest:
    files: list[FileEntry]
    skipped: list[Skipped] = field(default_factory=list)

    @property
    def data_version(self) -> str:
        rows = [[f.path, f.sha256, f.kind, f.size] for f in self.files]
        return hashlib.sha256(canonical_json(rows).encode()).hexdigest()

    def by_path(self) -> dict[str, FileEntry]:
        return {f.path: f for f in self.files}

    def to_frame(self) -> pd.DataFrame:
        columns = ["path", "sha256", "kind", "size"]
        return pd.DataFrame([vars(f) for f in self.files], columns=columns)

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> Manifest:
        rows = frame.to_dict("records")
        return cls([FileEntry(r["path"], r["sha256"], r["kind"], int(r["size"])) for r in rows])


def walk(folder: Path) -> tuple[list[tuple[str, os.stat_result]], list[Skipped]]:
    """(relative path, stat) of every visible file, following links without looping."""
    found: list[tuple[str, os.stat_result]] = []
    skipped: list[Skipped] = []
    seen_dirs: set[tuple[int, int]] = set()

    def visit(directory: Path, rel: str) -> None:
        st = directory.stat()
        if (st.st_dev, st.st_ino) in seen_dirs:
            skipped.append(Skipped(rel, "symlink loop: this folder leads back to one already read"))
            return
        seen_dirs.add((st.st_dev, st.st_ino))
        for entry in sorted(os.scandir(directory), key=lambda e: e.name):
            if entry.name.startswith("."):
                continue
            child_rel = f"{rel}/{entry.name}" if rel else entry.name
            try:
                child_st = os.stat(entry.path)  # follows links
            except OSError as exc:
                reason = "symlink loop" if entry.is_symlink() else "cannot be read"
                skipped.append(Skipped(child_rel, f"{reason}: {exc.strerror}"))
                continue
            if entry.is_dir(follow_symlinks=True):
                visit(Path(entry.path), child_rel)
            elif entry.is_file(follow_symlinks=True):
                found.append((child_rel, child_st))

    visit(folder, "")
    return found, skipped


def fast_fingerprint(folder: Path) -> str:
    """A cheap fingerprint (paths, sizes, mtimes; no content) for the sensor's cursor."""
    return _fingerprint(*walk(folder))


def _fingerprint(files: list[tuple[str, os.stat_result]], skipped: list[Skipped]) -> str:
    rows = [[rel, st.st_size, st.st_mtime_ns] for rel, st in files]
    rows += [[s.path, "skipped"] for s in skipped]
    return hashlib.sha256(canonical_json(rows).encode()).hexdigest()[:16]


def build_manifest(
    folder: Path, hash_cache: Path, workers: int = 1, pool_min_bytes: int = POOL_MIN_BYTES
) -> tuple[Manifest, StageResult]:
    """Scan `folder`; `hash_cache` is this dataset's file of remembered hashes."""
    start = time.perf_counter()
    remembered = _read_cache(hash_cache)
    files, skipped = walk(folder)
    fingerprint = _fingerprint(files, skipped)
    stale = [(rel, st) for rel, st in files if (remembered.get(rel) or [])[:2] != _stamp(st)]
    if sum(st.st_size for _, st in stale) < pool_min_bytes:
        workers = 1
    stale_paths = [rel for rel, _ in stale]
    results = run_all(_hash, [str(folder / rel) for rel in stale_paths], workers)
    digests = dict(zip(stale_paths, results, strict=True))
    entries, cache = [], {}
    for rel, st in files:
        digest = digests.get(rel) or remembered[rel][2]
        if isinstance(digest, list):  # [error] from _hash
            skipped.append(Skipped(rel, f"cannot be read: {digest[0]}"))
            continue
        cache[rel] = [*_stamp(st), digest]
        entries.append(FileEntry(rel, digest, kind_of(Path(rel)), st.st_size))
    if cache != remembered:
        atomic_write_json(hash_cache, cache)
    manifest = Manifest(entries, skipped)
    hashed = sum(1 for rel, _ in stale if not isinstance(digests[rel], list))
    result = StageResult(
        stage="manifest",
        data_version=manifest.data_version,
        items=len(entries),
        cached=len(entries) - hashed,
        computed=hashed,
        skipped=skipped,
        seconds=time.perf_counter() - start,
        extra={"fingerprint": fingerprint},
    )
    return manifest, result


def hash_cache_path(store: Path, dataset: str) -> Path:
    """Where the manifest stage remembers a dataset's file hashes: under the store root."""
    return store / "hashes" / f"{dataset}.json"


def file_hashes(folder: Path, hash_cache: Path, paths: list[str]) -> dict[str, str]:
    """The sha256 of each of `paths` (relative to `folder`): the one the manifest stage
    remembered in `hash_cache` where the file's size and mtime are still those it hashed,
    else read again (the cache is left as the manifest stage wrote it)."""
    remembered = _read_cache(hash_cache)
    found = {}
    for rel in paths:
        path = folder / rel
        entry = remembered.get(rel) or []
        found[rel] = entry[2] if entry[:2] == _stamp(path.stat()) else sha256_file(path)
    return found


def _stamp(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns]


def _hash(path: str) -> str | list[str]:
    """The sha256 of a file, or [the reason] when it cannot be read (run in a worker)."""
    try:
        return sha256_file(Path(path))
    except OSError as exc:
        return [exc.strerror or str(exc)]


def _read_cache(path: Path) -> dict[str, list]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
