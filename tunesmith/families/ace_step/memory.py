"""What an ACE-Step 1.5 run holds at its peak, for the estimate before it trains
(`tunesmith.train.footprint`).

The trainer loads the whole pipeline (`load_pipeline`: the DiT, the condition encoder, the VAE,
the Qwen3 text encoder, and the audio tokenizer and detokenizer where the folder has both) at
the placement's dtype and trains LoRA or LoKr on the DiT; a step runs the DiT alone, one crop
at a time, on stored latents and conditioning. Here each component is built on `meta` from the
base model's own `config.json` files (`full_size.build`), the adapter attached by the trainer's
own `attach` with the run's settings, and the step is one micro-batch of the trainer's:
`objective.crop_loss` on a crop of `train.crop_frames` latent frames and `backward()`, with the
DiT's checkpointing as the run says.

The conditioning is as long as it can be: the caption cut at 256 tokens, the lyrics at 2048,
and the one timbre token (the condition encoder packs the three), so the estimate holds for any
song; a song with shorter lyrics holds less in its cross-attention. The crop is
`train.crop_frames` (a song shorter than it trains on less). `batch_size` is always 1 here
(config.problems), so the crop is the one knob the fit may lower.

Not counted: the items' latents and conditioning the trainer keeps in memory (a song's
conditioning is its tokens × 2048 in the model's dtype, under 10 MB), DDP's gradient buckets
on several processes (the adapter's size again) and the demos' renders at validation.
"""

from __future__ import annotations

from pathlib import Path

import torch

from tunesmith.families.ace_step import full_size, objective
from tunesmith.families.ace_step.base_model import check_base_model
from tunesmith.families.ace_step.model import MAX_CAPTION_TOKENS, MAX_LYRICS_TOKENS
from tunesmith.families.ace_step.trainer import attach
from tunesmith.train.footprint import MemoryModel

# What the fit may lower when a run does not fit: the crop, from HOT-Step's 30 s down to 10 s.
KNOBS = (("crop_frames", (750, 600, 500, 375, 250)),)
TIMBRE_TOKENS = 1  # the timbre encoder's one embedding of its reference (the silence latent)
CONDITIONING_TOKENS = MAX_CAPTION_TOKENS + MAX_LYRICS_TOKENS + TIMBRE_TOKENS


def memory(run, base_model: Path, dtype: torch.dtype) -> MemoryModel:
    """The `MemoryModel` of `run` on the base model folder `base_model` at `dtype`."""
    configs = full_size.read_configs(base_model)
    if not check_base_model(base_model).codes:  # load_pipeline then loads neither
        for part in full_size.PARTS[-2:]:
            configs.pop(part, None)
    return memory_of(configs, run, dtype)


def memory_of(configs: dict[str, dict], run, dtype: torch.dtype) -> MemoryModel:
    """`memory` from the configs themselves (keyed by component folder, as `read_configs`)."""
    parts = {part: full_size.build(part, config, "meta", dtype) for part, config in configs.items()}
    dit = parts["transformer"]
    attach(dit, run.adapter, run.train.seed)
    latent = int(configs["transformer"]["audio_acoustic_hidden_dim"])
    width = int(configs["condition_encoder"]["hidden_size"])
    return MemoryModel(parts, lambda trial: _step(dit, latent, width, trial), KNOBS)


def _step(dit, latent: int, width: int, run) -> None:
    """One micro-batch's forward, loss and backward on `meta`, as `AceStepTrainer.step` runs
    each crop of a window."""
    if run.train.gradient_checkpointing is True:
        dit.enable_gradient_checkpointing()
    else:
        dit.disable_gradient_checkpointing()
    for p in dit.parameters():  # the optimizer's zero_grad(set_to_none=True)
        p.grad = None
    frames = run.train.crop_frames

    def meta(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.empty(shape, dtype=dtype, device="meta")

    # the crop's latents, noise and level, and its context, in float32 as the trainer draws
    # them; the conditioning in the model's dtype, as the trainer keeps it
    x0, noise, t = meta(1, frames, latent), meta(1, frames, latent), meta(1)
    context = meta(1, frames, 2 * latent)
    conditioning = meta(1, CONDITIONING_TOKENS, width, dtype=dit.dtype)
    loss = objective.crop_loss(dit, x0, noise, t, conditioning, context)[0]
    (loss * 1.0).backward()  # scaled by the crop's weight, as the trainer does
