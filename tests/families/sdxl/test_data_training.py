"""kohya's SDXL data options through training, on the tiny SDXL and pictures drawn here:
portrait, landscape and square pictures trained in batches of one bucket each with their
bucket's time_ids; flips, caption variants and caption dropout drawn per picture and step;
the masked loss; a resume bit for bit with all of them (and an EMA and accumulation) on; and
a whole build with buckets, whose second build computes nothing."""

from __future__ import annotations

import json
import math
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file

from tests.conftest import build_in_a_process, materialize
from tests.families.sdxl.test_encoded_shaped import draw
from tunesmith import encoding
from tunesmith.backends.placement import Placement
from tunesmith.dataset.labels import build_labels
from tunesmith.dataset.manifest import build_manifest
from tunesmith.families.sdxl import FAMILY, buckets
from tunesmith.families.sdxl import encoded as stage
from tunesmith.families.sdxl.buckets import BucketOrder
from tunesmith.families.sdxl.files import KOHYA_METADATA
from tunesmith.families.sdxl.objective import Choices, Picture, pictures_from_frame
from tunesmith.families.sdxl.options import (
    elementwise_loss,
    huber_threshold,
    min_snr_weight,
    signal_to_noise,
)
from tunesmith.families.sdxl.trainer import SdxlTrainer
from tunesmith.family import EncodeRequest
from tunesmith.store import Store
from tunesmith.train import loop
from tunesmith.train.config import resolve_run

CPU = Placement("torch", "cpu", "float32", "test")
LINEAGE = {"tunesmith.base_model_fingerprint": "fp", "tunesmith.training_config": "{}"}
SIZE = 64  # buckets of at most 64² pixels, in steps of 32: 32 x 96, 64 x 64, 96 x 32, ...
BUCKETS = dict(buckets=True, min_bucket_reso=32, max_bucket_reso=128, bucket_reso_steps=32)
RULES = buckets.BucketRules(SIZE, 32, 128, 32)
# Three of each shape to train on; "sq3.png", last of the sorted names, is held out.
PICTURES = {
    "land0.png": (120, 50),
    "land1.png": (100, 45),
    "land2.png": (128, 48),
    "port0.png": (50, 110),
    "port1.png": (44, 100),
    "port2.png": (48, 128),
    "sq0.png": (70, 70),
    "sq1.png": (64, 64),
    "sq2.png": (72, 66),
    "sq3.png": (66, 66),
}
ALPHA = "sq1.png"  # its left half transparent: its mask
EVERYTHING = dict(
    **BUCKETS,
    flip_aug=True,
    masked_loss=True,
    shuffle_caption=True,
    keep_tokens=1,
    caption_dropout_rate=0.25,
    caption_variants=3,
)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """The tiny UNet's ops are far too small to share out: one thread is much faster here."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def make_shapes(folder: Path) -> None:
    folder.mkdir(parents=True)
    for i, (name, size) in enumerate(PICTURES.items()):
        draw(folder / name, size, seed=i, alpha=name == ALPHA)
        (folder / name).with_suffix(".txt").write_text(f"kvad, {name[:-5]}, discs, ground, r{i}")


def run_config(tiny_sdxl, name: str = "shapes", **train):
    raw = {
        "name": name,
        "family": "sdxl",
        "base_model": str(tiny_sdxl),
        "train": {"size": SIZE, "lr": 1e-3, "steps": 6, "eval_every": 6, **train},
        "demos": [{"prompt": "kvad, a disc", "seed": 5, "steps": 1}],
    }
    return resolve_run(raw, Path("tunesmith.toml"), 0)


@pytest.fixture(scope="module")
def encoded(tiny_sdxl, tmp_path_factory):
    """The shapes encoded for a run with every data option on (buckets, flips, a mask,
    caption variants and dropout), by the family's own hook."""
    root = tmp_path_factory.mktemp("shapes")
    folder, store = root / "shapes", Store(root / "store")
    make_shapes(folder)
    manifest, _ = build_manifest(folder, root / "hashes.json")
    labels = build_labels(folder, manifest, store).frame
    run = run_config(tiny_sdxl, **EVERYTHING)
    request = EncodeRequest(
        folder, labels, [run], [tiny_sdxl], root / "out", store, CPU, root / "fp.json"
    )
    built = FAMILY.encode(request)
    assert built.result.skipped == [] and len(built.frame) == len(PICTURES)
    return built.frame.sort_values("path")


