"""Atomic file writes: a temporary name in the same folder, then one rename.

A reader never sees half a file. A writer holds an exclusive `flock` on its temporary file
while it writes, so `sweep_temporaries` can tell a live writer's file from one a killed
process left behind (the kernel drops the lock with the process), without guessing by age.
Files are created with mode 0666 less the umask, as `open()` creates them, so other users
and tools (ComfyUI, a dashboard, a container) can read what tunesmith writes.

Not handled: durability across a power loss on file systems that reorder metadata; we
fsync the file but not its folder.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

TMP_PREFIX = ".tmp-"
# A temporary younger than this may belong to a writer between creating it and locking it.
LOCK_RACE_SECONDS = 2.0


class DiskFull(OSError):
    """No space left where tunesmith writes; the message says where, how much is free, what
    was kept and what the next build does."""


@contextmanager
def disk_space(path: Path, what: str) -> Iterator[None]:
    """Turn "no space left" (or a quota) while writing `what` at `path` into one clear line."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT) or isinstance(exc, DiskFull):
            raise
        folder = Path(path)
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        free = shutil.disk_usage(folder).free
        raise DiskFull(
            exc.errno,
            f"disk full: could not write {what} at {path} ({free / 1e6:.1f} MB free there); "
            "everything finished before it is kept, nothing half-written; free some space and "
            "build again, it continues from what is kept",
        ) from exc


def temporary_name(path: Path) -> Path:
    """A fresh temporary name beside `path` (never the same twice, so writers never meet)."""
    return path.with_name(f"{TMP_PREFIX}{uuid.uuid4().hex[:12]}-{path.name}")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_name(path)
    try:
        with disk_space(path, path.name):
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            with os.fdopen(fd, "wb") as f:
                fcntl.flock(f, fcntl.LOCK_EX)  # released when the file closes or the process dies
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
                os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def json_bytes(value: Any) -> bytes:
    """The one layout of every JSON file tunesmith writes for people: indented, sorted keys."""
    return (json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True) + "\n").encode()


def atomic_write_json(path: Path, value: Any) -> None:
    atomic_write_bytes(path, json_bytes(value))


def write_if_changed(path: Path, data: bytes) -> bool:
    """Write `data` unless `path` already holds exactly these bytes (then its mtime is kept, so
    watchers and caches see no change). Returns whether it wrote."""
    try:
        if path.stat().st_size == len(data) and path.read_bytes() == data:
            return False
    except FileNotFoundError:
        pass
    atomic_write_bytes(path, data)
    return True


def is_abandoned(path: Path) -> bool:
    """True when no live process holds the writer's lock on this temporary file or folder."""
    try:
        if time.time() - path.stat().st_mtime < LOCK_RACE_SECONDS:
            return False
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False  # gone already
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing drops the lock we may have taken


def sweep_temporaries(folder: Path) -> list[Path]:
    """Remove the temporary files and folders in `folder` whose writer is dead; returns them."""
    removed = []
    if not folder.is_dir():
        return removed
    for entry in folder.iterdir():
        if entry.name.startswith(TMP_PREFIX) and is_abandoned(entry):
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
            removed.append(entry)
    return removed


def sweep_tree(folder: Path) -> list[Path]:
    """`sweep_temporaries` in `folder` and every folder below it."""
    removed = []
    if folder.is_dir():
        for parent, names, _ in os.walk(folder):
            names[:] = [n for n in names if not n.startswith(TMP_PREFIX)]
            removed += sweep_temporaries(Path(parent))
    return removed


@contextmanager
def writer_lock(folder: Path) -> Iterator[None]:
    """Hold the writer's lock on a temporary folder while it is filled (see `is_abandoned`)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
