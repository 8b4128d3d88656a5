"""Training Stable Audio 3 adapters the way underfit does, on the diffusers model.

One step (underfit's `underfit/training/loop.py` and `loss.py`; docs/conventions/stable-audio-3.md):

    x0 = latents / scale (scale 1.0)         t ~ sampler, then the model's `full` shift
    x_t = x0·(1 − t) + ε·t                   target = ε − x0            (rectified flow)
    pred = DiT(x_t, t, context, global, local_add_cond = [ones | zeros])
    loss = mean over valid frames × channels per sample, then over the batch

The loss options (`Sa3Train`; underfit's `loss.py` `compute_normalized_mse` and
`compute_masked_loss`, `loop.py`), each off by default, which is the formula above:

    e = (pred − target)²                                        per element [B, C, L]
    normalisation, at valid frames only (padded frames keep e), by a variance of the target
    computed without gradient, + 1e-6:
        timestep        over the channels of each frame (every frame, padded ones included)
        sample          over the valid frames × channels of each sample
        sample_channel  over the valid frames of each channel of each sample
        (a sample without valid frames divides by 1)
    per sample, with S, N the sum and count of e over valid frames × channels and P, M over
    padded ones:    (S + w·P) / (N + w·M + 1e-8),  w = mask_loss_weight
    mask_padding_attention: S / (N + 1e-8) whatever w, and the DiT's self-attention gets the
    padding mask (`PaddedValues`).

The run's log (`TrainLog`): underfit's progress line per step, in `<run>/train.log`.

`context` is T5Gemma's output for the prompt plus the duration token, padded tokens
replaced by the learned padding embedding and attended to (underfit attends over every
token). CFG dropout (p 0.1) zeroes a sample's whole context (and marks every token valid,
or the padding embedding would come back) and keeps the global conditioning.
`local_add_cond` is the inpainting input of these checkpoints; in training it is an
all-ones mask with zero context (pure generation), as underfit feeds it.

The update: AdamW and the InverseLR schedule of underfit's model templates, and over a float16
base fp16 autocast with a loss scaler, as underfit's "16-mixed" (`optim.py` says which and why).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import re
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pandas as pd
import torch
from torch import nn
from tqdm import tqdm

from tunesmith.adapters import torch_lora
from tunesmith.adapters.targets import select_targets
from tunesmith.backends.placement import Placement
from tunesmith.families.stable_audio_3 import arc, files, model, optim, published, xs_bases
from tunesmith.families.stable_audio_3 import names as sa3_names
from tunesmith.families.stable_audio_3.config import include_and_exclude
from tunesmith.families.stable_audio_3.data import Batch, Item, load_items
from tunesmith.families.stable_audio_3.draws import Draws
from tunesmith.families.stable_audio_3.prompts import prompt_options
from tunesmith.families.stable_audio_3.timesteps import FullShift
from tunesmith.families.stable_audio_3.validation import Validation
from tunesmith.formats.underfit import AdapterConfig, checkpoint_filename
from tunesmith.store.atomic import atomic_write_text
from tunesmith.train import distributed
from tunesmith.train.config import RunConfig
from tunesmith.train.holdout import split_holdout
from tunesmith.train.schedules import lr_scheduler
from tunesmith.train.state import (
    ResumeError,
    load_optimizer_state,
    load_params,
    optimizer_state,
    params_state,
)
from tunesmith.train.trainer import StepReport

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
NORM_EPS = 1e-6  # underfit's `loss_norm_eps`
COUNT_EPS = 1e-8  # compute_masked_loss's, added to each sample's element count


@dataclass(frozen=True)
class LossOptions:
    """underfit's loss options (module docstring); the defaults are its own."""

    normalization: str = "none"
    mask_weight: float = 0.0
    padding_attention: bool = False

    @classmethod
    def of(cls, train) -> LossOptions:
        return cls(train.loss_normalization, train.mask_loss_weight, train.mask_padding_attention)


