"""Stage `encoded` for Stable Audio 3: underfit's layout, and what is (not) recomputed."""

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import materialize, write_clip


def make_dataset(root: Path, base_model: Path) -> Path:
    folder = root / "songs"
    write_clip(folder / "a.wav", seconds=5.0, bpm=120)
    (folder / "a.txt").write_text("a bright loop")
    write_clip(folder / "b.wav", seconds=3.0, bpm=90, freq=330)
    (folder / "tunesmith.toml").write_text(
        f'[[runs]]\nname = "r"\nfamily = "stable-audio-3"\nbase_model = "{base_model}"\n'
        "[runs.train]\nsteps = 2\neval_every = 1\nlatent_crop_length = 32\n"
    )
    return folder


def encoded_dir(storage) -> Path:
    (folder,) = (Path(storage.out_root) / "songs" / "encoded").iterdir()
    return folder


@pytest.mark.slow
def test_encoded_layout_is_underfits(storage, instance, tiny_sa3):
    make_dataset(Path(storage.datasets_root), tiny_sa3)
    md = materialize(instance, storage, "songs")
    assert md["encoded"]["computed"] == 2
    folder = encoded_dir(storage)
    details = json.loads((folder / "details.json").read_text())
    assert details == {
        "sample_rate": 44100,
        "downsampling_ratio": 4096,
        "latent_dim": 16,
        "scale": 1.0,
    }
    latents = np.load(folder / "a.npy")
    sidecar = json.loads((folder / "a.json").read_text())
    assert latents.dtype == np.float32 and latents.shape == (16, 5 * 44100 // 4096)
    assert sidecar["latent_shape"] == list(latents.shape)
    assert sidecar["audio_samples"] == 5 * 44100  # the source length (underfit), not aligned
    assert sidecar["seconds_total"] == 5.0 and sidecar["seconds_start"] == 0
    assert sidecar["padding_mask"] == [1] * latents.shape[1]
    assert sidecar["prompt"] == "a bright loop"
    assert json.loads((folder / "b.json").read_text())["prompt"] == "b"


@pytest.mark.slow
def test_second_run_loads_no_model_and_a_caption_edit_encodes_no_audio(
    storage, instance, tiny_sa3, monkeypatch
):
    folder = make_dataset(Path(storage.datasets_root), tiny_sa3)
    materialize(instance, storage, "songs")

    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr("tunesmith.families.stable_audio_3.model.load_pipeline", refuse)
    again = materialize(instance, storage, "songs")
    assert again["encoded"]["computed"] == 0 and again["encoded"]["cached"] == 2
    monkeypatch.undo()

    (folder / "a.txt").write_text("a darker loop")
    edited = materialize(instance, storage, "songs")
    assert edited["encoded"]["computed"] == 0  # no audio re-encoded...
    sidecar = json.loads((encoded_dir(storage) / "a.json").read_text())
    assert sidecar["prompt"] == "a darker loop"  # ...but the sidecar follows the caption


def test_a_folder_that_is_not_a_base_model_is_named(storage, instance, tmp_path):
    bogus = tmp_path / "not-a-model"
    bogus.mkdir()
    make_dataset(Path(storage.datasets_root), bogus)
    md = materialize(instance, storage, "songs")
    assert md["encoded"]["skipped"] == 1  # one entry for the model, not one per song
    report = json.loads((Path(storage.out_root) / "songs" / "report.json").read_text())
    reason = report["stages"]["encoded"]["skipped"][0]["reason"]
    assert "not-a-model" in reason and "model_index.json is missing" in reason


def test_an_unknown_key_in_tunesmith_toml_fails_with_the_allowed_keys(storage, instance):
    folder = Path(storage.datasets_root) / "songs"
    write_clip(folder / "a.wav")
    (folder / "tunesmith.toml").write_text('[[runs]]\nfamily = "stable-audio-3"\nrnak = 3\n')
    with pytest.raises(Exception, match="rnak is not a setting of a run"):
        materialize(instance, storage, "songs")
