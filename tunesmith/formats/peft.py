"""PEFT's adapter files: its folder, and diffusers' one-file form of it.

    folder  `adapter_model.safetensors` with `base_model.model.<module>.<factor>` keys (the
            prefix PeftModel's `save_pretrained` gives), beside `adapter_config.json`, the
            config as PEFT's `save_pretrained` writes it (`to_dict`, sets as lists, indent 2,
            sorted keys) except that its sets are sorted: PEFT lists a set (`target_modules`)
            in hash order, which differs between processes, and the file's bytes must not.
            `PeftModel.from_pretrained` loads it.
    file    one `.safetensors` with `<component>.<module>.lora_A.weight` / `.lora_B.weight` and
            the LoraConfig under the metadata key `lora_adapter_metadata`, its keys prefixed
            `<component>.`: what diffusers' `save_lora_weights` writes and its
            `load_lora_weights` reads with the trained alpha.

Tensors are keyed `<module>.<factor>` here (`layers.0.self_attn.q_proj.lora_A.weight`); the
writers add the prefix, the reader strips it. The config is written after the weights, so a
folder with a config has its weights. Trigger and lineage go into the safetensors metadata,
never into adapter_config.json: PEFT builds its config as `LoraConfig(**json)`, and an unknown
key is a TypeError in some PEFT versions.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from tunesmith.formats import (
    FormatError,
    factor_pairs,
    lora_pairs,
    read_header,
    require_metadata,
    text_metadata,
)
from tunesmith.store.atomic import atomic_write_bytes
from tunesmith.store.tensors import write_safetensors

if TYPE_CHECKING:  # PEFT and torch are imported when a file is written or read
    import peft
    import torch

WEIGHTS, CONFIG = "adapter_model.safetensors", "adapter_config.json"
PREFIX = "base_model.model."  # PeftModel's own prefix in adapter_model.safetensors
FILE_CONFIG_KEY = "lora_adapter_metadata"  # diffusers.loaders.lora_base.LORA_ADAPTER_METADATA_KEY
OUR_KEYS = ("hot_step", "modelspec", "tunesmith")  # metadata keys, never config fields


def config_document(config: peft.PeftConfig) -> dict:
    """The config's `to_dict`, with each set as a sorted list."""
    return {k: sorted(v) if isinstance(v, set) else v for k, v in config.to_dict().items()}


def config_bytes(config: peft.PeftConfig) -> bytes:
    """adapter_config.json's bytes: PEFT's `save_pretrained` with sets sorted."""
    return json.dumps(config_document(config), indent=2, sort_keys=True).encode()


def write(
    folder: Path,
    tensors: Mapping[str, torch.Tensor],
    config: peft.PeftConfig,
    metadata: Mapping[str, str] | None = None,
) -> Path:
    """Write `folder/adapter_model.safetensors`, then `folder/adapter_config.json`, each
    atomically; returns the weights' path."""
    folder = Path(folder)
    weights = {PREFIX + name: value for name, value in tensors.items()}
    write_safetensors(folder / WEIGHTS, weights, {"format": "pt", **text_metadata(metadata)})
    atomic_write_bytes(folder / CONFIG, config_bytes(config))  # last: a config means whole
    return folder / WEIGHTS


def read(
    folder: Path, kinds: tuple[type, ...] | None = None
) -> tuple[dict[str, torch.Tensor], peft.PeftConfig, dict[str, str]]:
    """A PEFT folder as (`<module>.<factor>` → tensor, its config, the weights' metadata).

    Refuses a folder without both files, a config not of `kinds`, a key without PEFT's prefix.
    """
    from safetensors.torch import load_file

    path = Path(folder) / WEIGHTS
    config = read_config(folder, kinds)
    state = {}
    for key, value in load_file(path).items():
        if not key.startswith(PREFIX):
            raise FormatError(f"{path}: key {key!r} lacks {PREFIX!r}")
        state[key.removeprefix(PREFIX)] = value
    return state, config, read_header(path)[0]


