"""The content-addressed store: every cached item of every stage lives here.

An entry is a folder named by its key, the sha256 of a canonical JSON of everything that
determines its bytes (stage, stage version, input content hashes, parameters, model
fingerprint, placement). Entries are written whole into a temporary folder and renamed
into place: a rename of a folder onto a missing name is atomic, so two processes writing
one key at once leave exactly one good entry (the first rename wins, the second writer
discards its copy, whose bytes are the same by construction).

The store does not trust the disk. Every entry records the size and sha256 of its files
(`.files.json`, written before the rename). `has` checks the sizes (a `stat` per file) and
`publish` checks the hash of every byte it copies out; a mismatch, a missing record or a
value that does not parse evicts the entry with a warning naming it, and the stage computes
it again. `verify` checks every hash. Outputs are copies, never links, so editing an output
never edits the cache.

A writer holds an `flock` on its temporary folder; `sweep` removes the temporary folders of
dead writers (the kernel dropped their lock), at once rather than after an age.

Which entries are still wanted is recorded as "roots": after a stage materializes a
dataset it writes the list of keys it used under `roots/<dataset>/<stage>.json`. `gc`
removes every entry no root names.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunesmith.store.atomic import (
    TMP_PREFIX,
    atomic_write_json,
    disk_space,
    sweep_temporaries,
    writer_lock,
)

__all__ = ["Store", "GcResult", "DamagedEntry", "canonical_json", "content_key", "sha256_file"]

VALUE = "value.json"
FILES = ".files.json"  # {relative path: [size, sha256]} of every file of the entry
CHUNK = 1 << 20
log = logging.getLogger("tunesmith.store")


def canonical_json(value: Any) -> str:
    """One spelling per value: sorted keys, no spaces, UTF-8 kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_file(path: Path) -> str:
    """sha256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def content_key(**parts: Any) -> str:
    """The store key of an entry: sha256 of the canonical JSON of its parts."""
    return hashlib.sha256(canonical_json(parts).encode("utf-8")).hexdigest()


_KEY = re.compile("[0-9a-f]{64}")  # a store key: sha256, lowercase hex


class DamagedEntry(RuntimeError):
    """An entry whose bytes are not the ones it was written with; it has been evicted."""


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
        self.evictions: list[str] = []  # one line per entry this object evicted
        # Entries whose sizes this object has checked: a stage asks of one entry twice or more
        # (is it there, then its value), and an entry never changes once written, so the
        # record is read once per stage; a removed entry is still seen (its folder is gone).
        self._sizes_checked: set[str] = set()

    def path(self, key: str) -> Path:
        if not _KEY.fullmatch(key):
            raise ValueError(f"store key must be 64 hex digits, got {key!r}")
        return self.objects.joinpath(key[:2], key)

    # --- reading: every read checks what it can afford -------------------------------------

    def has(self, key: str) -> bool:
        """True when the entry exists and its files have their recorded sizes (checked once
        per Store object, which a stage makes for itself); a damaged entry is evicted (and
        reported) and counts as missing."""
        entry = self.path(key)
        if not entry.is_dir():
            return False
        if key in self._sizes_checked:
            return True
        problem = _size_problem(entry)
        if problem:
            self.evict(key, problem)
            return False
        self._sizes_checked.add(key)
        return True

    def read_json(self, key: str) -> Any | None:
        """The JSON value of an entry, or None when the store lacks it (or it was damaged)."""
        if not self.has(key):
            return None
        try:
            return json.loads((self.path(key) / VALUE).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
            self.evict(key, f"{VALUE} does not parse ({exc})")
            return None

    def publish(self, key: str, name: str, destination: Path) -> bool:
        """Copy the entry's file `name` to `destination`, checking its hash on the way.

        An output already equal to the entry (same size and modification time, which the copy
        takes from the entry) is left untouched; an edited or hard-linked one is replaced.
        Returns whether it copied. Raises DamagedEntry (after evicting) on a hash mismatch.
        """
        source = self.path(key) / name
        src = source.stat()
        try:
            dst = destination.stat()
            if (
                dst.st_size == src.st_size
                and dst.st_mtime_ns == src.st_mtime_ns
                and dst.st_ino != src.st_ino  # a hard link shares edits: replace it
            ):
                return False
        except FileNotFoundError:
            pass
        expected = _recorded(self.path(key)).get(name, (None, None))[1]
        destination.parent.mkdir(parents=True, exist_ok=True)
        tmp = destination.with_name(f"{TMP_PREFIX}{uuid.uuid4().hex[:12]}-{destination.name}")
        digest = hashlib.sha256()
        try:
            with disk_space(destination, name), open(source, "rb") as f, open(tmp, "wb") as out:
                fcntl.flock(out, fcntl.LOCK_EX)
                while chunk := f.read(CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
            if digest.hexdigest() != expected:
                self.evict(key, f"{name}: its sha256 is not the one recorded when it was written")
                raise DamagedEntry(f"{source}: damaged; evicted, it is computed again")
            os.utime(tmp, ns=(src.st_atime_ns, src.st_mtime_ns))
            os.replace(tmp, destination)
        finally:
            tmp.unlink(missing_ok=True)
        return True

    def verify(self, keys: Iterable[str]) -> list[str]:
        """Check every file's sha256 of the given entries; evict the damaged ones.
        Returns one line per damaged entry."""
        problems = []
        for key in sorted(set(keys)):
            entry = self.path(key)
            if not entry.is_dir():
                continue
            problem = _size_problem(entry) or _hash_problem(entry)
            if problem:
                self.evict(key, problem)
                problems.append(self.evictions[-1])
        return problems

    def damaged(self, keys: Iterable[str]) -> list[str]:
        """The entries among `keys` whose files have lost their recorded sizes (read only:
        nothing is evicted, for `tunesmith status`)."""
        lines = []
        for key in sorted(set(keys)):
            entry = self.path(key)
            problem = _size_problem(entry) if entry.is_dir() else "missing"
            if problem:
                lines.append(f"{entry}: {problem}")
        return lines

    def evict(self, key: str, reason: str) -> None:
        self._sizes_checked.discard(key)
        entry = self.path(key)
        doomed = entry.with_name(f"{TMP_PREFIX}evicted-{uuid.uuid4().hex[:8]}-{key}")
        try:
            entry.rename(doomed)  # one rename: readers see the entry whole or not at all
        except FileNotFoundError:
            return  # another process evicted it first
        shutil.rmtree(doomed, ignore_errors=True)
        line = f"store entry {entry}: {reason}; removed, it is computed again"
        self.evictions.append(line)
        log.warning(line)

    # --- writing ---------------------------------------------------------------------------

    @contextmanager
    def writing(self, key: str) -> Iterator[Path]:
        """Yield an empty temporary folder; on a clean exit it becomes the entry for `key`,
        with the record of its files' sizes and hashes.

        On an exception the temporary folder is removed and nothing is published.
        """
        final = self.path(key)
        tmp = final.with_name(f"{TMP_PREFIX}{uuid.uuid4().hex[:12]}")
        with disk_space(final, "a cache entry"):
            final.parent.mkdir(parents=True, exist_ok=True)
            tmp.mkdir()
        try:
            # A live writer: `sweep` leaves this folder alone while the lock is held.
            with writer_lock(tmp):
                with disk_space(final, "a cache entry"):
                    yield tmp
                    _write_record(tmp)
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

    def make(self, key: str, build: Callable[[Path], None]) -> bool:
        """Ensure the entry exists: `build(folder)` fills a temporary folder when the store
        lacks it (or held a damaged copy). Returns whether it built."""
        if self.has(key):
            return False
        with self.writing(key) as tmp:
            build(tmp)
        return True

    def provide(
        self, key: str, build: Callable[[Path], None], publish: Callable[[str], Any]
    ) -> tuple[Any, bool]:
        """Make the entry when missing, then `publish(key)` (copy it out). An entry found
        damaged while publishing has been evicted; it is built once more and published again.
        Returns (what `publish` returned, whether the entry was built)."""
        built = self.make(key, build)
        try:
            return publish(key), built
        except DamagedEntry:
            self.make(key, build)
            return publish(key), True

    # --- housekeeping ----------------------------------------------------------------------

    def sweep(self) -> list[Path]:
        """Remove temporary entries left by writers that died (a killed build)."""
        removed = []
        for shard in sorted(self.objects.glob("??")):
            removed += sweep_temporaries(shard)
        return removed

    def set_roots(self, owner: str, keys: Iterable[str]) -> None:
        """Record the keys a materialization uses; `owner` is "<dataset>/<stage>"."""
        atomic_write_json(self.roots / f"{owner}.json", sorted(set(keys)))

    def root_keys(self, dataset: str | None = None) -> set[str]:
        """The keys the recorded materializations use (of one dataset, or of all)."""
        folder = self.roots / dataset if dataset else self.roots
        keys: set[str] = set()
        for file in folder.rglob("*.json"):
            keys.update(json.loads(file.read_text(encoding="utf-8")))
        return keys

    def referenced(self) -> set[str]:
        return self.root_keys()

    def gc(self, dry_run: bool = False) -> GcResult:
        """Remove entries no root names, and temporary folders left by dead writers."""
        wanted = self.referenced()
        if not dry_run:
            self.sweep()
        removed = kept = freed = 0
        for shard in sorted(self.objects.glob("??")):
            for entry in sorted(shard.iterdir()):
                if entry.name.startswith(TMP_PREFIX):
                    continue  # a live writer's (dead writers' were swept above)
                if entry.name in wanted:
                    kept += 1
                    continue
                removed += 1
                freed += bytes_on_disk(entry)
                if not dry_run:
                    shutil.rmtree(entry, ignore_errors=True)
        return GcResult(removed=removed, kept=kept, bytes_freed=freed)


def _files(entry: Path) -> list[Path]:
    return sorted(p for p in entry.rglob("*") if p.is_file() and p.name != FILES)


def _write_record(folder: Path) -> None:
    record = {
        p.relative_to(folder).as_posix(): [p.stat().st_size, sha256_file(p)] for p in _files(folder)
    }
    (folder / FILES).write_text(canonical_json(record), encoding="utf-8")


def _recorded(entry: Path) -> dict[str, tuple[int, str]]:
    with open(os.path.join(entry, FILES), encoding="utf-8") as f:
        return {k: tuple(v) for k, v in json.load(f).items()}


def _size_problem(entry: Path) -> str:
    """What is wrong with the entry's files, judged by their sizes; "" when nothing is."""
    try:
        record = _recorded(entry)
    except FileNotFoundError:
        return f"no {FILES} (written by an older tunesmith, or not by tunesmith)"
    except (OSError, ValueError) as exc:
        return f"{FILES} does not parse ({exc})"
    for name, (size, _) in sorted(record.items()):
        try:
            actual = os.stat(os.path.join(entry, name)).st_size
        except FileNotFoundError:
            return f"{name} is missing"
        if actual != size:
            return f"{name} is {actual} bytes, {size} were written"
    return ""


def _hash_problem(entry: Path) -> str:
    for name, (_, digest) in sorted(_recorded(entry).items()):
        if sha256_file(entry / name) != digest:
            return f"{name}: its sha256 is not the one recorded when it was written"
    return ""


def bytes_on_disk(path: Path) -> int:
    """The bytes of a file, or of every file under a folder."""
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
