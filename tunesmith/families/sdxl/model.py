"""The `sdxl` family: Stable Diffusion XL as `diffusers` ships it (`StableDiffusionXLPipeline`).

A checkpoint is a folder in the diffusers layout, the one stabilityai/stable-diffusion-xl-base-1.0
publishes and `StableDiffusionXLPipeline.save_pretrained` writes (a fine-tune saved so trains too):

    model_index.json     which class each component folder holds
    unet/                UNet2DConditionModel          config.json + *.safetensors
    vae/                 AutoencoderKL                 config.json + *.safetensors
    text_encoder/        CLIPTextModel                 config.json + *.safetensors
    text_encoder_2/      CLIPTextModelWithProjection   config.json + *.safetensors
    tokenizer/           CLIPTokenizer                 tokenizer_config.json + vocab files
    tokenizer_2/         CLIPTokenizer                 tokenizer_config.json + vocab files
    scheduler/           EulerDiscreteScheduler (or another of diffusers' SDXL schedulers)

A user's real checkpoint and the tiny one `tunesmith.families.sdxl.tiny` makes go through the
same `load_pipeline`. Only `.safetensors` weights are ever loaded.

Not handled: single-file checkpoints (one `.safetensors` holding UNet, VAE and both text
encoders, as A1111 and ComfyUI keep them) are refused with the conversion to run once; and
folders holding only `fp16` variant weights (`*.fp16.safetensors`), which diffusers loads only
when asked for the variant.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch

from tunesmith.families.base_model import PICKLE_SUFFIXES, Part, check_folder, quiet_loading

if TYPE_CHECKING:
    from diffusers import StableDiffusionXLPipeline

FAMILY = "sdxl"
PIPELINE_CLASS = "StableDiffusionXLPipeline"

_TOKENIZER_FILES = ("tokenizer.json", "vocab.json")  # fast (tokenizers) or slow (BPE) files
# diffusers' KarrasDiffusionSchedulers, the type StableDiffusionXLPipeline declares for it.
SCHEDULERS = (
    "EulerDiscreteScheduler", "DDIMScheduler", "DDPMScheduler", "PNDMScheduler",
    "LMSDiscreteScheduler", "HeunDiscreteScheduler", "EulerAncestralDiscreteScheduler",
    "DPMSolverMultistepScheduler", "DPMSolverSinglestepScheduler", "KDPM2DiscreteScheduler",
    "KDPM2AncestralDiscreteScheduler", "DEISMultistepScheduler", "UniPCMultistepScheduler",
    "DPMSolverSDEScheduler", "EDMEulerScheduler",
)  # fmt: skip

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


def check_checkpoint(folder: Path) -> None:
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


def load_pipeline(
    folder: Path,
    dtype: torch.dtype = torch.float32,
    device: str = "cpu",
    skip: tuple[str, ...] = (),
) -> StableDiffusionXLPipeline:
    """Check `folder`, then load it as a `StableDiffusionXLPipeline` from .safetensors only,
    offline, every component cast to `dtype`, on `device`.

    `skip` names components not to load (left None), e.g. ("unet",) to encode pictures and
    captions without SDXL's 2.6 B-parameter UNet in memory.
    """
    from diffusers import StableDiffusionXLPipeline  # imported here: diffusers takes seconds

    folder = Path(folder)
    check_checkpoint(folder)
    with quiet_loading():
        pipe = StableDiffusionXLPipeline.from_pretrained(
            folder,
            dtype=dtype,
            use_safetensors=True,
            local_files_only=True,
            **{name: None for name in skip},
        )
    pipe.set_progress_bar_config(disable=True)
    return pipe.to(device)


# ---------------------------------------------------------------------------------------------
# Encode: pictures → the VAE posterior, captions → both text encoders' conditioning.


@torch.no_grad()
def encode_images(vae, pixels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The VAE posterior's mean and log-variance [B, 4, H/8, W/8], float32, unscaled.

    `pixels` is [B, 3, H, W] in [-1, 1] (what `pixels_to_tensor` and diffusers'
    VaeImageProcessor give). The posterior's parameters, not a sample: a trainer draws
    `x0 = (mean + exp(logvar / 2) * noise) * vae.config.scaling_factor` afresh every step
    (storing one sample is kohya-ss/sd-scripts#1709). `logvar` is the one AutoencoderKL
    keeps, clamped to [-30, 20].
    """
    x = pixels.to(device=vae.device, dtype=vae.dtype)
    posterior = vae.encode(x).latent_dist
    return posterior.mean.float().cpu(), posterior.logvar.float().cpu()


def pixels_to_tensor(pixels) -> torch.Tensor:
    """uint8 [H, W, 3] (or [B, H, W, 3]) → float32 [B, 3, H, W] in [-1, 1], as the pipeline's
    image processor normalises (x / 127.5 - 1)."""
    x = torch.as_tensor(pixels)
    if x.dim() == 3:
        x = x[None]
    return x.permute(0, 3, 1, 2).float() / 127.5 - 1.0


@torch.no_grad()
def encode_captions(pipe, captions: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """(prompt_embeds [B, 77, C1 + C2], pooled [B, P]) exactly as the pipeline builds them.

    `StableDiffusionXLPipeline.encode_prompt` itself: both tokenizers padded to 77, each
    encoder's penultimate hidden states concatenated (768 + 1280 = 2048 for SDXL), and
    text_encoder_2's projected end-of-text embedding as the pooled one (1280). No classifier-
    free guidance: the negative half is not made.
    """
    device = pipe.text_encoder_2.device
    embeds, _, pooled, _ = pipe.encode_prompt(
        captions, device=device, num_images_per_prompt=1, do_classifier_free_guidance=False
    )
    return embeds, pooled


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
