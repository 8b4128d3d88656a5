"""Progress of a build, for the person watching it: the stage at work, its items done of their
total, and for training each run's step of its total, loss, validation loss and time left.

The engine says what it is doing through three calls and never how it is shown:

    with progress.stage("encoded"): ...            # an asset's whole body
    with progress.work("encoding", total) as tick:  # items of a stage; tick(n) as they finish
    with progress.training(run, events, steps): ... # a training process writing events.jsonl

Nothing is shown until a process installs a `Display` (`show()`): `tunesmith run`'s building
process does, the UI's runs and the tests do not (their logs are Dagster's). On a terminal the
display is `rich`'s live progress; elsewhere (CI, a pipe, a file) it is plain lines, one when a
stage starts, one when its items are done and one per validation of a training run, so a log
stays readable. The training process already records every step in `events.jsonl`; the
display reads its tail four times a second rather than adding a channel to the process.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

_display: Display | None = None


def show(display: Display | None) -> None:
    """Install `display` for this process (None: show nothing)."""
    global _display
    _display = display


@contextmanager
def stage(name: str) -> Iterator[None]:
    if _display is None:
        yield
        return
    _display.stage_started(name)
    start = time.monotonic()
    try:
        yield
    finally:
        _display.stage_ended(name, time.monotonic() - start)


@contextmanager
def work(label: str, total: int) -> Iterator[Callable[[int], None]]:
    """`tick(n=1)` as items finish; nothing is shown for no items."""
    if _display is None or total <= 0:
        yield lambda n=1: None
        return
    task = _display.work_started(label, total)
    try:
        yield lambda n=1: _display.advance(task, n)
    finally:
        _display.work_ended(task)


@contextmanager
def training(run: str, events: Path, steps: int | None, note: str = "") -> Iterator[None]:
    """While the body trains `run` (a process appending to `events`), its steps are shown.
    `steps` None: the trainer sets its horizon (in epochs), read from its first step event.
    `note`: a line said first (the run's memory estimate)."""
    if _display is None:
        yield
        return
    if note:
        _display.say(f"  training {run}: {note}")
    watch = _Watch(_display, run, events, steps)
    watch.start()
    try:
        yield
    finally:
        watch.stop()


class _Watch(threading.Thread):
    """Reads the newest `step` and `validation` events of one run's `events.jsonl`."""

    def __init__(self, display: Display, run: str, events: Path, steps: int | None) -> None:
        super().__init__(daemon=True)
        self.display, self.run_name, self.events, self.steps = display, run, events, steps
        self.done = threading.Event()
        self.offset = events.stat().st_size if events.exists() else 0  # earlier runs' lines
        self.task = display.training_started(run, steps)

    def run(self) -> None:
        while not self.done.wait(0.25):
            self.read()

    def stop(self) -> None:
        self.done.set()
        self.join()
        self.read()
        self.display.training_ended(self.task)

    def read(self) -> None:
        try:
            with open(self.events, "rb") as f:
                if f.seek(0, 2) < self.offset:  # cut back to the saved state on a resume
                    self.offset = 0
                f.seek(self.offset)
                chunk = f.read()
        except OSError:
            return  # not written yet
        whole = chunk[: chunk.rfind(b"\n") + 1]  # a line being written waits for the next read
        self.offset += len(whole)
        for line in whole.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("event") == "step":
                total = event.get("of") or self.steps  # the trainer's horizon, where it has one
                self.display.training_step(self.task, event["step"], total, event.get("loss"))
            elif event.get("event") == "validation":
                self.display.training_validation(self.task, event["step"], event["loss"])


class Display:
    """Plain lines: for output that is not a terminal."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self.lock = threading.Lock()
        self.tasks: dict[int, dict] = {}

    def say(self, line: str) -> None:
        with self.lock:
            print(line, file=self.stream, flush=True)

    def stage_started(self, name: str) -> None:
        self.say(f"  {name}: started")

    def stage_ended(self, name: str, seconds: float) -> None:
        pass  # the build's summary says how each stage ended

    def work_started(self, label: str, total: int) -> int:
        task = len(self.tasks)
        self.tasks[task] = {"label": label, "total": total, "done": 0, "start": time.monotonic()}
        return task

    def advance(self, task: int, n: int) -> None:
        self.tasks[task]["done"] += n

    def work_ended(self, task: int) -> None:
        t = self.tasks[task]
        self.say(f"  {t['label']}: {t['done']} of {t['total']} in {_duration(_since(t))}")

    def training_started(self, run: str, steps: int | None) -> int:
        task = self.work_started(f"training {run}", steps)
        self.tasks[task].update(step=0, first=None, loss=None, validation=None)
        self.say(f"  training {run}: {f'{steps} steps' if steps else 'started'}")
        return task

    def training_step(self, task: int, step: int, total: int, loss: float | None) -> None:
        t = self.tasks[task]
        if t["first"] is None:  # the rate counts from the first step seen (a resume starts late)
            t["first"] = (step - 1, time.monotonic())
        t["step"], t["total"], t["loss"] = step, total, loss

    def training_validation(self, task: int, step: int, loss: float) -> None:
        t = self.tasks[task]
        t["validation"] = loss
        if step:  # step 0 is the base model's loss, measured before any step
            self.say(f"  {t['label']}: {_training_text(t)}")

    def training_ended(self, task: int) -> None:
        pass  # the build's summary gives each run's losses and files

    def close(self) -> None:
        self.stream.flush()


class Live(Display):
    """`rich`'s live progress: a bar for each piece of work at hand and each training run; a
    finished one leaves a line. Drawn only when something changes (no refresh thread), under
    one lock, so a line printed and a bar redrawn from two threads never interleave."""

    def __init__(self, console) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        super().__init__(console.file)
        self.lock = threading.RLock()
        self.bars = Progress(
            TextColumn("  {task.description}"),
            BarColumn(bar_width=24),
            TextColumn("{task.fields[unit]}{task.completed:.0f}{task.fields[of]}"),
            TextColumn("{task.fields[detail]}"),
            TimeRemainingColumn(compact=True),
            console=console,
            auto_refresh=False,
        )
        self.bars.start()
        self.ids: dict[int, int] = {}

    def say(self, line: str) -> None:
        with self.lock:
            self.bars.console.print(line, highlight=False, markup=False, soft_wrap=True)

    def stage_started(self, name: str) -> None:
        self.say(f"  {name}")

    def work_started(self, label: str, total: int) -> int:
        with self.lock:
            task = super().work_started(label, total)
            self.ids[task] = self.bars.add_task(
                label, total=total, unit="", of=f" of {total}", detail=""
            )
            self.bars.refresh()
            return task

    def advance(self, task: int, n: int) -> None:
        with self.lock:
            super().advance(task, n)
            self.bars.advance(self.ids[task], n)
            self.bars.refresh()

    def work_ended(self, task: int) -> None:
        with self.lock:
            self.bars.remove_task(self.ids[task])
            self.bars.refresh()
            Display.work_ended(self, task)

    def training_started(self, run: str, steps: int | None) -> int:
        with self.lock:
            task = Display.work_started(self, f"training {run}", steps)
            self.tasks[task].update(step=0, first=None, loss=None, validation=None)
            self.ids[task] = self.bars.add_task(
                f"training {run}", total=steps, unit="step ", of=_of(steps), detail=""
            )
            self.bars.refresh()
            return task

    def training_step(self, task: int, step: int, total: int, loss: float | None) -> None:
        with self.lock:
            super().training_step(task, step, total, loss)
            t = self.tasks[task]
            self.bars.update(
                self.ids[task], completed=step, total=total, of=_of(total), detail=_losses(t)
            )
            self.bars.refresh()

    def training_validation(self, task: int, step: int, loss: float) -> None:
        with self.lock:
            self.tasks[task]["validation"] = loss
            self.bars.update(self.ids[task], detail=_losses(self.tasks[task]))
            self.bars.refresh()

    def training_ended(self, task: int) -> None:
        with self.lock:
            self.bars.remove_task(self.ids[task])
            self.bars.refresh()
            t = self.tasks[task]
            self.say(f"  {t['label']}: {_training_text(t, left=False)} in {_duration(_since(t))}")

    def close(self) -> None:
        with self.lock:
            self.bars.stop()
        super().close()


def for_stream(stream: TextIO | None = None) -> Display:
    """`Live` on a terminal, plain lines elsewhere. By default the process's standard output
    as it is now: a copy of its descriptor, because Dagster points descriptor 1 at its own
    log capture while a step runs, and a display that asked then would not see a terminal."""
    from rich.console import Console

    if stream is None:
        stream = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8", buffering=1)
    console = Console(file=stream)
    return Live(console) if console.is_terminal else Display(stream)


@contextmanager
def shown(stream: TextIO | None = None) -> Iterator[Display]:
    """`for_stream(stream)` installed for the body; a live display is closed after it, so what
    is printed next is plain text again."""
    display = for_stream(stream)
    show(display)
    try:
        yield display
    finally:
        show(None)
        display.close()
        if stream is None:  # the copy of standard output made for it
            display.stream.close()


def _of(total: int | None) -> str:
    return f" of {total}" if total else ""


def _losses(t: dict) -> str:
    loss = f"loss {t['loss']:.4f}" if isinstance(t["loss"], float) else ""
    validation = f"validation {t['validation']:.4f}" if t["validation"] is not None else ""
    return ", ".join(s for s in (loss, validation) if s)


def _training_text(t: dict, left: bool = True) -> str:
    text = f"step {t['step']}{_of(t['total'])}"
    if losses := _losses(t):
        text += f", {losses}"
    if left and t["total"] and t["first"] is not None and t["first"][0] < t["step"] < t["total"]:
        rate = (t["step"] - t["first"][0]) / (time.monotonic() - t["first"][1])
        text += f", {_duration((t['total'] - t['step']) / rate)} left"
    return text


def _since(t: dict) -> float:
    return time.monotonic() - t["start"]


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, seconds = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"
