"""The files an SDXL adapter is written as, and the check every written file gets.

    PEFT    `NAME.safetensors`: keys `unet.<module>.lora_A.weight` / `.lora_B.weight` (fp32)
            and the LoraConfig under the metadata key `lora_adapter_metadata`, which is what
            diffusers itself writes, so `StableDiffusionXLPipeline.load_lora_weights` loads it
            with the same alpha
    kohya   `NAME.kohya.safetensors`: keys `lora_unet_<SGM module>.lora_down.weight` (A),
            `.lora_up.weight` (B), `.alpha`, named as kohya sd-scripts names SDXL modules
            (`lora_unet_input_blocks_4_1_transformer_blocks_0_attn1_to_q`: kohya_names.py),
            with kohya's `ss_*` and Stability's `modelspec.*` metadata, for ComfyUI,
            A1111/Forge and kohya's own tools

Both carry the run's lineage (docs/design.md, "Adapter files") as string metadata, unchanged.
Not handled: reading a file back into a trainer (a run resumes from its own state folder).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from tunesmith.families.sdxl.kohya_names import kohya_stem
from tunesmith.families.sdxl.train import TARGET_MODULES, SdxlLora
from tunesmith.store.tensors import write_safetensors

PEFT_METADATA_KEY = "lora_adapter_metadata"  # diffusers.loaders.lora_base.LORA_ADAPTER_METADATA_KEY
LINEAGE_KEYS = ("tunesmith.base_model_fingerprint", "tunesmith.training_config")


class AdapterFileError(ValueError):
    """A written adapter file that does not hold what it should; the message names it."""


def peft_state_dict(lora: SdxlLora) -> dict[str, torch.Tensor]:
    """`unet.<module>.lora_A.weight` / `lora_B.weight`, fp32, as diffusers writes them."""
    out = {}
    for name, (a, b) in lora.named_factors().items():
        out[f"unet.{name}.lora_A.weight"] = a.detach().float().cpu().contiguous()
        out[f"unet.{name}.lora_B.weight"] = b.detach().float().cpu().contiguous()
    return out


def kohya_state_dict(lora: SdxlLora) -> dict[str, torch.Tensor]:
    """`lora_unet_<SGM module>.lora_down.weight` (A), `.lora_up.weight` (B), `.alpha`."""
    out = {}
    for name, (a, b) in lora.named_factors().items():
        key = kohya_stem(name, lora.unet.config)
        out[f"{key}.lora_down.weight"] = a.detach().float().cpu().contiguous()
        out[f"{key}.lora_up.weight"] = b.detach().float().cpu().contiguous()
        out[f"{key}.alpha"] = torch.tensor(lora.alpha, dtype=torch.float32)
    return out


def save_peft(lora: SdxlLora, path: Path, lineage: dict[str, str] | None = None) -> Path:
    config = {}
    for key, value in lora.config.to_dict().items():
        config[f"unet.{key}"] = sorted(value) if isinstance(value, set) else value
    peft = {PEFT_METADATA_KEY: json.dumps(config, indent=2, sort_keys=True, default=str)}
    return _save(peft_state_dict(lora), path, {"format": "pt", **(lineage or {}), **peft})


def save_kohya(
    lora: SdxlLora,
    path: Path,
    lineage: dict[str, str] | None = None,
    name: str = "",
    steps: int = 0,
    size: int = 1024,
) -> Path:
    lineage = lineage or {}
    # No wall-clock fields (kohya's ss_training_finished_at, modelspec.date are optional): the
    # same tensors and settings must give the same bytes, which the renders' cache keys on.
    meta = {
        "format": "pt",
        **lineage,
        # kohya sd-scripts' training metadata (train_network.py), the keys its tools read
        "ss_network_module": "networks.lora",
        "ss_network_dim": str(lora.rank),
        "ss_network_alpha": _number(lora.alpha),
        "ss_network_args": json.dumps({"target": list(TARGET_MODULES)}),
        "ss_base_model_version": "sdxl_base_v1-0",
        "ss_v2": "False",
        "ss_output_name": name,
        "ss_steps": str(steps),
        "ss_resolution": f"({size}, {size})",
        "ss_sd_model_name": lineage.get("tunesmith.base_model", ""),
        # Stability's model spec (sai_model_spec 1.0.0), which ComfyUI and A1111 show
        "modelspec.sai_model_spec": "1.0.0",
        "modelspec.architecture": "stable-diffusion-xl-v1-base/lora",
        "modelspec.implementation": "https://github.com/Stability-AI/generative-models",
        "modelspec.title": name,
        "modelspec.resolution": f"{size}x{size}",
        "modelspec.prediction_type": lora.prediction_type,
    }
    return _save(kohya_state_dict(lora), path, meta)


def kohya_path(peft_path: Path) -> Path:
    """`NAME.kohya.safetensors` beside `NAME.safetensors`."""
    return Path(peft_path).with_suffix(".kohya.safetensors")


def validate_files(peft_path: Path) -> dict[str, str]:
    """Check a PEFT file and its kohya twin; returns the PEFT file's metadata.

    Raises AdapterFileError naming the file: unreadable, no `unet.` LoRA pairs, a factor
    without its partner, shapes that do not chain, a missing `.alpha`, missing lineage."""
    peft_path = Path(peft_path)
    meta, tensors = _read(peft_path)
    pairs = _pairs(peft_path, tensors, "unet.", ".lora_A.weight", ".lora_B.weight")
    if PEFT_METADATA_KEY not in meta:
        raise AdapterFileError(f"{peft_path}: no {PEFT_METADATA_KEY} metadata (the LoraConfig)")
    missing = [k for k in LINEAGE_KEYS if k not in meta]
    if missing:
        raise AdapterFileError(f"{peft_path}: lineage metadata missing: {', '.join(missing)}")
    twin = kohya_path(peft_path)
    kmeta, ktensors = _read(twin)
    kpairs = _pairs(twin, ktensors, "lora_unet_", ".lora_down.weight", ".lora_up.weight")
    no_alpha = [stem for stem in kpairs if f"{stem}.alpha" not in ktensors]
    if no_alpha:
        raise AdapterFileError(f"{twin}: no .alpha for {', '.join(no_alpha[:5])}")
    if len(kpairs) != len(pairs):
        raise AdapterFileError(f"{twin}: {len(kpairs)} layers, its PEFT twin has {len(pairs)}")
    if "ss_network_dim" not in kmeta or "modelspec.architecture" not in kmeta:
        raise AdapterFileError(f"{twin}: no ss_network_dim / modelspec.architecture metadata")
    return meta


def _read(path: Path) -> tuple[dict[str, str], dict[str, tuple[int, ...]]]:
    try:
        with safe_open(path, "pt") as f:
            return f.metadata() or {}, {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    except (OSError, SafetensorError) as exc:
        raise AdapterFileError(f"{path}: not a readable .safetensors file ({exc})") from exc


def _pairs(path: Path, shapes: dict, prefix: str, down: str, up: str) -> list[str]:
    stems = sorted({k[: -len(down)] for k in shapes if k.endswith(down)})
    ups = {k[: -len(up)] for k in shapes if k.endswith(up)}
    if not stems or not all(s.startswith(prefix) for s in stems):
        raise AdapterFileError(f"{path}: expected LoRA keys `{prefix}…{down}`, found none")
    if set(stems) != ups:
        odd = sorted(set(stems) ^ ups)
        raise AdapterFileError(f"{path}: factors without their partner: {', '.join(odd[:5])}")
    for stem in stems:
        (rank, _), (_, rank_up) = shapes[stem + down], shapes[stem + up]
        if rank != rank_up:
            raise AdapterFileError(f"{path}: {stem}: rank {rank} down but {rank_up} up")
    return stems


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _save(tensors: dict[str, torch.Tensor], path: Path, metadata: dict[str, str]) -> Path:
    return write_safetensors(Path(path), tensors, {k: str(v) for k, v in metadata.items()})
