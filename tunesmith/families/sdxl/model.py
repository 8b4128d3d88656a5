"""The `sdxl` family: Stable Diffusion XL as `diffusers` ships it (`StableDiffusionXLPipeline`).

A base model is a folder in the diffusers layout, the one stabilityai/stable-diffusion-xl-base-1.0
publishes and `StableDiffusionXLPipeline.save_pretrained` writes (a fine-tune saved so trains too):

    model_index.json     which class each component folder holds
    unet/                UNet2DConditionModel          config.json + *.safetensors
    vae/                 AutoencoderKL                 config.json + *.safetensors
    text_encoder/        CLIPTextModel                 config.json + *.safetensors
    text_encoder_2/      CLIPTextModelWithProjection   config.json + *.safetensors
    tokenizer/           CLIPTokenizer                 tokenizer_config.json + vocab files
    tokenizer_2/         CLIPTokenizer                 tokenizer_config.json + vocab files
    scheduler/           EulerDiscreteScheduler (or another of diffusers' SDXL schedulers)

A user's real base model and the tiny one `tunesmith.families.sdxl.tiny` makes go through the
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

from tunesmith.families.base_model import frozen, quiet_loading

if TYPE_CHECKING:
    from diffusers import StableDiffusionXLPipeline

from tunesmith.families.sdxl.base_model import (  # noqa: F401 (model's names)
    FAMILY,
    PIPELINE_CLASS,
    REQUIRED_PARTS,
    SCHEDULERS,
    SINGLE_FILE_SUFFIXES,
    check_base_model,
    encoder_details,
)


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
    check_base_model(folder)
    with quiet_loading():
        pipe = StableDiffusionXLPipeline.from_pretrained(
            folder,
            dtype=dtype,
            use_safetensors=True,
            local_files_only=True,
            **{name: None for name in skip},
        )
    pipe.set_progress_bar_config(disable=True)
    return frozen(pipe).to(device)


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
