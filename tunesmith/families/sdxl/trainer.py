"""Training one SDXL run: `SdxlLora` (objective.py) as a `Trainer` of the one loop.

Per step: the next pictures of a shuffled pass over the training pictures (a new order each
epoch, as kohya's and diffusers' data loaders draw: `ORDER`, a policy of
`tunesmith.train.order`), a level `t`, the posterior draw ε₁ and the noise ε from the
training generator, backward, optional clipping, AdamW at a constant lr. The validation loss
is measured on the held-out pictures (the kvad trainer's fixed set,
`tunesmith.train.holdout.LAST_OF_SORTED`) at levels 125/375/625/875 with fixed noise; the
demos are drawn into `samples/<demo>-<step>.png` by the renders stage's own `render_demo`, so
row 0 is the base model's picture. The adapter with the lowest validation loss is
`NAME.safetensors` (and its kohya twin), the last step's `NAME.last.safetensors` where it
differs (`tunesmith.train.trainer.PeftNames`); the cadence is the loop's
(`tunesmith.train.loop`).

Three random sources, all seeded from the run's seed and saved with the state: the order
generator (the passes), the training generator (t, ε₁, ε) and the adapters' initial A (drawn
once, then part of the state). Validation and samples draw from none of them. Captions are
used as written. With `train.gradient_checkpointing = true` the UNet recomputes its blocks in
the backward pass (`SdxlLora`); anything else trains without (the fit resolved "auto").

On several processes (`train.devices`, `tunesmith.train.distributed`) every rank draws the
global batch and its t, ε₁ and ε as above, keeps pictures `rank::world`, and DDP over the
UNet's adapter sums the gradients; rank 0 alone validates and renders.
"""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path

import torch

from tunesmith.families.sdxl import files
from tunesmith.families.sdxl.model import load_pipeline
from tunesmith.families.sdxl.objective import Picture, SdxlLora, ValidationSet, pictures_from_frame
from tunesmith.families.sdxl.sample import DTYPES, render_demo
from tunesmith.media.writers import write_png
from tunesmith.train import distributed
from tunesmith.train.holdout import LAST_OF_SORTED, split_holdout
from tunesmith.train.order import WRAP, Order, OrderPolicy
from tunesmith.train.state import load_trainer_state, trainer_state
from tunesmith.train.trainer import PeftNames, StepReport

ORDER = OrderPolicy(end=WRAP)  # kohya's and diffusers' loaders: a step fills from the next pass


def train_step(
    lora: SdxlLora,
    optimizer: torch.optim.Optimizer,
    pictures: list[Picture],
    generator: torch.Generator,
    grad_clip: float = 0.0,
) -> tuple[float, torch.Tensor]:
    """One step: t, ε₁ and ε drawn, backward (checking every B at the first), optional
    clipping, AdamW. Returns (loss, t); a loss that is not finite leaves the adapter as it was."""
    t, eps1, noise = lora.draw(pictures, generator)
    optimizer.zero_grad(set_to_none=True)
    loss = lora.backward(pictures, t, eps1, noise)
    if math.isfinite(loss):
        if grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(lora.parameters(), grad_clip)
        optimizer.step()
    return loss, t


def shared_train_step(
    replica,
    lora: SdxlLora,
    optimizer: torch.optim.Optimizer,
    pictures: list[Picture],
    generator: torch.Generator,
    grad_clip: float = 0.0,
) -> tuple[float, torch.Tensor]:
    """`train_step` on one rank of several: the global batch's draws, this rank's share of
    them through `replica` (DDP over the adapter, forward = `squared_error`), the gradients
    summed over the ranks in backward. Returns the global batch's (loss, t)."""
    rank, world = distributed.rank_and_world()
    t, eps1, noise = lora.draw(pictures, generator)  # the one-process draws, on every rank
    mine = [distributed.share(x, rank, world) for x in (pictures, t, eps1, noise)]
    optimizer.zero_grad(set_to_none=True)
    local = replica(*mine)  # Σ squared error over this rank's elements
    count = eps1.numel()
    if lora.half:  # the sum into backward, the fp32 gradients divided back (as `backward`)
        (local * world).backward()
        for p in lora.parameters():
            if p.grad is not None:
                p.grad.div_(count)
    else:
        distributed.global_share(local, count, world).backward()
    loss = distributed.global_sum(local) / count
    if not lora._checked:
        lora.gradient_note = lora.check_gradients()
        lora._checked = True
    if math.isfinite(loss):  # the same on every rank: the gradients and loss are global
        if grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(lora.parameters(), grad_clip)
        optimizer.step()
    return loss, t


