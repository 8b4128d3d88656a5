"""The training loop every family and backend runs, top to bottom.

Before the first step (a fresh run): the validation loss of the base model (every adapter
starts at zero), the adapter written as the first best, the demos rendered as samples.
Then per step: the trainer's update; the stop on a non-finite loss; progress (underfit's
line, `train/*` postfix keys, with the run's total) and the step's record; the memory cap. Every
`eval_every` steps and at the end: the validation loss, samples, and the best adapter
rewritten when it improved: by the loss, or with `train.select` by the score a caller
passes in (`score`, below). Every `checkpoint_every` steps and at the end: the
family's periodic adapter file (if it writes one) and the full state to resume from. A run
asked for more steps, or killed, continues from its newest state, bit for bit on the CPU;
an output deleted since is written again from that state.

What a step draws and how it updates is the trainer's (`tunesmith.train.trainer`); nothing
here knows a family.

Keeping by a score (`train.select` other than "loss"): the caller passes `score(step)`, a
number higher for a better adapter (None where nothing was measured), which the loop asks
after each validation's samples are rendered; step 0 (the base model) is the bar. The kept
adapter is the loss's choice until a step's score beats the base model's; from then on it
is the step of the best score (the earliest where two are equal). Every step the kept adapter
changes to is the one just trained, so one file is kept, as with the loss. The score is
recorded beside the loss in the history (and so in the state: a resumed run keeps the same
adapter), and where no step beats the base the run says so in one line. The loop knows no
measure: the scoring comes from above (the training process, `tunesmith.quality.select`).

On several processes (`tunesmith.train.distributed`) every rank runs the steps; rank 0
alone measures validation, renders samples, writes adapter files, events, progress and the
state. A state records the number of processes that trained it, and resumes only with as many.
"""

from __future__ import annotations

import math
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import torch
from tqdm import tqdm

from tunesmith.train import distributed
from tunesmith.train.config import select_text
from tunesmith.train.history import History
from tunesmith.train.memory import MemoryCap
from tunesmith.train.state import best_copy, latest_state, load_state, save_state
from tunesmith.train.trainer import Trainer, TrainingError, TrainResult

Score = Callable[[int], float | None]  # step → higher is better; None: not measured


class _Run:
    """The loop's own record of a run: step, validation history, best, checkpoints."""

    def __init__(self, trainer: Trainer, run_dir: Path, score: Score | None = None) -> None:
        self.trainer, self.run_dir, self.score = trainer, run_dir, score
        self.step, self.epoch = 0, 0
        self.history: list[dict[str, Any]] = []
        self.best: dict[str, Any] = {}
        self.checkpoints: list[str] = []
        world = distributed.rank_and_world()[1]
        # One process: the identity as before (its states resume as they did).
        self.identity = {**trainer.identity, **({"world_size": world} if world > 1 else {})}

    def document(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "history": self.history,
            "best": self.best,
            "checkpoints": self.checkpoints,
            "identity": self.identity,
        }

    def measure(self, log: Callable[[str], None]) -> dict[str, Any]:
        """The validation: its loss, the samples, its score where keeping by one; the best
        adapter kept again where this step is better. Returns the history's new entry."""
        loss = self.trainer.validation_loss()
        entry: dict[str, Any] = {"step": self.step, "loss": loss}
        self.trainer.render_samples(self.run_dir / "samples", self.step)
        if self.score is not None:
            score = self.score(self.step)
            if score is not None:
                entry["score"] = float(score)
        self.history.append(entry)
        by = self.better(entry)
        if by:
            self.keep_best(loss, entry.get("score") if by == "score" else None)
        return entry

    def better(self, entry: dict[str, Any]) -> str:
        """Whether the step of `entry` is kept instead of the best so far: "loss", "score", or
        "" where it is not."""
        score, bar = entry.get("score"), self.history[0].get("score")
        if self.best.get("by") == "score":  # a step beat the base: the score decides now
            return "score" if score is not None and score > self.best["score"] else ""
        if score is not None and bar is not None and entry["step"] > 0 and score > bar:
            return "score"  # the first step that beats the base model
        return "loss" if not self.best or entry["loss"] < self.best["loss"] else ""

    def keep_best(self, loss: float, score: float | None = None) -> None:
        trainer, old = self.trainer, self.best.get("path")
        path = trainer.names.best(self.step)
        if old and Path(old) != path:
            trainer.remove_adapter(Path(old))
        trainer.write_adapter(path, self.step, self.epoch, loss)
        self.best = {"step": self.step, "loss": loss, "path": str(path)}
        if score is not None:
            self.best.update(score=score, by="score")

    def checkpoint(self, events: History) -> None:
        trainer = self.trainer
        path = trainer.names.checkpoint(self.step, self.epoch)
        if path is not None:
            trainer.write_adapter(path, self.step, self.epoch, None)
            self.checkpoints.append(str(path))
        tensors, own = trainer.state()
        events.flush()
        save_state(
            self.run_dir / "state",
            self.step,
            tensors,
            {**self.document(), "trainer": own},
            best_files=trainer.adapter_files(Path(self.best["path"])),
        )
        events.event("checkpoint", step=self.step, path=str(path or self.run_dir / "state"))


