"""An ACE-Step run on two gloo ranks (the training child's torchrun launch): the same per-step
losses and adapter as one process, to 1e-5 relative (each rank sums its crops' gradients,
then DDP sums the ranks': another order than one process's, so not bit for bit)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from pipelines import train_child
from tests.train.test_distributed import assert_close, losses, one_thread  # noqa: F401
from tunesmith.backends.placement import Placement
from tunesmith.families.ace_step.trainer import AceStepTrainer
from tunesmith.train import loop
from tunesmith.train.config import resolve_run

pytestmark = pytest.mark.slow
CPU = Placement("torch", "cpu", "float32", "test")
LINEAGE = {"tunesmith.base_model_fingerprint": "fp"}
STEPS = 10


def raw_run(**train) -> dict:
    return {
        "name": "unit",
        "family": "ace-step",
        "base_model": "tiny",
        "adapter": {"rank": 4},
        "train": {
            "optimizer": "adamw",
            "crop_frames": 24,
            "accumulation": 2,
            "steps": STEPS,
            "eval_every": STEPS,
            "checkpoint_every": STEPS,
            **train,
        },
        "demos": [{"prompt": "zqx, a loop", "duration": 0.5, "steps": 1}],
    }


def test_two_ranks_train_what_one_process_trains(ace_encoded, tmp_path):
    encoded, _, models = ace_encoded
    rows = encoded.frame[encoded.frame["run"] == "unit"]
    run = resolve_run(raw_run(), Path("tunesmith.toml"), 0)
    (tmp_path / "one").mkdir()
    trainer = AceStepTrainer(run, models / "tiny", rows, tmp_path / "one", CPU, LINEAGE)
    single = loop.train(trainer, tmp_path / "one", log=lambda _: None)

    two = asdict(resolve_run(raw_run(devices=2), Path("tunesmith.toml"), 0))
    two["adapter"] = {k: list(v) if isinstance(v, tuple) else v for k, v in two["adapter"].items()}
    extras = {
        "run": two,
        "config_source": "tunesmith.toml",
        "base_model": str(models / "tiny"),
        "items": json.loads(rows.to_json(orient="records")),
        "run_dir": str(tmp_path / "two"),
        "result_path": str(tmp_path / "two.json"),
        "placement": CPU.as_dict(),
        "metadata": LINEAGE,
    }
    lines: list[str] = []
    train_child.launch(extras, 0, lines.append)
    result = json.loads((tmp_path / "two.json").read_text())
    assert result["world_size"] == 2 and result["steps"] == STEPS
    pairs = zip(losses(tmp_path / "two"), losses(tmp_path / "one"), strict=True)
    for step, (a, b) in enumerate(pairs):
        assert_close([a], [b], f"the loss of step {step + 1}")
    ours, theirs = load_file(result["last_path"]), load_file(single.last_path)
    assert ours.keys() == theirs.keys()
    whole = [torch.cat([x[k].flatten().double() for k in sorted(x)]) for x in (ours, theirs)]
    assert_close(*whole, "the adapter")
    assert any(line.startswith("[rank 1] rank 1 of 2") for line in lines), lines
