"""What one Stable Audio 3 training step draws, as underfit draws it.

A batch of random crops in a shuffled pass (the order's generator, `data.ORDER`), a random
prompt per item from its tags (the prompt generator: underfit's templates, the trigger 80 % of
the time), and from the training generator, in this order: t (the run's sampler, then the
model's shift, on the crop's length or with `use_effective_length_for_schedule` on each item's
full duration), the noise, the CFG-dropout coins. The three sources are seeded from the
run's seed and saved with the run's state, so a resumed run draws exactly what it would
have. The torch and MLX trainers both draw here, so they train on the same numbers.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from tunesmith.families.stable_audio_3 import timesteps
from tunesmith.families.stable_audio_3.data import ORDER, Batch, Item, draw_batch
from tunesmith.families.stable_audio_3.prompts import training_prompts
from tunesmith.train.config import RunConfig
from tunesmith.train.order import Order
from tunesmith.train.state import from_json, to_json


@dataclass
class Draw:
    batch: Batch
    prompts: list[str]
    t: torch.Tensor  # [B] shifted levels, float64
    noise: torch.Tensor  # [B, D, L]
    drop: torch.Tensor  # [B] bool


class Draws:
    def __init__(self, items: list[Item], run: RunConfig, shift: timesteps.FullShift) -> None:
        cfg = run.train
        self.run, self.shift = run, shift
        if not items:
            raise ValueError("no training items")
        self.items = items
        self.order = Order(len(items), cfg.batch_size, cfg.seed, ORDER)  # and the crops
        self.generator = torch.Generator().manual_seed(cfg.seed)
        self.prompt_rng = random.Random(cfg.seed)

    @property
    def epoch(self) -> int:
        return self.order.epoch

    def next(self) -> Draw:
        cfg = self.run.train
        indices = self.order.next()
        batch = draw_batch(self.items, indices, cfg.latent_crop_length, self.order.generator)
        n = batch.latents.shape[0]
        prompts = training_prompts(batch, self.prompt_rng, self.run)
        t = timesteps.sample(cfg.timestep_sampler, n, self.generator)
        if cfg.use_effective_length_for_schedule:  # each item's whole duration, not the crop
            lengths = [timesteps.effective_length(self.items[i].seconds_total) for i in indices]
            t = self.shift(t, lengths)
        else:
            t = self.shift(t, cfg.latent_crop_length)
        noise = torch.randn(batch.latents.shape, generator=self.generator)
        drop = torch.rand(n, generator=self.generator, dtype=torch.float64) < cfg.cfg_dropout
        return Draw(batch, prompts, t, noise, drop)

    def state(self) -> tuple[dict[str, torch.Tensor], dict]:
        order_tensors, order_document = self.order.state("sampler")
        tensors = {"rng.train": self.generator.get_state(), **order_tensors}
        document = {**order_document, "prompt_rng": to_json(self.prompt_rng.getstate())}
        return tensors, document

    def load_state(self, tensors: dict[str, torch.Tensor], document: dict) -> None:
        self.generator.set_state(tensors["rng.train"])
        self.order.load_state(tensors, document, "sampler")
        self.prompt_rng.setstate(from_json(document["prompt_rng"]))
