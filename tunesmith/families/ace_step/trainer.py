"""Training one ACE-Step 1.5 run: LoRA or LoKr on the DiT, as a trainer of the one loop.

Per step (one optimizer update): the next window of the epoch order (`data.py`), a crop per
item with its level, dropout and noise from the training generator, the crops' weights over
the whole window (`objective.weights`), forward and backward one crop at a time with its loss
scaled by w_i / k (k crops in the window, so the gradients add up to the window's mean),
the global gradient norm clipped at `grad_clip` (1.0), the optimizer (Muon beside AdamW, or
AdamW: `tunesmith.train.optimizers`) at the warmup-cosine schedule's lr (lr(0) = 0), then the
schedule moves on. The reported loss is the window's weighted mean; at the end of an epoch its
mean over the epoch joins the 5-epoch moving average the target loss is tested on.

With `train.gradient_checkpointing = true` the DiT recomputes each of its blocks in the
backward pass (diffusers' own `enable_gradient_checkpointing`, `torch.utils.checkpoint` without
reentrancy, around every `AceStepTransformerBlock`): the activations kept through a step are
the blocks' inputs, and the gradients are the same.

Random sources, each seeded from the run's seed and saved with the state: the training
generator (crops, levels, dropout, noise), the order generator (the passes) and the adapters'
initial factors (drawn once under the seed, then part of the state). Validation and samples
draw from none of them.

On several processes (`train.devices`, `tunesmith.train.distributed`) every rank draws the
whole window as above and runs crops `rank::world` of it, each scaled by w_i / k × world;
DDP over the DiT's adapter sums the gradients over the ranks at each rank's last crop (the
others under `no_sync`), and the window's loss is the sum of the ranks' parts. A rank with no
crop of a short window runs the window's first crop at weight 0, so every rank joins the
all-reduce.
"""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path

import torch

from tunesmith.adapters import torch_lokr, torch_lora
from tunesmith.families.ace_step import data, files, objective
from tunesmith.families.ace_step.config import lokr_factor_problems
from tunesmith.families.ace_step.model import SAMPLE_RATE, TextEncoding, conditioning, load_pipeline
from tunesmith.families.ace_step.sample import DTYPES, render_demo
from tunesmith.media.writers import wav_bytes
from tunesmith.store.atomic import atomic_write_bytes
from tunesmith.train import distributed
from tunesmith.train.config import ConfigError
from tunesmith.train.holdout import split_holdout
from tunesmith.train.optimizers import OptimizerError, OptimizerSettings, build_optimizer
from tunesmith.train.order import Order
from tunesmith.train.schedules import horizon_steps, lr_scheduler, warmup_cosine
from tunesmith.train.state import load_trainer_state, trainer_state
from tunesmith.train.trainer import PeftNames, StepReport

TARGET_WINDOW = 5  # epochs in the moving average the target loss is tested on (HOT-Step's ma5)


def target_modules(transformer, attention: str, target_mlp: bool) -> list[str]:
    """The DiT's attention (self, cross or both) and MLP projections, in module order."""
    kinds = ("self_attn", "cross_attn") if attention == "both" else (f"{attention}_attn",)
    wanted = tuple(f".{k}." for k in kinds) + ((".mlp.",) if target_mlp else ())
    return [
        name
        for name, module in transformer.named_modules()
        if isinstance(module, torch.nn.Linear)
        and name.startswith("layers.")
        and any(w in name for w in wanted)
    ]


def attach(transformer, adapter, seed: int) -> list[str]:
    """Wrap the DiT's targets (`target_modules`) in the run's LoRA or LoKr, the initial factors
    drawn under `seed` (the same every time); returns the targets. A LoKr factor that does not
    split a target for both PEFT and LyCORIS is a ConfigError naming each such layer."""
    targets = target_modules(transformer, adapter.attention, adapter.target_mlp)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if adapter.type == "lokr":
            layers = {
                n: (m.out_features, m.in_features)
                for n, m in transformer.named_modules()
                if n in targets
            }
            found = lokr_factor_problems(layers, adapter.factor)
            if found:
                raise ConfigError("; ".join(found))
            torch_lokr.attach(
                transformer, targets, adapter.rank, adapter.scale_alpha, adapter.factor
            )
        else:
            torch_lora.attach(transformer, targets, adapter.rank, adapter.scale_alpha, "lora")
    return targets


