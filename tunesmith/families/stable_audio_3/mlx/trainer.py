"""Training Stable Audio 3 adapters in MLX: the torch path's objective and loop, step compiled.

The same step as `tunesmith.families.stable_audio_3.train` (its docstring has the formulas):
rectified flow, x_t = x0·(1 − t) + ε·t, target ε − x0; context = T5Gemma tokens + duration
token, CFG dropout zeroing a sample's whole context and marking every token valid (so the
padding embedding does not come back), the global conditioning kept; local_add_cond = [ones |
zeros]; squared error over valid frames × channels per sample, then the batch mean; AdamW
with torch's defaults (betas 0.9/0.999, eps 1e-8, weight decay 0.01, bias correction on —
MLX's own default is off) and optional global-norm clipping as torch's clip_grad_norm_.

What runs where. T5Gemma stays in torch (frozen, its outputs cached per prompt and handed
over as arrays); the DiT and the duration embedder run in MLX. Every random number comes from
the torch loop's generators, in the torch loop's order (t, noise, dropout from the training
generator; crops and order from the sampler's; prompts from the prompt generator), so an MLX
run draws exactly what a torch run of the same config draws, and the initial adapter A is
drawn by `torch_lora.attach` under the run's seed, as the torch path draws it.

The compiled step (mlx-lm's pattern): `mx.compile` with the model, the optimizer and MLX's
random state as captured inputs and outputs; every per-step value (t, noise, dropout, the
batch) is an array argument, so a new value never retraces, only a new shape does.

Not handled: conv adapters (see `mlx_lora`), gradient checkpointing, demos rendered in MLX
(`render_samples` loads the adapter onto the torch pipeline and renders there).
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TextIO

import mlx.core as mx
import mlx.nn as nn
import mlx.optimizers as optim
import numpy as np
import pandas as pd
import torch
from mlx.utils import tree_flatten, tree_map, tree_unflatten

from tunesmith.adapters import mlx_lora, torch_lora
from tunesmith.adapters.targets import select_targets
from tunesmith.backends.placement import Placement
from tunesmith.families.stable_audio_3 import model
from tunesmith.families.stable_audio_3 import names as sa3_names
from tunesmith.families.stable_audio_3.data import Batch, Sampler, Split, load_items, split_holdout
from tunesmith.families.stable_audio_3.mlx import convert as mlx_convert
from tunesmith.families.stable_audio_3.mlx.model import cross_attention_context
from tunesmith.families.stable_audio_3.prompts import training_prompt
from tunesmith.families.stable_audio_3.timesteps import FullShift
from tunesmith.families.stable_audio_3.train import DEFAULT_INCLUDE, Objective
from tunesmith.families.stable_audio_3.validation import Validation
from tunesmith.train import loop, timesteps
from tunesmith.train.config import RunConfig
from tunesmith.train.history import History
from tunesmith.train.memory import MemoryCap
from tunesmith.train.state import ResumeError, RunState, latest_state, load_state, save_state

MX_DTYPES = {"float32": mx.float32, "float16": mx.float16, "bfloat16": mx.bfloat16}
ADAMW_WEIGHT_DECAY = 0.01  # torch.optim.AdamW's default, which the torch loop uses
CLIP_EPS = 1e-6  # torch's clip_grad_norm_: coef = max_norm / (norm + 1e-6), at most 1


class SA3Modules(nn.Module):
    """The MLX DiT and duration embedder under the pipeline's component names, so adapter
    names are the torch path's (`transformer.…`, `duration_embedder.linear`)."""

    def __init__(self, transformer: nn.Module, duration_embedder: nn.Module) -> None:
        super().__init__()
        self.transformer = transformer
        self.duration_embedder = duration_embedder


