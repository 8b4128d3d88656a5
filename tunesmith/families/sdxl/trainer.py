"""Training one SDXL run, top to bottom: the loop around `SdxlLora` (train.py).

Per step: the next pictures of a shuffled pass over the training pictures (a new order each
epoch, as kohya's and diffusers' data loaders draw), a level `t`, the posterior draw ε₁ and
the noise ε from the training generator, backward, optional clipping, AdamW at a constant lr,
then the memory cap. Validation on the held-out pictures at levels 125/375/625/875 with fixed
noise before the first step (the base model: every B is zero) and every `eval_every` steps and
at the end, each followed by the run's demos rendered into `samples/<demo>-<step>.png` by the
renders stage's own `render_demo`, so row 0 is the base model's picture. The adapter with the
lowest validation loss is `NAME.safetensors` (and its kohya twin), the last step's
`NAME.last.safetensors` where it differs. The full state (adapter, AdamW, both generators, the
pass order) is saved every `checkpoint_every` steps and at the end: asking an unchanged run for
more steps resumes it, bit for bit on the CPU.

Three random sources, all seeded from the run's seed and saved with the state: the order
generator (the passes), the training generator (t, ε₁, ε) and the adapters' initial A (drawn
once, then part of the state). Validation and samples draw from none of them.

Of the shared train settings the SDXL run does not use the Stable Audio ones
(`timestep_sampler`, `cfg_dropout`, `latent_crop_length`, `trigger_probability`); setting one
for an `sdxl` run is a config error, not a silent no-op. Captions are used as written.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import pandas as pd
import torch
from tqdm import tqdm

from tunesmith.backends.placement import Placement
from tunesmith.families.sdxl import files
from tunesmith.families.sdxl.model import load_pipeline
from tunesmith.families.sdxl.sample import DTYPES, render_demo
from tunesmith.families.sdxl.train import Picture, SdxlLora, ValidationSet, pictures_from_frame
from tunesmith.media.writers import write_png
from tunesmith.train.config import RunConfig
from tunesmith.train.history import History
from tunesmith.train.loop import TrainingError, TrainResult
from tunesmith.train.memory import MemoryCap
from tunesmith.train.state import RunState, latest_state, load_state, restore, save_state


def split_holdout(pictures: list[Picture], holdout: int | None = None):
    """(train, held out, note): a tenth held out, 1 to 4, unless `holdout` says; fewer than 5
    pictures: validation on the training pictures, and the note says so."""
    if holdout is None:
        holdout = 0 if len(pictures) < 5 else min(4, max(1, len(pictures) // 10))
    if holdout <= 0 or holdout >= len(pictures):
        note = (
            f"validation on training pictures: {len(pictures)} picture(s), none held out; the "
            "loss says how well they are fitted, not how well others would be"
        )
        return pictures, pictures, note
    return pictures[:-holdout], pictures[-holdout:], f"validation on {holdout} held-out picture(s)"


class PassOrder:
    """Batches from shuffled passes over `count` pictures; its state resumes a run exactly."""

    def __init__(self, count: int, batch_size: int, seed: int) -> None:
        self.count, self.batch_size = count, batch_size
        self.generator = torch.Generator().manual_seed(seed + 2)  # not the training generator
        self.epoch, self.position, self.order = 0, count, []

    def next_batch(self) -> list[int]:
        picks = []
        while len(picks) < self.batch_size:
            if self.position >= self.count:
                self.order = torch.randperm(self.count, generator=self.generator).tolist()
                self.position, self.epoch = 0, self.epoch + 1
            picks.append(self.order[self.position])
            self.position += 1
        return picks

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "position": self.position, "order": self.order}

    def load_state_dict(self, state: dict[str, Any], generator_state: torch.Tensor) -> None:
        self.epoch, self.position, self.order = state["epoch"], state["position"], state["order"]
        self.generator.set_state(generator_state)


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


def train_run(
    run: RunConfig,
    checkpoint: Path,
    encoded: pd.DataFrame,
    run_dir: Path,
    placement: Placement,
    metadata: dict[str, str],
    log: Callable[[str], None] = print,
    progress: TextIO | None = None,
) -> TrainResult:
    """Train `run` on the pictures of `encoded` (this base model's rows) into `run_dir`."""
    cfg, start_time = run.train, time.perf_counter()
    train, held, note = split_holdout(pictures_from_frame(encoded), cfg.holdout)
    pipe = load_pipeline(checkpoint, DTYPES[placement.dtype], placement.device)
    lora = SdxlLora(
        pipe.unet,
        pipe.scheduler,
        pipe.vae.config.scaling_factor,
        run.adapter.rank,
        run.adapter.scale_alpha,
        cfg.seed,
    )
    validation = ValidationSet.make(held, seed=cfg.seed + 1)
    params = lora.parameters()
    optimizer = torch.optim.AdamW(params, lr=cfg.lr)  # torch's defaults otherwise, as kvad
    order = PassOrder(len(train), cfg.batch_size, cfg.seed)
    generator = torch.Generator().manual_seed(cfg.seed)
    cap = MemoryCap(cfg.cap, placement.device)
    identity = {
        "base_model": metadata.get("tunesmith.base_model_fingerprint", str(checkpoint)),
        "adapter_type": "lora",
        "rank": lora.rank,
        "alpha": lora.alpha,
        "targets": list(lora.named_factors()),
    }
    best_file = run_dir / f"{run.name}.safetensors"
    last_file = run_dir / f"{run.name}.last.safetensors"
    state_dir, samples = run_dir / "state", run_dir / "samples"

    def write(path: Path, step: int, loss: float | None) -> Path:
        meta = {**metadata, "tunesmith.step": str(step)}
        if loss is not None:
            meta["validation_loss"] = f"{loss:.8g}"
        files.save_kohya(lora, files.kohya_path(path), meta, run.name, step, cfg.size)
        return files.save_peft(lora, path, meta)

    def measure(step: int) -> float:
        value = lora.validation_loss(validation)
        for index, demo in enumerate(run.demos):
            write_png(render_demo(pipe, demo, cfg.size), _mkdir(samples) / f"{index}-{step}.png")
        return value

    saved = latest_state(state_dir, cfg.steps)
    if saved is not None:
        state = load_state(saved, identity)
        restore(state, params, optimizer)
        generator.set_state(state.train_rng)
        order.load_state_dict(state.sampler, state.sampler_rng)
        step, history, best = state.step, state.history, state.best
        log(f"resuming {run.name} from step {step} ({saved})")
    else:
        step = 0
        base = measure(0)
        history, best = [{"step": 0, "loss": base}], {"step": 0, "loss": base}
        log(f"{run.name}: base model validation loss {base:.6f} ({note})")
        write(best_file, 0, base)
    resumed_from = step if saved is not None else None

    def checkpoint_state() -> None:
        state = RunState(
            step=step, params=[p.detach().float() for p in params],
            optimizer=optimizer.state_dict(), train_rng=generator.get_state(),
            sampler_rng=order.generator.get_state(), sampler=order.state_dict(),
            prompt_rng=(), history=history, best=best, identity=identity,
        )  # fmt: skip
        save_state(state_dir, state)

    stopped, trained, train_seconds = "", 0, 0.0
    history_files = History(run_dir, step)
    bar = tqdm(desc=run.name, initial=step, total=cfg.steps, file=progress or sys.stdout)
    try:
        while step < cfg.steps:
            tick = time.perf_counter()
            pictures = [train[i] for i in order.next_batch()]
            loss, t = train_step(lora, optimizer, pictures, generator, cfg.grad_clip)
            if not math.isfinite(loss):
                raise TrainingError(
                    f"{run.name}: loss is {loss} at step {step + 1}; training stopped. "
                    f"Best adapter kept: {best_file} (step {best['step']})"
                )
            step, trained = step + 1, trained + 1
            train_seconds += time.perf_counter() - tick
            bar.set_postfix({"train/loss": f"{loss:.6f}", "train/lr": f"{cfg.lr:.3e}"})
            bar.update(1)
            history_files.step(step, t.float().mean().item(), loss)

            over = cap.passed()
            if step % cfg.eval_every == 0 or step == cfg.steps or over:
                measured = measure(step)
                history.append({"step": step, "loss": measured})
                history_files.event("validation", step=step, loss=measured)
                log(f"{run.name}: step {step} validation loss {measured:.6f}")
                if measured < best["loss"]:
                    best = {"step": step, "loss": measured}
                    write(best_file, step, measured)
            if step % cfg.checkpoint_every == 0 or step == cfg.steps or over:
                checkpoint_state()
                history_files.flush()
                history_files.event("checkpoint", step=step, path=str(state_dir))
            if over:
                stopped = f"stopped at step {step} of {cfg.steps}: {over} (train.cap)"
                log(f"{run.name}: {stopped}; adapter files and state kept")
                history_files.event("stopped", step=step, reason=over)
                break
    finally:
        bar.close()
        history_files.close()

    if best["step"] != step:
        last_path = write(last_file, step, history[-1]["loss"])
    else:  # the last step is the best: one file, no stale `.last` from a shorter run
        for stale in (last_file, files.kohya_path(last_file)):
            stale.unlink(missing_ok=True)
        last_path = best_file
    return TrainResult(
        steps=step,
        steps_trained=trained,
        steps_per_second=trained / train_seconds if train_seconds else 0.0,
        base_loss=history[0]["loss"],
        best_loss=best["loss"],
        best_step=best["step"],
        best_path=str(best_file),
        last_path=str(last_path),
        checkpoints=[],
        history=history,
        validation_note=note,
        resumed_from=resumed_from,
        seconds=time.perf_counter() - start_time,
        extra={"stopped": stopped} if stopped else {},
    )


def _mkdir(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return folder
