"""The validation loss: held-out items at fixed noise levels with the same noise every time.

t ∈ {0.125, 0.375, 0.625, 0.875} (four levels spread over the noise range, as kvad's SDXL
trainer uses 125/375/625/875 of 1000). Each held-out item is cropped from its first frame, and
its noise for each level is drawn once from the run's seed, so two measurements differ only by
what the adapter learned. No CFG dropout; prompts are the items' full prompts with the trigger,
under the run's prompt options (`prompts.validation_prompt`)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from tunesmith.families.stable_audio_3.data import Batch, Item, collate, crop
from tunesmith.families.stable_audio_3.prompts import PromptOptions, validation_prompt

LEVELS = (0.125, 0.375, 0.625, 0.875)
# Per-sample losses: (batch, prompts, t [B], noise [B, D, L], drop [B] bool) → [B].
LossFn = Callable[[Batch, list[str], torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


class Validation:
    def __init__(
        self,
        items: list[Item],
        crop_length: int,
        seed: int,
        trigger: str = "",
        options: PromptOptions | None = None,
    ) -> None:
        if not items:
            raise ValueError("no validation items")
        self.prompts = [
            validation_prompt(list(item.pieces), item.path, options, trigger) for item in items
        ]
        crops = [crop(item, crop_length, 0) for item in items]
        self.batch = collate(items, crops)
        generator = torch.Generator().manual_seed(seed + 1)  # not the training generator
        shape = (len(LEVELS), *self.batch.latents.shape)
        self.noise = torch.randn(shape, generator=generator)

    @torch.no_grad()
    def loss(self, loss_fn: LossFn) -> float:
        """Mean loss over items × levels."""
        n = self.batch.latents.shape[0]
        drop = torch.zeros(n, dtype=torch.bool)
        total = 0.0
        for level, noise in zip(LEVELS, self.noise, strict=True):
            t = torch.full((n,), level, dtype=torch.float64)
            total += loss_fn(self.batch, self.prompts, t, noise, drop).double().mean().item()
        return total / len(LEVELS)
