"""Stage `encoded` for SDXL on a few drawn pictures: posteriors and caption encodings in the
store, exactly what the model gives; a second build computes nothing; editing one caption
encodes that caption and no picture; bad pictures are skipped by name; two runs of different
sizes each train on posteriors of their own size."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from tunesmith.backends.placement import Placement
from tunesmith.dataset.labels import build_labels
from tunesmith.dataset.manifest import build_manifest
from tunesmith.encoding import Encoded
from tunesmith.families.sdxl import FAMILY, model
from tunesmith.families.sdxl import encoded as stage
from tunesmith.family import EncodeRequest
from tunesmith.media.images import fit_square, load_image
from tunesmith.store import Store
from tunesmith.train import stage as train_stage
from tunesmith.train.config import resolve_run

SIZE = 64  # 8 x 8 latents
CPU = Placement("torch", "cpu", "float32", "test")


def draw(path: Path, size: tuple[int, int], seed: int) -> None:
    """A picture of a few discs on a flat ground."""
    rng = np.random.default_rng(seed)
    width, height = size
    y, x = np.mgrid[:height, :width]
    array = np.empty((height, width, 3), np.uint8)
    array[:] = rng.integers(0, 256, 3)
    for _ in range(3):
        cx, cy, r = rng.integers(0, width), rng.integers(0, height), rng.integers(6, 20)
        array[(x - cx) ** 2 + (y - cy) ** 2 < r * r] = rng.integers(0, 256, 3)
    Image.fromarray(array).save(path)


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    folder = tmp_path / "discs"
    folder.mkdir()
    for i, size in enumerate([(96, 64), (64, 128), (80, 80)]):
        draw(folder / f"disc{i}.png", size, seed=i)
        (folder / f"disc{i}.txt").write_text(f"a kvadring picture of {i + 1} discs")
    Image.new("RGB", (1, 1)).save(folder / "dot.png")  # one pixel: skipped by name
    return folder


def labels_of(folder: Path, store: Store) -> pd.DataFrame:
    manifest, _ = build_manifest(folder, folder.parent / "hashes.json")
    return build_labels(folder, manifest, store).frame


def sized_run(base_model: Path, size: int, name: str = "discs"):
    """A run of the tiny model at `size` (set past the config's checks, which refuse a size
    that is not a multiple of 8: the encoder checks it again)."""
    raw = {"name": name, "family": "sdxl", "base_model": str(base_model)}
    run = resolve_run(raw, Path("tunesmith.toml"), 0)
    return replace(run, train=replace(run.train, size=size))


def build(folder: Path, base_model: Path, store: Store, size: int = SIZE, runs=None) -> Encoded:
    out = folder.parent / "out"
    labels = labels_of(folder, store)
    cache = folder.parent / "fingerprints.json"
    runs = runs or [sized_run(base_model, size)]
    return FAMILY.encode(EncodeRequest(folder, labels, runs, [base_model], out, store, CPU, cache))


def close(batched: torch.Tensor, alone: torch.Tensor) -> bool:
    """Equal within the stage's TOLERANCE (a batch rounds differently from one item)."""
    return batched.shape == alone.shape and (batched - alone).abs().max() <= stage.TOLERANCE


def test_each_picture_gives_its_posterior_and_each_caption_both_encoders_outputs(
    dataset, tiny_sdxl, monkeypatch
):
    """The stage encodes in batches (the three pictures in one call of the VAE, the three
    captions in one call of the text encoders); each entry is that item encoded alone within
    the stage's TOLERANCE."""
    calls = []

    def counted(name):
        original = getattr(model, name)
        return lambda a, b: calls.append((name, len(b))) or original(a, b)

    for name in ("encode_images", "encode_captions"):
        monkeypatch.setattr(model, name, counted(name))
    store = Store(dataset.parent / "store")
    encoded = build(dataset, tiny_sdxl, store)
    assert sorted(calls) == [("encode_captions", 3), ("encode_images", 3)]
    result, frame = encoded.result, encoded.frame.set_index("path")
    assert (result.items, result.computed, result.cached) == (4, 3, 0)
    assert [s.path for s in result.skipped] == ["dot.png"]
    assert "dot.png: 1x1 pixels is too small" in result.skipped[0].reason
    assert result.extra["captions_computed"] == 3
    assert not result.extra.get("warnings")

    pipe = model.load_pipeline(tiny_sdxl, skip=("unet",))
    for path in ["disc0.png", "disc1.png", "disc2.png"]:
        row = frame.loc[path]
        mean, logvar = stage.load_posterior(row["posterior"])
        assert mean.shape == logvar.shape == (4, 8, 8) and mean.dtype == torch.float32
        pixels = fit_square(load_image(dataset / path), SIZE)
        ref_mean, ref_logvar = model.encode_images(pipe.vae, model.pixels_to_tensor(pixels))
        assert close(mean, ref_mean[0]) and close(logvar, ref_logvar[0])
        embeds, pooled = stage.load_caption(row["text"])
        ref_embeds, ref_pooled = model.encode_captions(pipe, [row["caption"]])
        assert close(embeds, ref_embeds[0]) and close(pooled, ref_pooled[0])
    # SDXL's size and crop conditioning: original (h, w), top-left of the square in the
    # picture resized to a short side of 64 (96 x 64 stays; 64 x 128 stays, cut at row 32).
    conditioning = ["original_height", "original_width", "crop_top", "crop_left"]
    assert frame.loc["disc0.png", conditioning].tolist() == [64, 96, 0, 16]
    assert frame.loc["disc1.png", conditioning].tolist() == [128, 64, 32, 0]
    assert frame.loc["disc0.png", "caption"] == "a kvadring picture of 1 discs"
    details = dataset.parent / "out" / "encoded"
    assert [p.name for p in details.glob("*/details.json")] == ["details.json"]


