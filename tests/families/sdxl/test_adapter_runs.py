"""SDXL runs of each adapter type and with the text encoders, on the tiny model and drawn rings:
each type trains, writes the files its tools read and renders through the family's renderer
(strength 0: the base model's picture); a text-encoder run trains both CLIPs at their own lr,
its PEFT file patches both text encoders in diffusers' `load_lora_weights` and gives the
trainer's prompt embeddings (scale 0: the base's), its kohya file carries `lora_te1_` and
`lora_te2_`, and it resumes bit for bit; the encoders at their start encode the captions, their
chunks and their variants as the encoded stage did; a default run keeps its key."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file

from tunesmith.backends.placement import Placement
from tunesmith.dataset.labels import build_labels
from tunesmith.dataset.manifest import build_manifest
from tunesmith.examples.rings import make_rings
from tunesmith.families.sdxl import FAMILY, data_options, files
from tunesmith.families.sdxl.adapters import layer_count
from tunesmith.families.sdxl.encoded import load_caption
from tunesmith.families.sdxl.model import encode_captions, encode_long_captions, load_pipeline
from tunesmith.families.sdxl.objective import TextEncoders, pictures_from_frame
from tunesmith.families.sdxl.sample import Renderer
from tunesmith.families.sdxl.trainer import SdxlTrainer
from tunesmith.family import EncodeRequest
from tunesmith.store import Store
from tunesmith.train import loop
from tunesmith.train.config import ConfigError, computed, resolve_run, run_key

SIZE = 64
CPU = Placement("torch", "cpu", "float32", "test")
DEMO = {"prompt": "rngstyle, two discs", "seed": 5, "steps": 2, "cfg": 4.0}
LINEAGE = {"tunesmith.base_model_fingerprint": "fp", "tunesmith.training_config": "{}"}
CLIP_LAYERS = 3 * 6  # the tiny CLIPs' 3 layers × q, k, v, out_proj, fc1, fc2
VARIED = dict(shuffle_caption=True, caption_variants=8, caption_dropout_rate=0.3)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def run_config(tiny_sdxl, adapter: dict | None = None, **train):
    raw = {
        "name": "rings",
        "family": "sdxl",
        "base_model": str(tiny_sdxl),
        "trigger": "rngstyle",
        "adapter": adapter or {},
        "train": {"size": SIZE, "lr": 1e-3, "steps": 4, "eval_every": 4, **train},
        "demos": [DEMO],
    }
    return resolve_run(raw, Path("tunesmith.toml"), 0)


def encode(tiny_sdxl, root: Path, **train):
    folder, store = root / "rings", Store(root / "store")
    make_rings(folder, count=6)
    manifest, _ = build_manifest(folder, root / "hashes.json")
    labels = build_labels(folder, manifest, store).frame
    request = EncodeRequest(
        folder,
        labels,
        [run_config(tiny_sdxl, **train)],
        [tiny_sdxl],
        root / "out",
        store,
        CPU,
        root / "fp.json",
    )
    built = FAMILY.encode(request)
    assert len(built.frame) == 6
    return built.frame.sort_values("path")


@pytest.fixture(scope="module")
def encoded(tiny_sdxl, tmp_path_factory):
    """Six rings, encoded as a run without data options is: five to train on, one held out."""
    return encode(tiny_sdxl, tmp_path_factory.mktemp("rings"))


def trainer(tiny_sdxl, encoded, run_dir, adapter=None, **train) -> SdxlTrainer:
    run = run_config(tiny_sdxl, adapter, **train)
    return SdxlTrainer(run, tiny_sdxl, encoded, run_dir, CPU, LINEAGE)


def fit(tiny_sdxl, encoded, run_dir, adapter=None, **train):
    run = trainer(tiny_sdxl, encoded, run_dir, adapter, **train)
    return run, loop.train(run, run_dir, log=lambda _: None)


TYPES = {
    "dora": {"type": "dora", "rank": 4},
    "locon": {"type": "locon", "rank": 4, "conv_dim": 2, "conv_alpha": 1},
    "lokr": {"type": "lokr", "rank": 4, "conv_dim": 2, "factor": 4},
    "loha": {"type": "loha", "rank": 4, "alpha": 2, "conv_dim": 2},
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(TYPES))
def test_each_type_trains_writes_its_files_and_renders(tiny_sdxl, encoded, tmp_path, kind):
    run, result = fit(tiny_sdxl, encoded, tmp_path, TYPES[kind])
    assert [h["step"] for h in result.history] == [0, 4]
    assert all(np.isfinite(h["loss"]) for h in result.history)
    best = Path(result.best_path)
    meta = files.validate_files(best)
    assert meta["tunesmith.step"] == str(result.best_step)
    written = sorted(p.name for p in tmp_path.glob("rings*.safetensors"))
    with_twin = kind in ("dora", "locon")
    assert written == (
        ["rings.kohya.safetensors", "rings.safetensors"] if with_twin else ["rings.safetensors"]
    )
    tools = FAMILY.files_for_tools(run.run, best)
    assert [path for _, path in tools] == [best, *([files.kohya_path(best)] if with_twin else [])]
    state = json.loads(next((tmp_path / "state").glob("step=*")).joinpath("state.json").read_text())
    assert state["identity"]["adapter_type"] == kind
    renderer = FAMILY.renderer(run.run, tiny_sdxl, CPU, best)
    base = Renderer(tiny_sdxl, CPU, SIZE).render(run.run.demos[0], 0.0)
    assert np.array_equal(renderer.render(run.run.demos[0], 0.0), base)
    # 4 steps move the picture: an adapter that loaded nothing would draw the base's
    assert not np.array_equal(renderer.render(run.run.demos[0], 1.0), base)


def test_the_text_encoders_at_their_start_encode_as_the_encoded_stage(tiny_sdxl):
    pipe = load_pipeline(tiny_sdxl)
    captions = ["rngstyle, two discs on a ground", "", "x " * 120]
    embeds, pooled = encode_captions(pipe, captions)
    ours = TextEncoders(pipe)
    with torch.no_grad():
        got = ours(captions)
    assert torch.equal(got[0], embeds) and torch.equal(got[1], pooled)
    long = TextEncoders(pipe, 150)
    embeds, pooled = encode_long_captions(pipe, captions, 2)
    with torch.no_grad():
        got = long(captions)
    assert got[0].shape[1] == 152
    assert torch.equal(got[0], embeds) and torch.equal(got[1], pooled)


def test_a_step_encodes_the_caption_variant_it_picked(tiny_sdxl, tmp_path):
    """With shuffled tags and dropout, each picture's variants' texts are the run's draws in
    the encoded stage's order: the encoders at their start give each variant's cached entry,
    and the empty caption where it drops out."""
    frame = encode(tiny_sdxl, tmp_path, **VARIED)
    run = run_config(tiny_sdxl, **VARIED)
    pictures = pictures_from_frame(frame, data_options.options(run.train), run.train.seed)
    text = TextEncoders(load_pipeline(tiny_sdxl))
    picture = pictures[0]
    assert len(picture.variant_texts) == len(picture.variants) == 8
    assert len(set(picture.variant_texts)) > 1  # shuffled
    for index, entry in enumerate(picture.variants):
        chosen = picture.chosen(False, index)
        assert chosen.caption == picture.variant_texts[index]
        with torch.no_grad():
            embeds, pooled = text([chosen.caption])
        cached = load_caption(entry)
        # the stage encodes captions in batches: the same numbers, to the batch's rounding
        assert torch.allclose(embeds[0], cached[0], rtol=1e-5, atol=1e-6)
        assert torch.allclose(pooled[0], cached[1], rtol=1e-5, atol=1e-6)
        if index:  # another variant's entry is another encoding: a wrong pick would show
            assert not torch.allclose(embeds[0], load_caption(picture.variants[0])[0]) or (
                picture.variant_texts[index] == picture.variant_texts[0]
            )
    assert picture.chosen(False, None).caption == ""


@pytest.fixture(scope="module")
def text_run(tiny_sdxl, encoded, tmp_path_factory):
    """A LoRA run on the UNet and both text encoders, the encoders at their own lr."""
    run_dir = tmp_path_factory.mktemp("text")
    run, result = fit(
        tiny_sdxl, encoded, run_dir, train_text_encoder=True, text_encoder_lr=5e-3, steps=4
    )
    return run, result, run_dir


@pytest.mark.slow
def test_a_text_encoder_run_trains_both_encoders_at_their_own_lr(text_run, tiny_sdxl):
    run, result, _ = text_run
    assert [group["lr"] for group in run.optimizer.param_groups] == [1e-3, 5e-3]
    assert len(run.optimizer.param_groups[1]["params"]) == 2 * 2 * CLIP_LAYERS
    moved = {
        name: bool(b.abs().sum() > 0)
        for name, b in zip(run.lora.targets(), run.lora.b_parameters(), strict=True)
        if name.startswith("text_encoder")
    }
    # CLIP-L's last layer never reaches the loss (SDXL reads its penultimate states)
    still = sorted(name for name, m in moved.items() if not m)
    assert still == sorted(
        f"text_encoder.encoder.layers.2.{p}"
        for p in ("self_attn.k_proj", "self_attn.v_proj", "self_attn.q_proj")
        + ("self_attn.out_proj", "mlp.fc1", "mlp.fc2")
    )
    assert len(moved) == 2 * CLIP_LAYERS
    losses = [h["loss"] for h in result.history]
    assert losses[0] != losses[-1]  # measured through the encoders as they train


@pytest.mark.slow
def test_diffusers_loads_a_text_encoder_run_into_both_encoders(text_run, tiny_sdxl):
    run, result, _ = text_run
    best = Path(result.best_path)
    pipe = load_pipeline(tiny_sdxl)
    base = encode_captions(pipe, ["rngstyle, two discs"])
    pipe.load_lora_weights(str(best.parent), weight_name=best.name, adapter_name="x")
    assert layer_count(pipe.text_encoder) == layer_count(pipe.text_encoder_2) == CLIP_LAYERS
    assert layer_count(pipe.unet) == 136
    loaded = encode_captions(pipe, ["rngstyle, two discs"])
    with torch.no_grad():
        ours = run.lora.text(["rngstyle, two discs"])
    for got, want in zip(loaded, ours, strict=True):
        assert ((got - want).norm() / want.norm()).item() <= 1e-5
    assert not torch.equal(loaded[0], base[0])
    pipe.set_adapters(["x"], adapter_weights=[0.0])
    at_zero = encode_captions(pipe, ["rngstyle, two discs"])
    assert torch.equal(at_zero[0], base[0]) and torch.equal(at_zero[1], base[1])
    with safe_open(files.kohya_path(best), "pt") as f:
        keys, meta = list(f.keys()), f.metadata()
    prefixes = {k.split("_text_model")[0] for k in keys if k.startswith("lora_te")}
    assert prefixes == {"lora_te1", "lora_te2"}
    assert meta["ss_text_encoder_lr"] == "0.005" and meta["ss_network_module"] == "networks.lora"


@pytest.mark.slow
def test_a_text_encoder_run_of_lokr_resumes_bit_for_bit(tiny_sdxl, encoded, tmp_path):
    settings = dict(train_text_encoder=True, checkpoint_every=2, eval_every=2)
    adapter = TYPES["lokr"]
    _, straight = fit(tiny_sdxl, encoded, tmp_path / "straight", adapter, steps=4, **settings)
    fit(tiny_sdxl, encoded, tmp_path / "resumed", adapter, steps=2, **settings)
    _, resumed = fit(tiny_sdxl, encoded, tmp_path / "resumed", adapter, steps=4, **settings)
    assert resumed.resumed_from == 2 and resumed.history == straight.history
    a = load_file(tmp_path / "straight" / "rings.safetensors")
    b = load_file(tmp_path / "resumed" / "rings.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert any(k.startswith("lora_te2_") for k in a)


def test_a_default_run_keeps_its_key_and_the_new_settings_key_their_runs(tiny_sdxl):
    default = run_config(tiny_sdxl)
    stated = run_config(
        tiny_sdxl,
        {"type": "lora", "conv_dim": 0, "factor": -1},
        train_text_encoder=False,
    )
    assert run_key(stated) == run_key(default)
    for key in ("conv_dim", "conv_alpha", "factor"):
        assert key not in computed(default)["adapter"]
    assert "train_text_encoder" not in computed(default)["train"]
    keys = {
        run_key(run_config(tiny_sdxl, {"type": "lokr", "conv_dim": 4})),
        run_key(run_config(tiny_sdxl, {"type": "lokr", "conv_dim": 4, "factor": 4})),
        run_key(run_config(tiny_sdxl, train_text_encoder=True)),
        run_key(run_config(tiny_sdxl, train_text_encoder=True, text_encoder_lr=1e-5)),
        run_key(default),
    }
    assert len(keys) == 5


@pytest.mark.parametrize(
    "adapter, train, message",
    [
        ({"type": "locon", "conv_alpha": 2}, {}, "adapter.conv_alpha 2 needs adapter.conv_dim"),
        ({"type": "loha", "factor": 4}, {}, "adapter.factor 4 is LoKr's"),
        ({"type": "lokr", "factor": 1}, {}, "adapter.factor = 1"),
        ({}, {"text_encoder_lr": 1e-5}, "has no effect without train.train_text_encoder"),
        ({"type": "boft"}, {}, 'adapter.type = "boft": must be one of'),
    ],
)
def test_settings_that_do_not_go_together_are_refused(tiny_sdxl, adapter, train, message):
    with pytest.raises(ConfigError, match=message):
        run_config(tiny_sdxl, adapter, **train)


BUILD_TOML = """\
[[runs]]
name = "kron"
family = "sdxl"
base_model = "tiny-sdxl"
[runs.adapter]
type = "lokr"
rank = 4
conv_dim = 2
[runs.train]
size = 64
steps = 2
lr = 1e-3
eval_every = 2
checkpoint_every = 2
train_text_encoder = true
shuffle_caption = true
caption_variants = 2
[[runs.demos]]
prompt = "rngstyle, two discs"
seed = 5
steps = 2

