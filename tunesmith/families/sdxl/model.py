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

    What `StableDiffusionXLPipeline.encode_prompt` computes (tested equal to the bit): both
    tokenizers padded to 77, each encoder's penultimate hidden states concatenated (768 + 1280
    = 2048 for SDXL), and text_encoder_2's projected end-of-text embedding as the pooled one
    (1280). No classifier-free guidance: the negative half is not made. Its warning about a
    cut caption is not printed: the encoded stage reports what was lost (`caption_tokens`).
    """
    return encode_long_captions(pipe, captions, 1)


@torch.no_grad()
def encode_long_captions(
    pipe, captions: list[str], chunks: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(prompt_embeds [B, 75·chunks + 2, C1 + C2], pooled [B, P]): kohya's long captions
    (captions.py): chunks of 75 tokens through both encoders, put back in one sequence; the
    pooled embedding of the first chunk. One chunk is `encode_captions`."""
    pairs = [(pipe.tokenizer, pipe.text_encoder), (pipe.tokenizer_2, pipe.text_encoder_2)]
    ids = [tokenize_chunks(tokenizer, captions, chunks) for tokenizer, _ in pairs]
    return encode_ids([encoder for _, encoder in pairs], ids)


def encode_ids(encoders: list, ids: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(prompt_embeds, pooled) of token ids [B, chunks, 77], one tensor per encoder: each
    chunk's penultimate hidden states put back in one sequence (the first chunk's start token,
    every chunk's 75 inner tokens, the last chunk's end), the encoders' concatenated; the
    pooled embedding is text_encoder_2's projected end-of-text embedding of the first chunk.
    Gradients flow where the encoders train (`objective.TextEncoders`)."""
    states, pooled = [], None
    for encoder, chunked in zip(encoders, ids, strict=True):
        batch, chunks, window = chunked.shape
        flat = chunked.reshape(-1, window).to(encoder.device)
        output = encoder(flat, output_hidden_states=True)
        hidden = output.hidden_states[-2]
        if chunks > 1:
            hidden = hidden.reshape(batch, chunks, window, -1)
            inner = hidden[:, :, 1 : window - 1].reshape(batch, chunks * (window - 2), -1)
            hidden = torch.cat([hidden[:, 0, :1], inner, hidden[:, -1, window - 1 :]], dim=1)
        states.append(hidden)
        if output[0].dim() == 2:  # text_encoder_2's projected end-of-text embedding
            pooled = output[0].reshape(batch, chunks, -1)[:, 0]
    return torch.cat(states, dim=-1), pooled


def tokenize_chunks(tokenizer, captions: list[str], chunks: int) -> torch.Tensor:
    """Token ids [B, chunks, 77] as kohya's `_get_input_ids` makes them (captions.py)."""
    window = tokenizer.model_max_length
    length = chunks * (window - 2) + 2
    ids = tokenizer(
        captions, padding="max_length", max_length=length, truncation=True, return_tensors="pt"
    ).input_ids
    if chunks == 1:
        return ids[:, None]
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    rows = []
    for row in ids:
        pieces = []
        for start in range(1, length - window + 2, window - 2):
            chunk = torch.cat([row[:1], row[start : start + window - 2], row[-1:]])
            if pad != eos:  # a tokenizer that pads with its own token (SDXL's second)
                if chunk[-2] != eos and chunk[-2] != pad:
                    chunk[-1] = eos  # the text goes on past this chunk
                if chunk[1] == pad:
                    chunk[1] = eos  # an empty chunk: <BOS> <EOS> <PAD> ...
            pieces.append(chunk)
        rows.append(torch.stack(pieces))
    return torch.stack(rows)


def caption_tokens(pipe, captions: list[str], kept: int) -> list[dict]:
    """Per caption: its length in text tokens (the first tokenizer's), how many of them are
    `kept`, and the text of those that are not (what a cut caption loses)."""
    tokenizer = pipe.tokenizer
    found = []
    for caption in captions:
        ids = tokenizer(caption, add_special_tokens=False, truncation=False, verbose=False)
        ids = ids.input_ids
        lost = tokenizer.decode(ids[kept:]) if len(ids) > kept else ""
        found.append({"tokens": len(ids), "kept": kept, "lost": lost})
    return found
