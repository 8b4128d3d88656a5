"""safetensors files with one spelling per content: the same tensors and metadata give the
same bytes in every process.

safetensors' own writer keeps the metadata in a Rust hash map, whose iteration order is
seeded per process, so two processes writing identical tensors produce files that differ in
their header's key order — and therefore in their sha256, which later stages key caches on.
We keep the library's serialisation of the data (its tensor order and alignment) and only
rewrite the JSON header with sorted keys; the data offsets are relative to the end of the
header, so they stay valid. Only `.safetensors` is written or read here; nothing unpickles.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from tunesmith.store.atomic import atomic_write_bytes

if TYPE_CHECKING:  # imported when a file is written: a stage that writes none imports no torch
    import torch

ALIGNMENT = 8  # the header is padded with spaces to a multiple of 8 bytes (the format's rule)


def safetensors_bytes(
    tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, str] | None = None
) -> bytes:
    """A safetensors file's bytes with a canonical header (sorted keys, no spaces)."""
    from safetensors.torch import save

    tensors = {name: t.detach().contiguous() for name, t in tensors.items()}
    raw = save(tensors, metadata=dict(metadata) if metadata else None)
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + length])
    text = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    encoded = text.encode("utf-8")
    encoded += b" " * (-len(encoded) % ALIGNMENT)
    return struct.pack("<Q", len(encoded)) + encoded + raw[8 + length :]


def write_safetensors(
    path: Path, tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, str] | None = None
) -> Path:
    """Write a canonical safetensors file atomically; returns `path`."""
    atomic_write_bytes(path, safetensors_bytes(tensors, metadata))
    return path
