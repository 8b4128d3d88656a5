"""Writing a tiny model folder: idempotent, atomic, never over a folder that is not ours.

Each family builds its tiny model (the real classes at tiny sizes, from a seed) for the tests
and the example; this is how every one of them is written: to a temporary sibling folder,
with a marker file last, then renamed into place.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

from tunesmith.families.base_model import quiet_loading

MARKER = ".tunesmith-tiny-model.json"  # hidden: model_fingerprint skips it


def write_tiny(folder: Path, config_hash: str, build, marker, check) -> Path:
    """Write the pipeline `build()` makes to `folder`, with `marker(pipe)` as its marker.

    Idempotent: a folder already holding a complete base model (`check` passes) with the same
    config hash is left as it is. The model is written to a temporary sibling folder and
    renamed into place, so an interrupted run leaves no half-written `folder`. A `folder` that
    exists and is neither empty nor a tiny model made here is refused (FileExistsError).
    """
    if _is_complete(folder, config_hash, check):
        return folder
    if folder.exists() and any(folder.iterdir()) and not (folder / MARKER).is_file():
        raise FileExistsError(
            f"{folder} exists and is not a tiny model made by tunesmith (no {MARKER}); "
            "refusing to replace it. Choose an empty or new folder."
        )
    folder.parent.mkdir(parents=True, exist_ok=True)
    # Path.mkdir (not mkdtemp, which makes it 0700) so the folder gets the usual permissions.
    tmp = folder.parent / f".tmp-{folder.name}-{uuid.uuid4().hex[:12]}"
    tmp.mkdir()
    try:
        pipe = build()
        with quiet_loading():  # no "Writing model shards" progress bars
            pipe.save_pretrained(tmp, safe_serialization=True)
        text = json.dumps(marker(pipe), indent=2, sort_keys=True)
        (tmp / MARKER).write_text(text + "\n", encoding="utf-8")  # written last
        _move_into_place(tmp, folder, config_hash, check)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _is_complete(folder: Path, config_hash: str, check) -> bool:
    try:
        marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
        check(folder)
    except (OSError, ValueError):  # no marker, bad JSON, or an incomplete base model
        return False
    return isinstance(marker, dict) and marker.get("config_hash") == config_hash


def _move_into_place(tmp: Path, folder: Path, config_hash: str, check) -> None:
    """Rename `tmp` to `folder`, replacing an empty folder or an older tiny model."""
    old = None
    if folder.exists() and any(folder.iterdir()):
        old = folder.parent / f".tmp-old-{folder.name}-{uuid.uuid4().hex[:12]}"
        os.replace(folder, old)
    try:
        os.replace(tmp, folder)  # rename(2): atomic, and replaces an empty folder
    except OSError:
        # Another process put a base model there meanwhile; keep it if it is the same one.
        if not _is_complete(folder, config_hash, check):
            raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
