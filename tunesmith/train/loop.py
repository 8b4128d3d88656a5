"""The training loop, top to bottom: one family's objective, underfit's conventions.

Per step: a batch of random crops, a random prompt per item (underfit's templates), a
timestep per item (sampler, then the model's shift), noise, a CFG-dropout coin per item,
the loss, backward, optional clipping, AdamW. Validation on held-out items at fixed levels
and fixed noise before the first step (the base model: every adapter starts at zero) and
every `eval_every` steps, each followed by the run's demos rendered into `samples/`; the
adapter with the lowest validation loss is kept beside the last one. Checkpoints every
`checkpoint_every` steps and at the end, with the full state to resume from (bit for bit
on the CPU). Rendering samples draws from the pipeline's own seeded generators only.

Every random number comes from three sources seeded from the run's seed and saved in the
state: the sampler's generator (order, crops), the training generator (t, noise, dropout)
and the prompt generator (templates, trigger). Validation draws from none of them.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, TextIO

import torch
from tqdm import tqdm

from tunesmith.train import timesteps
from tunesmith.train.config import RunConfig
from tunesmith.train.data import Batch, Sampler, Split
from tunesmith.train.history import History
from tunesmith.train.memory import MemoryCap
from tunesmith.train.prompts import training_prompt
from tunesmith.train.state import RunState, latest_state, load_state, restore, save_state
from tunesmith.train.validation import Validation


class Objective(Protocol):
    def parameters(self) -> list[torch.nn.Parameter]: ...
    def loss(self, batch: Batch, prompts: list[str], t, noise, drop) -> torch.Tensor: ...
    def shift_timesteps(self, t: torch.Tensor, length: int) -> torch.Tensor: ...
    def render_samples(self, folder: Path, step: int) -> list[Path]: ...
    def save(self, folder: Path, step: int, epoch: int, metadata: dict[str, str], name=None): ...


class TrainingError(RuntimeError):
    """The run stopped: a NaN loss, for one. The message names the step and what was kept."""


@dataclass
class TrainResult:
    steps: int
    steps_trained: int  # in this process (fewer than `steps` after a resume)
    steps_per_second: float
    base_loss: float
    best_loss: float
    best_step: int
    best_path: str
    last_path: str
    checkpoints: list[str]
    history: list[dict[str, Any]]
    validation_note: str
    resumed_from: int | None = None
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def train(
    objective: Objective,
    split: Split,
    run: RunConfig,
    run_dir: Path,
    identity: dict[str, Any],
    metadata: dict[str, str],
    log: Callable[[str], None] = print,
    progress: TextIO | None = None,
) -> TrainResult:
    """Train `objective` to `run.train.steps`, resuming from `run_dir/state` when it can.

    `log` gets one line per validation; `progress` (default stdout) gets underfit's tqdm bar.
    """
    cfg = run.train
    progress = progress or sys.stdout
    start_time = time.perf_counter()
    checkpoints_dir, state_dir = run_dir / "checkpoints", run_dir / "state"
    checkpoints_dir.mkdir(parents=True, exist_ok=True)
    params = objective.parameters()
    optimizer = torch.optim.AdamW(params, lr=cfg.lr)  # torch's defaults otherwise
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
        restore(state, params, optimizer)
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
        log(f"{run.name}: base model validation loss {base:.6f} ({note})")
        best["path"] = str(_save_best(objective, checkpoints_dir, 0, 0, best, metadata))
        objective.render_samples(run_dir / "samples", 0)
    resumed_from = step if saved is not None else None

    history_files = History(run_dir, step)
    trained, train_seconds, stopped = 0, 0.0, ""
    cap = MemoryCap(cfg.cap, str(getattr(objective, "device", "cpu")))  # ends the run past it
    pbar = _bar(step, sampler.epoch, progress)
    try:
        while step < cfg.steps:
            tick = time.perf_counter()
            epoch_before = sampler.epoch
            batch = sampler.next_batch()
            if sampler.epoch != epoch_before:
                pbar.close()
                pbar = _bar(step, sampler.epoch, progress)
            n = batch.latents.shape[0]
            prompts = [
                training_prompt(list(p), prompt_rng, run.trigger, cfg.trigger_probability)
                for p in batch.pieces
            ]
            t = timesteps.sample(cfg.timestep_sampler, n, generator)
            t = objective.shift_timesteps(t, cfg.latent_crop_length)
            noise = torch.randn(batch.latents.shape, generator=generator)
            drop = torch.rand(n, generator=generator, dtype=torch.float64) < cfg.cfg_dropout

            loss = objective.loss(batch, prompts, t, noise, drop).mean()
            if not torch.isfinite(loss):
                kept = checkpoints[-1] if checkpoints else "none (no checkpoint yet)"
                raise TrainingError(
                    f"{run.name}: loss is {loss.item()} at step {step + 1}; training stopped. "
                    f"Last good checkpoint: {kept}"
                )
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
            grad_norm, magnitude = _norms(params)  # post-clip grads, pre-update params
            optimizer.step()
            step += 1
            trained += 1
            train_seconds += time.perf_counter() - tick

            value = loss.item()
            lr = optimizer.param_groups[0]["lr"]
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
                    path = _save_best(
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
                        params=[p.detach().float() for p in params],
                        optimizer=optimizer.state_dict(),
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

    return TrainResult(
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
        extra={"stopped": stopped} if stopped else {},
    )


def _save_best(objective, folder: Path, step: int, epoch: int, best: dict, metadata) -> Path:
    """underfit's best-checkpoint name, `{run}-best-step={step}.safetensors`."""
    name = f"{objective.run.name}-best-step={step}.safetensors"
    info = {**metadata, "validation_loss": f"{best['loss']:.8g}"}
    return objective.save(folder, step, epoch, info, name=name)


def _norms(params: list[torch.nn.Parameter]) -> tuple[float, float]:
    """One global L2 over the adapter gradients and one over the adapter parameters."""
    grads = [p.grad.detach().float().norm() for p in params if p.grad is not None]
    grad = torch.linalg.vector_norm(torch.stack(grads)).item() if grads else 0.0
    magnitude = torch.linalg.vector_norm(torch.stack([p.detach().float().norm() for p in params]))
    return grad, magnitude.item()


def _bar(step: int, epoch: int, stream: TextIO) -> tqdm:
    # underfit's progress output: one bar per epoch, redrawn every step.
    return tqdm(desc=f"Step {step}, Epoch {epoch}", mininterval=0, miniters=1, file=stream)