def train(
    trainer: Trainer,
    run_dir: Path,
    log: Callable[[str], None] = print,
    progress: TextIO | None = None,
    score: Score | None = None,
) -> TrainResult | None:
    """Train to `trainer.steps` where the trainer sets it, else `trainer.run.train.steps`,
    resuming from `run_dir/state` when it can; a step whose report says `stop` ends it early.

    `log` gets one line per validation; `progress` (default stdout) gets the progress bar.
    `score`: where the run keeps its adapter by a measure (`train.select`), the score of the
    samples just rendered at a step (see the module's docstring); None keeps by the loss.
    On a rank other than 0 of several processes: the steps only, and None.
    """
    cfg, name = trainer.run.train, trainer.run.name
    steps = getattr(trainer, "steps", None) or cfg.steps
    start_time = time.perf_counter()
    rank, world = distributed.rank_and_world()
    main = rank == 0
    if not main:
        log, progress = _quiet, None
    select = getattr(cfg, "select", "loss")
    if select != "loss" and score is None and main:
        log(f"{name}: train.select = {select_text(select)}, but nothing measures the renders "
            "here; the adapter of the lowest validation loss is kept")  # fmt: skip
    run = _Run(trainer, run_dir, score if main and select != "loss" else None)
    if getattr(trainer, "start_note", ""):
        log(f"{name}: {trainer.start_note}")
    saved = latest_state(run_dir / "state", steps)
    if saved is not None:
        _resume(run, saved, rewrite=main)
        log(f"resuming {name} from step {run.step} ({saved})")
    elif main:
        base = run.measure(log)["loss"]
        log(f"{name}: base model validation loss {base:.6f} ({trainer.validation_note})")
    resumed_from = run.step if saved is not None else None

    events = History(run_dir, run.step) if main else _NoEvents()
    cap = MemoryCap(cfg.cap, trainer.device)  # ends the run past it
    trained, train_seconds, stopped = 0, 0.0, ""
    # A trainer that writes its own progress lines (Stable Audio 3: underfit's, one per step)
    # gets no bar beside them in the same file.
    own = getattr(trainer, "writes_progress", False)
    bar = _bar(run.step, run.epoch, steps, progress or sys.stdout, disable=not main or own)
    try:
        while run.step < steps:
            tick = time.perf_counter()
            try:
                report = trainer.step()
            except torch.cuda.OutOfMemoryError:
                # The step did not finish: the adapter is as the last step left it (an update
                # happens after the backward that runs out). Kept as the cap keeps it.
                stopped = _out_of_memory(run, steps, events, log)
                break
            if not math.isfinite(report.loss):
                kept = run.checkpoints[-1] if run.checkpoints else run.best["path"]
                raise TrainingError(
                    f"{name}: loss is {report.loss} at step {run.step + 1}; training stopped. "
                    f"Last good checkpoint: {kept}"
                )
            if report.note:
                log(f"{name}: {report.note}")
            run.step, run.epoch = run.step + 1, report.epoch
            trained += 1
            train_seconds += time.perf_counter() - tick
            # one redraw a step (the update's): postfix and description set without their own
            postfix = {f"train/{k}": _shown(k, v) for k, v in _postfix(report).items()}
            bar.set_postfix(postfix, refresh=False)
            bar.set_description(f"Step {run.step}, Epoch {run.epoch}", refresh=False)
            bar.update(1)
            events.step(run.step, report.t, report.loss, of=steps, **report.fields)
            over = cap.passed()
            if world > 1 and distributed.any_rank(bool(over), _flag_device(trainer)) and not over:
                over = "another rank passed its memory cap"  # every rank stops at one step
            end = run.step == steps or over or report.stop
            if main and (run.step % cfg.eval_every == 0 or end):
                entry = run.measure(log)
                scored = {"score": entry["score"]} if "score" in entry else {}
                events.event("validation", step=run.step, loss=entry["loss"], **scored)
                kept = " (kept)" if run.best.get("by") and run.best["step"] == run.step else ""
                log(f"{name}: step {run.step} validation loss {entry['loss']:.6f}{kept}")
            if main and (run.step % cfg.checkpoint_every == 0 or end):
                run.checkpoint(events)
            if over or report.stop:
                why = f"{over} (train.cap); {TO_FIT}" if over else report.stop
                stopped = f"stopped at step {run.step} of {steps}: {why}"
                log(f"{name}: {stopped}; adapter files and state kept")
                events.event("stopped", step=run.step, reason=over or report.stop)
                break
    finally:
        bar.close()
        events.close()

    if not main:
        return None
    last_path = _last(run)
    extra: dict[str, Any] = {"stopped": stopped} if stopped else {}
    if run.score is not None:
        extra["select"] = _selected(run, select)
        if not run.best.get("by"):
            log(f"{name}: {extra['select']['line']}")
    return TrainResult(
        steps=run.step,
        steps_trained=trained,
        steps_per_second=trained / train_seconds if train_seconds else 0.0,
        base_loss=run.history[0]["loss"],
        best_loss=run.best["loss"],
        best_step=run.best["step"],
        best_path=run.best["path"],
        last_path=str(last_path),
        checkpoints=run.checkpoints,
        history=run.history,
        validation_note=trainer.validation_note,
        resumed_from=resumed_from,
        seconds=time.perf_counter() - start_time,
        extra=extra,
    )