def normalized_mse(
    prediction: torch.Tensor, target: torch.Tensor, valid: torch.Tensor, normalization: str
) -> torch.Tensor:
    """The squared error [B, C, L], divided at the valid frames (`valid` [B, L] bool) by the
    detached variance of `normalization` (module docstring)."""
    mse = (prediction - target) ** 2
    if normalization == "none":
        return mse
    keep = valid[:, None, :]
    with torch.no_grad():
        target = target.detach()
        if normalization == "timestep":
            centred = target - target.mean(dim=1, keepdim=True)
            variance = (centred**2).mean(dim=1, keepdim=True) + NORM_EPS
        elif normalization in ("sample", "sample_channel"):
            dims = (1, 2) if normalization == "sample" else (2,)
            masked = torch.where(keep, target, torch.nan)  # padded frames out of the moments
            mean = torch.nanmean(masked, dim=dims, keepdim=True)
            variance = torch.nanmean((masked - mean) ** 2, dim=dims, keepdim=True) + NORM_EPS
            variance = torch.where(torch.isnan(variance), torch.ones_like(variance), variance)
        else:
            raise ValueError(f"unknown loss normalization {normalization!r}")
    return torch.where(keep, mse / variance, mse)


def masked_loss(
    errors: torch.Tensor, valid: torch.Tensor, padding_attention: bool, mask_weight: float
) -> torch.Tensor:
    """Per-sample losses [B] from per-element errors [B, C, L] (module docstring). The counts
    are float32 as underfit's are, so a whole count plus 1e-8 is the count itself."""
    keep = valid[:, None, :]
    channels = errors.shape[1]
    signal = torch.where(keep, errors, 0.0).sum(dim=(1, 2))
    count = valid.sum(dim=1).to(torch.float32) * channels
    if padding_attention or not mask_weight:
        return signal / (count + COUNT_EPS)
    padding = torch.where(keep, 0.0, errors).sum(dim=(1, 2))
    padded = (~valid).sum(dim=1).to(torch.float32) * channels
    return (signal + mask_weight * padding) / (count + mask_weight * padded + COUNT_EPS)


class PaddedValues:
    """`mask_padding_attention` on diffusers' DiT, whose self-attention takes no mask: the value
    vectors of padded frames zeroed in every block's self-attention (the memory tokens always
    valid), which is what Stable Audio 3's transformer does with `padding_mask` on the SDPA,
    flex and plain flash-attention paths (stable-audio-3 `models/transformer.py`,
    `Attention.apply_attn`; underfit installs no flash-attn). Padded keys stay in the softmax;
    only flash-attn's varlen kernels, where installed, drop them too. Cross-attention and the
    feed-forward are per token, as there.

    A forward hook on each block's `to_qkv` (whose last `embed_dim` outputs are v, in diffusers'
    order [q… | k… | v]) zeroes them while `frames` holds a mask. Under gradient checkpointing the
    blocks run again in the backward, after the forward has returned: the checkpoint's
    recompute context holds the mask the forward had."""

    def __init__(self, transformer) -> None:
        self.valid: torch.Tensor | None = None  # [B, memory + L] bool while a forward runs
        self.memory = transformer.config.num_memory_tokens
        self.width = transformer.config.embed_dim
        for block in transformer.transformer_blocks:
            block.self_attn.to_qkv.register_forward_hook(self._zero_padded)
        if transformer.gradient_checkpointing:
            transformer.enable_gradient_checkpointing(self.checkpoint)

    def frames(self, mask: torch.Tensor | None):
        """A context within which the self-attention skips the values where `mask` [B, L] is
        False (None: of no frame)."""
        if mask is not None:
            memory = torch.ones(mask.shape[0], self.memory, dtype=torch.bool, device=mask.device)
            mask = torch.cat([memory, mask.bool()], dim=1)
        return self._holding(mask)

    def _zero_padded(self, module, inputs, output: torch.Tensor):
        if self.valid is None:
            return None
        if output.shape[:2] != self.valid.shape:
            raise ValueError(f"padding mask {tuple(self.valid.shape)} for tokens {output.shape}")
        keep = self.valid[:, :, None].to(output.dtype)
        split = output.shape[-1] - self.width
        return torch.cat([output[..., :split], output[..., split:] * keep], dim=-1)

    def checkpoint(self, module, *args):
        valid = self.valid

        def contexts():
            return contextlib.nullcontext(), self._holding(valid)

        return torch.utils.checkpoint.checkpoint(
            module.__call__, *args, use_reentrant=False, context_fn=contexts
        )

    @contextlib.contextmanager
    def _holding(self, valid: torch.Tensor | None):
        before, self.valid = self.valid, valid
        try:
            yield
        finally:
            self.valid = before


