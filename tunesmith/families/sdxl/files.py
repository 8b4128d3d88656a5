"""The files an SDXL adapter is written as, and the check every written file gets.

    PEFT    `NAME.safetensors` for lora, dora and locon: diffusers' one-file PEFT form
            (`tunesmith/formats/peft.py`), keys `unet.<module>.lora_A.weight` / `.lora_B.weight`
            (dora: the magnitude, `adapters.py`; the text encoders' under `text_encoder.` and
            `text_encoder_2.`), fp32, and a LoraConfig per component under
            `lora_adapter_metadata`, so `StableDiffusionXLPipeline.load_lora_weights` loads it
            with the same alpha
    kohya   `NAME.kohya.safetensors` (`tunesmith/formats/kohya.py`): the modules named as kohya
            sd-scripts names SDXL's (`lora_unet_input_blocks_4_1_transformer_blocks_0_attn1_to_q`,
            `lora_te1_text_model_encoder_layers_0_self_attn_q_proj`: kohya_names.py) with each
            type's tensors (`adapters.py`), with SDXL's values of kohya's `ss_*` and Stability's
            `modelspec.*` metadata, for ComfyUI, A1111/Forge and kohya's own tools. lokr and
            loha have no PEFT form diffusers reads for SDXL: their one file is this one, as
            `NAME.safetensors`, which LyCORIS loads (and the renders, `adapters.LycorisFile`)

Every file carries the run's lineage (docs/design.md, "Adapter files") as string metadata,
unchanged. Not handled: reading a file back into a trainer (a run resumes from its own state
folder).
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from tunesmith.families.sdxl.adapter_spec import PEFT_FILE_TYPES, AdapterSpec
from tunesmith.families.sdxl.adapters import CONV_BLOCKS, UNET_TARGETS, Adapter
from tunesmith.families.sdxl.kohya_names import TEXT_ENCODER_PREFIXES, TEXT_ENCODER_TARGETS
from tunesmith.families.sdxl.objective import TARGET_MODULES, SdxlLora
from tunesmith.formats import FormatError, kohya, peft, read_header, require_metadata

COMPONENT = "unet"  # diffusers' prefix of the UNet's keys in a pipeline's LoRA file
LINEAGE_KEYS = ("tunesmith.base_model_fingerprint", "tunesmith.training_config")
# SDXL base 1.0 in kohya's metadata and Stability's model spec
BASE_MODEL_VERSION = "sdxl_base_v1-0"
ARCHITECTURE = "stable-diffusion-xl-v1-base/lora"
IMPLEMENTATION = "https://github.com/Stability-AI/generative-models"
KOHYA_PREFIXES = ("lora_unet_", *TEXT_ENCODER_PREFIXES.values())
PEFT_PREFIXES = ("unet.", "text_encoder.", "text_encoder_2.")
# A, B, DoRA's magnitude on a text encoder (transformers' key) and on the UNet (PEFT's)
PEFT_SUFFIXES = (
    ".lora_A.weight",
    ".lora_B.weight",
    ".lora_magnitude_vector.weight",
    ".lora_magnitude_vector",
)
LYCORIS_MODULE = "lycoris.kohya"  # sd-scripts' --network_module for LyCORIS's networks


def adapter_of(lora) -> Adapter:
    """The attached adapter of an `SdxlLora` (or an `Adapter` itself)."""
    if isinstance(lora, Adapter):
        return lora
    found = getattr(lora, "adapter", None)
    if found is not None:
        return found
    spec = AdapterSpec(rank=lora.rank, alpha=lora.alpha)  # a LoRA on the UNet: PEFT's, found
    return Adapter(spec, {COMPONENT: lora.unet}, attached={COMPONENT: lora.config})


def has_peft_file(adapter_type: str) -> bool:
    """Whether a run of this type writes the PEFT file and its kohya twin (else one file)."""
    return adapter_type in PEFT_FILE_TYPES


def peft_state_dict(lora: SdxlLora) -> dict[str, torch.Tensor]:
    """`unet.<module>.lora_A.weight` / `lora_B.weight` (...), fp32, as diffusers writes them."""
    return adapter_of(lora).peft_tensors()


def kohya_state_dict(lora: SdxlLora) -> dict[str, torch.Tensor]:
    """`lora_unet_<SGM module>.lora_down.weight` (A), `.lora_up.weight` (B), `.alpha` (...)."""
    return adapter_of(lora).kohya_tensors()


def save_peft(lora: SdxlLora, path: Path, lineage: dict[str, str] | None = None) -> Path:
    adapter = adapter_of(lora)
    return peft.write_file(path, adapter.peft_tensors(), adapter.peft_configs(), lineage)


# kohya's training options and the `ss_` keys sd-scripts records them under (train_network.py's
# metadata; its dataset keys where one dataset is given on the command line)
KOHYA_METADATA = {
    "lr_scheduler": "ss_lr_scheduler",
    "lr_warmup_steps": "ss_lr_warmup_steps",
    "gradient_accumulation_steps": "ss_gradient_accumulation_steps",
    "noise_offset": "ss_noise_offset",
    "adaptive_noise_scale": "ss_adaptive_noise_scale",
    "multires_noise_iterations": "ss_multires_noise_iterations",
    "multires_noise_discount": "ss_multires_noise_discount",
    "min_snr_gamma": "ss_min_snr_gamma",
    "debiased_estimation": "ss_debiased_estimation",
    "loss_type": "ss_loss_type",
    "huber_schedule": "ss_huber_schedule",
    "huber_c": "ss_huber_c",
    "max_token_length": "ss_max_token_length",
    "caption_dropout_rate": "ss_caption_dropout_rate",
    "caption_tag_dropout_rate": "ss_caption_tag_dropout_rate",
    "shuffle_caption": "ss_shuffle_caption",
    "keep_tokens": "ss_keep_tokens",
    "flip_aug": "ss_flip_aug",
    "buckets": "ss_enable_bucket",
    "bucket_no_upscale": "ss_bucket_no_upscale",
    "min_bucket_reso": "ss_min_bucket_reso",
    "max_bucket_reso": "ss_max_bucket_reso",
}


def training_metadata(train) -> tuple[tuple[str, str], ...]:
    """The kohya options `train` sets away from their defaults, under sd-scripts' `ss_` names
    and as it writes them (Python's str of the value). The defaults are left out, so a run that
    sets none writes the file it wrote before these options existed."""
    from dataclasses import fields

    defaults = {f.name: f.default for f in fields(type(train))}
    changed = {o for o in KOHYA_METADATA if getattr(train, o) != defaults[o]}
    if "buckets" in changed:  # the limits its buckets were made with, as kohya records them
        changed |= {"min_bucket_reso", "max_bucket_reso"}
    return tuple((key, str(getattr(train, o))) for o, key in KOHYA_METADATA.items() if o in changed)


def network(
    adapter: Adapter,
    prediction_type: str,
    lineage: dict[str, str] | None = None,
    name: str = "",
    steps: int = 0,
    size: int = 1024,
    text_encoder_lr: float | None = None,
    training: tuple[tuple[str, str], ...] = (),
) -> kohya.Network:
    """kohya's metadata of the adapter (a lora on the UNet: as the family wrote it before)."""
    spec, lineage = adapter.spec, lineage or {}
    target = list(TARGET_MODULES if spec.type == "lora" else UNET_TARGETS)
    args: dict[str, str] = {}
    if spec.type != "lora":  # LyCORIS's network_args, as sd-scripts records them (strings)
        args["algo"] = "lora" if spec.type == "dora" else spec.type
        if spec.type == "dora":
            args["dora_wd"] = "True"
        if spec.type == "lokr":
            args["factor"] = str(spec.factor)
    if spec.conv_dim:  # networks/lora.py's and LyCORIS's conv_dim, conv_alpha
        target += list(CONV_BLOCKS)
        args["conv_dim"] = str(spec.conv_dim)
        args["conv_alpha"] = kohya.number(spec.conv_alpha)
    if any(layer.component != COMPONENT for layer in adapter.layers):
        target += list(TEXT_ENCODER_TARGETS)
    return kohya.Network(
        dim=spec.rank,
        alpha=spec.alpha,
        target=tuple(target),
        base_model_version=BASE_MODEL_VERSION,
        architecture=ARCHITECTURE,
        implementation=IMPLEMENTATION,
        prediction_type=prediction_type,
        name=name,
        steps=steps,
        size=size,
        base_model=lineage.get("tunesmith.base_model", ""),
        module="networks.lora" if spec.type == "lora" else LYCORIS_MODULE,
        args=tuple(args.items()),
        text_encoder_lr=text_encoder_lr,
        training=training,
    )


def save_kohya(
    lora: SdxlLora,
    path: Path,
    lineage: dict[str, str] | None = None,
    name: str = "",
    steps: int = 0,
    size: int = 1024,
    text_encoder_lr: float | None = None,
    training: tuple[tuple[str, str], ...] = (),
) -> Path:
    adapter = adapter_of(lora)
    prediction_type = getattr(lora, "prediction_type", "epsilon")
    meta = network(adapter, prediction_type, lineage, name, steps, size, text_encoder_lr, training)
    return kohya.write(path, adapter.kohya_tensors(), meta, lineage or {})


def kohya_path(peft_path: Path) -> Path:
    """`NAME.kohya.safetensors` beside `NAME.safetensors`."""
    return Path(peft_path).with_suffix(".kohya.safetensors")


def validate_files(path: Path) -> dict[str, str]:
    """Check an adapter's files; returns the metadata of `NAME.safetensors`.

    A PEFT file (lora, dora, locon) and its kohya twin: readable, the config metadata, every
    key `<component>.<module>` with both factors whose ranks chain, the lineage, a twin of the
    same number of layers. A lone kohya-layout file (lokr, loha): every module one network's
    tensors, chained, with its alpha, and the lineage. Raises FormatError naming the file."""
    path = Path(path)
    meta, shapes, _ = read_header(path)
    if peft.FILE_CONFIG_KEY not in meta and any(k.startswith(KOHYA_PREFIXES) for k in shapes):
        metadata, _ = kohya.validate_network(path, KOHYA_PREFIXES)
        require_metadata(path, metadata, LINEAGE_KEYS)
        return metadata
    stems = _validate_peft(path, meta, shapes)
    twin = kohya_path(path)
    _, forms = kohya.validate_network(twin, KOHYA_PREFIXES)
    if len(forms) != len(stems):
        raise FormatError(f"{twin}: {len(forms)} layers, its PEFT twin has {len(stems)}")
    return meta


def _validate_peft(path: Path, meta: dict[str, str], shapes: dict) -> list[str]:
    """diffusers' one-file form from its header (`validate_files`); returns the stems. Unlike
    `peft.validate_file`, it takes the text encoders' keys, conv factors and DoRA's magnitude."""
    if peft.FILE_CONFIG_KEY not in meta:
        raise FormatError(f"{path}: no {peft.FILE_CONFIG_KEY} metadata (the LoraConfig)")
    require_metadata(path, meta, LINEAGE_KEYS)
    found: dict[str, dict[str, tuple[int, ...]]] = {}
    for key, shape in shapes.items():
        suffix = next((s for s in PEFT_SUFFIXES if key.endswith(s)), None)
        if suffix is None or not key.startswith(PEFT_PREFIXES):
            raise FormatError(
                f"{path}: key {key!r} is not <unet|text_encoder|text_encoder_2>.<module>"
                f"{'|'.join(PEFT_SUFFIXES)}"
            )
        found.setdefault(key[: -len(suffix)], {})[suffix] = shape
    if not found:
        raise FormatError(f"{path}: expected LoRA keys `unet.…`, found none")
    for stem, factors in sorted(found.items()):
        a, b = factors.get(PEFT_SUFFIXES[0]), factors.get(PEFT_SUFFIXES[1])
        if a is None or b is None:
            raise FormatError(f"{path}: {stem} has a factor without its partner")
        if len(a) < 2 or len(b) < 2 or a[0] != b[1]:
            raise FormatError(f"{path}: {stem}: A {a} and B {b} do not chain")
        magnitude = factors.get(PEFT_SUFFIXES[2], factors.get(PEFT_SUFFIXES[3]))
        if magnitude is not None and math.prod(magnitude) != b[0]:
            raise FormatError(f"{path}: {stem}: magnitude {magnitude} for {b[0]} outputs")
    return sorted(found)