class AceStepTrainer:
    """One ACE-Step run on PyTorch (module docstring)."""

    data_parallel = True

    def __init__(self, run, base_model: Path, encoded, run_dir: Path, placement, metadata) -> None:
        cfg = run.train
        self.run, self.metadata, self.device = run, dict(metadata), placement.device
        self.pipe = load_pipeline(base_model, DTYPES[placement.dtype], placement.device)
        self.transformer = self.pipe.transformer
        items = self._items(encoded)
        split = split_holdout(items, cfg.holdout, what="song")
        self.train_items, self.validation_note = split.train, split.note("song")
        self.validation = data.Validation.make(split.validation, cfg.crop_frames, cfg.seed)
        self.silence = self.pipe.condition_encoder.silence_latent.detach().float().cpu()
        self.null = self.pipe.condition_encoder.null_condition_emb.detach()
        self.mu, self.sigma = _timestep_law(base_model, cfg)
        self.targets = attach(self.transformer, run.adapter, cfg.seed)
        if cfg.gradient_checkpointing is True:  # "auto" is resolved before the trainer is built
            self.transformer.enable_gradient_checkpointing()
        self.named = self._named_parameters()
        self.params = [p for _, p in self.named]
        self.optimizer, self.split = self._optimizer(cfg)
        seed = cfg.seed + data.ORDER_SEED
        self.order = Order(len(self.train_items), cfg.accumulation, seed, data.ORDER)
        self.horizon = horizon_steps(cfg.epochs, len(self.train_items), cfg.accumulation)
        self.schedule = warmup_cosine(max(2, self.horizon), cfg.warmup, cfg.lr_floor)
        self.scheduler = lr_scheduler(self.optimizer, self.schedule, 0)
        self.steps = cfg.steps or self.horizon
        self.generator = torch.Generator().manual_seed(cfg.seed)
        self.updates, self.epoch_losses, self.epoch_sum = 0, [], [0.0, 0]
        self.names = PeftNames(run_dir, run.name, files.WEIGHTS)
        self.start_note = (
            f"{self.split.summary()}; {len(self.train_items)} training songs, "
            f"{self.order.steps_per_epoch()} steps an epoch, horizon {cfg.epochs} epochs = "
            f"{self.horizon} steps, training {self.steps}"
        )
        self.identity = {
            "base_model": metadata.get("tunesmith.base_model_fingerprint", str(base_model)),
            "adapter_type": run.adapter.type,
            "rank": run.adapter.rank,
            "alpha": run.adapter.scale_alpha,
            "targets": self.targets,
        }
        self.replica = None
        if distributed.rank_and_world()[1] > 1:
            self.replica = distributed.replicate({"dit": self.transformer}, self._crop_loss)

    # --- setup ---------------------------------------------------------------------------------

    def _items(self, encoded) -> list[data.Item]:
        """The run's songs with their conditioning (the frozen condition encoder, once)."""
        items, rows = [], encoded.sort_values("path").to_dict("records")
        # The trigger the captions were written with (one per run): for the files' metadata.
        self.trigger = (
            (str(rows[0]["trigger"] or ""), str(rows[0]["tag_position"]))
            if rows
            else ("", "prepend")
        )
        for row in rows:
            latents, caption, lyrics = _load(row)
            with torch.no_grad():
                states, _ = conditioning(self.pipe, _text(caption), _text(lyrics))
            items.append(data.Item(row["path"], latents, states.detach()))
        if not items:
            raise ConfigError("no encoded songs to train on")
        return items

    def _named_parameters(self) -> list[tuple[str, torch.nn.Parameter]]:
        if self.run.adapter.type == "lokr":
            return torch_lokr.named_adapter_parameters(self.transformer)
        named = []
        for name, layer in torch_lora.adapter_layers(self.transformer).items():
            named += [
                (f"{name}.lora_A", layer.lora_A[torch_lora.PEFT_ADAPTER].weight),
                (f"{name}.lora_B", layer.lora_B[torch_lora.PEFT_ADAPTER].weight),
            ]
        return named

    def _optimizer(self, cfg):
        settings = OptimizerSettings(
            name=cfg.optimizer, muon_min_dim=cfg.muon_min_dim, muon_lr_scale=cfg.muon_lr_scale
        )
        try:
            return build_optimizer(self.named, cfg.lr, settings)
        except OptimizerError as exc:
            raise ConfigError(str(exc)) from None

    # --- the step ------------------------------------------------------------------------------

    def step(self) -> StepReport:
        cfg = self.run.train
        window, ends_epoch = self.order.next(), self.order.ends_pass
        epoch = self.order.epoch
        crops = data.draw_window(
            self.train_items,
            window,
            cfg.crop_frames,
            self.generator,
            self.mu,
            self.sigma,
            cfg.cfg_dropout,
        )
        t = torch.cat([c.t for c in crops])
        w = objective.weights(t, cfg.loss_weighting, cfg.snr_gamma, cfg.t_bias)
        lr = self._lr()
        self.optimizer.zero_grad(set_to_none=True)
        if self.replica is not None:
            return self._shared_step(crops, w, t, epoch, ends_epoch, lr)
        total = raw = 0.0
        for crop, weight in zip(crops, w.tolist(), strict=True):
            loss = self._crop_loss(crop)
            share = weight / len(crops)
            value = float(loss.detach())  # one read (on CUDA one wait) serves the check and the sum
            if not math.isfinite(value):
                self.optimizer.zero_grad(set_to_none=True)
                return StepReport(value, float(t.mean()), epoch)
            (loss * share).backward()
            total, raw = total + share * value, raw + value / len(crops)
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self.params, cfg.grad_clip))
        self.optimizer.step()
        self.scheduler.step()
        self.updates += 1
        fields = {"lr": lr, "grad_norm": grad_norm, "raw_loss": raw}
        stop = self._epoch_end(total, ends_epoch, fields)
        return StepReport(total, float(t.mean()), epoch, fields, stop)

    def _shared_step(self, crops, w, t, epoch: int, ends_epoch: bool, lr: float) -> StepReport:
        """`step` on one rank of several: this rank's crops of the window through DDP."""
        cfg, (rank, world) = self.run.train, distributed.rank_and_world()
        k, weights = len(crops), w.tolist()
        # This rank's crops, each at world / k (a short window: crop 0 at 0 joins the sum).
        mine, scales = distributed.weighted_share(k, rank, world)
        parts = torch.zeros(2, dtype=torch.float64)  # Σ w_i/k·loss_i and Σ loss_i/k, here
        for n, (index, scale) in enumerate(zip(mine, scales, strict=True)):
            last = n == len(mine) - 1
            with contextlib.nullcontext() if last else self.replica.no_sync():
                loss = self.replica(crops[index])
                # DDP divides the summed gradients by the world size: scale is w_i/k × world
                (loss * (weights[index] * scale)).backward()
            value = float(loss.detach()) * (scale > 0)
            parts += torch.tensor([weights[index] / k * value, value / k], dtype=torch.float64)
        parts = parts.to(self.device if str(self.device).startswith("cuda") else "cpu")
        torch.distributed.all_reduce(parts)
        total, raw = float(parts[0]), float(parts[1])
        if not math.isfinite(total):  # the same on every rank: nothing is updated
            self.optimizer.zero_grad(set_to_none=True)
            return StepReport(total, float(t.mean()), epoch)
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self.params, cfg.grad_clip))
        self.optimizer.step()
        self.scheduler.step()
        self.updates += 1
        fields = {"lr": lr, "grad_norm": grad_norm, "raw_loss": raw}
        stop = self._epoch_end(total, ends_epoch, fields)
        return StepReport(total, float(t.mean()), epoch, fields, stop)

    def _crop_loss(self, crop: data.Crop) -> torch.Tensor:
        # The placement's device, not the model's `.device`, which walks every module per call.
        item, device = self.train_items[crop.item], self.device
        x0 = item.latents[None, crop.start : crop.start + crop.length].to(device)
        conditioning = objective.with_dropout(item.conditioning, self.null, crop.drop)
        ctx = data.context(self.silence, crop.start, crop.length).to(device)
        return objective.crop_loss(
            self.transformer, x0, crop.noise.to(device), crop.t.to(device), conditioning, ctx
        )[0]

    def _lr(self) -> float:
        return schedule_lr(self.optimizer)

    def _epoch_end(self, loss: float, ends_epoch: bool, fields: dict) -> str:
        return epoch_end(self, loss, ends_epoch, fields)

    # --- validation, samples, files ------------------------------------------------------------

    def validation_loss(self) -> float:
        return self.validation.loss(self.transformer, self.silence)

    def render_samples(self, folder: Path, step: int) -> None:
        for index, demo in enumerate(self.run.demos):
            samples = render_demo(self.pipe, demo)
            atomic_write_bytes(folder / f"{index}-{step}.wav", wav_bytes(samples, SAMPLE_RATE))

    def write_adapter(self, path: Path, step: int, epoch: int, loss: float | None) -> Path:
        info = {**self.metadata, "tunesmith.step": str(step), "tunesmith.epoch": str(epoch)}
        if loss is not None:
            info["validation_loss"] = f"{loss:.8g}"
        return files.write_adapter(path, self.transformer, self.run, self.trigger, info)

    def adapter_files(self, path: Path) -> list[Path]:
        return files.adapter_files(path, self.run.adapter.type)

    def remove_adapter(self, path: Path) -> None:
        files.remove_adapter(path)

    # --- state ---------------------------------------------------------------------------------

    def state(self) -> tuple[dict[str, torch.Tensor], dict]:
        tensors, document = trainer_state(
            self.params, self.optimizer, self.order, "order", **self._counters()
        )
        return {**tensors, "rng.train": self.generator.get_state()}, document

    def _counters(self) -> dict:
        return {
            "updates": self.updates,
            "epoch_losses": self.epoch_losses,
            "epoch_sum": self.epoch_sum,
        }

    def load_state(self, tensors: dict[str, torch.Tensor], document: dict) -> None:
        load_trainer_state(self.params, self.optimizer, self.order, "order", tensors, document)
        self.generator.set_state(tensors["rng.train"])
        self.updates = document["updates"]
        self.epoch_losses, self.epoch_sum = document["epoch_losses"], document["epoch_sum"]
        self.scheduler = lr_scheduler(self.optimizer, self.schedule, self.updates)


