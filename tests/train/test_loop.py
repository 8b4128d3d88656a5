"""The one training loop with a fake trainer (no model): what the loop promises, in seconds.

The fake's "adapter" is one number that each step moves toward 1 (its loss the distance); its
validation loss is a script of numbers, so the best-adapter bookkeeping can be read off; its
files are small JSON files. Real trainers are exercised through the loop in each family's tests.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

from tunesmith.train import loop
from tunesmith.train.config import RunConfig, TrainConfig
from tunesmith.train.trainer import PeftNames, StepReport, TrainingError


@dataclass(frozen=True)
class StepNames:
    """underfit's way: a file per checkpoint, the best named by its step."""

    folder: Path
    run: str

    def best(self, step: int) -> Path:
        return self.folder / f"{self.run}-best-step={step}.json"

    def checkpoint(self, step: int, epoch: int) -> Path:
        return self.folder / f"{self.run}-step={step}-epoch={epoch}.json"

    def last(self, step: int, epoch: int) -> Path:
        return self.checkpoint(step, epoch)


@dataclass
class Fake:
    """A trainer of the loop's protocol without a model."""

    run: RunConfig
    folder: Path
    validation: list[float] = field(default_factory=list)  # the losses measured, in turn
    losses: dict[int, float] = field(default_factory=dict)  # a step's loss where scripted
    stop_at: int = 0
    per_epoch: int = 3
    device: str = "cpu"
    validation_note: str = "validation on 1 held-out item(s)"
    names: object = None
    value: float = 0.0
    steps_taken: int = 0
    measured: int = 0
    loaded: dict | None = None

    def __post_init__(self) -> None:
        self.names = self.names or PeftNames(self.folder, self.run.name, "adapter.json")
        self.identity = {"base_model": "fake", "adapter_type": "lora", "rank": 1, "alpha": 1}

    def step(self) -> StepReport:
        self.steps_taken += 1
        self.value += 0.1 * (1 - self.value)
        loss = self.losses.get(self.steps_taken, 1 - self.value)
        stop = "enough" if self.steps_taken == self.stop_at else ""
        return StepReport(loss, 0.5, (self.steps_taken - 1) // self.per_epoch, {"lr": 0.1}, stop)

    def validation_loss(self) -> float:
        self.measured += 1
        if self.validation:
            return self.validation.pop(0)
        return 1 - self.value

    def render_samples(self, folder: Path, step: int) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"0-{step}.txt").write_text(str(self.value))

    def write_adapter(self, path: Path, step: int, epoch: int, loss: float | None) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"step": step, "epoch": epoch, "value": self.value}))
        return path

    def adapter_files(self, path: Path) -> list[Path]:
        return [path]

    def remove_adapter(self, path: Path) -> None:
        path.unlink(missing_ok=True)

    def state(self) -> tuple[dict[str, torch.Tensor], dict]:
        tensors = {"value": torch.tensor([self.value], dtype=torch.float64)}
        epoch = (self.steps_taken - 1) // self.per_epoch
        return tensors, {"steps_taken": self.steps_taken, "epoch": epoch}

    def load_state(self, tensors: dict[str, torch.Tensor], document: dict) -> None:
        self.value, self.steps_taken = float(tensors["value"][0]), document["steps_taken"]
        self.loaded = document


def run_config(**train) -> RunConfig:
    settings = {"steps": 6, "eval_every": 2, "checkpoint_every": 3, **train}
    return RunConfig(name="fake", family="fake", base_model="none", train=TrainConfig(**settings))


def fit(folder: Path, lines: list[str] | None = None, **kwargs):
    train = {k: kwargs.pop(k) for k in list(kwargs) if k in TrainConfig.__dataclass_fields__}
    trainer = Fake(run_config(**train), folder, **kwargs)
    log = lines.append if lines is not None else (lambda _: None)
    return trainer, loop.train(trainer, folder, log=log, progress=io.StringIO())


def events(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "events.jsonl").read_text().splitlines()]


def test_validation_and_checkpoints_keep_their_cadence_and_the_end(tmp_path):
    lines: list[str] = []
    trainer, result = fit(tmp_path, lines, steps=7)
    assert [h["step"] for h in result.history] == [0, 2, 4, 6, 7]  # the base, every 2, the end
    assert sorted(p.name for p in (tmp_path / "state").iterdir()) == ["step=6", "step=7"]
    assert [e["step"] for e in events(tmp_path) if e["event"] == "checkpoint"] == [3, 6, 7]
    assert sorted(p.name for p in (tmp_path / "samples").iterdir()) == [
        f"0-{s}.txt" for s in (0, 2, 4, 6, 7)
    ]
    assert (
        lines[0] == "fake: base model validation loss 1.000000 (validation on 1 held-out item(s))"
    )
    assert (result.steps, result.steps_trained, result.resumed_from) == (7, 7, None)
    assert result.base_loss == 1.0 and trainer.measured == 5
    assert len((tmp_path / "loss_by_timestep.bin").read_bytes()) == 7 * 12


def test_the_best_adapter_is_the_lowest_validation_and_the_last_is_kept_beside_it(tmp_path):
    _, result = fit(tmp_path, validation=[1.0, 0.5, 0.2, 0.7])
    assert (result.best_step, result.best_loss) == (4, 0.2)
    best, last = tmp_path / "fake" / "adapter.json", tmp_path / "fake.last" / "adapter.json"
    assert result.best_path == str(best) and json.loads(best.read_text())["step"] == 4
    assert result.last_path == str(last) and json.loads(last.read_text())["step"] == 6
    # a longer run whose last step is the best: one file, the stale `.last` removed
    _, longer = fit(tmp_path, steps=8, validation=[0.1])
    assert (longer.resumed_from, longer.best_step) == (6, 8)
    assert longer.last_path == longer.best_path and not last.exists()