def per_sample_loss(
    modules: SA3Modules,
    x0: mx.array,  # [B, D, L] float32 (latents / scale)
    noise: mx.array,  # [B, D, L]
    t: mx.array,  # [B] shifted timesteps
    prompt_embeds: mx.array,  # [B, P, C] T5Gemma output
    prompt_mask: mx.array,  # [B, P] bool
    seconds: mx.array,  # [B] seconds_total
    drop: mx.array,  # [B] bool: CFG dropout
    frame_mask: mx.array,  # [B, L] 1 where there is audio
) -> mx.array:
    """Per-sample losses [B] (float32), the torch Objective.loss in MLX."""
    dit = modules.transformer
    dtype = dit.prompt_padding_embedding.dtype  # the weights' dtype; never adapted
    noised = x0 * (1 - t)[:, None, None] + noise * t[:, None, None]
    target = noise - x0
    global_states = modules.duration_embedder(seconds)
    context, context_mask = cross_attention_context(prompt_embeds, prompt_mask, global_states)
    context = mx.where(drop[:, None, None], mx.zeros_like(context), context)
    context_mask = mx.where(drop[:, None], True, context_mask)
    b, d, length = x0.shape
    local_add_cond = mx.concatenate([mx.ones((b, 1, length)), mx.zeros((b, d, length))], axis=1)
    prediction = dit(
        noised.astype(dtype),
        t.astype(dtype),
        context.astype(dtype),
        global_states.astype(dtype),
        context_mask,
        local_add_cond.astype(dtype),
    )
    valid = frame_mask.astype(mx.float32)[:, None, :]
    mse = (prediction.astype(mx.float32) - target) ** 2 * valid
    return mse.sum(axis=(1, 2)) / mx.maximum(valid.sum(axis=(1, 2)) * d, 1.0)


def _mean_loss(modules, *inputs) -> mx.array:
    return per_sample_loss(modules, *inputs).mean()


def loss_and_grads(modules: SA3Modules, *inputs: mx.array) -> tuple[mx.array, dict]:
    """(batch-mean loss, gradients of the trainable parameters), uncompiled: for checks."""
    return nn.value_and_grad(modules, _mean_loss)(modules, *inputs)


def clip_global_norm(grads: dict, max_norm: float) -> tuple[dict, mx.array]:
    """torch's clip_grad_norm_: scale by min(max_norm / (‖g‖ + 1e-6), 1); the norm before."""
    total = mx.sqrt(sum(mx.sum(g.astype(mx.float32) ** 2) for _, g in tree_flatten(grads)))
    coef = mx.minimum(max_norm / (total + CLIP_EPS), 1.0)
    return tree_map(lambda g: (g * coef).astype(g.dtype), grads), total


def _global_norm(tree) -> mx.array:
    return mx.sqrt(sum(mx.sum(a.astype(mx.float32) ** 2) for _, a in tree_flatten(tree)))


def adamw(lr: float) -> optim.AdamW:
    """torch.optim.AdamW(lr=lr) in MLX: betas, eps and weight decay are torch's defaults."""
    return optim.AdamW(
        learning_rate=lr,
        betas=[0.9, 0.999],
        eps=1e-8,
        weight_decay=ADAMW_WEIGHT_DECAY,
        bias_correction=True,
    )


def make_step(modules: SA3Modules, optimizer: optim.Optimizer, grad_clip: float = 0.0):
    """The compiled training step: (x0, noise, t, embeds, prompt_mask, seconds, drop,
    frame_mask) → (mean loss, grad norm after clipping, parameter norm before the update).

    `grad_clip` (0 = off) is fixed when the step is built. The step draws no random numbers;
    MLX's random state is captured anyway, as mlx's compile docs ask of any step that might.
    """
    value_and_grad = nn.value_and_grad(modules, _mean_loss)
    # Moments made now, outside the trace: made lazily inside it, they would be placeholders.
    optimizer.init(modules.trainable_parameters())
    state = [modules.state, optimizer.state, mx.random.state]

    @partial(mx.compile, inputs=state, outputs=state)
    def step(*inputs):
        magnitude = _global_norm(modules.trainable_parameters())
        loss, grads = value_and_grad(modules, *inputs)
        if grad_clip > 0:
            grads, _ = clip_global_norm(grads, grad_clip)
        optimizer.update(modules, grads)
        return loss, _global_norm(grads), magnitude

    def run(*inputs: mx.array) -> tuple[mx.array, mx.array, mx.array]:
        out = step(*inputs)
        mx.eval(state, out)
        return out

    return run


def _mx(tensor: torch.Tensor, dtype=mx.float32) -> mx.array:
    return mx.array(tensor.detach().cpu().float().numpy()).astype(dtype)


