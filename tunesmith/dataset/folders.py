"""Dataset folders and their partition keys.

A dataset is a folder directly under the datasets root. Its partition key is the folder
name when Dagster accepts it as a key, else a sanitised name plus a short hash of the
original (so two folders never share a key). `dataset_folders` returns the mapping, which
the sensor logs and `tunesmith status` shows.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

# Dagster refuses partition keys containing these (INVALID_PARTITION_SUBSTRINGS), and a
# key is also used as a folder name under the output root.
_UNSAFE = re.compile(r"[^A-Za-z0-9._ +=@-]+")
MAX_KEY = 64


def partition_key(folder_name: str) -> str:
    """The partition key for a dataset folder name; the name itself when it is safe."""
    clean = _UNSAFE.sub("_", folder_name).strip(" ._")
    clean = re.sub(r"\.{2,}", ".", clean)[:MAX_KEY]
    if clean == folder_name and clean:
        return clean
    digest = hashlib.sha256(folder_name.encode("utf-8", "surrogateescape")).hexdigest()[:8]
    return f"{clean or 'dataset'}-{digest}"


def dataset_folders(root: Path) -> dict[str, Path]:
    """Partition key → folder, for every visible folder directly under `root`."""
    if not root.is_dir():
        return {}
    found = {}
    for entry in sorted(root.iterdir()):
        if entry.name.startswith(".") or not entry.is_dir():
            continue
        found[partition_key(entry.name)] = entry
    return found


def renamed(folders: dict[str, Path]) -> dict[str, str]:
    """Folder name → key, for the folders whose key is not their own name."""
    return {path.name: key for key, path in folders.items() if path.name != key}


def resolve(root: Path, key: str) -> Path:
    folders = dataset_folders(root)
    if key not in folders:
        known = ", ".join(sorted(folders)) or "none"
        raise FileNotFoundError(
            f"no dataset folder for partition {key!r} under {root} (datasets found: {known})"
        )
    return folders[key]
