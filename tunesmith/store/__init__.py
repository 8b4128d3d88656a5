"""The content-addressed store: every cached item of every stage lives here.

An entry is a folder named by its key, the sha256 of a canonical JSON of everything that
determines its bytes (stage, stage version, input content hashes, parameters, model
fingerprint, placement). Entries are written whole into a temporary folder and renamed
into place: a rename of a folder onto a missing name is atomic, so two processes writing
one key at once leave exactly one good entry (the first rename wins, the second writer
discards its copy, whose bytes are the same by construction).

Which entries are still wanted is recorded as "roots": after a stage materializes a
dataset it writes the list of keys it used under `roots/<dataset>/<stage>.json`. `gc`
removes every entry no root names.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunesmith.store.atomic import TMP_PREFIX, atomic_write_json

__all__ = ["Store", "GcResult", "canonical_json", "content_key", "sha256_file"]

VALUE = "value.json"
# A temporary folder older than this belongs to a process that died mid-write.
STALE_TMP_SECONDS = 3600


def canonical_json(value: Any) -> str:
    """One spelling per value: sorted keys, no spaces, UTF-8 kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_file(path: Path) -> str:
    """sha256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def content_key(**parts: Any) -> str:
    """The store key of an entry: sha256 of the canonical JSON of its parts."""
    return hashlib.sha256(canonical_json(parts).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class GcResult:
    removed: int
    kept: int
    bytes_freed: int


class Store:
    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.objects = self.root / "objects"
        self.roots = self.root / "roots"

    def path(self, key: str) -> Path:
        if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
            raise ValueError(f"store key must be 64 hex digits, got {key!r}")
        return self.objects / key[:2] / key

    def has(self, key: str) -> bool:
        return self.path(key).is_dir()

    @contextmanager
    def writing(self, key: str) -> Iterator[Path]:
        """Yield an empty temporary folder; on a clean exit it becomes the entry for `key`.

        On an exception the temporary folder is removed and nothing is published.
        """
        final = self.path(key)
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=TMP_PREFIX, dir=final.parent))
        try:
            yield tmp
            try:
                tmp.rename(final)
            except OSError:
                if not final.is_dir():
                    raise
                # Another writer published the same key first; its bytes are ours.
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def write_json(self, key: str, value: Any) -> None:
        with self.writing(key) as tmp:
            (tmp / VALUE).write_text(canonical_json(value), encoding="utf-8")

    def read_json(self, key: str) -> Any | None:
        """The JSON value of an entry, or None when the store lacks it."""
        try:
            return json.loads((self.path(key) / VALUE).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None

    def set_roots(self, owner: str, keys: Iterable[str]) -> None:
        """Record the keys a materialization uses; `owner` is "<dataset>/<stage>"."""
        atomic_write_json(self.roots / f"{owner}.json", sorted(set(keys)))

    def referenced(self) -> set[str]:
        keys: set[str] = set()
        for file in self.roots.rglob("*.json"):
            keys.update(json.loads(file.read_text(encoding="utf-8")))
        return keys

    def gc(self, dry_run: bool = False) -> GcResult:
        """Remove entries no root names, and temporary folders left by dead writers."""
        wanted = self.referenced()
        removed = kept = freed = 0
        now = time.time()
        for shard in sorted(self.objects.glob("??")):
            for entry in sorted(shard.iterdir()):
                if entry.name.startswith(TMP_PREFIX):
                    if now - entry.stat().st_mtime < STALE_TMP_SECONDS:
                        continue  # a writer may still be filling it
                elif entry.name in wanted:
                    kept += 1
                    continue
                removed += 1
                freed += _size(entry)
                if not dry_run:
                    shutil.rmtree(entry, ignore_errors=True)
        return GcResult(removed=removed, kept=kept, bytes_freed=freed)


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
