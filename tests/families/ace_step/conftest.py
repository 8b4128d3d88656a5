"""The tiny ACE-Step 1.5, made once per test session, and loaded as a user's base model is."""

from __future__ import annotations

from pathlib import Path

import pytest

# `tiny_ace_step`, the base model folder, is in tests/conftest.py (the golden case uses it too).


@pytest.fixture(scope="session")
def ace_pipe(tiny_ace_step: Path):
    """The tiny ACE-Step 1.5 through `load_pipeline`, float32 on the CPU (do not modify)."""
    from tunesmith.families.ace_step.model import load_pipeline

    return load_pipeline(tiny_ace_step)


# --- a small dataset through the labels and encoded stages, for the training tests ------------

RUN_TOML = """\
[dataset]
default_language = "en"
custom_tag = "zqx"
[[runs]]
name = "unit"
family = "ace-step"
base_model = "tiny"
[runs.adapter]
rank = 4
[runs.train]
optimizer = "adamw"
crop_frames = 24
epochs = 3
"""


def write_dataset(folder: Path, count: int = 5, seconds: float = 1.6) -> Path:
    """`count` short clips with captions, the even ones with lyrics."""
    from tests.conftest import write_clip

    for i in range(count):
        write_clip(folder / f"clip{i}.wav", seconds=seconds, bpm=90 + 10 * i, freq=200.0 + 40 * i)
        (folder / f"clip{i}.txt").write_text(f"a loop number {i}, warm synth pop")
        if i % 2 == 0:
            (folder / f"clip{i}.lyrics.txt").write_text(f"[Verse]\nla la {i}\n")
    (folder / "tunesmith.toml").write_text(RUN_TOML)
    return folder


def encode_dataset(folder: Path, models: Path, work: Path, runs=None):
    """The `encoded` stage's result for the dataset's runs (manifest and labels built first)."""
    from tunesmith.backends.placement import Placement
    from tunesmith.dataset.labels import build_labels
    from tunesmith.dataset.manifest import build_manifest
    from tunesmith.family import EncodeRequest, get
    from tunesmith.store import Store
    from tunesmith.train.config import base_model_folder, load_runs

    store = Store(work / "store")
    manifest, _ = build_manifest(folder, work / "hashes.json")
    labels = build_labels(folder, manifest, store)
    runs = runs or load_runs(folder, "audio")
    placement = Placement("torch", "cpu", "float32", "tests")
    request = EncodeRequest(
        folder,
        labels.frame,
        runs,
        sorted({base_model_folder(r, models) for r in runs}),
        work / "out",
        store,
        placement,
        work / "fingerprints.json",
    )
    return get("ace-step").encode(request), runs


@pytest.fixture(scope="session")
def ace_encoded(tiny_ace_step: Path, tmp_path_factory):
    """(encoded result, runs, models root) of five 1.6 s clips, made once a session."""
    import shutil

    work = tmp_path_factory.mktemp("ace-data")
    models = work / "models"
    shutil.copytree(tiny_ace_step, models / "tiny")
    folder = write_dataset(work / "clips")
    encoded, runs = encode_dataset(folder, models, work)
    return encoded, runs, models
