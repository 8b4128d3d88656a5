"""What the one training loop (`tunesmith.train.loop`) asks of a family's trainer.

A `Trainer` is one family's training on one backend: it owns its random draws (batches,
noise levels, noise, dropout; each source seeded from the run's seed and part of its state)
and its update (loss, backward, clipping, optimizer). The loop owns the cadence: resume,
validation and the best and last adapter files, checkpoints, the memory cap, the stop on a
non-finite loss, progress, events, samples and the result. Nothing in the loop knows a family.

A family also decides what its adapter files are called (`AdapterNames`): underfit writes a
file per checkpoint and names the best by its step; PEFT/kohya users expect one `NAME` file
(the best) and a `NAME.last` beside it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch

from tunesmith.train.config import RunConfig


@dataclass
class StepReport:
    """What one optimizer step did: its loss, the mean noise level of its batch (underfit's
    `loss_by_timestep.bin` record), the epoch it drew from, and numbers for the progress bar
    and the events (`lr`, `grad_norm`, ...). A non-empty `stop` ends the run after this step
    (validation, files and state as at the last step), saying why: a target loss reached."""

    loss: float
    t: float
    epoch: int
    fields: dict[str, float] = field(default_factory=dict)
    stop: str = ""
    note: str = ""  # one line for the run's log about what this step saw (the data, say)


class AdapterNames(Protocol):
    """Where a family's adapter files go inside a run's folder."""

    def best(self, step: int) -> Path: ...  # the adapter with the lowest validation loss

    def checkpoint(self, step: int, epoch: int) -> Path | None: ...  # None: no periodic files

    def last(self, step: int, epoch: int) -> Path: ...  # the last step's, where not the best


@dataclass(frozen=True)
class PeftNames:
    """PEFT's and kohya's users' names: the best adapter is `NAME`, the last step's
    `NAME.last` where it differs; no periodic files (the state is saved instead). `NAME` is
    the file `<run>.safetensors`, or with `weights` the folder `<run>/` holding that file
    (a PEFT folder's `adapter_model.safetensors`)."""

    folder: Path
    run: str
    weights: str = ""

    def best(self, step: int) -> Path:
        return self._path(self.run)

    def checkpoint(self, step: int, epoch: int) -> None:
        return None

    def last(self, step: int, epoch: int) -> Path:
        return self._path(f"{self.run}.last")

    def _path(self, name: str) -> Path:
        if self.weights:
            return self.folder / name / self.weights
        return self.folder / f"{name}.safetensors"


class Trainer(Protocol):
    run: RunConfig
    device: str  # where the memory cap measures ("cuda:0", "cpu", ...)
    identity: dict[str, Any]  # what a saved state must match to be resumed
    validation_note: str  # on what the validation loss is measured, in words
    names: AdapterNames
    # Optional: `start_note`, one line the loop logs when the run starts or resumes (e.g. the
    # optimizer's split of the parameters); `steps`, where set, the steps the run trains to
    # (a family whose horizon is counted in epochs knows it only once it has its items);
    # `writes_progress`, true where the trainer writes its own progress lines (no bar then).

    def step(self) -> StepReport:
        """One optimizer update. On a non-finite loss the adapter is left as it was."""

    def validation_loss(self) -> float:
        """The loss on the held-out items at fixed levels and fixed noise (no random state)."""

    def render_samples(self, folder: Path, step: int) -> None:
        """The run's demos with the adapter as it is now, `<folder>/<demo>-<step>.<ext>`."""

    def write_adapter(self, path: Path, step: int, epoch: int, loss: float | None) -> Path:
        """Write the adapter in the family's format (`loss`: its validation loss, if known)."""

    def adapter_files(self, path: Path) -> list[Path]:
        """The files `write_adapter(path, ...)` writes: the file and any twin beside it."""

    def remove_adapter(self, path: Path) -> None:
        """Remove an adapter file written by `write_adapter` (with any twin it writes)."""

    def state(self) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """Everything to continue exactly: tensors, and a JSON-able document."""

    def load_state(self, tensors: dict[str, torch.Tensor], document: dict[str, Any]) -> None:
        """Continue from `state()` as saved by an earlier process."""


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