def _load(row: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    from tunesmith.families.ace_step.encoded import load_item

    return load_item(row)


def _text(states: torch.Tensor) -> TextEncoding:
    return TextEncoding(states, int(states.shape[0]), 0)


def _timestep_law(base_model: Path, cfg) -> tuple[float, float]:
    """(μ, σ): the run's, else the DiT's config.json (ACE-Step 1.5's carries timestep_mu and
    timestep_sigma), else ACE-Step 1.5's values."""
    path = Path(base_model) / "transformer" / "config.json"
    config = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    mu = cfg.timestep_mu if cfg.timestep_mu is not None else config.get("timestep_mu")
    sigma = cfg.timestep_sigma if cfg.timestep_sigma is not None else config.get("timestep_sigma")
    mu = objective.MODEL_MU if mu is None else float(mu)
    sigma = objective.MODEL_SIGMA if sigma is None else float(sigma)
    if not (math.isfinite(mu) and math.isfinite(sigma) and sigma > 0):
        raise ConfigError(f"{path}: timestep_mu {mu!r} / timestep_sigma {sigma!r} are not usable")
    return mu, sigma


def schedule_lr(optimizer) -> float:
    """The shared schedule's lr of this update (Muon's group runs at a multiple of it)."""
    if hasattr(optimizer, "schedule_lr"):
        return optimizer.schedule_lr
    return optimizer.param_groups[0]["lr"]


def epoch_end(trainer, loss: float, ends_epoch: bool, fields: dict) -> str:
    """Add the step's loss to the trainer's epoch; at the epoch's end, test the moving average
    of the last TARGET_WINDOW epochs against `train.target_loss` (both ACE-Step trainers, the
    DiT's and the planner's, stop so). Returns why the run ends, or ""."""
    trainer.epoch_sum = [trainer.epoch_sum[0] + loss, trainer.epoch_sum[1] + 1]
    if not ends_epoch:
        return ""
    trainer.epoch_losses.append(trainer.epoch_sum[0] / trainer.epoch_sum[1])
    trainer.epoch_sum = [0.0, 0]
    recent = trainer.epoch_losses[-TARGET_WINDOW:]
    if len(recent) < TARGET_WINDOW:
        return ""
    average = sum(recent) / TARGET_WINDOW
    fields["loss_ma5"] = average
    target = trainer.run.train.target_loss
    if target and average <= target:
        return (
            f"target loss {target:g} reached: the {TARGET_WINDOW}-epoch average is "
            f"{average:.4f} at epoch {trainer.order.epoch}"
        )
    return ""
