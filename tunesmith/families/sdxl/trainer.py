"""Training one SDXL run: `SdxlLora` (objective.py) as a `Trainer` of the one loop.

Per step, `train.gradient_accumulation_steps` micro-batches (one by default), each: the next
pictures of a shuffled pass over the training pictures (a new order each epoch, as kohya's and
diffusers' data loaders draw: `ORDER`, a policy of `tunesmith.train.order`), a level `t`, the
posterior draw ε₁ and the noise ε from the training generator (with kohya's noise options
after them, where the run has any), backward of its share of the step's loss; then optional
clipping, one optimizer update (AdamW by default; kohya's AdamW8bit, Prodigy and Adafactor by
`train.optimizer`), the lr schedule's step (`train.lr_scheduler`, diffusers' get_scheduler per
update; constant by default) and, with `train.ema_decay`, the EMA's update (`options.py`).
A step's loss is the mean of its micro-batches' losses; its lr the one the update used. The
validation loss is measured on the held-out pictures (the kvad trainer's fixed set,
`tunesmith.train.holdout.LAST_OF_SORTED`) at levels 125/375/625/875 with fixed noise; the
demos are drawn into `samples/<demo>-<step>.png` by the renders stage's own `render_demo`, so
row 0 is the base model's picture. The adapter with the lowest validation loss is
`NAME.safetensors` (and its kohya twin), the last step's `NAME.last.safetensors` where it
differs (`tunesmith.train.trainer.PeftNames`); the cadence is the loop's
(`tunesmith.train.loop`).

With an EMA, the EMA of the adapter is what is validated, rendered and written (the best
adapter is the EMA with the lowest validation loss), as SimpleTuner does; training goes on from
the adapter's own values, and the state keeps both.

kohya's data options (data_options.py; the `encoded` stage made what they need):

- `buckets = true`: the order is `buckets.BucketOrder`, every micro-batch the pictures of one
  bucket (the last of each bucket shorter), in kohya's order of (seed, epoch); each picture's
  time_ids have its bucket as the target size. Its state is (epoch, position).
- `flip_aug`, caption variants (`shuffle_caption`, `caption_tag_dropout_rate`) and
  `caption_dropout_rate`: per picture and step, drawn from the training generator after t, ε₁
  and ε (`objective.Choices`): the flipped posterior with probability ½, one of the caption's
  variants, or the empty caption.
- `masked_loss`: each picture's latent mask weighs its loss (objective.py).
- `max_token_length` 150 or 225: every caption of the run, its variants and the empty one were
  encoded at that length (152 or 227 positions), so every batch shares one length: nothing is
  padded or grouped (a frame that mixes lengths is refused at the start, in one line).

Validation always uses each held-out picture as written: unflipped, its caption as written,
at its own bucket, the plain MSE (unmasked).

The adapter is the run's `[runs.adapter] type` (`adapters.py`: lora by default, dora, locon,
lokr, loha; `conv_dim` for the LyCORIS types' conv layers). With `train.train_text_encoder`
both text encoders carry it too and encode each step's captions as they train
(`objective.TextEncoders`), their factors at `train.text_encoder_lr` (train.lr where unset: a
second parameter group of the one optimizer, as kohya's `prepare_optimizer_params`). The files:
`NAME.safetensors` (PEFT) and `NAME.kohya.safetensors` for lora, dora and locon; one
kohya-layout `NAME.safetensors` for lokr and loha (`files.py`).

Three random sources, all seeded from the run's seed and saved with the state: the order
generator (the passes; with buckets, Python's `random` seeded seed + epoch, as kohya's), the
training generator (t, ε₁, ε, the flips' and captions' draws and the noise options') and the
adapters' initial A (drawn once, then part of the state). Validation and samples draw from
none of them. The state also keeps the optimizer's, the schedule's and the EMA's. With
`train.gradient_checkpointing = true` the UNet recomputes its blocks in the backward pass
(`SdxlLora`); anything else trains without (the fit resolved "auto").

On several processes (`train.devices`, `tunesmith.train.distributed`) every rank draws the
global batch and its draws as above, keeps pictures `rank::world` (a rank a short bucket batch
leaves without one takes the first at weight 0), and DDP over the UNet's adapter sums the
gradients (at a step's last micro-batch; the others accumulate under `no_sync`), and over the
text encoders' where they train; rank 0 alone validates and renders.
"""

