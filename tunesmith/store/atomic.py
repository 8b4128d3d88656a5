"""Atomic file writes: a temporary name in the same folder, then one rename.

A reader never sees half a file, and a killed process leaves only a `.tmp-*` file that
`Store.gc` (or the next write) removes. Not handled: durability across a power loss on
file systems that reorder metadata; we fsync the file but not its folder.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

TMP_PREFIX = ".tmp-"


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, value: Any) -> None:
    atomic_write_text(path, json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True) + "\n")


def link_into(source: Path, destination: Path) -> None:
    """Hard-link a store file to `destination` (a copy where links are impossible), atomically."""
    if destination.exists() and os.path.samefile(source, destination):
        return
    destination.parent.mkdir(parents=True, exist_ok=True)
    tmp = destination.with_name(f"{TMP_PREFIX}{destination.name}")
    tmp.unlink(missing_ok=True)
    try:
        os.link(source, tmp)
    except OSError:
        tmp.write_bytes(source.read_bytes())
    os.replace(tmp, destination)
