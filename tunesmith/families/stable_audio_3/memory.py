"""What a Stable Audio 3 run's training holds at its peak, traced on the `meta` device.

`memory_model(run, base_model, dtype)` builds every component the training process loads (the
pipeline: DiT, SAME VAE, T5Gemma encoder, duration embedder) from the folder's `config.json`
files on `meta` at the placement's dtype, and the trainer's own `Objective` over them: the
adapters attached as the trainer attaches them, its loss. `step(run)` is one training step
of the run's shapes through that `Objective.loss`: `batch_size` crops of
`latent_crop_length` latent frames, the prompt as the pipeline encodes it (256 tokens, the
duration token after them), the mean, `backward()`; with diffusers' block checkpointing on or
off as `run.train.gradient_checkpointing` says. The prompts' T5Gemma outputs are the
`Objective`'s cache (it encodes each prompt once, under no_grad, before its first step), so
the trace starts with them in place. The adapters' gradients are made before the trace,
once: the estimate counts them with the optimizer's state, and the backward adds into them.

`render(run)`: the run's longest demo as the pipeline renders it at validation, without
gradients: one guided DiT call (a batch of two where the demo's cfg is above 1) over the
demo's latent frames, then the SAME VAE's decode of them, whose band-mask attention over the
upsampled sequence grows with the square of the demo's length.

`KNOBS`: what the fit lowers when a run does not fit with checkpointing on, in order: the
crop (underfit's 1300 frames, ≈ 120 s, is the default), then the batch.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from tunesmith.backends.placement import Placement
from tunesmith.families.stable_audio_3 import full_size
from tunesmith.families.stable_audio_3.data import Batch
from tunesmith.families.stable_audio_3.trainer import Objective
from tunesmith.train.footprint import MemoryModel

KNOBS = (
    ("latent_crop_length", (2048, 1300, 1024, 768, 512, 384, 256)),
    ("batch_size", (32, 16, 8, 4, 2, 1)),
)
PROMPT_TOKENS = 256  # the pipeline's encode_prompt pads and cuts every prompt to 256 tokens
DTYPE_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
META = "meta"


def memory_model(run, base_model: Path, dtype: torch.dtype) -> MemoryModel:
    from diffusers import StableAudio3Pipeline

    configs = full_size.read_configs(base_model)
    parts = {part: full_size.build(configs, part, META, dtype) for part in full_size.PARTS}
    for part in ("vae", "text_encoder"):  # never trained (the trainer encodes under no_grad)
        parts[part].requires_grad_(False)
    pipe = StableAudio3Pipeline(tokenizer=None, scheduler=None, **parts)
    placement = Placement("torch", META, DTYPE_NAMES[dtype], "the memory estimate")
    objective = Objective(base_model, run, placement, pipe=pipe)
    for param in objective.parameters():
        param.grad = torch.zeros_like(param)
    text = pipe.text_encoder.config.encoder.hidden_size

    def step(trial) -> None:
        b, length = trial.train.batch_size, trial.train.latent_crop_length
        dit = pipe.transformer
        if trial.train.gradient_checkpointing is True:
            # the trainer's own checkpoint function where padded frames are masked (its
            # recompute masks them too), diffusers' otherwise
            padded = objective.padded_values
            dit.enable_gradient_checkpointing(*([padded.checkpoint] if padded else []))
        else:
            dit.disable_gradient_checkpointing()
        channels = dit.config.io_channels
        prompts = [f"prompt {i}" for i in range(b)]
        objective._text = {  # the Objective's cache of T5Gemma outputs, as after encoding
            prompt: (
                torch.empty(PROMPT_TOKENS, text, dtype=dtype, device=META),
                torch.ones(PROMPT_TOKENS, dtype=torch.long, device=META),
            )
            for prompt in prompts
        }
        batch = Batch(
            latents=torch.empty(b, channels, length, device=META),
            mask=torch.ones(b, length, dtype=torch.bool, device=META),
            seconds_total=torch.empty(b, device=META),
            pieces=[()] * b,
            paths=[""] * b,
        )
        t = torch.empty(b, dtype=torch.float64, device=META)
        noise = torch.empty(b, channels, length, device=META)
        drop = torch.zeros(b, dtype=torch.bool, device=META)
        objective.loss(batch, prompts, t, noise, drop).mean().backward()

    def render(trial) -> None:
        if not trial.demos:
            return
        demo = max(trial.demos, key=lambda d: d.duration)
        vae, dit = pipe.vae, pipe.transformer
        frames = math.ceil(demo.duration * vae.config.sampling_rate / vae.downsampling_ratio)
        b = 2 if demo.cfg > 1 else 1  # the pipeline's guided call: unconditioned and prompted
        tokens = PROMPT_TOKENS + 1  # and the duration token
        with torch.no_grad():
            dit(
                torch.empty(b, dit.config.io_channels, frames, dtype=dtype, device=META),
                torch.empty(b, dtype=dtype, device=META),
                torch.empty(b, tokens, text, dtype=dtype, device=META),
                torch.empty(b, dit.config.global_cond_dim, dtype=dtype, device=META),
                torch.ones(b, tokens, dtype=torch.long, device=META),
            )
            vae.decode(torch.empty(1, vae.config.latent_dim, frames, dtype=dtype, device=META))

    return MemoryModel(parts=parts, step=step, knobs=KNOBS, render=render)
