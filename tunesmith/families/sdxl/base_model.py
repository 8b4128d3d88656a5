"""The SDXL base model folder: its parts, the check that it is whole, and what its VAE's
config tells a reader of the stored posteriors.

Kept apart from `model` (which imports torch) so that checking a folder, and keying the
work on it, imports no model library: a build that computes nothing stays light.
"""

from __future__ import annotations

from pathlib import Path

from tunesmith.families.base_model import PICKLE_SUFFIXES, Part, check_folder

FAMILY = "sdxl"
PIPELINE_CLASS = "StableDiffusionXLPipeline"

_TOKENIZER_FILES = ("tokenizer.json", "vocab.json")  # fast (tokenizers) or slow (BPE) files
# diffusers' KarrasDiffusionSchedulers, the type StableDiffusionXLPipeline declares for it.
SCHEDULERS = (
    "EulerDiscreteScheduler",
    "DDIMScheduler",
    "DDPMScheduler",
    "PNDMScheduler",
    "LMSDiscreteScheduler",
    "HeunDiscreteScheduler",
    "EulerAncestralDiscreteScheduler",
    "DPMSolverMultistepScheduler",
    "DPMSolverSinglestepScheduler",
    "KDPM2DiscreteScheduler",
    "KDPM2AncestralDiscreteScheduler",
    "DEISMultistepScheduler",
    "UniPCMultistepScheduler",
    "DPMSolverSDEScheduler",
    "EDMEulerScheduler",
)

# The components of StableDiffusionXLPipeline.__init__ (diffusers 0.42.1), in its order; the
# optional image_encoder and feature_extractor (IP-Adapter) are not needed.
REQUIRED_PARTS: tuple[Part, ...] = (
    Part("vae", ("AutoencoderKL",), "config.json", weights=True),
    Part("text_encoder", ("CLIPTextModel",), "config.json", weights=True),
    Part("text_encoder_2", ("CLIPTextModelWithProjection",), "config.json", weights=True),
    # CLIPTokenizerFast: the name a tokenizer saved by transformers 4.x may record.
    Part(
        "tokenizer",
        ("CLIPTokenizer", "CLIPTokenizerFast"),
        "tokenizer_config.json",
        weights=False,
        any_of=_TOKENIZER_FILES,
    ),
    Part(
        "tokenizer_2",
        ("CLIPTokenizer", "CLIPTokenizerFast"),
        "tokenizer_config.json",
        weights=False,
        any_of=_TOKENIZER_FILES,
    ),
    Part("unet", ("UNet2DConditionModel",), "config.json", weights=True),
    Part("scheduler", SCHEDULERS, "scheduler_config.json", weights=False),
)

SINGLE_FILE_SUFFIXES = (".safetensors", *PICKLE_SUFFIXES)


def check_base_model(folder: Path) -> None:
    """Raise ValueError naming every missing or refused part, or return if the folder is whole.

    A single-file checkpoint (a `.safetensors` file, or a folder holding one and no
    model_index.json) is refused with the command that converts it.
    """
    folder = Path(folder)
    if folder.is_file() and folder.suffix in SINGLE_FILE_SUFFIXES:
        raise ValueError(_single_file_error(folder))
    if folder.is_dir() and not (folder / "model_index.json").exists():
        singles = sorted(p for p in folder.glob("*") if p.suffix in SINGLE_FILE_SUFFIXES)
        if singles:
            raise ValueError(_single_file_error(singles[0], inside=folder))
    check_folder(folder, PIPELINE_CLASS, REQUIRED_PARTS, "SDXL")


def _single_file_error(path: Path, inside: Path | None = None) -> str:
    if inside is None:
        where = f"{path} is"
    else:
        where = f"{inside} holds no model_index.json but {path.name}, which looks like"
    message = (
        f"{where} a single-file SDXL checkpoint (UNet, VAE and both text encoders in one file, "
        "as A1111 and ComfyUI keep them). tunesmith trains from the diffusers folder layout "
        "only. Convert it once with diffusers:\n"
        "  from diffusers import StableDiffusionXLPipeline\n"
        f"  StableDiffusionXLPipeline.from_single_file({str(path)!r})"
        ".save_pretrained('my-sdxl', safe_serialization=True)\n"
        "and pass the folder 'my-sdxl' instead."
    )
    if path.suffix != ".safetensors":
        message += (
            f" {path.suffix} files are pickles, which tunesmith never loads: convert the file "
            "where you trust it."
        )
    return message


def encoder_details(vae_config, size: int) -> dict:
    """What a reader of the stored posteriors needs to know to make training latents.

    `vae_config` is `vae.config` or the VAE's config.json read as a dict: no model is loaded.
    """
    return {
        "size": size,
        "latent_channels": int(vae_config["latent_channels"]),
        "vae_scale_factor": 2 ** (len(vae_config["block_out_channels"]) - 1),
        "scaling_factor": float(vae_config["scaling_factor"]),
        "shift_factor": vae_config.get("shift_factor"),  # None for SDXL's VAE
        "stored": "posterior mean and logvar, float32, unscaled",
    }
