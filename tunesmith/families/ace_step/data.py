"""What an ACE-Step run trains on and draws: items, crops, the epoch order, the validation draws.

An item is one song: its latents [T, C] and its conditioning [1, S, H] (the condition encoder's
output over its caption, lyrics and the silence latent as timbre reference, computed once:
the encoder is frozen). An epoch is one pass over the training items in a new shuffled order;
an optimizer step takes the next `accumulation` items of the pass (fewer at its end, never
reaching into the next pass: `ORDER`, a policy of `tunesmith.train.order`), one random crop
each (HOT-Step's crop-window training): a window of `crop_frames` frames at an offset drawn
uniformly, the whole song where it is shorter. Per crop the training generator draws, in this
order: the offset, the level t, the CFG dropout decision, the noise.

Validation: each held-out item's first `crop_frames` frames at fixed levels, each level with
noise drawn once from its own generator, the conditioning kept (no dropout) and no weighting:
the plain flow-matching error, the same number for every run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from tunesmith.families.ace_step import objective
from tunesmith.train.order import SHORT, OrderPolicy

VALIDATION_LEVELS = (0.1, 0.3, 0.5, 0.7, 0.9)
ORDER = OrderPolicy(end=SHORT)  # HOT-Step's epochs: the last window takes what is left
ORDER_SEED = 2  # the order generator's seed is the run's + 2 (not the training generator's)


@dataclass
class Item:
    path: str
    latents: torch.Tensor  # [T, C] float32, CPU
    conditioning: torch.Tensor  # [1, S, H] on the model's device, in its dtype


@dataclass
class Crop:
    """One micro-batch's draws."""

    item: int
    start: int
    length: int
    t: torch.Tensor  # [1]
    drop: torch.Tensor  # [1] bool
    noise: torch.Tensor  # [1, length, C]


def context(silence: torch.Tensor, start: int, length: int) -> torch.Tensor:
    """The DiT's context for frames [start, start + length) of a song: the base model's silence
    latent as source (tiled past its end, as `encode.context_latents`) beside a chunk mask of
    ones (generate everywhere), [1, length, 2C]."""
    if start + length > silence.shape[1]:  # past the buffer's 600 s: tiled
        silence = silence.repeat(1, math.ceil((start + length) / silence.shape[1]), 1)
    source = silence[:, start : start + length, :]
    return torch.cat([source, torch.ones_like(source)], dim=-1)


def draw_window(
    items: list[Item],
    window: list[int],
    crop_frames: int,
    generator: torch.Generator,
    mu: float,
    sigma: float,
    cfg_dropout: float,
) -> list[Crop]:
    """One crop per item of the window, drawn in the module docstring's order."""
    crops = []
    for index in window:
        frames, channels = items[index].latents.shape
        length = min(crop_frames, frames)
        start = int(torch.randint(0, frames - length + 1, (1,), generator=generator))
        t = objective.timesteps(1, generator, mu, sigma)
        drop = torch.rand(1, generator=generator) < cfg_dropout
        noise = torch.randn(1, length, channels, generator=generator)
        crops.append(Crop(index, start, length, t, drop, noise))
    return crops


@dataclass
class Validation:
    """Held-out items with their fixed windows, levels and noise."""

    items: list[Item]
    crop_frames: int
    levels: tuple[float, ...] = VALIDATION_LEVELS
    noise: list[torch.Tensor] = field(default_factory=list)  # [L, length, C] per item

    @classmethod
    def make(cls, items: list[Item], crop_frames: int, seed: int) -> Validation:
        generator = torch.Generator().manual_seed(seed + 1)
        noise = []
        for item in items:
            frames, channels = item.latents.shape
            shape = (len(VALIDATION_LEVELS), min(crop_frames, frames), channels)
            noise.append(torch.randn(shape, generator=generator))
        return cls(items, crop_frames, VALIDATION_LEVELS, noise)

    @torch.no_grad()
    def loss(self, transformer, silence: torch.Tensor) -> float:
        """Mean crop loss over the items and levels (float64 sum of float32 crop losses)."""
        device, total, count = transformer.device, 0.0, 0
        for item, noise in zip(self.items, self.noise, strict=True):
            length = noise.shape[1]
            x0 = item.latents[None, :length].to(device)
            ctx = context(silence, 0, length).to(device)
            for i, level in enumerate(self.levels):
                t = torch.tensor([level])
                value = objective.crop_loss(
                    transformer,
                    x0,
                    noise[i : i + 1].to(device),
                    t.to(device),
                    item.conditioning,
                    ctx,
                )
                total += float(value.sum())
                count += 1
        return total / count