class Objective:
    """The base model with adapters attached, and the loss underfit trains it with."""

    def __init__(
        self,
        base_model: Path,
        run: RunConfig,
        placement: Placement,
        pipe=None,
        fingerprint: str | None = None,
    ) -> None:
        """`pipe`: the pipeline, already built (the memory estimate's, on `meta`); by default
        loaded from `base_model` at the placement's dtype and device. `fingerprint`: the base
        model's, where the run's `-xs` bases are kept in the store under it (`xs_bases.py`)."""
        self.run, self.device = run, torch.device(placement.device)
        self.base_model = Path(base_model)
        self.arc = None  # the ARC model of `arc` demos, loaded at the first
        if pipe is None:
            pipe = model.load_pipeline(base_model, DTYPES[placement.dtype], placement.device)
        self.pipe = pipe
        self.pipe.transformer.eval()
        if run.train.gradient_checkpointing is True:  # "auto" is resolved before a trainer
            # diffusers' checkpointing of each DiT block (torch.utils.checkpoint, non-reentrant):
            # the blocks' activations, adapters' included, are recomputed in the backward.
            self.pipe.transformer.enable_gradient_checkpointing()
        # underfit's model id when this is a published base model, else None (no key written).
        self.underfit_model = published.underfit_model_id(base_model)
        self.scale = 1.0  # pre-encoded latents are unscaled; the SA3 pretransform scale is 1.0
        self.shift = FullShift()  # what SA3 base models ship (distribution_shift_options)
        # Adapter names are the pipeline's component names, so they map to underfit's.
        self.modules = nn.ModuleDict(
            {"transformer": self.pipe.transformer, "duration_embedder": self.pipe.duration_embedder}
        )
        candidates = sa3_names.adapter_targets(self.pipe.transformer, self.pipe.duration_embedder)
        include, exclude = include_and_exclude(run.adapter)
        chosen = select_targets(
            [(underfit, name) for name, underfit in candidates.items()], include, exclude
        )
        self.targets = [name for _, name in chosen]
        self.bases, self.bases_note = None, ""
        if xs_bases.is_xs(run.adapter.type):
            self.bases, self.bases_note = xs_bases.run_bases(
                self.modules, self.targets, run.adapter.rank, base_model, fingerprint
            )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(run.train.seed)  # the adapters' initial A: the same every time
            torch_lora.attach(
                self.modules,
                self.targets,
                run.adapter.rank,
                run.adapter.scale_alpha,
                run.adapter.type,
                bases=self.bases,
            )
        self.include, self.exclude = include, exclude
        self.torch_modules = self.modules  # where the demos' adapters are (MLX: a torch copy)
        self._text: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        self.loss_options = LossOptions.of(run.train)
        # After the adapters are attached: the hooks go on the modules the forward calls.
        self.padded_values = None
        if self.loss_options.padding_attention:
            self.padded_values = PaddedValues(self.pipe.transformer)

    def parameters(self) -> list[nn.Parameter]:
        return torch_lora.adapter_parameters(self.modules)

    def _prompts(self, prompts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """T5Gemma outputs, computed once per distinct prompt in this process."""
        missing = sorted({p for p in prompts if p not in self._text})
        if missing:
            embeds, mask = model.encode_prompts(self.pipe, missing)
            for prompt, e, m in zip(missing, embeds, mask, strict=True):
                self._text[prompt] = (e, m)
        return (
            torch.stack([self._text[p][0] for p in prompts]),
            torch.stack([self._text[p][1] for p in prompts]),
        )

    def loss(
        self,
        batch: Batch,
        prompts: list[str],
        t: torch.Tensor,
        noise: torch.Tensor,
        drop: torch.Tensor,
    ) -> torch.Tensor:
        """Per-sample losses [B] (float32, or float64 over a float64 model) for shifted `t`."""
        device, dtype = self.device, self.pipe.transformer.dtype
        acc = torch.promote_types(dtype, torch.float32)  # float32, or float64 in gradient checks
        x0 = (batch.latents / self.scale).to(device=device, dtype=acc)
        t32 = t.to(device=device, dtype=acc)
        noise = noise.to(device=device, dtype=acc)
        noised = x0 * (1 - t32)[:, None, None] + noise * t32[:, None, None]
        target = noise - x0
        embeds, mask = self._prompts(prompts)
        context, context_mask, global_states = model.conditioning(
            self.pipe, embeds, mask, batch.seconds_total.to(device)
        )
        drop = drop.to(device)
        context = torch.where(drop[:, None, None], torch.zeros_like(context), context)
        context_mask = torch.where(drop[:, None], torch.ones_like(context_mask), context_mask)
        b, d, length = x0.shape
        local_add_cond = torch.cat(
            [torch.ones(b, 1, length, device=device), torch.zeros(b, d, length, device=device)], 1
        )
        valid = batch.mask.to(device=device, dtype=torch.bool)
        options = self.loss_options
        padded = contextlib.nullcontext()
        if options.padding_attention:
            padded = self.padded_values.frames(valid)
        with optim.autocast(self.device, dtype), padded:  # fp16 autocast over float16 only
            prediction = self.pipe.transformer(
                hidden_states=noised.to(dtype),
                timestep=t32.to(dtype),
                encoder_hidden_states=context.to(dtype),
                global_hidden_states=global_states.to(dtype),
                encoder_attention_mask=context_mask,
                local_add_cond=local_add_cond.to(dtype),
            ).sample
        errors = normalized_mse(prediction.to(acc), target, valid, options.normalization)
        return masked_loss(errors, valid, options.padding_attention, options.mask_weight)

    def shift_timesteps(self, t: torch.Tensor, length: int) -> torch.Tensor:
        return self.shift(t, length)

    def render_samples(self, folder: Path, step: int) -> list[Path]:
        """The run's demos with the adapter as it is now: `<folder>/<demo>-<step>.wav` (kvad's
        samples; at step 0 every adapter is zero, so the first row is the base model's)."""
        from tunesmith.media.writers import wav_bytes
        from tunesmith.store.atomic import atomic_write_bytes

        written = []
        for index, demo in enumerate(self.run.demos):
            if demo.arc:  # underfit's arc demo entries: the ARC model with the adapter merged
                if self.arc is None:
                    self.arc = arc.training_arc(
                        self.base_model,
                        self.run,
                        self.pipe.transformer.dtype,
                        str(self.device),
                        self.torch_modules,
                        self.targets,
                    )
                self.arc.load_state(self.adapter_state())
                samples = self.arc.render(demo, 1.0)
            else:
                samples = model.render_demo(self.pipe, demo)
            path = folder / f"{index}-{step}.wav"
            atomic_write_bytes(path, wav_bytes(samples, model.SAMPLE_RATE))
            written.append(path)
        return written

    # --- files --------------------------------------------------------------------------------

    def adapter_config(self, step: int, epoch: int) -> AdapterConfig:
        a = self.run.adapter
        return AdapterConfig(
            rank=a.rank,
            alpha=a.scale_alpha,
            adapter_type=a.type,
            include=self.include,
            exclude=self.exclude,
            step=step,
            epoch=epoch,
            base_model=self.underfit_model,
        )

    def adapter_state(self) -> dict[str, torch.Tensor]:
        """The adapter tensors under diffusers' names (torch_lora's layout)."""
        return torch_lora.adapter_state(self.modules)

    def save(self, folder: Path, step: int, epoch: int, metadata: dict[str, str], name=None):
        """Write the adapter as underfit's file; returns its path."""
        path = folder / (name or checkpoint_filename(self.run.name, step, epoch))
        differential = self.pipe.transformer.config.use_differential_attention
        config = self.adapter_config(step, epoch)
        return files.write_adapter(path, self.adapter_state(), config, differential, metadata)


@dataclass(frozen=True)
class UnderfitNames:
    """underfit's file names: `checkpoints/{run}-step=S-epoch=E` per checkpoint; the last
    step's adapter is its checkpoint. The best is `best/{run}-best-step=S`, beside the
    checkpoints folder, not in it: underfit's dashboard lists every `.safetensors` in a
    session's `checkpoints/` as a step of the run (the number after `step=` in its name, else
    step 0), and would list the best twice."""

    folder: Path  # the run's checkpoints folder
    run: str

    def best(self, step: int) -> Path:
        return self.folder.parent / "best" / f"{self.run}-best-step={step}.safetensors"

    def checkpoint(self, step: int, epoch: int) -> Path:
        return self.folder / checkpoint_filename(self.run, step, epoch)

    def last(self, step: int, epoch: int) -> Path:
        return self.checkpoint(step, epoch)


STEP_PREFIX = re.compile(r"Step (\d+),")
PROGRESS_KEYS = ("loss", "lr", "grad_norm", "lora_magnitude")  # underfit's postfix, its order


def progress_values(report: StepReport) -> dict[str, str]:
    """underfit's postfix values of a step: the lr as .3e, the rest with 6 decimals; a number
    the step does not have (no gradient) is left out, as underfit leaves out a None."""
    numbers = {"loss": report.loss, **report.fields}
    return {
        f"train/{key}": f"{numbers[key]:.3e}" if key == "lr" else f"{numbers[key]:.6f}"
        for key in PROGRESS_KEYS
        if numbers.get(key) is not None
    }


class TrainLog:
    """underfit's progress line of every step, in the run's `train.log`, for its dashboard.

    underfit's loop prints one tqdm line per step (`loop.py`), which its dashboard parses
    (`dashboard/server.py`: `_HISTORY_RE`, `_LR_RE`, `_GN_RE`, `_LM_RE`, `_STEP_PREFIX_RE`):

        Step 6, Epoch 1: 100%|██████████| 6/6 [00:03<00:00,  2.00it/s, train/loss=0.123456,
        train/lr=1.234e-04, train/grad_norm=0.012345, train/lora_magnitude=3.456789]

    on one line: the steps done, the epoch the step drew from, the run's total (underfit's bar
    counts within its epoch; the dashboard takes the step from the `Step N,` prefix), and the
    step's numbers as `events.jsonl` has them, formatted as underfit formats them. One whole
    line per step, the file closed (so flushed) after it. A resumed run appends, after cutting
    the lines past the step it resumes from (a killed run's steps beyond its state, trained
    again), as `events.jsonl` is cut; a fresh run in a used folder starts the file over. On
    several processes rank 0 alone writes.
    """

    def __init__(self, path: Path, total: int) -> None:
        self.path, self.total = path, total
        self.step = self.first = 0
        self.started = time.perf_counter()
        self.opened = False
        self.main = distributed.rank_and_world()[0] == 0

    def resume(self, step: int) -> None:
        """The run continues after `step` (its saved state's)."""
        self.step = self.first = step

    def write(self, report: StepReport) -> None:
        self.step += 1
        if not self.main:
            return
        if not self.opened:
            _cut_lines(self.path, self.first)
            self.opened = True
        postfix = ", ".join(f"{k}={v}" for k, v in progress_values(report).items())
        line = tqdm.format_meter(
            n=self.step,
            total=max(self.total, self.step),
            elapsed=time.perf_counter() - self.started,
            prefix=f"Step {self.step}, Epoch {report.epoch}",
            postfix=postfix,
            initial=self.first,
        )
        with open(self.path, "a", encoding="utf-8") as log:
            log.write(line + "\n")


def _cut_lines(path: Path, step: int) -> None:
    """Keep the whole lines of `path` up to `step`'s (a line a kill cut short goes too)."""
    if not path.exists():
        return
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")[:-1]  # the last piece has no newline: empty, or cut short
    kept = [
        line + "\n"
        for line in lines
        if (m := STEP_PREFIX.match(line)) is None or int(m.group(1)) <= step
    ]
    if "".join(kept) != text:
        atomic_write_text(path, "".join(kept))


class UnderfitTrainer:
    """What the trainers of Stable Audio 3 share (torch here, MLX in `mlx/trainer.py`): the
    items, the holdout, underfit's draws and validation, its files, the run's identity."""

    def __init__(
        self,
        run: RunConfig,
        base_model: Path,
        encoded: pd.DataFrame | list[Item],
        run_dir: Path,
        metadata: dict[str, str],
    ) -> None:
        """`encoded`: this base model's rows of the `encoded` table, or the items themselves."""
        items = encoded if isinstance(encoded, list) else load_items(encoded)
        split = split_holdout(items, run.train.holdout)
        self.run, self.metadata = run, metadata
        self.fingerprint = metadata.get("tunesmith.base_model_fingerprint")
        self.base_model = self.fingerprint or str(base_model)
        self.validation_note = split.note()
        self.draws = Draws(split.train, run, FullShift())
        self.validation = Validation(
            split.validation,
            run.train.latent_crop_length,
            run.train.seed,
            run.trigger,
            prompt_options(run.train),
        )
        self.names = UnderfitNames(run_dir / "checkpoints", run.name)
        self.train_log = TrainLog(run_dir / "train.log", run.train.steps)

    writes_progress = True  # `train_log`: the loop draws no bar of its own

    def step(self) -> StepReport:
        """One optimizer update (the backend's `_update`), its line in the run's log."""
        report = self._update()
        self.train_log.write(report)
        return report

    def identity_of(self, objective) -> dict:
        a = self.run.adapter
        return {
            "base_model": self.base_model,
            "adapter_type": a.type,
            "rank": a.rank,
            "alpha": a.scale_alpha,
            "targets": objective.targets,
        }

    def validation_loss(self) -> float:
        return self.validation.loss(self.objective.loss)

    def render_samples(self, folder: Path, step: int) -> None:
        self.objective.render_samples(folder, step)

    def write_adapter(self, path: Path, step: int, epoch: int, loss: float | None) -> Path:
        info = dict(self.metadata)
        if loss is not None:
            info["validation_loss"] = f"{loss:.8g}"
        return self.objective.save(path.parent, step, epoch, info, name=path.name)

    def adapter_files(self, path: Path) -> list[Path]:
        return [path]

    def remove_adapter(self, path: Path) -> None:
        path.unlink(missing_ok=True)


class TorchTrainer(UnderfitTrainer):
    """Stable Audio 3 on PyTorch: the `Objective`, AdamW and the lr schedule of the run,
    optional global-norm clipping, a loss scaler over a float16 base (`optim.py`). On several
    processes each rank takes items `rank::world` of the global batch's draws and DDP sums
    the adapter gradients (`tunesmith.train.distributed`)."""

    data_parallel = True

    def __init__(self, run, base_model, encoded, run_dir, placement, metadata) -> None:
        super().__init__(run, base_model, encoded, run_dir, metadata)
        self.objective = Objective(base_model, run, placement, fingerprint=self.fingerprint)
        self.start_note = self.objective.bases_note
        self.device = placement.device
        self.identity = self.identity_of(self.objective)
        self.params = self.objective.parameters()
        self.optimizer = optim.torch_adamw(self.params, run.train)
        self.schedule = optim.lr_schedule(run.train)
        self.scheduler = lr_scheduler(self.optimizer, self.schedule)
        base_dtype = self.objective.pipe.transformer.dtype
        self.scaler = optim.grad_scaler(self.objective.device, base_dtype)  # float16 base only
        self.replica = None  # DDP over the adapter where the run has several processes
        if distributed.rank_and_world()[1] > 1:
            self.replica = distributed.replicate(
                {"adapted": self.objective.modules}, self.objective.loss
            )

    def _update(self) -> StepReport:
        d = self.draws.next()
        if self.replica is None:
            loss = self.objective.loss(d.batch, d.prompts, d.t, d.noise, d.drop).mean()
            value = loss.item()
        else:
            loss, value = self._shared_loss(d)
        t_mean = d.t.float().mean().item()
        if not math.isfinite(value):
            return StepReport(value, t_mean, self.draws.epoch)
        self.optimizer.zero_grad(set_to_none=True)
        if self.scaler is None:
            loss.backward()
        else:  # backward on loss × scale, then the true gradients (inf/nan noted) for the rest
            self.scaler.scale(loss).backward()
            self.scaler.unscale_(self.optimizer)
        if self.run.train.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.params, self.run.train.grad_clip)
        grad_norm, magnitude = underfit_norms(self.params)  # post-clip grads, pre-update params
        if self.scaler is None:
            self.optimizer.step()
        else:  # skipped when a gradient overflowed; the scale then backs off
            self.scaler.step(self.optimizer)
            self.scaler.update()
        self.scheduler.step()  # every step, as underfit's loop; the lr logged is the next one's
        fields = {"lr": self.optimizer.param_groups[0]["lr"]}
        for key, norm in (("grad_norm", grad_norm), ("lora_magnitude", magnitude)):
            if norm is not None:  # underfit logs neither without gradients or parameters
                fields[key] = norm
        return StepReport(value, t_mean, self.draws.epoch, fields)

    def _shared_loss(self, d) -> tuple[torch.Tensor, float]:
        """On one rank of several: (what this rank backpropagates, the global batch's loss).
        The draws are the global batch's, the same on every rank; the rank's share of them goes
        through DDP, whose backward sums the adapter gradients over the ranks."""
        rank, world = distributed.rank_and_world()
        mine = partial(distributed.share, rank=rank, world=world)
        batch = Batch(*(mine(getattr(d.batch, f.name)) for f in dataclasses.fields(Batch)))
        local = self.replica(batch, mine(d.prompts), mine(d.t), mine(d.noise), mine(d.drop)).sum()
        count = d.t.shape[0]  # the mean over the global batch's samples
        return distributed.global_share(local, count, world), distributed.global_sum(local) / count

    def state(self) -> tuple[dict[str, torch.Tensor], dict]:
        tensors, document = self.draws.state()
        optimizer_tensors, optimizer_document = optimizer_state(self.optimizer)
        scaler = {} if self.scaler is None else {"grad_scaler": self.scaler.state_dict()}
        return (
            {**params_state(self.params), **optimizer_tensors, **tensors},
            {
                **document,
                "optimizer": optimizer_document,
                "schedule_step": self.scheduler.last_epoch,
                **scaler,
            },
        )

    def load_state(self, tensors: dict[str, torch.Tensor], document: dict) -> None:
        if "schedule_step" not in document:
            raise ResumeError("the saved state has no lr schedule step (saved by an older version)")
        if (self.scaler is None) != ("grad_scaler" not in document):
            raise ResumeError("the saved state and this run differ in loss scaling (float16 base)")
        load_params(self.params, tensors)
        load_optimizer_state(self.optimizer, tensors, document["optimizer"])
        # The groups now carry the saved `initial_lr`; the lr is the schedule's at that step.
        self.scheduler = lr_scheduler(self.optimizer, self.schedule, document["schedule_step"])
        if self.scaler is not None:
            self.scaler.load_state_dict(document["grad_scaler"])
        self.draws.load_state(tensors, document)
        self.train_log.resume(document["schedule_step"])  # one schedule step per step