def _selected(run: _Run, select: Any) -> dict[str, Any]:
    """How the kept adapter was chosen, for the result: by the score, or by the loss (and one
    line saying why) where no step's score beat the base model's."""
    said = f"train.select = {select_text(select)}"
    if run.best.get("by") == "score":
        line = f"kept step {run.best['step']} by {said} (the base model's score beaten)"
        return {"by": "score", "step": run.best["step"], "score": run.best["score"], "line": line}
    if run.history[0].get("score") is None:
        why = "the base model's renders were not measured"
    else:
        why = "no step's renders beat the base model's on it"
    line = (
        f"{said}: {why}; kept the adapter of the lowest validation loss (step {run.best['step']})"
    )
    return {"by": "loss", "step": run.best["step"], "line": line}


def _resume(run: _Run, saved: Path, rewrite: bool = True) -> None:
    tensors, document = load_state(saved, run.identity)
    run.trainer.load_state(tensors, document["trainer"])
    run.step, run.history = document["step"], document["history"]
    run.best, run.checkpoints = document["best"], document["checkpoints"]
    run.epoch = document["trainer"].get("epoch", 0)
    if not rewrite:  # a rank other than 0: rank 0 writes the files
        return
    # A best adapter deleted since: written again from the state's copy of its files.
    for path in run.trainer.adapter_files(Path(run.best["path"])):
        copy = best_copy(saved, path)
        if not path.exists() and copy is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(copy, path)


def _last(run: _Run) -> Path:
    """The last step's adapter: the final checkpoint where the family writes them; else the
    best where the last step is the best, or `names.last` written now."""
    trainer, step, epoch = run.trainer, run.step, run.epoch
    final = trainer.names.checkpoint(step, epoch)
    if final is not None:
        if not final.exists():  # deleted since its state was saved: the state is this step's
            trainer.write_adapter(final, step, epoch, None)
        return final
    last = trainer.names.last(step, epoch)
    if run.best["step"] == step:  # one file; no stale `.last` of a shorter run beside it
        trainer.remove_adapter(last)
        return Path(run.best["path"])
    return trainer.write_adapter(last, step, epoch, run.history[-1]["loss"])


TO_FIT = (
    "to fit: train.gradient_checkpointing = true, a shorter crop or a smaller batch, or a "
    "higher train.cap"
)


def _out_of_memory(run: _Run, steps: int, events: History, log: Callable[[str], None]) -> str:
    """End a run whose step ran out of device memory, as the cap ends one: the state of the
    last finished step saved (where it was not already), the best adapter kept, one line."""
    torch.cuda.empty_cache()
    main = distributed.rank_and_world()[0] == 0
    if main and run.step and run.step % run.trainer.run.train.checkpoint_every:
        run.checkpoint(events)
    stopped = (
        f"stopped at step {run.step} of {steps}: step {run.step + 1} ran out of device memory "
        f"(torch.cuda.OutOfMemoryError); {TO_FIT}"
    )
    log(f"{run.trainer.run.name}: {stopped}; adapter files and state kept")
    events.event("stopped", step=run.step, reason="out of memory")
    return stopped


def _postfix(report) -> dict[str, float]:
    return {"loss": report.loss, **report.fields}


def _shown(key: str, value: float) -> str:
    return f"{value:.3e}" if key == "lr" else f"{value:.6f}"


def _bar(step: int, epoch: int, steps: int, stream: TextIO, disable: bool = False) -> tqdm:
    # underfit's progress line (its description "Step N, Epoch E" and `train/*` postfix keys),
    # redrawn every step; one bar for the run with the run's total, so the line says how far
    # the run is and the time left, where underfit's restarts each epoch without a total.
    return tqdm(
        desc=f"Step {step}, Epoch {epoch}",
        total=steps,
        initial=step,
        mininterval=0,
        miniters=1,
        file=stream,
        disable=disable,
    )


def _quiet(line: str) -> None:
    """The log of a rank other than 0: its lines are rank 0's to say."""


class _NoEvents:
    """The events of a rank other than 0: rank 0 writes them."""

    def step(self, *args: Any, **kwargs: Any) -> None: ...

    def event(self, *args: Any, **kwargs: Any) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


def _flag_device(trainer: Trainer) -> str:
    """Where a collective's tensor lives: the rank's CUDA device under NCCL, else the CPU."""
    device = str(trainer.device)
    return device if device.startswith("cuda") else "cpu"
