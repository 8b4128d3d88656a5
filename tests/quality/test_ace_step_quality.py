"""An ACE-Step run measured at every validation through a build, as the Stable Audio 3 and SDXL
runs are (`test_quality_stage.py`): the numbers per validation in events.jsonl, quality.json
and the adapters and renders stages' Dagster metadata; a build again gives the same numbers,
read back or measured from nothing; without the metric model the measures are skipped in one
line. Real Dagster, the tiny ACE-Step 1.5 and the tiny CLAP."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from tests.conftest import materialize, write_clip
from tunesmith.quality.tiny import make_tiny_clap

pytestmark = pytest.mark.slow

TOML = """\
[metrics]
clap = "tiny-clap"

[dataset]
default_language = "en"

[[runs]]
name = "ace-measured"
family = "ace-step"
base_model = "{base}"
trigger = "msrd"
[runs.adapter]
rank = 4
[runs.train]
optimizer = "adamw"
crop_frames = 24
epochs = 4
eval_every = 2
checkpoint_every = 4
[[runs.demos]]
prompt = "{{trigger}}, warm synth pop"
seed = 7
duration = 1.0
steps = 2
[[runs.demos]]
prompt = "a bell"
seed = 8
duration = 1.0
steps = 2
"""


def report_run(storage) -> dict:
    report = json.loads((Path(storage.out_root) / "songs" / "report.json").read_text())
    (run,) = report["stages"]["adapters"]["runs"]
    return run


def test_ace_step_runs_are_measured_at_every_validation(storage, instance, tiny_ace_step):
    clap = make_tiny_clap(Path(storage.models_root) / "tiny-clap")
    folder = Path(storage.datasets_root) / "songs"
    for i in range(5):
        write_clip(folder / f"clip{i}.wav", seconds=1.6, bpm=90 + 10 * i, freq=200.0 + 40 * i)
        (folder / f"clip{i}.txt").write_text(f"a loop number {i}, warm synth pop")
    (folder / "tunesmith.toml").write_text(TOML.format(base=tiny_ace_step))

    first = materialize(instance, storage, "songs")
    run = report_run(storage)
    run_dir = Path(run["run_dir"])
    validated = [h["step"] for h in run["history"]]
    assert validated == [0, 2, 4]  # the base model, then every eval_every steps
    quality = json.loads((run_dir / "quality.json").read_text())
    assert [row["step"] for row in quality["steps"]] == validated
    for row in quality["steps"]:
        assert all(math.isfinite(row[m]) for m in ("prompt", "style", "frechet")), row
        assert -1 <= row["prompt"] <= 1 and -1 <= row["style"] <= 1 and row["frechet"] >= 0
    assert quality["references"] and not quality["on_training_items"]
    assert quality["steps"][0] != {**quality["steps"][-1], "step": 0}  # the adapter changed them
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    lines = [e for e in events if e["event"] == "quality"]
    assert [{k: v for k, v in e.items() if k != "event"} for e in lines] == quality["steps"]
    assert [e["step"] for e in events if e["event"] == "validation"] == [2, 4]

    # The adapters stage's table and values, the renders stage's table of the same numbers
    table = first["adapters"]["quality"]
    assert [r.data["step"] for r in table.records] == validated
    for record, row in zip(table.records, quality["steps"], strict=True):
        assert record.data["style"] == pytest.approx(row["style"], rel=1e-5)
        assert record.data["kept"] == ("kept" if row["step"] == run["best_step"] else "")
    kept = next(r for r in quality["steps"] if r["step"] == run["best_step"])
    assert first["adapters"]["quality ace-measured prompt"] == pytest.approx(kept["prompt"], 1e-5)
    shown = first["renders"]["quality ace-measured"]
    assert [r.data for r in shown.records] == [r.data for r in table.records]
    assert run["quality"]["verdict"]["best_step"] == run["best_step"]

    # A build again: nothing measured, the same numbers
    written = (run_dir / "quality.json").read_bytes(), (run_dir / "events.jsonl").read_bytes()
    again = materialize(instance, storage, "songs")
    assert again["adapters"]["computed"] == 0
    assert ((run_dir / "quality.json").read_bytes(), (run_dir / "events.jsonl").read_bytes()) == (
        written
    )
    assert [r.data for r in again["renders"]["quality ace-measured"].records] == [
        r.data for r in shown.records
    ]
    # Measured from nothing (no quality.json, no stored embeddings): the same numbers
    (run_dir / "quality.json").unlink()
    shutil.rmtree(Path(storage.store_root) / "embeddings")
    materialize(instance, storage, "songs")
    assert json.loads((run_dir / "quality.json").read_text())["steps"] == quality["steps"]

    # Without the metric model: measures skipped in one line, the build goes on
    shutil.rmtree(clap)
    skipped = materialize(instance, storage, "songs")
    reason = report_run(storage)["quality"]["skipped"]
    assert "\n" not in reason and reason.startswith("quality not measured: ")
    assert f"{clap} is not a folder" in reason and "laion/larger_clap_music" in reason
    assert "quality" not in skipped["adapters"]
    assert skipped["renders"]["quality ace-measured"] == reason
    assert skipped["adapters"]["computed"] == 0  # the run itself is as it was
