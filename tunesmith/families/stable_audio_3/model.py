"""The `stable-audio-3` family: Stable Audio 3 as `diffusers` ships it (`StableAudio3Pipeline`).

A base model is a folder in the diffusers layout, the one `StableAudio3Pipeline.save_pretrained`
and diffusers' conversion script write:

    model_index.json          which class each component folder holds
    transformer/              StableAudio3DiTModel          config.json + *.safetensors
    vae/                      AutoencoderSAME               config.json + *.safetensors
    text_encoder/             T5GemmaEncoderModel           config.json + *.safetensors
    tokenizer/                GemmaTokenizer                tokenizer_config.json + tokenizer.json
    duration_embedder/        StableAudio3DurationEmbedder  config.json + *.safetensors
    scheduler/                FlowMatchEulerDiscreteScheduler  scheduler_config.json

A user's real base model and the tiny one `tiny.py` makes go through the same `load_pipeline`.
Only `.safetensors` weights are ever loaded; a component whose weights are pickles only (`.bin`,
`.pt`, `.ckpt`, `.pth`) is refused, not converted.

This file holds loading, checking and fingerprinting so far; encode, noise, loss and sample
follow. Not handled: single-file checkpoints (stable-audio-tools' one `model.safetensors`):
convert them with diffusers' `scripts/convert_stable_audio_3_to_diffusers.py` first.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from tunesmith.families.base_model import frozen, quiet_loading

if TYPE_CHECKING:
    from diffusers import StableAudio3Pipeline

from tunesmith.families.stable_audio_3.base_model import (  # noqa: F401 (model's names)
    AUDIO_CHANNELS,
    CHUNK_OVERLAP,
    CHUNK_SECONDS,
    FAMILY,
    PIPELINE_CLASS,
    REQUIRED_PARTS,
    SAMPLE_RATE,
    check_base_model,
)


def load_pipeline(
    folder: Path, dtype: torch.dtype = torch.float32, device: str = "cpu"
) -> StableAudio3Pipeline:
    """Check `folder`, then load it as a `StableAudio3Pipeline` from .safetensors only, offline.

    Every component is cast to `dtype` (diffusers' `dtype` argument; `torch_dtype` is its
    deprecated name in 0.42). Returns the pipeline on `device`.
    """
    from diffusers import StableAudio3Pipeline  # imported here: diffusers takes seconds

    folder = Path(folder)
    check_base_model(folder)
    with quiet_loading():
        pipe = StableAudio3Pipeline.from_pretrained(
            folder, dtype=dtype, use_safetensors=True, local_files_only=True
        )
    pipe.set_progress_bar_config(disable=True)
    return frozen(pipe).to(device)


# ---------------------------------------------------------------------------------------------
# Encode: audio → latents, prompts → cross-attention conditioning.


@torch.no_grad()
def encode_audio(vae, samples: torch.Tensor) -> torch.Tensor:
    """Latents [D, T] (float32, unscaled) of stereo audio [2, N], N a multiple of the ratio.

    `AutoencoderSAME.encode` applies its soft-norm bottleneck and samples nothing, so its
    `.latents` are underfit's "unscaled" latents (the pretransform scale is 1.0). Above 30 s
    the audio is encoded in chunks with 32 frames of context on each side (its attention is
    a sliding window, so a chunk's centre sees what the whole file would show it).
    """
    ratio = vae.downsampling_ratio
    frames = samples.shape[-1] // ratio
    chunk = max(1, int(CHUNK_SECONDS * vae.config.sampling_rate) // ratio)
    x = samples.to(device=vae.device, dtype=vae.dtype)[None]
    if frames <= chunk:
        return vae.encode(x).latents[0].float().cpu()
    pieces = []
    for start in range(0, frames, chunk):
        end = min(start + chunk, frames)
        lo, hi = max(0, start - CHUNK_OVERLAP), min(frames, end + CHUNK_OVERLAP)
        latents = vae.encode(x[..., lo * ratio : hi * ratio]).latents[0]
        pieces.append(latents[:, start - lo : end - lo])
    return torch.cat(pieces, dim=-1).float().cpu()


@torch.no_grad()
def encode_audio_batch(vae, samples: torch.Tensor) -> torch.Tensor:
    """Latents [B, D, T] (float32, unscaled) of B stereo clips of one length [B, 2, N], N a
    multiple of the ratio and at most CHUNK_SECONDS (longer clips go through `encode_audio`):
    one call of the VAE, equal to `encode_audio` of each clip within float rounding."""
    x = samples.to(device=vae.device, dtype=vae.dtype)
    return vae.encode(x).latents.float().cpu()


@torch.no_grad()
def encode_prompts(pipe, prompts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """T5Gemma hidden states [B, L, C] and their mask [B, L], as the pipeline makes them."""
    embeds, mask = pipe.encode_prompt(prompts, pipe.text_encoder.device, 1)
    return embeds, mask


def conditioning(
    pipe, embeds: torch.Tensor, mask: torch.Tensor, seconds_total: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(context [B, L+1, C], context mask, global [B, C]) for the DiT, as the pipeline builds
    them: the duration embedding is the global conditioning and one more context token."""
    global_states = pipe.duration_embedder(seconds_total.to(torch.float32))
    context, context_mask = pipe.prepare_cross_attention(embeds, mask, global_states)
    return context, context_mask, global_states


@torch.no_grad()
def render_demo(pipe, demo) -> np.ndarray:
    """What a user's request produces: the pipeline with the demo's prompt, duration, steps,
    guidance and seed; stereo float32 [2, N], cut to the requested duration."""
    generator = torch.Generator("cpu").manual_seed(demo.seed)
    audio = pipe(
        demo.prompt,
        duration=demo.duration,
        num_inference_steps=demo.steps,
        guidance_scale=demo.cfg,
        generator=generator,
    ).audios[0]
    return audio.float().cpu().numpy()[:, : int(round(demo.duration * SAMPLE_RATE))]
