"""The MLX trainer in the one loop: a resumed run ends where a straight one does, to the bit
(the schedule's step is part of its state), and it logs the lr the torch trainer logs."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from safetensors.torch import load_file

from tests.families.stable_audio_3.test_sa3_training import items, run_config
from tunesmith.backends.placement import Placement
from tunesmith.families.stable_audio_3.files import read_adapter
from tunesmith.families.stable_audio_3.mlx.trainer import MlxTrainer
from tunesmith.families.stable_audio_3.trainer import TorchTrainer
from tunesmith.train.loop import train
from tunesmith.train.state import ResumeError

pytestmark = pytest.mark.slow

MLX = Placement("mlx", "cpu", "float32", "test")
TORCH = Placement("torch", "cpu", "float32", "test")


def fit(tiny_sa3, run_dir, run, cls=MlxTrainer, placement=MLX):
    trainer = cls(run, Path(tiny_sa3), items(), run_dir, placement, {})
    return trainer, train(trainer, run_dir, log=lambda s: None)


def lrs(run_dir: Path) -> list[float]:
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    return [e["lr"] for e in events if e["event"] == "step"]


def test_an_mlx_run_resumes_bit_for_bit_with_its_schedule(tiny_sa3, tmp_path):
    run = run_config(tiny_sa3, steps=6, checkpoint_every=3, eval_every=3)
    _, straight = fit(tiny_sa3, tmp_path / "a", run)
    fit(tiny_sa3, tmp_path / "b", replace(run, train=replace(run.train, steps=3)))
    trainer, resumed = fit(tiny_sa3, tmp_path / "b", run)
    assert resumed.resumed_from == 3 and trainer.objective.schedule_step == 6
    a, b = read_adapter(straight.last_path)[0], read_adapter(resumed.last_path)[0]
    assert all((a[k] == b[k]).all() for k in a)
    sa = load_file(tmp_path / "a" / "state" / "step=6" / "state.safetensors")
    sb = load_file(tmp_path / "b" / "state" / "step=6" / "state.safetensors")
    assert sa.keys() == sb.keys() and all((sa[k] == sb[k]).all() for k in sa)
    assert lrs(tmp_path / "a") == lrs(tmp_path / "b")
    fit(tiny_sa3, tmp_path / "t", run, TorchTrainer, TORCH)
    assert lrs(tmp_path / "a") == lrs(tmp_path / "t")  # the same schedule, the same numbers


def test_a_state_without_a_schedule_step_is_refused(tiny_sa3, tmp_path):
    run = run_config(tiny_sa3, steps=2, checkpoint_every=2, eval_every=2)
    trainer, _ = fit(tiny_sa3, tmp_path, run)
    tensors, document = trainer.state()
    del document["schedule_step"]
    with pytest.raises(ResumeError, match="no lr schedule step"):
        trainer.load_state(tensors, document)