from __future__ import annotations

import contextlib
import math
from pathlib import Path

import torch

from tunesmith.families.sdxl import data_options, files
from tunesmith.families.sdxl.adapters import AdapterError, AdapterSpec
from tunesmith.families.sdxl.buckets import BucketOrder
from tunesmith.families.sdxl.model import load_pipeline
from tunesmith.families.sdxl.objective import (
    Choices,
    Picture,
    SdxlLora,
    TextEncoders,
    ValidationSet,
    pictures_from_frame,
)
from tunesmith.families.sdxl.options import (
    AdapterEma,
    LossOptions,
    OptionError,
    build_optimizer,
    build_scheduler,
    optimizer_note,
)
from tunesmith.families.sdxl.sample import DTYPES, render_demo
from tunesmith.media.writers import write_png
from tunesmith.train import distributed
from tunesmith.train.config import ConfigError
from tunesmith.train.holdout import LAST_OF_SORTED, split_holdout
from tunesmith.train.order import WRAP, Order, OrderPolicy
from tunesmith.train.schedules import lr_scheduler
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
    """One step of one micro-batch: t, ε₁ and ε drawn, backward (checking every B at the
    first), optional clipping, the optimizer's update. Returns (loss, t); a loss that is not
    finite leaves the adapter as it was."""
    t, eps1, noise = lora.draw(pictures, generator)
    optimizer.zero_grad(set_to_none=True)
    loss = lora.backward(pictures, t, eps1, noise)
    if math.isfinite(loss):
        if grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(lora.parameters(), grad_clip)
        optimizer.step()
    return loss, t


def shared_backward(
    replica,
    lora: SdxlLora,
    pictures: list[Picture],
    draws: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    share: float,
    reference: int,
) -> float:
    """`SdxlLora.accumulate` on one rank of several: the global micro-batch's draws, this
    rank's part of them through `replica` (DDP over the adapter, forward = `training_error`),
    the gradients summed over the ranks in backward (where DDP syncs). Returns the global
    micro-batch's loss."""
    rank, world = distributed.rank_and_world()
    t, eps1, noise = draws  # the one-process draws, on every rank
    mine = [distributed.share(x, rank, world) for x in (pictures, t, eps1, noise)]
    none = not mine[0]  # a short batch (a bucket's last) leaves this rank no picture:
    if none:  # it takes the first at weight 0, so it still joins the gradients' sum
        mine = [x[:1] for x in (pictures, t, eps1, noise)]
    local = replica(*mine)  # Σ of the training loss over this rank's elements
    if none:
        local = local * 0.0
    count = eps1.numel()
    if lora.half:  # the sum into backward, the fp32 gradients divided back (`finish`)
        scale = share * reference / count
        (local * world if scale == 1 else local * (world * scale)).backward()
    else:
        part = distributed.global_share(local, count, world)
        (part if share == 1 else part * share).backward()
    return distributed.global_sum(local) / count


