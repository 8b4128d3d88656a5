"""The SDXL `encoded` stage with kohya's data options, on the tiny SDXL and pictures drawn
here: portrait, landscape and square pictures each encoded at its bucket (shape, value.json,
the posterior the VAE gives the fitted picture), cached (a second build computes nothing;
editing a caption encodes that caption only), flipped pictures and masks as entries of their
own, long captions and caption variants, and a dataset without options left as it was."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from tunesmith import encoding
from tunesmith.backends.placement import Placement
from tunesmith.dataset.labels import build_labels
from tunesmith.dataset.manifest import build_manifest
from tunesmith.families.sdxl import buckets, model
from tunesmith.families.sdxl import encoded as stage
from tunesmith.families.sdxl.config import SdxlTrain
from tunesmith.families.sdxl.data_options import SdxlDataOptions
from tunesmith.family import EncodeRequest
from tunesmith.media.images import load_image
from tunesmith.store import Store
from tunesmith.train.config import resolve_run

pytestmark = pytest.mark.slow  # several builds of the tiny model: about 30 s in all
CPU = Placement("torch", "cpu", "float32", "test")
SIZE = 64  # buckets of at most 64² pixels: 32 x 96, 64 x 64, 96 x 32 ... (steps of 32)
BUCKETS = dict(buckets=True, min_bucket_reso=32, max_bucket_reso=128, bucket_reso_steps=32)
RULES = buckets.BucketRules(SIZE, 32, 128, 32)
PICTURES = {"landscape.png": (120, 50), "portrait.png": (50, 110), "square.png": (70, 70)}


@dataclass(frozen=True)
class Train(SdxlTrain, SdxlDataOptions):
    """An SDXL train section with the data options (as the family's will have them)."""


def run_with(base_model: Path, name: str = "shaped", **settings):
    raw = {"name": name, "family": "sdxl", "base_model": str(base_model)}
    run = resolve_run(raw, Path("tunesmith.toml"), 0)
    plain = {k: getattr(run.train, k) for k in SdxlTrain.__dataclass_fields__}
    return replace(run, train=Train(**{**plain, "size": SIZE, **settings}))


def draw(path: Path, size: tuple[int, int], seed: int, alpha: bool = False) -> np.ndarray:
    """A coloured ground with three discs; `alpha`: the left half transparent."""
    rng = np.random.default_rng(seed)
    width, height = size
    y, x = np.mgrid[:height, :width]
    pixels = np.empty((height, width, 3), np.uint8)
    pixels[:] = rng.integers(0, 256, 3)
    for _ in range(3):
        cx, cy, r = rng.integers(0, width), rng.integers(0, height), rng.integers(6, 20)
        pixels[(x - cx) ** 2 + (y - cy) ** 2 < r * r] = rng.integers(0, 256, 3)
    if alpha:
        a = np.where(x < width // 2, 0, 255).astype(np.uint8)
        Image.fromarray(np.dstack([pixels, a]), "RGBA").save(path)
    else:
        Image.fromarray(pixels).save(path)
    return pixels


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    folder = tmp_path / "shapes"
    folder.mkdir()
    for i, (name, size) in enumerate(PICTURES.items()):
        draw(folder / name, size, seed=i)
        (folder / name).with_suffix(".txt").write_text(f"kvad, {name[:-4]}, discs, ground")
    return folder


def build(folder: Path, runs, store: Store | None = None):
    store = store or Store(folder.parent / "store")
    manifest, _ = build_manifest(folder, folder.parent / "hashes.json")
    labels = build_labels(folder, manifest, store).frame
    request = EncodeRequest(
        folder,
        labels,
        runs,
        [runs[0].base_model and Path(runs[0].base_model)],
        folder.parent / "out",
        store,
        CPU,
        folder.parent / "fp.json",
    )
    return stage.encode(request)


def counting(monkeypatch) -> list[int]:
    """The number of pictures each call of the VAE encodes."""
    calls, original = [], model.encode_images
    monkeypatch.setattr(model, "encode_images", lambda v, p: calls.append(len(p)) or original(v, p))
    return calls


def test_each_picture_is_encoded_at_its_bucket_and_cached(dataset, tiny_sdxl, monkeypatch):
    run = run_with(tiny_sdxl, **BUCKETS)
    calls = counting(monkeypatch)
    encoded = build(dataset, [run])
    result, frame = encoded.result, encoded.frame.set_index("path")
    assert (result.computed, result.cached, result.skipped) == (3, 0, [])
    assert sorted(calls) == [1, 1, 1]  # three buckets: a batch each
    assert result.extra["buckets"] == {"shaped": {"32x96": 1, "64x64": 1, "96x32": 1}}
    pipe = model.load_pipeline(tiny_sdxl, skip=("unet",))
    for path, (width, height) in PICTURES.items():
        fit = buckets.select(width, height, RULES)
        row = frame.loc[path]
        assert (row["target_width"], row["target_height"]) == fit.bucket
        ids = [row[c] for c in ("original_height", "original_width", "crop_top", "crop_left")]
        assert [*ids, row["target_height"], row["target_width"]] == fit.time_ids()
        mean, logvar = stage.load_posterior(row["posterior"])
        assert mean.shape == (4, fit.bucket[1] // 8, fit.bucket[0] // 8)
        pixels = buckets.fit_bucket(load_image(dataset / path), fit)
        alone, _ = model.encode_images(pipe.vae, model.pixels_to_tensor(pixels))
        assert (mean - alone[0]).abs().max() <= stage.TOLERANCE
        value = json.loads((Path(row["posterior"]).parent / "value.json").read_text())
        assert value["original_size"] == [height, width]
        assert value["target_size"] == fit.target_size
        assert value["crop_top_left"] == fit.crop_top_left
        assert value["cut_top_left"] == fit.cut_top_left
        assert row["flipped_posterior"] is None and row["mask"] is None
    # kohya's numbers for the landscape, by hand: 120 x 50 (2.4) goes to 96 x 32, shrunk by
    # 0.8 to 96 x 40 and cut 4 from the top; fitted inside the bucket it is 76.8 wide, 9 in.
    assert frame.loc["landscape.png", ["crop_top", "crop_left"]].tolist() == [0, 9]

    def refuse(*args, **kwargs):
        raise AssertionError("a build with nothing to do loaded the model")

    monkeypatch.setattr(model, "load_pipeline", refuse)
    again = build(dataset, [run])
    assert (again.result.computed, again.result.cached) == (0, 3)
    assert again.result.extra["captions_computed"] == 0
    assert again.result.data_version == result.data_version and again.frame.equals(encoded.frame)
    monkeypatch.undo()
    calls = counting(monkeypatch)
    (dataset / "portrait.txt").write_text("kvad, a tall picture")
    edited = build(dataset, [run])
    assert calls == [] and (edited.result.computed, edited.result.cached) == (0, 3)
    assert edited.result.extra["captions_computed"] == 1
    before, after = encoded.frame.set_index("path"), edited.frame.set_index("path")
    assert (before["entry"] == after["entry"]).all()
    assert (before["caption_entry"] != after["caption_entry"]).tolist() == [False, True, False]


def test_flips_and_masks_are_entries_of_their_own(dataset, tiny_sdxl, monkeypatch):
    """Turning flip_aug on encodes the flipped pictures only; masked_loss encodes no picture;
    the mask comes from `<stem>.mask.png` or the alpha channel, at the latent's size; the mask
    file is no picture to train on."""
    store = Store(dataset.parent / "store")
    plain = build(dataset, [run_with(tiny_sdxl, **BUCKETS)], store).frame.set_index("path")
    alpha = draw(dataset / "alpha.png", (64, 64), seed=9, alpha=True)
    (dataset / "alpha.txt").write_text("kvad, half seen")
    calls = counting(monkeypatch)
    flipped = build(dataset, [run_with(tiny_sdxl, flip_aug=True, **BUCKETS)], store)
    # per bucket: the new picture both ways and the square flipped; the others flipped only
    assert sorted(calls) == [1, 1, 3]
    frame = flipped.frame.set_index("path")
    assert sorted(frame.index) == ["alpha.png", "landscape.png", "portrait.png", "square.png"]
    pipe = model.load_pipeline(tiny_sdxl, skip=("unet",))
    for path in PICTURES:
        row = frame.loc[path]
        assert row["posterior"] == plain.loc[path, "posterior"]  # the same entry as before
        fit = buckets.select(*PICTURES[path], RULES)
        pixels = buckets.fit_bucket(load_image(dataset / path), fit)[:, ::-1]
        alone, _ = model.encode_images(pipe.vae, model.pixels_to_tensor(pixels.copy()))
        mean, _ = stage.load_posterior(row["flipped_posterior"])
        assert (mean - alone[0]).abs().max() <= stage.TOLERANCE
        assert row["flipped_crop_left"] == fit.flipped_crop_left

    mask = np.zeros((110, 50), np.uint8)
    mask[:55] = 255
    Image.fromarray(mask).save(dataset / "portrait.mask.png")
    calls.clear()
    masked = build(
        dataset, [run_with(tiny_sdxl, flip_aug=True, masked_loss=True, **BUCKETS)], store
    )
    assert calls == []  # the posteriors are all there: no picture is encoded again
    frame = masked.frame.set_index("path")
    assert "portrait.mask.png" not in frame.index  # portrait.png's mask, not a picture
    assert masked.result.skipped == []
    warnings = masked.result.extra["warnings"]
    assert [w.split(":")[0] for w in warnings] == ["landscape.png", "square.png"]
    assert "no mask" in warnings[0] and "every pixel of it counts" in warnings[0]
    portrait = stage.load_mask(frame.loc["portrait.png", "mask"])
    fit = buckets.select(50, 110, RULES)  # 44 x 96 cut 6 from the left: the top half is 1
    assert portrait.shape == (12, 4) and portrait.dtype == torch.float32
    assert torch.equal(portrait[:6], torch.ones(6, 4)) and torch.equal(
        portrait[6:], torch.zeros(6, 4)
    )
    seen = stage.load_mask(frame.loc["alpha.png", "mask"])  # alpha: the left half is 0
    assert torch.equal(seen, torch.tensor([[0.0] * 4 + [1.0] * 4] * 8))
    assert frame.loc["alpha.png", "flipped_posterior"] is not None
    alpha_rgb = load_image(dataset / "alpha.png")  # colours composited on white where alpha is 0
    assert np.asarray(alpha_rgb)[0, 0].tolist() == [255, 255, 255]
    del alpha, fit


def test_long_captions_variants_and_dropout(dataset, tiny_sdxl):
    (dataset / "square.txt").write_text("kvad, " + ", ".join(f"tag{i}" for i in range(20)))
    plain = build(dataset, [run_with(tiny_sdxl)])  # defaults: 75 tokens, one line for the cut
    [cut] = [w for w in plain.result.extra["warnings"] if w.startswith("square.png")]
    # a character a token in the tiny vocabulary (spaces are none): 114, 39 past 75
    assert "its caption is 114 tokens; the 39 past the first 75 are cut off" in cut
    run = run_with(
        tiny_sdxl,
        max_token_length=150,
        shuffle_caption=True,
        keep_tokens=1,
        caption_dropout_rate=0.1,
        caption_variants=3,
    )
    encoded = build(dataset, [run])
    assert not [w for w in encoded.result.extra["warnings"] if "cut off" in w]  # none at 150
    assert "buckets" not in encoded.result.extra  # no run has buckets
    rows = encoded.frame.set_index("path")
    embeds, pooled = stage.load_caption(rows.loc["square.png", "text"])
    assert embeds.shape == (152, 64) and pooled.shape == (32,)
    variants, empty = stage.text_choices(rows.loc["square.png"].to_dict())
    assert len(variants) == 3 and empty == rows.loc["landscape.png", "empty_text"]
    shuffled = [json.loads(Path(p).parent.joinpath("value.json").read_text()) for p in variants]
    assert all(v["tokens"] == 114 for v in shuffled)  # the same tags, shuffled
    assert stage.load_caption(empty)[0].shape == (152, 64)
    pipe = model.load_pipeline(tiny_sdxl, skip=("unet",))
    ref, _ = model.encode_long_captions(pipe, [rows.loc["square.png", "caption"]], 2)
    assert (embeds - ref[0]).abs().max() <= stage.TOLERANCE
    # 3 captions as written, up to 9 variants (fewer where two are the same text), 1 empty
    assert 5 <= encoded.result.extra["captions_computed"] <= 13


def test_a_dataset_whose_runs_set_no_option_is_encoded_as_before(dataset, tiny_sdxl):
    """The default run: the same table as `Pictures` gives; beside a bucketed run, its rows
    name the same entries (so it trains as before)."""
    store = Store(dataset.parent / "store")
    run = run_with(tiny_sdxl, name="plain")
    ours = build(dataset, [run], store)
    manifest, _ = build_manifest(dataset, dataset.parent / "hashes.json")
    labels = build_labels(dataset, manifest, store).frame
    request = EncodeRequest(
        dataset,
        labels,
        [run],
        [tiny_sdxl],
        dataset.parent / "out",
        store,
        CPU,
        dataset.parent / "fp.json",
    )
    theirs = encoding.encode(request, stage.Pictures)  # the encoder before the data options
    assert list(ours.frame.columns) == list(stage.COLUMNS) and ours.frame.equals(theirs.frame)
    assert ours.result.data_version == theirs.result.data_version
    both = build(dataset, [run, run_with(tiny_sdxl, name="bucketed", **BUCKETS)], store)
    mine = both.frame[both.frame["run"] == "plain"].set_index("path")
    before = ours.frame.set_index("path")
    assert (mine["entry"] == before["entry"]).all()
    assert (mine["caption_entry"] == before["caption_entry"]).all()
    assert (mine["target_height"] == SIZE).all() and mine["flipped_posterior"].isna().all()


def test_two_workers_write_what_one_writes(dataset, tiny_sdxl, tmp_path, monkeypatch):
    """`Shaped` travels to the worker processes: the same entries and table from two as from
    one, the flipped posteriors (written beside each picture's entry) included."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    draw(dataset / "alpha.png", (64, 64), seed=9, alpha=True)
    run = run_with(tiny_sdxl, flip_aug=True, masked_loss=True, **BUCKETS)
    manifest, _ = build_manifest(dataset, tmp_path / "hashes.json")

    def build_on(workers: int):
        store = Store(tmp_path / f"store{workers}")
        labels = build_labels(dataset, manifest, store).frame
        request = EncodeRequest(
            dataset,
            labels,
            [run],
            [tiny_sdxl],
            tmp_path / f"out{workers}",
            store,
            CPU,
            tmp_path / "fp.json",
            workers,
        )
        return stage.encode(request)

    one, two = build_on(1), build_on(2)
    assert one.keys == two.keys and two.result.computed == 4
    places = list(stage.Shaped.places)
    assert one.frame.drop(columns=places).equals(two.frame.drop(columns=places))
    for a, b in zip(one.frame.to_dict("records"), two.frame.to_dict("records"), strict=True):
        for column in ("posterior", "flipped_posterior", "mask"):
            if isinstance(a[column], str) or isinstance(b[column], str):  # no mask: None
                assert Path(a[column]).read_bytes() == Path(b[column]).read_bytes(), a["path"]
    assert one.frame["mask"].notna().tolist() == [True, False, False, False]  # alpha.png's