def test_second_build_computes_nothing_and_loads_no_model(dataset, tiny_sdxl, monkeypatch):
    store = Store(dataset.parent / "store")
    first = build(dataset, tiny_sdxl, store)

    def refuse(*args, **kwargs):
        raise AssertionError("a no-change build loaded the model")

    monkeypatch.setattr(model, "load_pipeline", refuse)
    second = build(dataset, tiny_sdxl, store)
    assert (second.result.computed, second.result.cached) == (0, 3)
    assert second.result.extra["captions_computed"] == 0
    assert second.result.data_version == first.result.data_version
    assert second.frame.equals(first.frame)


def test_editing_one_caption_encodes_one_caption_and_no_picture(dataset, tiny_sdxl):
    store = Store(dataset.parent / "store")
    first = build(dataset, tiny_sdxl, store)
    (dataset / "disc1.txt").write_text("a kvadring picture of two blue discs")
    second = build(dataset, tiny_sdxl, store)
    assert (second.result.computed, second.result.cached) == (0, 3)
    assert (second.result.extra["captions_computed"], second.result.extra["captions_cached"]) == (
        1,
        2,
    )
    assert second.result.data_version != first.result.data_version
    before, after = first.frame.set_index("path"), second.frame.set_index("path")
    assert (before["entry"] == after["entry"]).all()  # the same posteriors
    changed = before["caption_entry"] != after["caption_entry"]
    assert changed.tolist() == [False, True, False]


def test_a_shared_caption_is_encoded_once_and_small_pictures_are_reported(dataset, tiny_sdxl):
    for i in range(3):
        (dataset / f"disc{i}.txt").write_text("discs")
    encoded = build(dataset, tiny_sdxl, Store(dataset.parent / "store"), size=96)
    assert encoded.result.extra["captions_computed"] == 1
    assert encoded.frame["caption_entry"].nunique() == 1
    warnings = encoded.result.extra["warnings"]  # one line per picture, each naming it
    assert [w.split(":")[0] for w in warnings] == ["disc0.png", "disc1.png", "disc2.png"]
    assert warnings[1].startswith("disc1.png: 64x128 is smaller than 96 on its short side")


def test_size_not_a_multiple_of_eight_and_a_model_that_is_not_sdxl(dataset, tiny_sdxl, tiny_sa3):
    store = Store(dataset.parent / "store")
    with pytest.raises(ValueError, match="multiple of 8"):
        build(dataset, tiny_sdxl, store, size=100)
    encoded = build(dataset, tiny_sa3, store)
    assert encoded.frame.empty and len(encoded.result.skipped) == 4
    assert all("not a usable SDXL base model" in s.reason for s in encoded.result.skipped)


def test_two_files_with_the_same_bytes_are_encoded_once(dataset, tiny_sdxl):
    (dataset / "copy.png").write_bytes((dataset / "disc0.png").read_bytes())
    (dataset / "copy.txt").write_text("the same discs again")
    (dataset / "dot.png").unlink()
    encoded = build(dataset, tiny_sdxl, Store(dataset.parent / "store"))
    result, frame = encoded.result, encoded.frame.set_index("path")
    assert (result.computed, result.cached, result.skipped) == (3, 1, [])
    assert frame.loc["copy.png", "entry"] == frame.loc["disc0.png", "entry"]


def test_two_runs_of_different_sizes_each_train_on_posteriors_of_their_own_size(
    dataset, tiny_sdxl, tmp_path
):
    """The size is in the picture's key: each run's rows name posteriors of its own size, with
    its own size conditioning; the captions are encoded once for both; each size's details."""
    runs = [sized_run(tiny_sdxl, 64, "small"), sized_run(tiny_sdxl, 96, "large")]
    encoded = build(dataset, tiny_sdxl, Store(dataset.parent / "store"), runs=runs)
    assert (encoded.result.computed, encoded.result.cached) == (6, 0)
    assert encoded.result.extra["captions_computed"] == 3
    frame = encoded.frame.assign(family="sdxl")
    for run, latent in ((runs[0], 8), (runs[1], 12)):
        plan = train_stage.plan(run, tiny_sdxl, frame, tmp_path / "out", CPU, tmp_path / "fp.json")
        items = plan.items
        assert sorted(items["path"]) == ["disc0.png", "disc1.png", "disc2.png"]
        assert set(items["run"]) == {run.name} and set(items["size"]) == {run.train.size}
        for row in items.to_dict("records"):
            mean, _ = stage.load_posterior(row["posterior"])
            assert mean.shape == (4, latent, latent), (run.name, row["path"])
    small, large = (frame[frame["run"] == name].set_index("path") for name in ("small", "large"))
    assert (small["entry"] != large["entry"]).all()
    assert (small["caption_entry"] == large["caption_entry"]).all()
    details = sorted((dataset.parent / "out" / "encoded").glob("*/*/details.json"))
    assert [p.parent.name for p in details] == ["64", "96"]
