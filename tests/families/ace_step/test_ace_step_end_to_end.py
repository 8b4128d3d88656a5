"""The `songs` example through every stage with the tiny ACE-Step 1.5 (what `make demo` builds):
labels, latents and codes, a LoRA trained by the one loop that beats the base model on its
validation songs, files that pass their check, same-seed renders and the audition page with the
demo's lyrics; beside it the planner run on the tiny planner LM, its pure-LM audition pair; a
second build computes nothing."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from tests.conftest import build_in_a_process, materialize
from tunesmith.examples import SONGS_TOML, TINY_ACE_STEP, TINY_PLANNER
from tunesmith.examples.songs import make_songs

pytestmark = pytest.mark.slow


def test_the_songs_example_trains_renders_and_auditions(
    storage, instance, tiny_ace_step, tiny_planner
):
    shutil.copytree(tiny_ace_step, Path(storage.models_root) / TINY_ACE_STEP)
    shutil.copytree(tiny_planner, Path(storage.models_root) / TINY_PLANNER)
    folder = Path(storage.datasets_root) / "songs"
    make_songs(folder)
    (folder / "tunesmith.toml").write_text(SONGS_TOML)
    md = materialize(instance, storage, "songs")
    assert md["encoded"]["computed"] == 4 and md["adapters"]["computed"] == 2
    assert md["checks"]["ace_step_files"] is True and md["checks"]["ace_step_planner_files"]
    out = Path(storage.out_root) / "songs"
    report = json.loads((out / "report.json").read_text())
    run, planner = report["stages"]["adapters"]["runs"]
    assert planner["run"] == "songs-planner" and planner["steps"] == 60  # 30 epochs of two
    assert planner["best_loss"] < planner["base_loss"]
    assert run["family"] == "ace-step" and run["steps"] == 60  # 60 epochs of one step
    assert run["best_loss"] < 0.9 * run["base_loss"]
    assert Path(run["best_path"]).name == "adapter_model.safetensors"
    # which file each tool takes: a LoRA folder for diffusers, its file for ComfyUI; the
    # planner's PEFT folder and its mlx-lm twin
    assert [f["tool"].split(" ")[0] for f in run["files"]] == [
        "diffusers",
        "ComfyUI",
        "PEFT",
        "PEFT",
    ]
    assert [Path(f["path"]).name for f in planner["files"]] == [
        "songs-planner",
        "songs-planner.mlx-lm",
    ]
    assert all(Path(f["path"]).exists() for f in run["files"] + planner["files"])
    # nothing handed to another tool names a folder of this machine (people share adapters)
    roots = [str(Path(r).resolve()) for r in (storage.models_root, storage.out_root)]
    roots += [str(Path(storage.models_root).resolve().parent)]
    handed = [Path(f["path"]) for f in run["files"] + planner["files"]]
    files = [p for h in handed for p in ([h] if h.is_file() else sorted(h.rglob("*")))]
    assert len(files) >= 8, files
    for path in files:
        data = path.read_bytes()
        assert not any(root.encode() in data for root in roots), path
    sidecar = json.loads((out / "renders" / "songs-lora" / "adapter" / "demo0.json").read_text())
    assert sidecar["lyrics"].startswith("[Verse]\nlast bus home") and sidecar["duration"] == 8.0
    page = (out / "auditions" / "songs-lora.html").read_text()
    assert '<pre class="lyrics">[Verse]\nlast bus home' in page and page.count("<audio") == 4
    plans = (out / "auditions" / "songs-planner.html").read_text()
    assert "Planner plans" in plans and plans.count('class="metas"') == 2
    again = materialize(instance, storage, "songs")
    assert again["encoded"]["computed"] == 0 and again["adapters"]["computed"] == 0
    assert again["renders"]["computed"] == 0
    # As `tunesmith run` builds it: the first build process remembers the adapter checks
    # (files written in the last two seconds never are), the next imports no model library.
    time.sleep(2.1)
    for build in ("remembers", "light"):
        heavy = build_in_a_process(storage, "songs", home=Path(storage.out_root).parent / build)
    assert heavy == [], heavy
