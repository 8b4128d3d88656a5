"""A base model's fingerprint: what a cache key says about the model, without reading it whole.

Every cache key that depends on a model (encoded latents, a trained run, a render) holds the
fingerprint of the folder (or component) it was made with, so a changed weight, config or
vocabulary recomputes what depends on it, and a copied or moved folder does not.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from tunesmith.store import sha256_file
from tunesmith.store.atomic import atomic_write_json

# Weights, and the JSON and tokenizer files beside them: a changed config (the VAE's
# sliding_window, the scheduler's shift) or vocabulary changes outputs as a weight does.
FINGERPRINT_SUFFIXES = (".safetensors", ".json", ".model", ".txt")  # .txt: BPE merges
# A file modified this recently may be modified again within the file system's timestamp
# granularity with the same size, so its hash is not cached ("racily clean", as git says).
RACY_WINDOW_NS = 2_000_000_000


def model_fingerprint(folder: Path, cache: Path | None = None) -> str:
    """sha256 over (relative path, sha256 of content) of every fingerprinted file under `folder`.

    Fingerprinted: `*.safetensors`, `*.json`, `*.model`, `*.txt`, at any depth; names starting
    with "." (tunesmith's markers, temporary files) are skipped. Pickle weights are never loaded, so
    they are not part of it. Works on a whole base model or on one component (`folder / "vae"`).

    `cache`, if given, is a JSON file (written atomically, created if missing) mapping each
    file's absolute path to (size, mtime_ns, sha256); a file whose size and mtime_ns match is
    not read again. Touching a file only costs one re-read; the fingerprint stays the same.
    Keep the cache outside the model folder (tunesmith never writes into a user's folders).
    """
    folder = Path(folder).resolve()
    files = sorted(
        p
        for p in folder.rglob("*")
        if p.is_file()
        and p.suffix in FINGERPRINT_SUFFIXES
        and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )
    if not files:
        raise ValueError(
            f"{folder} holds no {', '.join(FINGERPRINT_SUFFIXES)} files to fingerprint"
        )
    entries = _read_cache(cache)
    changed = False
    now = time.time_ns()
    digest = hashlib.sha256()
    for path in files:
        stat = path.stat()
        key = str(path)
        hit = entries.get(key)
        if (
            isinstance(hit, dict)
            and isinstance(hit.get("sha256"), str)
            and hit.get("size") == stat.st_size
            and hit.get("mtime_ns") == stat.st_mtime_ns
        ):
            file_hash = hit["sha256"]
        else:
            file_hash = sha256_file(path)
            if now - stat.st_mtime_ns > RACY_WINDOW_NS:
                entries[key] = {
                    "size": stat.st_size,
                    "mtime_ns": stat.st_mtime_ns,
                    "sha256": file_hash,
                }
                changed = True
        # Relative path, NUL, hash, newline: unambiguous, and independent of where the folder is.
        digest.update(f"{path.relative_to(folder).as_posix()}\0{file_hash}\n".encode())
    if cache is not None and changed:
        atomic_write_json(Path(cache), entries)
    return digest.hexdigest()


def _read_cache(cache: Path | None) -> dict[str, dict]:
    if cache is None or not Path(cache).is_file():
        return {}
    try:
        entries = json.loads(Path(cache).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {}  # a damaged cache only costs re-hashing; it never changes a fingerprint
    return entries if isinstance(entries, dict) else {}
