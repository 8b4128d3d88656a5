"""Checks that passed, remembered, so that a build which changes nothing does not run them again.

Some checks load a library that takes seconds to import (a tokenizer through transformers, an
adapter file through torch) to look at files that have not changed since they last passed. A
record file, kept beside the store's fingerprint cache, lists the key of each check that passed
with what it returned (JSON pairs, the oldest first; `true` when nothing); a key names what was
looked at:

- by content: a model folder's fingerprint (`tunesmith.store.fingerprints`);
- by the state of files (`files_key`): each file's path, size, modification time and inode.
  Files modified within the last two seconds give no key, since they may change again with
  the same size and time ("racily clean", as git says); their check runs every time.

Only passes are kept: a check that failed runs again, and says again what is wrong. A
damaged or unreadable record only costs the checks again. The record keeps the most recent
MAX_KEYS keys.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tunesmith.store.atomic import atomic_write_json
from tunesmith.store.fingerprints import RACY_WINDOW_NS

MAX_KEYS = 4096
RECORD = "checks-passed.json"  # the record's name in the store's root


def passed(record: Path | None, key: str | None) -> bool:
    """Did the check named `key` pass before (None: it is not remembered)?"""
    return key is not None and key in _read(record)


def recalled(record: Path | None, key: str | None) -> Any:
    """What the check named `key` returned when it passed; None when it is not remembered."""
    return _read(record).get(key) if key is not None else None


def remember(record: Path | None, key: str | None, value: Any = True) -> None:
    """Record that the check named `key` passed, returning `value` (JSON); nothing when
    `record` or `key` is None."""
    if record is None or key is None:
        return
    entries = _read(record)
    entries.pop(key, None)
    entries[key] = value  # the newest last: the oldest go first past MAX_KEYS
    atomic_write_json(record, [[k, v] for k, v in entries.items()][-MAX_KEYS:])


def checked_files(
    record: Path | None, kind: str, path: Path | str, check: Callable[[], Any]
) -> Any:
    """What `check()` returns on the file or folder `path` (JSON), run only when the check
    `kind` has not passed on it and the files beside it as they are now. What `check` raises
    propagates, and is not remembered."""
    key = files_key(f"{kind} {path}", files_beside(Path(path)))
    value = recalled(record, key)
    if value is None:
        value = check()
        remember(record, key, True if value is None else value)
    return value


def files_beside(path: Path) -> list[Path]:
    """The files a check of `path` may read: a folder's files, or a file and those beside it
    (SDXL's kohya twin and lineage sit beside its PEFT file)."""
    path = Path(path)
    if path.is_dir():
        return [p for p in path.rglob("*") if p.is_file()]
    if not path.parent.is_dir():
        return [path]  # gone: it gives no key, so the check runs and says what is missing
    return [p for p in path.parent.iterdir() if p.is_file()]


def files_key(kind: str, files: Iterable[Path]) -> str | None:
    """A key for the check `kind` of `files` as they are now; None when one is missing or was
    modified too recently to be told apart from its next version."""
    now, state = time.time_ns(), []
    for path in sorted(Path(p).absolute() for p in files):
        try:
            stat = path.stat()
        except OSError:
            return None
        if now - stat.st_mtime_ns <= RACY_WINDOW_NS:
            return None
        state.append([str(path), stat.st_size, stat.st_mtime_ns, stat.st_ino])
    text = json.dumps([kind, state], separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read(record: Path | None) -> dict[str, Any]:
    if record is None or not record.is_file():
        return {}
    try:
        value = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(value, list):
        return {}
    entries = {}
    for entry in value:
        if isinstance(entry, str):  # a key alone: a pass, as the planner check kept them before
            entries[entry] = True
        elif isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str):
            entries[entry[0]] = entry[1]
    return entries