class MLXObjective:
    """The torch Objective's conventions with the DiT in MLX (see the module docstring)."""

    def __init__(self, checkpoint: Path, run: RunConfig, placement: Placement) -> None:
        if placement.backend != "mlx":
            raise ValueError(f"MLXObjective needs an mlx placement, got {placement}")
        if placement.device != "cpu":
            mx.set_default_device(mx.gpu)  # metal or cuda: MLX's gpu device
        self.run, self.placement = run, placement
        self.dtype = MX_DTYPES[placement.dtype]
        # The torch pipeline (float32, CPU) for T5Gemma, the demos and the initial A.
        self.pipe = model.load_pipeline(checkpoint, torch.float32, "cpu")
        transformer, duration_embedder = mlx_convert.from_diffusers(
            self.pipe.transformer, self.pipe.duration_embedder
        )
        self.modules = SA3Modules(transformer, duration_embedder)
        if self.dtype != mx.float32:  # every weight in the placement dtype, as load_pipeline
            self.modules.update(tree_map(lambda a: a.astype(self.dtype), self.modules.parameters()))
        self.scale, self.shift = 1.0, FullShift()  # as the torch Objective
        candidates = sa3_names.adapter_targets(self.pipe.transformer, self.pipe.duration_embedder)
        include = run.adapter.include or DEFAULT_INCLUDE
        chosen = select_targets(
            [(underfit, name) for name, underfit in candidates.items()],
            include,
            run.adapter.exclude,
        )
        self.targets = [name for _, name in chosen]
        self.include = tuple(include)
        a = run.adapter
        mlx_lora.attach(self.modules, self.targets, a.rank, a.scale_alpha, a.type)
        self._adopt_torch_init()
        self._text: dict[str, tuple[mx.array, mx.array]] = {}
        self.optimizer = adamw(run.train.lr)
        self._step = make_step(self.modules, self.optimizer, run.train.grad_clip)

    def _adopt_torch_init(self) -> None:
        """A as the torch path draws it (same seed, same order); B zero; m from the MLX
        weights (so the dora factor is exactly 1 at init, as in torch)."""
        torch_modules = torch.nn.ModuleDict(
            {"transformer": self.pipe.transformer, "duration_embedder": self.pipe.duration_embedder}
        )
        a = self.run.adapter
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.run.train.seed)
            torch_lora.attach(torch_modules, self.targets, a.rank, a.scale_alpha, a.type)
        initial = torch_lora.adapter_state(torch_modules)
        state = mlx_lora.adapter_state(self.modules)
        for key in state:
            if key.endswith(".lora_A"):
                state[key] = initial[key]
        mlx_lora.load_adapter_state(self.modules, state)
        # The torch pipeline now holds torch adapters: `render_samples` loads ours into them.

    # --- the loop's protocol ------------------------------------------------------------------

    def parameters(self) -> list[mx.array]:
        """The adapter arrays in the torch path's order (per layer A, B, m)."""
        return [
            p
            for module in mlx_lora.adapter_layers(self.modules).values()
            for p in mlx_lora._tensors(module).values()
        ]

    def _prompts(self, prompts: list[str]) -> tuple[mx.array, mx.array]:
        missing = sorted({p for p in prompts if p not in self._text})
        if missing:
            embeds, mask = model.encode_prompts(self.pipe, missing)
            for prompt, e, m in zip(missing, embeds, mask, strict=True):
                self._text[prompt] = (_mx(e), mx.array(m.bool().numpy()))
        return (
            mx.stack([self._text[p][0] for p in prompts]),
            mx.stack([self._text[p][1] for p in prompts]),
        )

    def inputs(self, batch: Batch, prompts, t, noise, drop) -> tuple[mx.array, ...]:
        """The step's array arguments from the torch loop's batch and draws."""
        embeds, mask = self._prompts(prompts)
        return (
            _mx(batch.latents / self.scale),
            _mx(noise),
            _mx(t),
            embeds,
            mask,
            _mx(batch.seconds_total),
            mx.array(drop.numpy().astype(bool)),
            _mx(batch.mask),
        )

    def loss(self, batch: Batch, prompts: list[str], t, noise, drop) -> torch.Tensor:
        """Per-sample losses [B] as a torch tensor, without gradients (validation)."""
        losses = per_sample_loss(self.modules, *self.inputs(batch, prompts, t, noise, drop))
        return torch.from_numpy(np.array(losses))

    def step(self, batch: Batch, prompts, t, noise, drop) -> tuple[float, float, float]:
        """One compiled optimizer step: (loss, grad norm after clipping, adapter norm before)."""
        loss, grad_norm, magnitude = self._step(*self.inputs(batch, prompts, t, noise, drop))
        return loss.item(), grad_norm.item(), magnitude.item()

    def shift_timesteps(self, t: torch.Tensor, length: int) -> torch.Tensor:
        return self.shift(t, length)

    def render_samples(self, folder: Path, step: int) -> list[Path]:
        """The torch path's demos, with this adapter loaded onto the torch pipeline."""
        if not self.run.demos:
            return []
        torch_modules = torch.nn.ModuleDict(
            {"transformer": self.pipe.transformer, "duration_embedder": self.pipe.duration_embedder}
        )
        torch_lora.load_adapter_state(torch_modules, mlx_lora.adapter_state(self.modules))
        return Objective.render_samples(self, folder, step)

    adapter_config = Objective.adapter_config

    save = Objective.save  # the same file as the torch path, from this adapter_state

    def adapter_state(self) -> dict[str, torch.Tensor]:
        return mlx_lora.adapter_state(self.modules)

    # --- resumable state ----------------------------------------------------------------------

    def optimizer_state(self) -> dict:
        # The step counter is uint64, which torch lacks: saved as int64, cast back on loading.
        tensors = {
            k: mlx_lora._to_torch(v if mx.issubdtype(v.dtype, mx.floating) else v.astype(mx.int64))
            for k, v in tree_flatten(self.optimizer.state)
        }
        return {"state": {0: tensors}, "param_groups": [{"backend": "mlx"}]}

    def load_optimizer_state(self, saved: dict, params: list[torch.Tensor]) -> None:
        if saved["param_groups"] != [{"backend": "mlx"}]:
            raise ResumeError("the saved optimizer state is not an MLX one")
        state = mlx_lora.adapter_state(self.modules)
        mlx_lora.load_adapter_state(self.modules, dict(zip(state, params, strict=True)))
        self.optimizer.init(self.modules.trainable_parameters())
        dtypes = {k: v.dtype for k, v in tree_flatten(self.optimizer.state)}
        if set(dtypes) != set(saved["state"][0]):
            raise ResumeError("the saved MLX optimizer state does not fit these adapters")
        flat = [(k, mx.array(v.numpy()).astype(dtypes[k])) for k, v in saved["state"][0].items()]
        self.optimizer.state = tree_unflatten(flat)
        mx.eval(self.optimizer.state)
        # The compiled step captured the old state dict: build it again around the new one.
        self._step = make_step(self.modules, self.optimizer, self.run.train.grad_clip)


