"""One SDXL run on the tiny model and drawn rings: it beats the base model on held-out pictures,
writes files diffusers and kohya tools read, samples at every measurement (the first the base
model's own picture), resumes bit for bit, and ends itself past its memory cap."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import load_file

from tunesmith.backends.placement import Placement
from tunesmith.dataset.labels import build_labels
from tunesmith.dataset.manifest import build_manifest
from tunesmith.examples.rings import make_rings
from tunesmith.families.sdxl import FAMILY, files
from tunesmith.families.sdxl.model import load_pipeline
from tunesmith.families.sdxl.sample import render_demo
from tunesmith.families.sdxl.trainer import SdxlTrainer
from tunesmith.family import EncodeRequest
from tunesmith.store import Store
from tunesmith.train import loop
from tunesmith.train.config import ConfigError, resolve_run

SIZE = 64
CPU = Placement("torch", "cpu", "float32", "test")
DEMO = {"prompt": "rngstyle, two discs", "seed": 5, "steps": 3, "cfg": 4.0}


@pytest.fixture(scope="module")
def encoded(tiny_sdxl, tmp_path_factory):
    """Ten rings encoded by the `encoded` stage's engine: nine to train on, one held out."""
    root = tmp_path_factory.mktemp("rings")
    folder, store = root / "rings", Store(root / "store")
    make_rings(folder, count=10)
    manifest, _ = build_manifest(folder, root / "hashes.json")
    labels = build_labels(folder, manifest, store).frame
    request = EncodeRequest(
        folder,
        labels,
        [run_config(tiny_sdxl)],
        [tiny_sdxl],
        root / "out",
        store,
        CPU,
        root / "fp.json",
    )
    built = FAMILY.encode(request)
    assert len(built.frame) == 10
    return built.frame.sort_values("path")


def run_config(tiny_sdxl, **train):
    raw = {
        "name": "rings",
        "family": "sdxl",
        "base_model": str(tiny_sdxl),
        "trigger": "rngstyle",
        "train": {"size": SIZE, "lr": 1e-3, "steps": 8, "eval_every": 4, **train},
        "demos": [DEMO],
    }
    return resolve_run(raw, Path("tunesmith.toml"), 0)


def fit(tiny_sdxl, encoded, run_dir, **train):
    lineage = {"tunesmith.base_model_fingerprint": "fp", "tunesmith.training_config": "{}"}
    run = run_config(tiny_sdxl, **train)
    trainer = SdxlTrainer(run, tiny_sdxl, encoded, run_dir, CPU, lineage)
    return loop.train(trainer, run_dir, log=lambda _: None)


@pytest.mark.slow
def test_a_run_beats_the_base_model_on_a_held_out_picture(tiny_sdxl, encoded, tmp_path):
    result = fit(tiny_sdxl, encoded, tmp_path, steps=60, eval_every=20)
    print(result.history)
    assert result.validation_note == "validation on 1 held-out picture(s)"
    assert [h["step"] for h in result.history] == [0, 20, 40, 60]
    assert result.best_loss < result.base_loss and result.best_step > 0
    assert result.best_path == str(tmp_path / "rings.safetensors")
    meta = files.validate_files(result.best_path)  # and its kohya twin
    assert meta["tunesmith.step"] == str(result.best_step)
    assert Path(result.last_path).exists()
    assert (result.last_path == result.best_path) == (result.best_step == 60)


@pytest.mark.slow
def test_samples_at_every_measurement_the_first_is_the_base_models_picture(
    tiny_sdxl, encoded, tmp_path
):
    fit(tiny_sdxl, encoded, tmp_path, steps=4, eval_every=2)
    samples = tmp_path / "samples"
    assert sorted(p.name for p in samples.iterdir()) == ["0-0.png", "0-2.png", "0-4.png"]
    run = run_config(tiny_sdxl)
    base = render_demo(load_pipeline(tiny_sdxl), run.demos[0], SIZE)
    assert np.array_equal(np.asarray(Image.open(samples / "0-0.png")), base)
    assert not np.array_equal(np.asarray(Image.open(samples / "0-4.png")), base)


@pytest.mark.slow
def test_more_steps_resume_a_run_bit_for_bit(tiny_sdxl, encoded, tmp_path):
    straight = fit(tiny_sdxl, encoded, tmp_path / "straight", steps=8, checkpoint_every=4)
    fit(tiny_sdxl, encoded, tmp_path / "resumed", steps=4, checkpoint_every=4)
    resumed = fit(tiny_sdxl, encoded, tmp_path / "resumed", steps=8, checkpoint_every=4)
    assert resumed.resumed_from == 4 and resumed.steps_trained == 4
    assert resumed.history == straight.history
    for name in ("rings.safetensors", "rings.last.safetensors"):
        a, b = load_file(tmp_path / "straight" / name), load_file(tmp_path / "resumed" / name)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name


def test_a_run_past_its_memory_cap_stops_and_keeps_a_whole_adapter(tiny_sdxl, encoded, tmp_path):
    result = fit(tiny_sdxl, encoded, tmp_path, steps=50, cap=0.001)  # 1 MB: passed at once
    assert result.steps == 1 and "passed the cap of 0.00 GB" in result.extra["stopped"]
    assert [h["step"] for h in result.history] == [0, 1]
    files.validate_files(result.last_path)
    assert (tmp_path / "state" / "step=1" / "state.json").exists()


def test_holdout_zero_trains_and_validates_on_the_training_pictures_saying_so(
    tiny_sdxl, encoded, tmp_path
):
    lines = []
    lineage = {"tunesmith.base_model_fingerprint": "fp", "tunesmith.training_config": "{}"}
    run = run_config(tiny_sdxl, steps=2, eval_every=2, holdout=0)
    trainer = SdxlTrainer(run, tiny_sdxl, encoded, tmp_path, CPU, lineage)
    assert len(trainer.train) == len(trainer.validation.pictures) == 10
    result = loop.train(trainer, tmp_path, log=lines.append, progress=io.StringIO())
    note = "validation on training pictures: train.holdout = 0, none held out"
    assert result.validation_note == note and result.steps == 2
    assert any(note in line for line in lines)


def test_a_holdout_of_every_picture_is_refused_in_one_line(tiny_sdxl, encoded, tmp_path):
    with pytest.raises(ConfigError, match="^train.holdout 10 leaves no training pictures out"):
        fit(tiny_sdxl, encoded, tmp_path, holdout=10)