[[runs]]
name = "magnitude"
family = "sdxl"
base_model = "tiny-sdxl"
[runs.adapter]
type = "dora"
rank = 4
[runs.train]
size = 64
steps = 2
lr = 1e-3
eval_every = 2
checkpoint_every = 2
[[runs.demos]]
prompt = "rngstyle, two discs"
seed = 5
steps = 2
"""


@pytest.mark.slow
def test_a_build_of_a_lokr_run_with_its_text_encoders_and_a_dora_run(storage, instance, tiny_sdxl):
    """Every stage, by Dagster, of a dataset with a LoKr run (conv layers, both text encoders,
    caption variants) and a DoRA run: both train, their files pass the family's check, their
    demos render with and without the adapter; a second build, as `tunesmith run` starts it,
    computes nothing and loads no model library."""
    import shutil
    import time

    from tests.conftest import build_in_a_process, materialize

    shutil.copytree(tiny_sdxl, Path(storage.models_root) / "tiny-sdxl")
    folder = Path(storage.datasets_root) / "rings"
    make_rings(folder, count=6)
    (folder / "tunesmith.toml").write_text(BUILD_TOML)
    first = materialize(instance, storage, "rings")
    assert first["adapters"]["computed"] == 2 and first["checks"]["sdxl_files"]
    out = Path(storage.out_root) / "rings"
    [kron] = (out / "adapters").glob("kron-*")
    [magnitude] = (out / "adapters").glob("magnitude-*")
    assert sorted(p.name for p in kron.glob("*.safetensors")) == ["kron.safetensors"]
    assert sorted(p.name for p in magnitude.glob("*.safetensors")) == [
        "magnitude.kohya.safetensors",
        "magnitude.safetensors",
    ]
    with safe_open(kron / "kron.safetensors", "pt") as f:
        keys = list(f.keys())
    assert any(k.startswith("lora_te1_") for k in keys) and any(
        "_0_in_layers_2." in k for k in keys
    )
    assert first["renders"]["computed"] == 3  # one base picture, shared; each run's adapter
    time.sleep(2.1)  # files written in the last two seconds are never remembered as checked
    for build in ("remembers", "light"):
        heavy = build_in_a_process(storage, "rings", home=Path(storage.out_root).parent / build)
    assert heavy == [], heavy


@pytest.mark.slow
def test_two_ranks_train_a_lokr_with_its_text_encoders_as_one_process(tiny_sdxl, encoded, tmp_path):
    """LoKr with conv layers on the UNet and both text encoders, on two gloo ranks: DDP sums
    the encoders' gradients too; the losses and the adapter are one process's (1e-5)."""
    from pipelines import train_child
    from tests.train.test_distributed import assert_close, extras, losses, one_process, raw_run

    settings = dict(steps=3, eval_every=3, checkpoint_every=3, train_text_encoder=True)
    one_run = raw_run("sdxl", tiny_sdxl, **settings)
    two_run = raw_run("sdxl", tiny_sdxl, devices=2, **settings)
    for raw in (one_run, two_run):
        raw["adapter"] = TYPES["lokr"]
    single = one_process(one_run, tiny_sdxl, encoded, tmp_path / "1")
    two = extras(two_run, tiny_sdxl, encoded, tmp_path / "2")
    lines: list[str] = []
    train_child.launch(two, 0, lines.append)
    result = json.loads((tmp_path / "2" / "result.json").read_text())
    assert result["world_size"] == 2 and result["steps"] == 3, lines
    for step, (a, b) in enumerate(zip(losses(tmp_path / "2"), losses(tmp_path / "1"), strict=True)):
        assert_close([a], [b], f"the loss of step {step + 1}")
    ours, theirs = load_file(result["last_path"]), load_file(single.last_path)
    assert ours.keys() == theirs.keys() and any(k.startswith("lora_te2_") for k in ours)
    whole = [torch.cat([x[k].flatten().double() for k in sorted(x)]) for x in (ours, theirs)]
    assert_close(*whole, "the adapter")
    text = [k for k in sorted(ours) if k.startswith("lora_te")]
    encoders = [torch.cat([x[k].flatten().double() for k in text]) for x in (ours, theirs)]
    assert_close(*encoders, "the text encoders' adapter")