class SdxlTrainer:
    """One SDXL run on PyTorch: `SdxlLora` on the base model's UNet, its optimizer, lr
    schedule and EMA as the run's settings say (AdamW at a constant lr by default)."""

    data_parallel = True  # trains on several processes (tunesmith.train.distributed)

    def __init__(self, run, base_model: Path, encoded, run_dir: Path, placement, metadata) -> None:
        cfg = run.train
        self.run, self.metadata, self.size = run, metadata, cfg.size
        option = data_options.options(cfg)
        self.text_encoders = bool(getattr(cfg, "train_text_encoder", False))
        if self.text_encoders and "caption" not in encoded.columns:
            raise ConfigError(
                f"run {run.name}: train.train_text_encoder needs the captions' texts, which "
                "this encoded table lacks: build the encoded stage again"
            )
        seed = cfg.seed if self.text_encoders else None  # the variants' texts: the run's draws
        try:
            pictures = pictures_from_frame(encoded, option, seed)
        except ValueError as exc:
            raise ConfigError(f"run {run.name}: {exc}") from None
        lengths = sorted({p.prompt_embeds.shape[0] for p in pictures})
        if len(lengths) > 1:
            raise ConfigError(
                f"run {run.name}: its captions are encoded at {' and '.join(map(str, lengths))} "
                "positions, where a batch needs one length (a run's captions are all encoded "
                "at its train.max_token_length): build the encoded stage again"
            )
        split = split_holdout(pictures, cfg.holdout, lambda p: p.name, LAST_OF_SORTED, "picture")
        self.pipe = load_pipeline(base_model, DTYPES[placement.dtype], placement.device)
        self.spec = AdapterSpec.of(run.adapter)
        text = (
            TextEncoders(self.pipe, data_options.tokens_of(option)) if self.text_encoders else None
        )
        try:
            self.lora = SdxlLora(
                self.pipe.unet,
                self.pipe.scheduler,
                self.pipe.vae.config.scaling_factor,
                run.adapter.rank,
                run.adapter.scale_alpha,
                cfg.seed,
                checkpointing=cfg.gradient_checkpointing is True,  # "auto" was resolved before
                options=LossOptions.of(cfg),
                spec=self.spec,
                text=text,
            )
        except AdapterError as exc:
            raise ConfigError(f"run {run.name}: {exc}") from None
        self.train = split.train
        self.validation = ValidationSet.make(split.validation, seed=cfg.seed + 1)
        self.params = self.lora.parameters()
        self.text_encoder_lr = None
        groups = self.params
        if self.text_encoders:  # kohya's prepare_optimizer_params: the encoders' own lr
            self.text_encoder_lr = cfg.text_encoder_lr or cfg.lr
            text_params = self.lora.text_parameters()
            theirs = {id(p) for p in text_params}
            groups = [
                {"params": [p for p in self.params if id(p) not in theirs]},
                {"params": text_params, "lr": self.text_encoder_lr},
            ]
        try:
            self.optimizer = build_optimizer(cfg.optimizer, groups, cfg.lr)
            self.scheduler = build_scheduler(cfg, self.optimizer)  # None: constant
        except OptionError as exc:
            raise ConfigError(f"run {run.name}: {exc}") from None
        self.ema = AdapterEma(self.params, cfg.ema_decay) if cfg.ema_decay else None
        self.accumulation = cfg.gradient_accumulation_steps
        self.updates = 0  # optimizer updates made: the schedule's step on a resume
        self.start_note = optimizer_note(cfg.optimizer, cfg.lr)
        self.validation_note = split.note("picture")
        # The order's generator is seeded apart from the training generator.
        self.order: Order | BucketOrder
        if data_options.options(cfg).buckets:  # batches of one bucket: kohya's seed + epoch
            self.order = BucketOrder([p.bucket for p in self.train], cfg.batch_size, cfg.seed)
        else:
            self.order = Order(len(split.train), cfg.batch_size, cfg.seed + 2, ORDER)
        self.choices = Choices.of(cfg)  # flips and captions per step; None: neither
        self.generator = torch.Generator().manual_seed(cfg.seed)
        self.device = placement.device
        self.names = PeftNames(run_dir, run.name)
        self.identity = {
            "base_model": metadata.get("tunesmith.base_model_fingerprint", str(base_model)),
            "adapter_type": self.spec.type,
            "rank": self.lora.rank,
            "alpha": self.lora.alpha,
            "targets": self.lora.targets(),
        }
        self.replica = None
        if distributed.rank_and_world()[1] > 1:
            models = {"unet": self.pipe.unet}
            if text is not None:
                models |= text.encoders
            self.replica = distributed.replicate(models, self.lora.training_error)

    def step(self) -> StepReport:
        """One optimizer update over `accumulation` micro-batches (module docstring)."""
        cfg, lora, n = self.run.train, self.lora, self.accumulation
        lr = self.optimizer.param_groups[0]["lr"] if self.scheduler is not None else cfg.lr
        self.optimizer.zero_grad(set_to_none=True)
        losses, levels, reference = [], [], 0
        for index in range(n):
            items = [self.train[i] for i in self.order.next()]
            pictures, draws = lora.draw_step(items, self.generator, self.choices)
            reference = reference or draws[1].numel()  # the half-precision gradients' divisor
            if self.replica is None:
                loss = lora.accumulate(pictures, *draws, 1.0 / n, reference)
            else:
                last = index == n - 1  # DDP sums the accumulated gradients at the last one
                with contextlib.nullcontext() if last else self.replica.no_sync():
                    loss = shared_backward(self.replica, lora, pictures, draws, 1.0 / n, reference)
            losses.append(loss)
            levels.append(draws[0])
            if not math.isfinite(loss):  # the same on every rank: the losses are global
                break
        lora.finish(reference)
        loss = sum(losses) / len(losses)
        if math.isfinite(loss):
            if cfg.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(self.params, cfg.grad_clip)
            self.optimizer.step()
            if self.scheduler is not None:
                self.scheduler.step()
            if self.ema is not None:
                self.ema.step()
            self.updates += 1
        note, lora.gradient_note = lora.gradient_note, ""
        t = torch.cat(levels).float().mean().item()
        return StepReport(loss, t, self.order.epoch, {"lr": lr}, note=note)

    def averaged(self):
        """The adapter as it is measured, rendered and written: its EMA where the run keeps
        one, else itself."""
        return self.ema.applied() if self.ema is not None else contextlib.nullcontext()

    def validation_loss(self) -> float:
        with self.averaged():  # the plain MSE at fixed levels, whatever the run trains with
            return self.lora.validation_loss(self.validation)

    def render_samples(self, folder: Path, step: int) -> None:
        with self.averaged():
            for index, demo in enumerate(self.run.demos):
                folder.mkdir(parents=True, exist_ok=True)
                picture = render_demo(self.pipe, demo, self.size)
                write_png(picture, folder / f"{index}-{step}.png")

    def write_adapter(self, path: Path, step: int, epoch: int, loss: float | None) -> Path:
        meta = {**self.metadata, "tunesmith.step": str(step)}
        if loss is not None:
            meta["validation_loss"] = f"{loss:.8g}"
        training = files.training_metadata(self.run.train)
        settings = (self.run.name, step, self.size, self.text_encoder_lr, training)
        with self.averaged():
            if not files.has_peft_file(self.spec.type):  # lokr, loha: the kohya layout alone
                return files.save_kohya(self.lora, path, meta, *settings)
            files.save_kohya(self.lora, files.kohya_path(path), meta, *settings)
            return files.save_peft(self.lora, path, meta)

    def adapter_files(self, path: Path) -> list[Path]:
        if not files.has_peft_file(self.spec.type):
            return [path]
        return [path, files.kohya_path(path)]

    def remove_adapter(self, path: Path) -> None:
        for stale in self.adapter_files(path):
            stale.unlink(missing_ok=True)

    def state(self) -> tuple[dict[str, torch.Tensor], dict]:
        # A run at the default settings keeps the state it kept before: no counter, no EMA.
        counters = {"updates": self.updates} if self.scheduler is not None else {}
        tensors, document = trainer_state(
            self.params, self.optimizer, self.order, "sampler", **counters
        )
        tensors = {**tensors, "rng.train": self.generator.get_state()}
        if self.ema is not None:
            ema_tensors, ema_document = self.ema.state()
            tensors, document = {**tensors, **ema_tensors}, {**document, **ema_document}
        return tensors, document

    def load_state(self, tensors: dict[str, torch.Tensor], document: dict) -> None:
        load_trainer_state(self.params, self.optimizer, self.order, "sampler", tensors, document)
        self.generator.set_state(tensors["rng.train"])
        if self.scheduler is not None:  # the schedule at the saved update, from the optimizer's
            self.updates = int(document["updates"])  # groups (their initial_lr)
            self.scheduler = lr_scheduler(
                self.optimizer, self.scheduler.lr_lambdas[0], self.updates
            )
        if self.ema is not None:
            self.ema.load_state(tensors, document)
