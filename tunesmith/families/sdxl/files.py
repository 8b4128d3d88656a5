"""The files an SDXL adapter is written as, and the check every written file gets.

    PEFT    `NAME.safetensors`: diffusers' one-file PEFT form (`tunesmith/formats/peft.py`),
            keys `unet.<module>.lora_A.weight` / `.lora_B.weight` (fp32) and the LoraConfig
            under `lora_adapter_metadata`, so `StableDiffusionXLPipeline.load_lora_weights`
            loads it with the same alpha
    kohya   `NAME.kohya.safetensors` (`tunesmith/formats/kohya.py`): the modules named as kohya
            sd-scripts names SDXL's (`lora_unet_input_blocks_4_1_transformer_blocks_0_attn1_to_q`:
            kohya_names.py), with SDXL's values of kohya's `ss_*` and Stability's `modelspec.*`
            metadata, for ComfyUI, A1111/Forge and kohya's own tools

Both carry the run's lineage (docs/design.md, "Adapter files") as string metadata, unchanged.
Not handled: reading a file back into a trainer (a run resumes from its own state folder).
"""

from __future__ import annotations

from pathlib import Path

import torch

from tunesmith.families.sdxl.kohya_names import kohya_stem
from tunesmith.families.sdxl.objective import TARGET_MODULES, SdxlLora
from tunesmith.formats import FormatError, kohya, peft

COMPONENT = "unet"  # diffusers' prefix of the UNet's keys in a pipeline's LoRA file
LINEAGE_KEYS = ("tunesmith.base_model_fingerprint", "tunesmith.training_config")
# SDXL base 1.0 in kohya's metadata and Stability's model spec
BASE_MODEL_VERSION = "sdxl_base_v1-0"
ARCHITECTURE = "stable-diffusion-xl-v1-base/lora"
IMPLEMENTATION = "https://github.com/Stability-AI/generative-models"


def peft_state_dict(lora: SdxlLora) -> dict[str, torch.Tensor]:
    """`unet.<module>.lora_A.weight` / `lora_B.weight`, fp32, as diffusers writes them."""
    factors = {f"{COMPONENT}.{name}": ab for name, ab in lora.named_factors().items()}
    return peft.lora_tensors(factors, torch.float32)


def kohya_state_dict(lora: SdxlLora) -> dict[str, torch.Tensor]:
    """`lora_unet_<SGM module>.lora_down.weight` (A), `.lora_up.weight` (B), `.alpha`."""
    config = lora.unet.config
    factors = {kohya_stem(name, config): ab for name, ab in lora.named_factors().items()}
    return kohya.lora_tensors(factors, lora.alpha)


def save_peft(lora: SdxlLora, path: Path, lineage: dict[str, str] | None = None) -> Path:
    return peft.write_file(path, peft_state_dict(lora), {COMPONENT: lora.config}, lineage)


def save_kohya(
    lora: SdxlLora,
    path: Path,
    lineage: dict[str, str] | None = None,
    name: str = "",
    steps: int = 0,
    size: int = 1024,
) -> Path:
    lineage = lineage or {}
    network = kohya.Network(
        dim=lora.rank,
        alpha=lora.alpha,
        target=TARGET_MODULES,
        base_model_version=BASE_MODEL_VERSION,
        architecture=ARCHITECTURE,
        implementation=IMPLEMENTATION,
        prediction_type=lora.prediction_type,
        name=name,
        steps=steps,
        size=size,
        base_model=lineage.get("tunesmith.base_model", ""),
    )
    return kohya.write(path, kohya_state_dict(lora), network, lineage)


def kohya_path(peft_path: Path) -> Path:
    """`NAME.kohya.safetensors` beside `NAME.safetensors`."""
    return Path(peft_path).with_suffix(".kohya.safetensors")


def validate_files(peft_path: Path) -> dict[str, str]:
    """Check a PEFT file and its kohya twin; returns the PEFT file's metadata.

    Raises FormatError naming the file: unreadable, no `unet.` LoRA pairs, a factor without
    its partner, shapes that do not chain, a missing `.alpha`, missing lineage, twins of
    another number of layers."""
    meta, pairs = peft.validate_file(peft_path, COMPONENT, LINEAGE_KEYS)
    twin = kohya_path(peft_path)
    _, stems = kohya.validate(twin, f"lora_{COMPONENT}_")
    if len(stems) != len(pairs):
        raise FormatError(f"{twin}: {len(stems)} layers, its PEFT twin has {len(pairs)}")
    return meta
