"""`train.select = "style"` through `tunesmith run`: the training process measures each
validation's renders with the dataset's CLAP and keeps the adapter the measure prefers, in a
run whose lowest validation loss is at another step (`echo_family.py` makes it so); the stage
reads the measures back; a run that would train without its embedding model is refused in
one line; asked for more steps it resumes with the same kept adapter."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file

from tests.conftest import write_clip
from tunesmith.quality.tiny import make_tiny_clap
from tunesmith.train.holdout import split_holdout

pytestmark = pytest.mark.slow

TOML = """\
[metrics]
clap = "{clap}"

[[runs]]
name = "by-style"
family = "echo"
[runs.train]
steps = {steps}
lr = 0.01
eval_every = 2
checkpoint_every = 2
select = "style"
[[runs.demos]]
prompt = "a loop"
[[runs.demos]]
prompt = "a bell"
seed = 7

[[runs]]
name = "by-loss"
family = "echo"
[runs.train]
steps = 4
lr = 0.01
eval_every = 2
checkpoint_every = 2
[[runs.demos]]
prompt = "a loop"
"""


def build(root: Path) -> tuple[int, str]:
    env = {
        **os.environ,
        "TUNESMITH_FAMILIES": "tests.quality.echo_family",
        "DAGSTER_HOME": str(root / "home"),
        "TUNESMITH_DATASETS": str(root / "datasets"),
        "TUNESMITH_OUT": str(root / "out"),
        "TUNESMITH_STORE": str(root / "store"),
        "TUNESMITH_MODELS": str(root / "models"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "run", "songs"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return done.returncode, done.stdout + done.stderr


def runs(root: Path) -> dict[str, dict]:
    report = json.loads((root / "out" / "songs" / "report.json").read_text())
    return {r["run"]: r for r in report["stages"]["adapters"]["runs"]}


def level(path: str) -> float:
    return float(load_file(path)["level"])


def test_select_style_keeps_the_step_the_measure_prefers_over_the_lowest_loss(tmp_path):
    songs = tmp_path / "datasets" / "songs"
    for i in range(5):
        write_clip(songs / f"clip{i}.wav", seconds=1.0, bpm=90 + 10 * i, freq=200.0 + 50 * i)
    (songs / "tunesmith.toml").write_text(TOML.format(clap="tiny-clap", steps=4))
    make_tiny_clap(tmp_path / "models" / "tiny-clap")
    model = tmp_path / "models" / "echo-model"
    model.mkdir()
    (model / "volume.json").write_text("{}")
    (model / "echo.json").write_text('{"clear_at": 2}')
    paths = sorted(p.name for p in songs.glob("*.wav"))
    (held,) = split_holdout(paths, None, path=lambda p: p).validation
    shutil.copyfile(songs / held, model / "echo.wav")  # step 2 renders the held-out clip

    code, out = build(tmp_path)
    assert code == 0, out
    style, loss = runs(tmp_path)["by-style"], runs(tmp_path)["by-loss"]
    # The loss and the measure disagree: the loss is lowest at the end, the style at step 2.
    lowest = min(style["history"], key=lambda h: h["loss"])
    assert lowest["step"] == 4 and loss["best_step"] == 4
    quality = json.loads((Path(style["run_dir"]) / "quality.json").read_text())
    by_step = {row["step"]: row for row in quality["steps"]}
    assert sorted(by_step) == [0, 2, 4] and by_step[2]["style"] == pytest.approx(1.0, abs=1e-6)
    assert by_step[0]["style"] < 0.9999 and by_step[4]["style"] == by_step[0]["style"]
    # select = "style" keeps step 2: its file is the adapter of step 2, not the last
    assert style["best_step"] == 2 and style["select"]["by"] == "score"
    assert level(style["best_path"]) < level(style["last_path"]) == level(loss["best_path"])
    assert f"quality at step 2 (kept by train.select): prompt {by_step[2]['prompt']:.3f}" in out
    verdict = style["quality"]["verdict"]
    assert verdict["best_step"] == 2 and "style" in verdict["beats"] and verdict["learned"]
    # measured by the training process as it trained; the stage read it back
    run_dir = Path(style["run_dir"])
    assert (run_dir / "quality.json").stat().st_mtime_ns <= (
        (run_dir / "result-steps=4.json").stat().st_mtime_ns
    )
    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    validations = [(e["step"], e["score"]) for e in events if e["event"] == "validation"]
    assert [s for s, _ in validations] == [2, 4] and validations[0][1] > 0 == validations[1][1]
    assert [e["step"] for e in events if e["event"] == "quality"] == [0, 2, 4]
    # the setting is in what keys the run where it is not "loss", and out of it where it is
    covered = {
        name: json.loads((Path(r["run_dir"]) / "inputs.json").read_text())["inputs"]["settings"]
        for name, r in (("style", style), ("loss", loss))
    }
    assert covered["style"]["train"]["select"] == "style"
    assert "select" not in covered["loss"]["train"]
    kept = Path(style["best_path"]).read_bytes()

    # More steps without the embedding model: refused before training, in one line
    (songs / "tunesmith.toml").write_text(TOML.format(clap="gone-clap", steps=6))
    code, out = build(tmp_path)
    refused = [line for line in out.splitlines() if "skipped run by-style" in line]
    assert len(refused) == 1, out
    assert (
        "not trained: train.select = style keeps the adapter by a measure of its renders, and "
        in refused[0]
    )
    assert "gone-clap" in refused[0] and "laion/larger_clap_music" in refused[0]
    assert not (run_dir / "result-steps=6.json").exists()
    assert "by-style" not in runs(tmp_path) and runs(tmp_path)["by-loss"]["best_step"] == 4

    # With the model back: resumed from step 4, the kept adapter the same to the byte
    (songs / "tunesmith.toml").write_text(TOML.format(clap="tiny-clap", steps=6))
    code, out = build(tmp_path)
    assert code == 0, out
    resumed = runs(tmp_path)["by-style"]
    assert resumed["run_dir"] == style["run_dir"] and resumed["steps"] == 6
    assert resumed["best_step"] == 2 and Path(resumed["best_path"]).read_bytes() == kept
    assert [r["step"] for r in resumed["quality"]["steps"]] == [0, 2, 4, 6]
    assert resumed["quality"]["steps"][:3] == quality["steps"]

    # Another CLAP judges the run: the adapter kept depends on it, so it trains anew into a
    # folder of its own and says why; the run kept by the loss is not touched.
    make_tiny_clap(tmp_path / "models" / "other-clap", seed=1)
    (songs / "tunesmith.toml").write_text(TOML.format(clap="other-clap", steps=6))
    code, out = build(tmp_path)
    assert code == 0, out
    judged = runs(tmp_path)
    assert judged["by-style"]["run_dir"] != style["run_dir"]
    assert judged["by-loss"]["run_dir"] == loss["run_dir"]
    assert "the embedding model its adapter is kept by changed" in out, out
