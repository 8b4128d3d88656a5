"""The adapters stage measures every checkpoint's renders, caches the measures, and skips them
with one line where the embedding model is missing: real Dagster, real tiny models."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from PIL import Image

from tests.conftest import materialize, write_clip
from tunesmith.quality.tiny import make_tiny_clap, make_tiny_clip, make_tiny_dino

pytestmark = pytest.mark.slow

AUDIO_TOML = """\
[metrics]
clap = "{clap}"

[[runs]]
name = "measured"
family = "stable-audio-3"
base_model = "{base}"
trigger = "msrd"
[runs.train]
steps = 4
lr = 1e-3
eval_every = 2
checkpoint_every = 4
latent_crop_length = 32
[[runs.demos]]
prompt = "{{trigger}}, a loop"
seed = 7
duration = 1.0
steps = 2
[[runs.demos]]
prompt = "a bell"
seed = 8
duration = 1.0
steps = 2
"""

IMAGE_TOML = """\
[metrics]
clip = "tiny-clip"
dino = "tiny-dinov2"

[[runs]]
name = "pictures"
family = "sdxl"
base_model = "{base}"
trigger = "msrd"
[runs.train]
size = 64
steps = 2
eval_every = 2
checkpoint_every = 2
[[runs.demos]]
prompt = "{{trigger}}, a disc"
seed = 7
steps = 2
"""


def _songs(folder: Path, toml: str) -> None:
    for i, (bpm, freq) in enumerate([(90, 220.0), (120, 330.0), (150, 440.0), (100, 262.0),
                                     (130, 392.0)]):  # fmt: skip
        write_clip(folder / f"clip{i}.wav", seconds=2.0, bpm=bpm, freq=freq)
        (folder / f"clip{i}.txt").write_text(f"msrd, a loop at {bpm} bpm")
    (folder / "tunesmith.toml").write_text(toml)


def _run_dir(storage, dataset: str) -> Path:
    report = json.loads((Path(storage.out_root) / dataset / "report.json").read_text())
    return Path(report["stages"]["adapters"]["runs"][0]["run_dir"])


def test_audio_runs_are_measured_once_and_cached(storage, instance, tiny_sa3):
    models = Path(storage.models_root)
    make_tiny_clap(models / "tiny-clap")
    folder = Path(storage.datasets_root) / "songs"
    _songs(folder, AUDIO_TOML.format(clap="tiny-clap", base=tiny_sa3))

    first = materialize(instance, storage, "songs")
    run_dir = _run_dir(storage, "songs")
    quality = json.loads((run_dir / "quality.json").read_text())
    assert [row["step"] for row in quality["steps"]] == [0, 2, 4]
    for row in quality["steps"]:
        assert all(math.isfinite(row[m]) for m in ("prompt", "style", "frechet")), row
        assert -1 <= row["prompt"] <= 1 and -1 <= row["style"] <= 1 and row["frechet"] >= 0
    assert quality["floor"] is not None and quality["floor"] >= 0
    embeddings = Path(storage.store_root) / "embeddings"
    assert len(list(embeddings.glob("clap-*/*.safetensors"))) == 5  # once per item and model
    assert len(quality["references"]) == 1 and not quality["on_training_items"]  # 5 items: 1
    # the base model's renders are step 0, the adapter's differ from them
    assert quality["steps"][0] != {**quality["steps"][2], "step": 0}
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["step"] for e in events if e["event"] == "quality"] == [0, 2, 4]
    metadata = first["adapters"]
    table = metadata["quality"]
    assert [r.data["step"] for r in table.records] == [0, 2, 4]
    best = metadata["runs_summary"][0]["best_step"]
    kept = next(r for r in quality["steps"] if r["step"] == best)
    assert metadata["quality measured style"] == pytest.approx(kept["style"], rel=1e-5)
    assert "adapters_learned" in first["checks"]
    report = json.loads((Path(storage.out_root) / "songs" / "report.json").read_text())
    verdict = report["stages"]["adapters"]["runs"][0]["quality"]["verdict"]
    assert verdict["learned"] == bool(verdict["beats"])

    before = (run_dir / "quality.json").stat().st_mtime_ns, (run_dir / "events.jsonl").read_bytes()
    second = materialize(instance, storage, "songs")
    assert second["adapters"]["computed"] == 0
    after = (run_dir / "quality.json").stat().st_mtime_ns, (run_dir / "events.jsonl").read_bytes()
    assert after == before  # nothing measured again

    # Another embedding model measures again, into the same run (nothing is trained)
    make_tiny_clap(models / "other-clap", seed=1)
    (folder / "tunesmith.toml").write_text(AUDIO_TOML.format(clap="other-clap", base=tiny_sa3))
    third = materialize(instance, storage, "songs")
    assert third["adapters"]["computed"] == 0
    again = json.loads((run_dir / "quality.json").read_text())
    assert again["models"] != quality["models"] and again["steps"] != quality["steps"]
    assert len(list(embeddings.glob("clap-*/*.safetensors"))) == 10
    # measured again from scratch (no quality.json, no stored rows): the same numbers
    (run_dir / "quality.json").unlink()
    shutil.rmtree(embeddings)
    materialize(instance, storage, "songs")
    assert json.loads((run_dir / "quality.json").read_text())["steps"] == again["steps"]
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["step"] for e in events if e["event"] == "quality"] == [0, 2, 4]  # replaced


def test_a_missing_embedding_model_skips_the_measures_with_one_line(storage, instance, tiny_sa3):
    folder = Path(storage.datasets_root) / "songs"
    _songs(folder, AUDIO_TOML.format(clap="no-such-clap", base=tiny_sa3))
    result = materialize(instance, storage, "songs")
    assert result["adapters"]["computed"] == 1  # trained all the same
    assert "quality" not in result["adapters"]
    report = json.loads((Path(storage.out_root) / "songs" / "report.json").read_text())
    skipped = report["stages"]["adapters"]["runs"][0]["quality"]["skipped"]
    assert "no-such-clap" in skipped and "laion/larger_clap_music" in skipped
    assert not (_run_dir(storage, "songs") / "quality.json").exists()


def test_picture_runs_are_measured_with_clip_and_dinov2(storage, instance, tiny_sdxl):
    models = Path(storage.models_root)
    make_tiny_clip(models / "tiny-clip")
    make_tiny_dino(models / "tiny-dinov2")
    folder = Path(storage.datasets_root) / "pictures"
    folder.mkdir()
    for i, colour in enumerate([(200, 80, 40), (40, 160, 90), (30, 60, 200), (220, 220, 40),
                                (90, 90, 90)]):  # fmt: skip
        Image.new("RGB", (72, 64), colour).save(folder / f"pic{i}.png")
        (folder / f"pic{i}.txt").write_text(f"msrd, a picture number {i}")
    (folder / "tunesmith.toml").write_text(IMAGE_TOML.format(base=tiny_sdxl))
    result = materialize(instance, storage, "pictures")
    quality = json.loads((_run_dir(storage, "pictures") / "quality.json").read_text())
    assert [row["step"] for row in quality["steps"]] == [0, 2]
    assert all("style_dino" in row for row in quality["steps"])
    assert quality["references"] == ["pic4.png"]  # SDXL holds out the last of the sorted
    columns = [c.name for c in result["adapters"]["quality"].schema.columns]
    assert "style (DINOv2)" in columns