class SdxlTrainer:
    """One SDXL run on PyTorch: `SdxlLora` on the base model's UNet, AdamW at a constant lr."""

    data_parallel = True  # trains on several processes (tunesmith.train.distributed)

    def __init__(self, run, base_model: Path, encoded, run_dir: Path, placement, metadata) -> None:
        cfg = run.train
        self.run, self.metadata, self.size = run, metadata, cfg.size
        pictures = pictures_from_frame(encoded)
        split = split_holdout(pictures, cfg.holdout, lambda p: p.name, LAST_OF_SORTED, "picture")
        self.pipe = load_pipeline(base_model, DTYPES[placement.dtype], placement.device)
        self.lora = SdxlLora(
            self.pipe.unet,
            self.pipe.scheduler,
            self.pipe.vae.config.scaling_factor,
            run.adapter.rank,
            run.adapter.scale_alpha,
            cfg.seed,
            checkpointing=cfg.gradient_checkpointing is True,  # "auto" was resolved before
        )
        self.train = split.train
        self.validation = ValidationSet.make(split.validation, seed=cfg.seed + 1)
        self.params = self.lora.parameters()
        self.optimizer = torch.optim.AdamW(self.params, lr=cfg.lr)  # torch's defaults, as kvad
        self.validation_note = split.note("picture")
        # The order's generator is seeded apart from the training generator.
        self.order = Order(len(split.train), cfg.batch_size, cfg.seed + 2, ORDER)
        self.generator = torch.Generator().manual_seed(cfg.seed)
        self.device = placement.device
        self.names = PeftNames(run_dir, run.name)
        self.identity = {
            "base_model": metadata.get("tunesmith.base_model_fingerprint", str(base_model)),
            "adapter_type": "lora",
            "rank": self.lora.rank,
            "alpha": self.lora.alpha,
            "targets": list(self.lora.named_factors()),
        }
        self.replica = None
        if distributed.rank_and_world()[1] > 1:
            self.replica = distributed.replicate({"unet": self.pipe.unet}, self.lora.squared_error)

    def step(self) -> StepReport:
        pictures = [self.train[i] for i in self.order.next()]
        step = train_step if self.replica is None else partial(shared_train_step, self.replica)
        loss, t = step(
            self.lora, self.optimizer, pictures, self.generator, self.run.train.grad_clip
        )
        note, self.lora.gradient_note = self.lora.gradient_note, ""
        return StepReport(
            loss, t.float().mean().item(), self.order.epoch, {"lr": self.run.train.lr}, note=note
        )

    def validation_loss(self) -> float:
        return self.lora.validation_loss(self.validation)

    def render_samples(self, folder: Path, step: int) -> None:
        for index, demo in enumerate(self.run.demos):
            folder.mkdir(parents=True, exist_ok=True)
            write_png(render_demo(self.pipe, demo, self.size), folder / f"{index}-{step}.png")

    def write_adapter(self, path: Path, step: int, epoch: int, loss: float | None) -> Path:
        meta = {**self.metadata, "tunesmith.step": str(step)}
        if loss is not None:
            meta["validation_loss"] = f"{loss:.8g}"
        files.save_kohya(self.lora, files.kohya_path(path), meta, self.run.name, step, self.size)
        return files.save_peft(self.lora, path, meta)

    def adapter_files(self, path: Path) -> list[Path]:
        return [path, files.kohya_path(path)]

    def remove_adapter(self, path: Path) -> None:
        for stale in self.adapter_files(path):
            stale.unlink(missing_ok=True)

    def state(self) -> tuple[dict[str, torch.Tensor], dict]:
        tensors, document = trainer_state(self.params, self.optimizer, self.order, "sampler")
        return {**tensors, "rng.train": self.generator.get_state()}, document

    def load_state(self, tensors: dict[str, torch.Tensor], document: dict) -> None:
        load_trainer_state(self.params, self.optimizer, self.order, "sampler", tensors, document)
        self.generator.set_state(tensors["rng.train"])