def read_config(folder: Path, kinds: tuple[type, ...] | None = None) -> peft.PeftConfig:
    """The folder's config as PEFT reads it, once both files are there and the config holds no
    metadata keys."""
    import peft

    folder = Path(folder)
    for name in (WEIGHTS, CONFIG):
        if not (folder / name).is_file():
            raise FormatError(f"{folder}: no {name}; a PEFT adapter folder holds both")
    try:
        document = json.loads((folder / CONFIG).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FormatError(f"{folder / CONFIG}: not readable JSON ({exc})") from exc
    if not isinstance(document, dict) or any(k.startswith(OUR_KEYS) for k in document):
        raise FormatError(
            f"{folder / CONFIG}: holds metadata keys; PEFT reads every key as a LoraConfig "
            "field, so they belong in the safetensors metadata"
        )
    config = peft.PeftConfig.from_pretrained(str(folder))
    if kinds and not isinstance(config, kinds):
        wanted = " or ".join(k.__name__ for k in kinds)
        raise FormatError(f"{folder / CONFIG}: a {type(config).__name__}, not a {wanted}")
    return config


def validate(
    folder: Path,
    kinds: tuple[type, ...],
    suffixes: tuple[str, ...],
    dtype: str,
    lineage: tuple[str, ...] = (),
    check_module: Callable[[Path, str], None] | None = None,
) -> tuple[peft.PeftConfig, dict[str, str], set[str]]:
    """Check a PEFT folder as `PeftModel.from_pretrained` reads it, from the weights' header:
    a config of `kinds` without metadata keys, every key `base_model.model.<module><suffix>`
    (and `check_module(path, module)` passing: the family's naming rule), every module
    targeted by `target_modules` (PEFT's own matching) and every target used, tensors in
    `dtype` (`"BF16"`), the `lineage` keys in the metadata. Returns (config, metadata,
    modules)."""
    from peft.tuners.tuners_utils import check_target_module_exists

    folder = Path(folder)
    config = read_config(folder, kinds)
    metadata, shapes, dtypes = read_header(folder / WEIGHTS)
    path, modules = folder / WEIGHTS, set()
    for key in shapes:
        suffix = next((s for s in suffixes if key.endswith(s)), None)
        if not key.startswith(PREFIX) or suffix is None:
            raise FormatError(f"{path}: key {key!r} is not {PREFIX}<module>{'|'.join(suffixes)}")
        module = key[len(PREFIX) : -len(suffix)]
        if check_module is not None:
            check_module(path, module)
        modules.add(module)
    targets = sorted(config.target_modules)
    untargeted = sorted(m for m in modules if not check_target_module_exists(config, m))
    unused = [t for t in targets if not any(m == t or m.endswith(f".{t}") for m in modules)]
    if untargeted or unused:
        raise FormatError(
            f"{path}: its modules and adapter_config.json's target_modules differ "
            f"({len(untargeted)} modules not targeted, {len(unused)} targets unused: "
            f"{', '.join((untargeted + unused)[:5])})"
        )
    if dtypes != {dtype}:
        raise FormatError(f"{path}: tensors in {sorted(dtypes)}; expected {dtype}")
    require_metadata(path, metadata, lineage)
    return config, metadata, modules


def write_file(
    path: Path,
    tensors: Mapping[str, torch.Tensor],
    configs: Mapping[str, peft.PeftConfig],
    metadata: Mapping[str, str] | None = None,
) -> Path:
    """diffusers' one-file form: `tensors` keyed `<component>.<module>.<factor>`, `configs` by
    component (`{"unet": LoraConfig}`), written under `lora_adapter_metadata`; returns `path`."""
    document = {}
    for component, config in configs.items():
        for key, value in config_document(config).items():
            document[f"{component}.{key}"] = value
    packed = json.dumps(document, indent=2, sort_keys=True, default=str)
    meta = {"format": "pt", **text_metadata(metadata), FILE_CONFIG_KEY: packed}
    return write_safetensors(Path(path), tensors, meta)


def validate_file(
    path: Path, component: str, lineage: tuple[str, ...] = ()
) -> tuple[dict[str, str], list[str]]:
    """Check diffusers' one-file form from its header: readable, LoRA pairs under the
    component's prefix whose ranks chain, the config metadata, the `lineage` keys. Returns
    (metadata, the pairs' stems)."""
    path = Path(path)
    metadata, shapes, _ = read_header(path)
    pairs = lora_pairs(path, shapes, f"{component}.", ".lora_A.weight", ".lora_B.weight")
    if FILE_CONFIG_KEY not in metadata:
        raise FormatError(f"{path}: no {FILE_CONFIG_KEY} metadata (the LoraConfig)")
    require_metadata(path, metadata, lineage)
    return metadata, pairs


def lora_tensors(
    factors: Mapping[str, tuple[torch.Tensor, torch.Tensor]], dtype: torch.dtype
) -> dict[str, torch.Tensor]:
    """`<module>.lora_A.weight` [r, in] and `.lora_B.weight` [out, r] for {module: (A, B)}, in
    `dtype` on the CPU."""
    out = {}
    for module, (a, b) in factors.items():
        out[f"{module}.lora_A.weight"] = a.detach().to(dtype).cpu().contiguous()
        out[f"{module}.lora_B.weight"] = b.detach().to(dtype).cpu().contiguous()
    return out


def lora_factors(
    tensors: Mapping[str, torch.Tensor], path: Path
) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """{module: (A, B)} float32 from `<module>.lora_A.weight` / `.lora_B.weight` tensors;
    refuses an A without its B (`path` names the file)."""
    pairs = factor_pairs(tensors, ".lora_A.weight", ".lora_B.weight", str(path), PREFIX)
    return {module: (a.float(), b.float()) for module, (a, b) in pairs.items()}
