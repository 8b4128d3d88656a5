"""The foreign adapter file formats, one module each, and what they share.

    peft.py      PEFT's adapter folder (`adapter_model.safetensors`, `adapter_config.json`),
                 and diffusers' one-file form of it (the config in the safetensors metadata)
    kohya.py     kohya sd-scripts' LoRA file (`lora_down` / `lora_up` / `alpha`, `ss_*`)
    lycoris.py   LyCORIS's LoKr file (`lycoris_<module>.lokr_w1` ..., `.alpha`)
    underfit.py  underfit's Stable Audio 3 adapter checkpoint
    mlx_lm.py    mlx-lm's adapter folder (`adapters.safetensors`, `adapter_config.json`)

Each has a writer that takes names → tensors with the format's config and metadata, a
validator that reads a file as its users' tools do, and a reader where tunesmith loads the
format back (PEFT, underfit, mlx-lm; the mlx-lm reader is its validator), as diffusers' loaders
keep one converter per foreign format. A family gives the names (its modules' names in the
file) and nothing else. Bytes are canonical: safetensors
through `store/tensors.py` (sorted header), JSON with sorted keys and sets as sorted lists, so
the same adapter has the same bytes in every process and caches keyed on a file's hash hold.
Only `.safetensors` is read; nothing unpickles.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from safetensors import SafetensorError, safe_open


class FormatError(ValueError):
    """A file that breaks a rule of its format, or an adapter a format cannot hold; the message
    names the file and the rule."""


def trigger_metadata(trigger: str, position: str = "prepend") -> dict[str, str]:
    """HOT-Step's three trigger keys (`hot_step_trigger`, `hot_step_trigger_position`,
    `modelspec.trigger_phrase`), all or none."""
    if not trigger:
        return {}
    return {
        "hot_step_trigger": trigger,
        "hot_step_trigger_position": position or "prepend",
        "modelspec.trigger_phrase": trigger,
    }


def text_metadata(metadata: Mapping[str, str] | None) -> dict[str, str]:
    """`metadata` as safetensors takes it, refusing what is not text (its `__metadata__` holds
    strings only)."""
    metadata = dict(metadata or {})
    not_text = [k for k, v in metadata.items() if not isinstance(k, str) or not isinstance(v, str)]
    if not_text:
        raise TypeError(f"lineage values must be strings (safetensors metadata): {not_text}")
    return metadata


def read_header(path: Path) -> tuple[dict[str, str], dict[str, tuple[int, ...]], set[str]]:
    """A safetensors file's (metadata, shape by key, dtypes) from its header alone."""
    try:
        with safe_open(path, "pt") as f:
            shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
            dtypes = {f.get_slice(k).get_dtype() for k in f.keys()}
            return dict(f.metadata() or {}), shapes, dtypes
    except (OSError, SafetensorError) as exc:
        raise FormatError(f"{path}: not a readable .safetensors file ({exc})") from exc


def require_metadata(path: Path, metadata: Mapping[str, str], keys: tuple[str, ...]) -> None:
    """Refuse a file whose metadata lacks any of `keys` (the run's lineage, say)."""
    missing = [k for k in keys if k not in metadata]
    if missing:
        raise FormatError(f"{path}: lineage metadata missing: {', '.join(missing)}")


def lora_pairs(
    path: Path, shapes: Mapping[str, tuple], prefix: str, down: str, up: str
) -> list[str]:
    """The stems of a file's LoRA factor pairs (`<stem><down>` [r, in], `<stem><up>` [out, r]),
    sorted; refuses a file without one, a factor without its partner, ranks that differ."""
    stems = sorted({k[: -len(down)] for k in shapes if k.endswith(down)})
    ups = {k[: -len(up)] for k in shapes if k.endswith(up)}
    if not stems or not all(s.startswith(prefix) for s in stems):
        raise FormatError(f"{path}: expected LoRA keys `{prefix}…{down}`, found none")
    if set(stems) != ups:
        odd = sorted(set(stems) ^ ups)
        raise FormatError(f"{path}: factors without their partner: {', '.join(odd[:5])}")
    for stem in stems:
        (rank, _), (_, rank_up) = shapes[stem + down], shapes[stem + up]
        if rank != rank_up:
            raise FormatError(f"{path}: {stem}: rank {rank} down but {rank_up} up")
    return stems


def factor_pairs(
    tensors: Mapping, down: str, up: str, where: str, shown: str = ""
) -> dict[str, tuple]:
    """{module: (down, up)} of the tensors named `<module><down>` and `<module><up>`, in the
    file's orientation; refuses a down factor without its up partner (`where` names the file,
    `shown` the prefix its keys carry there)."""
    pairs = {}
    for key, a in tensors.items():
        if key.endswith(down):
            module = key.removesuffix(down)
            b = tensors.get(module + up)
            if b is None:
                raise FormatError(f"{where}: {shown}{key} has no {up.lstrip('.')} partner")
            pairs[module] = (a, b)
    return pairs


def replace_folder(folder: Path, write: Callable[[Path], None]) -> Path:
    """Run `write(tmp)` into a fresh sibling folder, then rename it to `folder` (replacing an
    earlier folder there), so a reader never sees half an adapter; returns `folder`."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f".tmp-{folder.name}-{uuid.uuid4().hex[:12]}"
    tmp.mkdir()
    old = None
    try:
        write(tmp)
        if folder.exists():
            old = folder.parent / f".tmp-old-{folder.name}-{uuid.uuid4().hex[:12]}"
            os.replace(folder, old)
        os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    return folder
