"""Adding a family is one folder: `fake_family/` (a few dozen lines, nothing edited elsewhere)
goes through every stage, the training process, the report and the audition page."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import write_clip

pytestmark = pytest.mark.slow


def test_a_family_in_its_own_folder_runs_through_every_stage(tmp_path):
    songs = tmp_path / "datasets" / "quiet"
    for i, level in enumerate((120, 90, 140)):
        write_clip(songs / f"clip{i}.wav", seconds=1.5, bpm=level)
    (songs / "tunesmith.toml").write_text(
        '[[runs]]\nname = "volume-run"\nfamily = "volume"\nbase_model = "volume-model"\n'
        "[runs.train]\nsteps = 30\nlr = 0.05\neval_every = 10\n"
        '[[runs.demos]]\nprompt = "a tone"\n'
    )
    (tmp_path / "models" / "volume-model").mkdir(parents=True)
    (tmp_path / "models" / "volume-model" / "volume.json").write_text("{}")
    env = {
        **os.environ,
        "TUNESMITH_FAMILIES": "tests.families.fake_family",
        "DAGSTER_HOME": str(tmp_path / "home"),
        "TUNESMITH_DATASETS": str(tmp_path / "datasets"),
        "TUNESMITH_OUT": str(tmp_path / "out"),
        "TUNESMITH_STORE": str(tmp_path / "store"),
        "TUNESMITH_MODELS": str(tmp_path / "models"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "run", "quiet"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "FAILED" not in done.stdout and "      skipped " not in done.stdout, done.stdout
    report = json.loads((tmp_path / "out" / "quiet" / "report.json").read_text())
    (run,) = report["stages"]["adapters"]["runs"]
    assert run["family"] == "volume" and run["best_loss"] < run["base_loss"]
    assert Path(run["best_path"]).name == "volume-run.safetensors"
    assert {(r["side"], Path(r["wav"]).suffix) for r in report["renders"]} == {
        ("base", ".wav"),
        ("adapter", ".wav"),
    }
    (page,) = report["auditions"]
    assert "volume-run" in Path(page).read_text()