def combine_norms(norms: list[float], skip_nan: bool = False) -> float | None:
    """underfit's `_compute_grad_and_lora_norms` from per-tensor L2 norms (float32 values):
    the square root of the sum of their squares in Python floats (a NaN norm left out with
    `skip_nan`, as underfit leaves out a NaN gradient's); None for no norms."""
    total, count = 0.0, 0
    for norm in norms:  # in order, one addition at a time (not `sum`, compensated from 3.12)
        if norm == norm or not skip_nan:
            total += norm**2
            count += 1
    return math.sqrt(total) if count else None


def underfit_norms(params: list[nn.Parameter]) -> tuple[float | None, float | None]:
    """(gradient norm, adapter magnitude) as underfit logs them (`loop.py`,
    `_compute_grad_and_lora_norms`): each tensor's float32 L2 norm, then `combine_norms`; a
    parameter without a gradient, or with a NaN one, is left out of the first. One transfer
    per list, where underfit reads each norm on its own: the same numbers."""
    grads = [p.grad.detach().float().norm(2) for p in params if p.grad is not None]
    grad = combine_norms(torch.stack(grads).tolist(), skip_nan=True) if grads else None
    weights = [p.detach().float().norm(2) for p in params]
    return grad, combine_norms(torch.stack(weights).tolist()) if weights else None