def test_the_familys_hook_encodes_a_default_run_as_before(tiny_sdxl, encoded, tmp_path):
    """`Sdxl.encode` at the default settings is the `Pictures` stage it was (the same table,
    entries and data version); with a data option on, the table has the options' columns."""
    assert list(encoded.columns) == [*stage.SHAPED_COLUMNS]
    folder, store = tmp_path / "shapes", Store(tmp_path / "store")
    make_shapes(folder)
    manifest, _ = build_manifest(folder, tmp_path / "hashes.json")
    labels = build_labels(folder, manifest, store).frame
    request = EncodeRequest(
        folder,
        labels,
        [run_config(tiny_sdxl)],
        [tiny_sdxl],
        tmp_path / "out",
        store,
        CPU,
        tmp_path / "fp.json",
    )
    ours = FAMILY.encode(request)
    before = encoding.encode(request, stage.Pictures)
    assert list(ours.frame.columns) == list(stage.COLUMNS) and ours.frame.equals(before.frame)
    assert ours.result.data_version == before.result.data_version
    assert (before.result.computed, before.result.cached) == (0, len(PICTURES))


def trainer(tiny_sdxl, encoded, run_dir, **train) -> SdxlTrainer:
    return SdxlTrainer(run_config(tiny_sdxl, **train), tiny_sdxl, encoded, run_dir, CPU, LINEAGE)


def seen_batches(trainer: SdxlTrainer) -> list[list[Picture]]:
    """Every micro-batch the trainer's steps give its objective (its `accumulate` wrapped)."""
    seen, original = [], trainer.lora.accumulate

    def accumulate(pictures, *args):
        seen.append(list(pictures))
        return original(pictures, *args)

    trainer.lora.accumulate = accumulate
    return seen


