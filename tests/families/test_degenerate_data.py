"""Data a person should not train on, but may: each family either trains on it or stops with one
line that says what is wrong, never with an error nobody foresaw.

Each case goes the way a build goes (manifest, labels, the family's encoder, the run's plan, its
trainer under the loop) on real files: one item alone, silent audio, every item the same,
pictures of one flat colour.
"""

from __future__ import annotations

import io
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from pipelines.train_child import EXPECTED
from tests.conftest import write_clip, write_image
from tunesmith import family as families
from tunesmith.backends.placement import Placement
from tunesmith.dataset.labels import build_labels
from tunesmith.dataset.manifest import build_manifest
from tunesmith.family import EncodeRequest
from tunesmith.store import Store
from tunesmith.train import loop
from tunesmith.train.config import resolve_run
from tunesmith.train.stage import plan

pytestmark = pytest.mark.slow
CPU = Placement("torch", "cpu", "float32", "test")


def silent(path: Path, seconds: float = 3.0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(path, np.zeros((int(seconds * 44100), 2), np.float32), 44100, subtype="PCM_16")


def one_clip(folder: Path) -> None:
    write_clip(folder / "only.wav", seconds=3.0)


def silent_and_identical(folder: Path) -> None:
    for i in range(3):
        silent(folder / f"quiet{i}.wav")


def flat_pictures(folder: Path) -> None:
    """White and black at size 32: where a step's self-attention queries and keys get no
    gradient at all, the run says so and trains the other layers (tests/families/sdxl)."""
    for i, colour in enumerate([(255, 255, 255), (0, 0, 0)]):
        write_image(folder / f"flat{i}.png", size=(64, 64), colour=colour)


def one_picture(folder: Path) -> None:
    write_image(folder / "only.png", size=(64, 64))


CASES = {
    "stable-audio-3": ([one_clip, silent_and_identical], {"latent_crop_length": 32}),
    "ace-step": ([one_clip, silent_and_identical], {"crop_frames": 32, "epochs": 2}),
    "sdxl": ([one_picture, flat_pictures], {"size": 32}),
}
MODELS = {"stable-audio-3": "tiny_sa3", "ace-step": "tiny_ace_step", "sdxl": "tiny_sdxl"}


def build_and_train(request, family: str, make, tmp_path: Path) -> list[str]:
    """The case's build up to its trained adapter; the lines the run logged."""
    _, train = CASES[family]
    base = Path(request.getfixturevalue(MODELS[family]))
    folder, store = tmp_path / "data", Store(tmp_path / "store")
    make(folder)
    manifest, _ = build_manifest(folder, tmp_path / "hashes.json")
    labels = build_labels(folder, manifest, store).frame
    raw = {"name": "odd", "family": family, "base_model": str(base), "trigger": "odd"}
    raw["train"] = {"steps": 2, "eval_every": 1, "checkpoint_every": 2, **train}
    raw["demos"] = [{"prompt": "odd", "steps": 2}]
    run = resolve_run(raw, Path("tunesmith.toml"), 0)
    encode = EncodeRequest(
        folder, labels, [run], [base], tmp_path / "out", store, CPU, tmp_path / "fp.json"
    )
    encoded = families.get(family).encode(encode).frame
    assert len(encoded), "nothing was encoded"
    ready = plan(run, base, encoded, tmp_path / "out", CPU, tmp_path / "fp.json")
    lineage = ready.metadata("manifest")
    make_trainer = families.get(family).trainer("torch")
    lines: list[str] = []
    trainer = make_trainer(run, base, ready.items, ready.run_dir, CPU, lineage)
    result = loop.train(trainer, ready.run_dir, log=lines.append, progress=io.StringIO())
    assert result.steps >= 1
    assert all(math.isfinite(h["loss"]) for h in result.history if "loss" in h), result.history
    return lines


@pytest.mark.parametrize(
    ("family", "make"),
    [(family, make) for family, (makers, _) in CASES.items() for make in makers],
    ids=lambda v: v if isinstance(v, str) else v.__name__,
)
def test_degenerate_data_trains_or_stops_with_one_line(request, family, make, tmp_path):
    try:
        lines = build_and_train(request, family, make, tmp_path)
    except EXPECTED as exc:  # a stop a person can act on, said in one line
        assert str(exc) and "\n" not in str(exc), str(exc)
        return
    assert lines  # trained: the base loss, the validations


def test_a_planner_run_on_silent_identical_songs_trains_or_stops_with_one_line(
    tiny_ace_step, tiny_planner, tmp_path
):
    base = tmp_path / "models" / "ace"
    shutil.copytree(tiny_ace_step, base)
    shutil.copytree(tiny_planner, base.parent / "planner")
    folder, store = tmp_path / "data", Store(tmp_path / "store")
    silent_and_identical(folder)
    manifest, _ = build_manifest(folder, tmp_path / "hashes.json")
    labels = build_labels(folder, manifest, store).frame
    raw = {
        "name": "odd",
        "family": "ace-step-planner",
        "base_model": str(base),
        "adapter": {"planner": "planner"},
        "train": {"steps": 2, "eval_every": 1, "checkpoint_every": 2, "epochs": 2},
    }
    run = resolve_run(raw, Path("tunesmith.toml"), 0)
    encode = EncodeRequest(
        folder, labels, [run], [base], tmp_path / "out", store, CPU, tmp_path / "fp.json"
    )
    encoded = families.get("ace-step").encode(encode).frame
    try:
        ready = plan(run, base, encoded, tmp_path / "out", CPU, tmp_path / "fp.json")
        trainer = families.get("ace-step-planner").trainer("torch")(
            run, base, ready.items, ready.run_dir, CPU, ready.metadata("manifest")
        )
        result = loop.train(trainer, ready.run_dir, log=lambda _: None, progress=io.StringIO())
    except (*EXPECTED, ValueError) as exc:  # ValueError: the plan skips the run, one line
        assert str(exc) and "\n" not in str(exc), str(exc)
        return
    assert result.steps >= 1 and math.isfinite(result.best_loss)