def test_a_best_named_by_its_step_replaces_the_one_before(tmp_path):
    names = StepNames(tmp_path, "fake")
    _, result = fit(tmp_path, validation=[1.0, 0.5, 0.2, 0.7], names=names)
    assert sorted(p.name for p in tmp_path.glob("fake-best-*")) == ["fake-best-step=4.json"]
    assert result.checkpoints == [str(names.checkpoint(3, 0)), str(names.checkpoint(6, 1))]
    assert result.last_path == str(names.checkpoint(6, 1))


def test_more_steps_resume_from_the_newest_state_as_if_never_stopped(tmp_path):
    _, straight = fit(tmp_path / "straight", steps=9)
    fit(tmp_path / "resumed", steps=6)
    (tmp_path / "resumed" / "fake" / "adapter.json").unlink()  # a deleted best comes back
    lines: list[str] = []
    trainer, resumed = fit(tmp_path / "resumed", lines, steps=9)
    assert lines[0].startswith("resuming fake from step 6 (")
    assert trainer.loaded == {"steps_taken": 6, "epoch": 1}
    assert (resumed.resumed_from, resumed.steps_trained) == (6, 3)
    assert resumed.history == straight.history and resumed.best_step == straight.best_step
    assert (tmp_path / "resumed" / "fake" / "adapter.json").exists()
    a, b = events(tmp_path / "straight"), events(tmp_path / "resumed")
    assert [(e["event"], e.get("step")) for e in a] == [(e["event"], e.get("step")) for e in b]
    records = (tmp_path / "resumed" / "loss_by_timestep.bin").read_bytes()
    assert records == (tmp_path / "straight" / "loss_by_timestep.bin").read_bytes()


def test_a_non_finite_loss_stops_the_run_naming_the_step_and_what_was_kept(tmp_path):
    with pytest.raises(TrainingError) as error:
        fit(tmp_path, steps=9, losses={5: float("nan")})
    best = tmp_path / "fake" / "adapter.json"  # no periodic files: the best is what is kept
    assert str(error.value) == (
        f"fake: loss is nan at step 5; training stopped. Last good checkpoint: {best}"
    )
    assert (tmp_path / "state" / "step=3").is_dir() and not (tmp_path / "state" / "step=5").exists()


def test_a_run_past_its_memory_cap_stops_at_once_with_its_files_and_state(tmp_path):
    lines: list[str] = []
    _, result = fit(tmp_path, lines, steps=50, cap=0.001)  # 1 MB: this process is past it
    assert result.steps == 1 and "RAM" in result.extra["stopped"]
    assert "passed the cap of 0.00 GB (train.cap)" in result.extra["stopped"]
    assert [h["step"] for h in result.history] == [0, 1]
    assert (tmp_path / "state" / "step=1" / "state.json").exists()
    assert any(line.endswith("adapter files and state kept") for line in lines)


@dataclass
class RunsOutOfMemory(Fake):
    """A trainer whose step `at` raises what CUDA's allocator raises when the card is full."""

    at: int = 0

    def step(self) -> StepReport:
        if self.steps_taken + 1 == self.at:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return super().step()


def test_a_step_out_of_device_memory_ends_the_run_as_the_cap_does(tmp_path):
    lines: list[str] = []
    trainer = RunsOutOfMemory(run_config(steps=50, checkpoint_every=3), tmp_path, at=5)
    result = loop.train(trainer, tmp_path, log=lines.append, progress=io.StringIO())
    assert result.steps == 4 and trainer.value > 0  # four steps trained and kept
    assert result.extra["stopped"].startswith(
        "stopped at step 4 of 50: step 5 ran out of device memory"
    )
    assert "train.gradient_checkpointing = true" in result.extra["stopped"]
    # The state of the last finished step, from which a run asked again continues.
    assert sorted(p.name for p in (tmp_path / "state").iterdir()) == ["step=3", "step=4"]
    assert Path(result.best_path).exists() and Path(result.last_path).exists()
    assert [e["reason"] for e in events(tmp_path) if e["event"] == "stopped"] == ["out of memory"]
    assert lines[-1].endswith("adapter files and state kept")


def test_a_step_that_says_stop_ends_the_run_after_it(tmp_path):
    _, result = fit(tmp_path, steps=50, stop_at=4)
    assert result.steps == 4 and result.extra["stopped"] == "stopped at step 4 of 50: enough"
    assert [h["step"] for h in result.history] == [0, 2, 4]
    assert (tmp_path / "state" / "step=4").is_dir()
    assert [e["reason"] for e in events(tmp_path) if e["event"] == "stopped"] == ["enough"]


def test_the_progress_bar_counts_the_steps_of_the_run_across_epochs(tmp_path):
    stream = io.StringIO()
    trainer = Fake(run_config(steps=7), tmp_path)
    loop.train(trainer, tmp_path, log=lambda _: None, progress=stream)
    text = stream.getvalue()
    assert "Step 3, Epoch 0" in text and "Step 6, Epoch 1" in text and "Step 7, Epoch 2" in text
    assert re.search(r"Step 6, Epoch 1: +86%\|[^|]*\| 6/7 ", text), text
    assert re.search(r"Step 7, Epoch 2: 100%\|[^|]*\| 7/7 ", text), text
