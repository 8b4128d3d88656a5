"""A planner run through every stage in Dagster: codes from the encoded stage, a LoRA on the
tiny planner trained by the one loop that beats the base on its validation tokens, PEFT and
mlx-lm folders that pass the family's check, the pure-LM audition pair (same seed, codes heard
without the DiT, and through it) with its code count and metas under its own heading; a second
build computes nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import materialize
from tests.families.ace_step.conftest import write_dataset
from tunesmith.examples import TINY_ACE_STEP, TINY_PLANNER

pytestmark = pytest.mark.slow

TOML = f"""\
[dataset]
default_language = "en"
[[runs]]
name = "plan"
family = "ace-step-planner"
base_model = "{TINY_ACE_STEP}"
trigger = "zqx"
[runs.adapter]
planner = "{TINY_PLANNER}"
[runs.train]
lr = 1e-2
epochs = 4
eval_every = 4
checkpoint_every = 4
[[runs.demos]]
prompt = "{{trigger}}, warm synth pop"
lyrics = "[Verse]\\nla la"
seed = 7
duration = 2.0
steps = 2                 # the DiT's steps for the plan's codes rendered through it
"""


def test_a_planner_run_trains_renders_and_auditions(storage, instance, tiny_ace_step, tiny_planner):
    models = Path(storage.models_root)
    shutil.copytree(tiny_ace_step, models / TINY_ACE_STEP)
    shutil.copytree(tiny_planner, models / TINY_PLANNER)
    folder = write_dataset(Path(storage.datasets_root) / "plans", count=5)
    (folder / "tunesmith.toml").write_text(TOML)
    md = materialize(instance, storage, "plans")
    assert md["adapters"]["computed"] == 1 and md["checks"]["ace_step_planner_files"] is True
    out = Path(storage.out_root) / "plans"
    report = json.loads((out / "report.json").read_text())
    [run] = report["stages"]["adapters"]["runs"]
    assert run["best_loss"] < run["base_loss"]
    best = Path(run["best_path"])
    assert best.name == "adapter_model.safetensors"
    assert (best.parent.parent / "plan.mlx-lm" / "adapters.safetensors").is_file()
    private = [
        f for f in best.parent.parent.rglob("*") if f.is_file() and f.stat().st_mode & 0o77 == 0
    ]
    assert private == [], f"files only their owner can read: {private}"
    sides = {}
    for side in ("base", "adapter"):
        sidecar = json.loads((out / "renders" / "plan" / side / "demo0.json").read_text())
        sides[side] = sidecar["plan"]
        assert sidecar["seed"] == 7 and isinstance(sidecar["plan"]["codes"], int)
    page = (out / "auditions" / "plan.html").read_text()
    through_dit = sum(1 for side in sides.values() if side["codes"])
    assert "Planner plans: the 5 Hz LM alone" in page
    assert page.count("<audio") == 2 + through_dit
    assert page.count('class="metas"') == 2
    if sides["adapter"]["codes"]:  # the same codes through the DiT, played beside the plan
        assert (out / "renders" / "plan" / "adapter" / "demo0.dit.wav").is_file()
        assert "../renders/plan/adapter/demo0.dit.wav" in page
    assert f"{sides['base']['codes']} codes" in page
    again = materialize(instance, storage, "plans")
    assert again["adapters"]["computed"] == 0 and again["renders"]["computed"] == 0


def test_a_planner_run_placed_on_mlx_trains_with_mlx_lm(
    storage, instance, tiny_ace_step, tiny_planner, monkeypatch
):
    pytest.importorskip("mlx_lm")
    monkeypatch.setenv("TUNESMITH_BACKEND", "adapters=mlx")
    models = Path(storage.models_root)
    shutil.copytree(tiny_ace_step, models / TINY_ACE_STEP)
    shutil.copytree(tiny_planner, models / TINY_PLANNER)
    folder = write_dataset(Path(storage.datasets_root) / "plans", count=5)
    (folder / "tunesmith.toml").write_text(TOML)
    md = materialize(instance, storage, "plans")
    assert md["adapters"]["computed"] == 1 and md["checks"]["ace_step_planner_files"] is True
    report = json.loads((Path(storage.out_root) / "plans" / "report.json").read_text())
    [run] = report["stages"]["adapters"]["runs"]
    assert run["placement"].startswith("mlx/") and run["best_loss"] < run["base_loss"]