def train(
    objective: MLXObjective,
    split: Split,
    run: RunConfig,
    run_dir: Path,
    identity: dict,
    metadata: dict[str, str],
    log: Callable[[str], None] = print,
    progress: TextIO | None = None,
) -> loop.TrainResult:
    """`tunesmith.train.loop.train` with the MLX step: the same draws, validation, files,
    progress bar, events and resumable state (see that function)."""
    cfg = run.train
    progress = progress or sys.stdout
    start_time = time.perf_counter()
    checkpoints_dir, state_dir = run_dir / "checkpoints", run_dir / "state"
    checkpoints_dir.mkdir(parents=True, exist_ok=True)
    sampler = Sampler(split.train, cfg.batch_size, cfg.latent_crop_length, cfg.seed)
    validation = Validation(split.validation, cfg.latent_crop_length, cfg.seed, run.trigger)
    generator = torch.Generator().manual_seed(cfg.seed)
    prompt_rng = random.Random(cfg.seed)
    note = (
        "validation on training items: fewer than 5 items, none held out"
        if split.on_training_items
        else f"validation on {len(split.validation)} held-out item(s)"
    )
    saved = latest_state(state_dir, cfg.steps)
    if saved is not None:
        state = load_state(saved, identity)
        objective.load_optimizer_state(state.optimizer, state.params)
        generator.set_state(state.train_rng)
        sampler.load_state_dict(state.sampler, state.sampler_rng)
        prompt_rng.setstate(state.prompt_rng)
        step, history, best, checkpoints = state.step, state.history, state.best, state.checkpoints
        log(f"resuming {run.name} from step {step} ({saved})")
    else:
        step, history, checkpoints = 0, [], []
        base = validation.loss(objective.loss)
        history.append({"step": 0, "loss": base})
        best = {"step": 0, "loss": base, "path": ""}
        log(f"{run.name}: base model validation loss {base:.6f} ({note}; mlx)")
        best["path"] = str(loop._save_best(objective, checkpoints_dir, 0, 0, best, metadata))
        objective.render_samples(run_dir / "samples", 0)
    resumed_from = step if saved is not None else None

    history_files = History(run_dir, step)
    trained, train_seconds, stopped = 0, 0.0, ""
    cap = MemoryCap(cfg.cap, "cpu")  # the run ends itself past it
    pbar = loop._bar(step, sampler.epoch, progress)
    try:
        while step < cfg.steps:
            tick = time.perf_counter()
            epoch_before = sampler.epoch
            batch = sampler.next_batch()
            if sampler.epoch != epoch_before:
                pbar.close()
                pbar = loop._bar(step, sampler.epoch, progress)
            n = batch.latents.shape[0]
            prompts = [
                training_prompt(list(p), prompt_rng, run.trigger, cfg.trigger_probability)
                for p in batch.pieces
            ]
            # The torch loop's draws, in its order, from its generator.
            t = timesteps.sample(cfg.timestep_sampler, n, generator)
            t = objective.shift_timesteps(t, cfg.latent_crop_length)
            noise = torch.randn(batch.latents.shape, generator=generator)
            drop = torch.rand(n, generator=generator, dtype=torch.float64) < cfg.cfg_dropout

            value, grad_norm, magnitude = objective.step(batch, prompts, t, noise, drop)
            if not np.isfinite(value):
                kept = checkpoints[-1] if checkpoints else "none (no checkpoint yet)"
                raise loop.TrainingError(
                    f"{run.name}: loss is {value} at step {step + 1}; training stopped. "
                    f"Last good checkpoint: {kept}"
                )
            step += 1
            trained += 1
            train_seconds += time.perf_counter() - tick
            lr = cfg.lr
            pbar.set_postfix(
                {
                    "train/loss": f"{value:.6f}",
                    "train/lr": f"{lr:.3e}",
                    "train/grad_norm": f"{grad_norm:.6f}",
                    "train/lora_magnitude": f"{magnitude:.6f}",
                }
            )
            pbar.set_description(f"Step {step}, Epoch {sampler.epoch}")
            pbar.update(1)
            t_mean = t.float().mean().item()
            history_files.step(step, t_mean, value, lr=lr, grad_norm=grad_norm,
                               lora_magnitude=magnitude)  # fmt: skip
            over = cap.passed()

            if step % cfg.eval_every == 0 or step == cfg.steps or over:
                measured = validation.loss(objective.loss)
                history.append({"step": step, "loss": measured})
                history_files.event("validation", step=step, loss=measured)
                log(f"{run.name}: step {step} validation loss {measured:.6f}")
                objective.render_samples(run_dir / "samples", step)
                if measured < best["loss"]:
                    Path(best["path"]).unlink(missing_ok=True)
                    best = {"step": step, "loss": measured, "path": ""}
                    path = loop._save_best(
                        objective, checkpoints_dir, step, sampler.epoch, best, metadata
                    )
                    best["path"] = str(path)
            if step % cfg.checkpoint_every == 0 or step == cfg.steps or over:
                path = objective.save(checkpoints_dir, step, sampler.epoch, metadata)
                checkpoints.append(str(path))
                history_files.event("checkpoint", step=step, path=str(path))
                save_state(
                    state_dir,
                    RunState(
                        step=step,
                        params=list(mlx_lora.adapter_state(objective.modules).values()),
                        optimizer=objective.optimizer_state(),
                        train_rng=generator.get_state(),
                        sampler_rng=sampler.generator.get_state(),
                        sampler=sampler.state_dict(),
                        prompt_rng=prompt_rng.getstate(),
                        history=history,
                        best=best,
                        checkpoints=checkpoints,
                        identity=identity,
                    ),
                )
                history_files.flush()
            if over:
                stopped = f"stopped at step {step} of {cfg.steps}: {over} (train.cap)"
                log(f"{run.name}: {stopped}; checkpoint and state kept")
                break
    finally:
        pbar.close()
        history_files.close()

    return loop.TrainResult(
        steps=step,
        steps_trained=trained,
        steps_per_second=trained / train_seconds if train_seconds else 0.0,
        base_loss=history[0]["loss"],
        best_loss=best["loss"],
        best_step=best["step"],
        best_path=best["path"],
        last_path=checkpoints[-1] if checkpoints else "",
        checkpoints=checkpoints,
        history=history,
        validation_note=note,
        resumed_from=resumed_from,
        seconds=time.perf_counter() - start_time,
        extra={
            "backend": "mlx",
            "device": objective.placement.device,
            **({"stopped": stopped} if stopped else {}),
        },
    )


def train_run(
    run: RunConfig,
    checkpoint: Path,
    encoded: pd.DataFrame,
    run_dir: Path,
    placement: Placement,
    metadata: dict[str, str],
    log=print,
    progress=None,
) -> loop.TrainResult:
    """`stable_audio_3.train.train_run` on MLX: same arguments, same files, same result."""
    split = split_holdout(load_items(encoded), run.train.holdout)
    objective = MLXObjective(checkpoint, run, placement)
    identity = {
        "base_model": metadata.get("tunesmith.base_model_fingerprint", str(checkpoint)),
        "adapter_type": run.adapter.type,
        "rank": run.adapter.rank,
        "alpha": run.adapter.scale_alpha,
        "targets": objective.targets,
    }
    return train(objective, split, run, run_dir, identity, metadata, log, progress)