def test_each_batch_is_one_bucket_with_its_time_ids(tiny_sdxl, encoded, tmp_path):
    """An epoch of `batch_size` 2 over three buckets of three pictures: six batches, two per
    bucket (the second of one picture), every picture once, each at its bucket's latent size
    with kohya's time_ids for it, unflipped and with its caption as written here."""
    run = trainer(tiny_sdxl, encoded, tmp_path, batch_size=2, **BUCKETS)
    assert isinstance(run.order, BucketOrder) and run.choices is None
    seen = seen_batches(run)
    for _ in range(6):
        report = run.step()
        assert math.isfinite(report.loss) and report.epoch == 1
    assert run.order.ends_pass and len(seen) == 6
    per_bucket = Counter()
    names = []
    rows = encoded.set_index("path")
    for batch in seen:
        [shape] = {tuple(p.mean.shape) for p in batch}  # one latent size in a batch
        [bucket] = {p.bucket for p in batch}
        assert shape == (4, bucket[1] // 8, bucket[0] // 8)
        per_bucket[bucket] += 1
        for picture in batch:
            names.append(picture.name)
            fit = buckets.select(*PICTURES[picture.name], RULES)
            assert bucket == fit.bucket
            assert picture.time_ids.tolist() == fit.time_ids()  # crop as kohya computes it
            embeds, _ = stage.load_caption(rows.loc[picture.name, "text"])
            assert torch.equal(picture.prompt_embeds, embeds)  # no variants in this run
    assert sorted(names) == sorted(PICTURES)[:-1]  # sq3.png is held out
    assert per_bucket == {(96, 32): 2, (32, 96): 2, (64, 64): 2}
    assert sorted(len(b) for b in seen) == [1, 1, 1, 2, 2, 2]
    # the validation picture at its own bucket, as written (unflipped, no mask in its loss)
    [held] = run.validation.pictures
    assert held.name == "sq3.png" and held.bucket == (64, 64)


def test_the_bucket_order_is_kohyas_for_seed_and_epoch(tiny_sdxl, encoded, tmp_path):
    """The trainer's order is `bucket_batches` of the run's seed, epoch after epoch."""
    run = trainer(tiny_sdxl, encoded, tmp_path, batch_size=2, seed=7, **BUCKETS)
    keys = [p.bucket for p in run.train]
    expected = buckets.bucket_batches(keys, 2, 7, 1) + buckets.bucket_batches(keys, 2, 7, 2)
    assert [run.order.next() for _ in range(12)] == expected
    assert run.order.epoch == 2


def test_flips_and_captions_are_drawn_per_picture_and_step(tiny_sdxl, encoded):
    """`Choices`: a flip at ½ gives the flipped posterior, its crop left from the right and
    its mask flipped; a caption is one of the variants, or the empty one at its rate."""
    pictures = {p.name: p for p in pictures_from_frame(encoded)}
    rows = encoded.set_index("path")
    square = pictures[ALPHA]
    choose = Choices(flip=True, captions=True, dropout_rate=0.25)
    generator = torch.Generator().manual_seed(0)
    flips = empties = 0
    variants = Counter()
    empty, _ = stage.load_caption(rows.loc[ALPHA, "empty_text"])
    texts = [stage.load_caption(p)[0] for p in square.variants]
    for _ in range(400):
        [seen] = choose([square], generator)
        flipped = torch.equal(seen.mean, square.flipped.mean)
        assert flipped or torch.equal(seen.mean, square.mean)
        if flipped:
            flips += 1
            assert seen.time_ids[3] == rows.loc[ALPHA, "flipped_crop_left"]
            assert torch.equal(seen.mask, torch.flip(square.mask, dims=[-1]))
        else:
            assert torch.equal(seen.time_ids, square.time_ids)
            assert torch.equal(seen.mask, square.mask)
        if torch.equal(seen.prompt_embeds, empty):
            empties += 1
        else:
            [index] = [i for i, t in enumerate(texts) if torch.equal(seen.prompt_embeds, t)]
            variants[index] += 1
    # 400 draws: σ = 10 flips, 8.7 empties
    assert abs(flips - 200) < 45 and abs(empties - 100) < 40, (flips, empties)
    assert sorted(variants) == [0, 1, 2]  # every variant is picked
    # the alpha mask: the left half of the picture transparent, so zero there
    assert square.mask[:, :4].max() == 0 and square.mask[:, 4:].min() == 1


def test_caption_dropout_draws_the_empty_caption_at_its_rate(tiny_sdxl, encoded, tmp_path):
    """A run with caption_dropout_rate 0.25 (and no variants): over 120 steps of 2 pictures,
    the steps see the empty caption about a quarter of the time, the caption as written
    otherwise."""
    run = trainer(tiny_sdxl, encoded, tmp_path, caption_dropout_rate=0.25, batch_size=2)
    assert run.choices == Choices(flip=False, captions=True, dropout_rate=0.25)
    rows = encoded.set_index("path")
    empty, _ = stage.load_caption(rows.iloc[0]["empty_text"])
    # the draws alone, as the step makes them (the UNet is not needed to count them)
    dropped = total = 0
    for _ in range(120):
        items = [run.train[i] for i in run.order.next()]
        pictures, _ = run.lora.draw_step(items, run.generator, run.choices)
        for item, picture in zip(items, pictures, strict=True):
            total += 1
            if torch.equal(picture.prompt_embeds, empty):
                dropped += 1
            else:
                assert torch.equal(picture.prompt_embeds, item.prompt_embeds)
    assert total == 240 and abs(dropped / total - 0.25) < 0.09, dropped  # σ ≈ 0.028


def test_a_default_run_draws_what_it_drew_before(tiny_sdxl, encoded, tmp_path):
    """No data option: no draws beyond t, ε₁ and ε (so a default run's numbers do not move);
    with flips, the flips come after them."""
    plain = trainer(tiny_sdxl, encoded, tmp_path / "plain")
    assert plain.choices is None and not isinstance(plain.order, BucketOrder)
    pictures = pictures_from_frame(encoded)[:2]  # two landscapes: one bucket
    g = torch.Generator().manual_seed(3)
    chosen, (t, eps1, noise) = plain.lora.draw_step(pictures, g, plain.choices)
    assert chosen is pictures
    h = torch.Generator().manual_seed(3)
    shape = (2, *pictures[0].mean.shape)
    assert torch.equal(t, torch.randint(0, 1000, (2,), generator=h))
    assert torch.equal(eps1, torch.randn(shape, generator=h))
    assert torch.equal(noise, torch.randn(shape, generator=h))
    assert torch.equal(g.get_state(), h.get_state())  # nothing more was drawn
    g = torch.Generator().manual_seed(3)
    flips = Choices(flip=True)
    _, again = plain.lora.draw_step(pictures, g, flips)
    assert all(torch.equal(a, b) for a, b in zip(again, (t, eps1, noise), strict=True))
    flip = [torch.rand((), generator=h).item() < 0.5 for _ in range(2)]
    assert torch.equal(g.get_state(), h.get_state()) and len(flip) == 2


def _with_b(lora, seed: int = 1):
    """B factors not zero, so the gradients reach every factor."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for b in lora.b_parameters():
            b.copy_(torch.randn(b.shape, generator=g) * 0.05)
    return lora


def _gradient(lora, pictures, draws) -> torch.Tensor:
    for p in lora.parameters():
        p.grad = None
    lora.backward(pictures, *draws)
    return torch.cat([p.grad.flatten() for p in lora.parameters()])


@pytest.mark.parametrize("settings", [{}, {"min_snr_gamma": 5.0, "loss_type": "huber"}])
def test_a_fully_masked_picture_gives_no_gradient(tiny_sdxl, encoded, tmp_path, settings):
    """The mask weighs the element-wise loss before the weights and the mean (kohya): a
    picture masked out whole gives no gradient, alone or beside another, whose gradient it
    halves (the mean is over both pictures' elements); a half mask is the loss's sum over
    the unmasked half."""
    run = trainer(tiny_sdxl, encoded, tmp_path, masked_loss=True, **BUCKETS, **settings)
    lora = _with_b(run.lora)
    squares = [p for p in run.train if p.bucket == (64, 64) and p.mask is None]
    kept = squares[0]
    hidden = Picture(
        *[getattr(squares[1], f) for f in ("mean", "logvar")],
        kept.prompt_embeds,
        kept.pooled,
        squares[1].time_ids,
        "hidden",
        mask=torch.zeros(8, 8),
    )
    g = torch.Generator().manual_seed(5)
    t, eps1, noise = lora.draw([kept, hidden], g)
    alone = _gradient(lora, [hidden], (t[1:], eps1[1:], noise[1:]))
    assert alone.abs().max() == 0  # no gradient at all, and the first-step check waits
    assert not lora._checked
    both = _gradient(lora, [kept, hidden], (t, eps1, noise))
    one = _gradient(lora, [kept], (t[:1], eps1[:1], noise[:1]))
    assert one.abs().max() > 0 and lora._checked
    assert ((both - one / 2).norm() / one.norm()).item() < 1e-5
    # a half mask: the loss is the masked half's sum over every element's count
    half = torch.zeros(8, 8)
    half[:, 4:] = 1
    masked = Picture(
        kept.mean, kept.logvar, kept.prompt_embeds, kept.pooled, kept.time_ids, mask=half
    )
    draws = (t[:1], eps1[:1], noise[:1])
    with torch.no_grad():
        value = lora.loss([masked], *draws)
        prediction, target = lora.prediction_and_target([kept], *draws)
        o = lora.options
        c = None
        if o.loss_type == "huber":
            c = huber_threshold(
                t[:1], o.huber_c, o.huber_schedule, lora.alphas_cumprod, lora.levels
            )
        by_hand = elementwise_loss(prediction, target, o.loss_type, c)[..., 4:].sum()
        if o.min_snr_gamma:
            by_hand = by_hand * min_snr_weight(
                signal_to_noise(lora.alphas_cumprod, t[:1]), o.min_snr_gamma, False
            )
        by_hand = by_hand / prediction.numel()
    assert torch.allclose(value, by_hand.reshape(()), rtol=1e-5), (value, by_hand)


def test_a_run_with_every_data_option_resumes_bit_for_bit(tiny_sdxl, encoded, tmp_path):
    """Buckets, flips, a mask, caption variants and dropout, with an EMA and accumulation:
    eight steps straight, or four and then four more from the saved state, train the same
    adapter to the bit and report the same losses."""
    settings = dict(
        **EVERYTHING,
        batch_size=2,
        gradient_accumulation_steps=2,
        ema_decay=0.9,
        min_snr_gamma=5.0,
        noise_offset=0.05,
        adaptive_noise_scale=0.01,
        eval_every=4,
        checkpoint_every=4,
    )

    def fit(run_dir: Path, steps: int):
        run = trainer(tiny_sdxl, encoded, run_dir, **settings, steps=steps)
        return loop.train(run, run_dir, log=lambda _: None)

    straight = fit(tmp_path / "straight", 8)
    fit(tmp_path / "resumed", 4)
    state = load_file(next((tmp_path / "resumed" / "state").glob("step=4")) / "state.safetensors")
    assert not any(k.startswith("rng.sampler") for k in state)  # (epoch, position) suffice
    resumed = fit(tmp_path / "resumed", 8)
    assert resumed.resumed_from == 4 and resumed.steps_trained == 4
    assert resumed.history == straight.history
    for name in ("shapes.safetensors", "shapes.last.safetensors"):
        a = load_file(tmp_path / "straight" / name)
        b = load_file(tmp_path / "resumed" / name)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name


KOHYA_OPTION_KEYS = set(KOHYA_METADATA.values())
IMAGE_TOML = """\
[[runs]]
name = "buckets"
family = "sdxl"
base_model = "tiny-sdxl"
[runs.train]
size = 64
steps = 4
lr = 1e-3
eval_every = 2
checkpoint_every = 2
batch_size = 2
buckets = true
min_bucket_reso = 32
max_bucket_reso = 128
bucket_reso_steps = 32
flip_aug = true
shuffle_caption = true
caption_variants = 2
caption_dropout_rate = 0.1
[[runs.demos]]
prompt = "kvad, a disc"
seed = 3
steps = 2
"""


@pytest.mark.slow
def test_a_build_with_buckets_trains_and_a_second_build_computes_nothing(
    storage, instance, tiny_sdxl
):
    """Every stage of a dataset of three shapes with buckets, flips and caption variants on,
        then `tunesmith run`'s build process again: nothing computed (each build process asserts
    it), no model library loaded."""
    shutil.copytree(tiny_sdxl, Path(storage.models_root) / "tiny-sdxl")
    folder = Path(storage.datasets_root) / "shapes"
    make_shapes(folder)
    (folder / "tunesmith.toml").write_text(IMAGE_TOML)
    first = materialize(instance, storage, "shapes")
    assert first["encoded"]["computed"] == len(PICTURES)
    assert first["adapters"]["computed"] == 1 and first["checks"]["sdxl_files"]
    out = Path(storage.out_root) / "shapes"
    # the pictures per bucket, as kohya lists them, in the metadata and the report
    counts = first["encoded"]["buckets"]["buckets"]
    assert sum(counts.values()) == len(PICTURES) and len(counts) == 3, counts
    report = json.loads((out / "report.json").read_text())
    assert report["stages"]["encoded"]["buckets"] == {"buckets": counts}
    [run_dir] = (out / "adapters").glob("buckets-*")
    assert (run_dir / "buckets.safetensors").exists()
    # the kohya file records the options the run set, under sd-scripts' names
    with safe_open(run_dir / "buckets.kohya.safetensors", "pt") as f:
        meta = f.metadata()
    assert {k: v for k, v in meta.items() if k in KOHYA_OPTION_KEYS} == {
        "ss_enable_bucket": "True",
        "ss_min_bucket_reso": "32",
        "ss_max_bucket_reso": "128",
        "ss_flip_aug": "True",
        "ss_shuffle_caption": "True",
        "ss_caption_dropout_rate": "0.1",
    }
    # nine training pictures in three buckets, batches of two: six an epoch; four taken
    state = json.loads((run_dir / "state" / "step=4" / "state.json").read_text())
    assert state["trainer"]["sampler"] == {"epoch": 1, "position": 4}
    # as tests/pipelines/test_rebuild.py: the first such build remembers the adapter files'
    # checks (never those of files written in the last two seconds), the next loads nothing
    time.sleep(2.1)
    for build in ("remembers", "light"):
        heavy = build_in_a_process(storage, "shapes", home=Path(storage.out_root).parent / build)
    assert heavy == [], heavy


@pytest.mark.slow
def test_two_ranks_train_what_one_process_trains_with_buckets(tiny_sdxl, encoded, tmp_path):
    """Buckets, flips, a mask and caption variants on two gloo ranks: every bucket's last
    batch has one picture, so the second rank has none there and joins at weight 0; the
    losses and the adapter are one process's, to 1e-5 relative."""
    from pipelines import train_child
    from tests.train.test_distributed import assert_close, extras, losses, one_process, raw_run

    settings = dict(EVERYTHING, steps=6, eval_every=6, checkpoint_every=6)
    one_run, two_run = (
        raw_run("sdxl", tiny_sdxl, **settings),
        raw_run("sdxl", tiny_sdxl, devices=2, **settings),
    )
    single = one_process(one_run, tiny_sdxl, encoded, tmp_path / "1")
    two = extras(two_run, tiny_sdxl, encoded, tmp_path / "2")
    lines: list[str] = []
    train_child.launch(two, 0, lines.append)
    result = json.loads((tmp_path / "2" / "result.json").read_text())
    assert result["world_size"] == 2 and result["steps"] == 6, lines
    for step, (a, b) in enumerate(zip(losses(tmp_path / "2"), losses(tmp_path / "1"), strict=True)):
        assert_close([a], [b], f"the loss of step {step + 1}")
    ours, theirs = load_file(result["last_path"]), load_file(single.last_path)
    assert ours.keys() == theirs.keys()
    whole = [torch.cat([x[k].flatten().double() for k in sorted(x)]) for x in (ours, theirs)]
    assert_close(*whole, "the adapter")
