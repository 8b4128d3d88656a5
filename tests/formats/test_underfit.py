"""underfit's adapter file: written, read back, and validated as lora_validate.py does."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import nn

from tunesmith.adapters.torch_lora import (
    adapter_parameters,
    adapter_state,
    attach,
    load_adapter_state,
)
from tunesmith.formats.underfit import (
    AdapterConfig,
    AdapterFileError,
    checkpoint_filename,
    infer_adapter_type,
    parse_checkpoint_filename,
    read_adapter_file,
    validate_file,
    write_adapter_file,
)

# --- a toy model and a toy name mapping --------------------------------------------------------
# diffusers-like names                 checkpoint names
#   blocks.{i}.attn.qkv            ↔   model.transformer.layers.{i}.self_attn.to_qkv  (rows rolled)
#   blocks.{i}.ff                  ↔   model.transformer.layers.{i}.ff.ff.2
#   duration.linear                ↔   conditioners.seconds_total.embedder.embedding.1

RANK, ALPHA = 2, 4


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.ModuleDict({"qkv": nn.Linear(4, 10, bias=False)})
        self.ff = nn.Conv1d(10, 4, 1)


class Toy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.duration = nn.ModuleDict({"linear": nn.Linear(1, 4)})

    def forward(self, x: torch.Tensor, seconds: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = x + block.ff(block.attn["qkv"](x.transpose(1, 2)).transpose(1, 2))
        return x + self.duration["linear"](seconds)[:, :, None]


TARGETS = [
    "blocks.0.attn.qkv",
    "blocks.0.ff",
    "blocks.1.attn.qkv",
    "blocks.1.ff",
    "duration.linear",
]


def to_checkpoint_name(name: str) -> str:
    if name == "duration.linear":
        return "conditioners.seconds_total.embedder.embedding.1"
    _, index, rest = name.split(".", 2)
    return (
        f"model.transformer.layers.{index}."
        + {"attn.qkv": "self_attn.to_qkv", "ff": "ff.ff.2"}[rest]
    )


def to_diffusers_name(name: str) -> str:
    if name == "conditioners.seconds_total.embedder.embedding.1":
        return "duration.linear"
    index, rest = name.removeprefix("model.transformer.layers.").split(".", 1)
    return f"blocks.{index}." + {"self_attn.to_qkv": "attn.qkv", "ff.ff.2": "ff"}[rest]


def permute_rows(name: str, tensor: torch.Tensor, direction: str) -> torch.Tensor:
    """Not self-inverse, so a wrong direction shows."""
    if not name.endswith("self_attn.to_qkv"):
        return tensor
    return tensor.roll(2 if direction == "to_checkpoint" else -2, dims=0)


def trained(adapter_type: str) -> Toy:
    model = Toy()
    attach(model, TARGETS, RANK, ALPHA, adapter_type)
    torch.manual_seed(1)
    with torch.no_grad():
        for p in adapter_parameters(model):
            p.add_(torch.randn_like(p) * 0.3)
    return model


CONFIG = dict(rank=RANK, alpha=ALPHA, step=1000, epoch=3, base_model="toy-base")
LINEAGE = {"tunesmith.dataset_manifest": "sha256:abc", "tunesmith.version": "0.1.0"}


def write(tmp_path: Path, model: nn.Module, adapter_type: str, **kwargs) -> Path:
    path = tmp_path / checkpoint_filename("loops-20260714123456", 1000, 3)
    return write_adapter_file(
        path,
        adapter_state(model, **kwargs),
        AdapterConfig(adapter_type=adapter_type, exclude=("ff.ff",), **CONFIG),
        to_checkpoint_name=to_checkpoint_name,
        permute_rows=permute_rows,
        extra_metadata=LINEAGE,
    )


def read(path: Path):
    return read_adapter_file(path, to_diffusers_name=to_diffusers_name, permute_rows=permute_rows)


# --- file names ---------------------------------------------------------------------------------


def test_the_file_name_is_underfits_with_the_run_timestamp_stripped():
    assert (
        checkpoint_filename("loops-20260714123456", 1000, 3)
        == "loops-step=1000-epoch=3.safetensors"
    )
    assert checkpoint_filename("loops", 0, 0) == "loops-step=0-epoch=0.safetensors"
    assert checkpoint_filename("", 5, 1) == "step=5-epoch=1.safetensors"
    assert parse_checkpoint_filename("/x/loops-step=1000-epoch=3.safetensors") == (1000, 3)
    assert parse_checkpoint_filename("best.safetensors") == (None, None)
    with pytest.raises(ValueError, match="path separator"):
        checkpoint_filename("a/b", 1, 1)


# --- the written file ---------------------------------------------------------------------------


@pytest.mark.parametrize("adapter_type", ["lora", "dora-rows"])
def test_the_file_holds_fp16_tensors_under_checkpoint_names_with_lora_config(
    tmp_path, adapter_type
):
    model = trained(adapter_type)
    path = write(tmp_path, model, adapter_type)
    assert path.name == "loops-step=1000-epoch=3.safetensors"
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left
    params = ("lora_A", "lora_B") + (("magnitude",) if adapter_type == "dora-rows" else ())
    layers = [to_checkpoint_name(t) for t in TARGETS]
    with safe_open(str(path), framework="pt") as f:
        assert set(f.keys()) == {
            f"{n}.parametrizations.weight.0.{p}" for n in layers for p in params
        }
        metadata = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    assert all(t.dtype == torch.float16 for t in tensors.values())
    assert json.loads(metadata["lora_config"]) == {
        "rank": RANK,
        "alpha": ALPHA,
        "adapter_type": adapter_type,
        "include": None,  # never [], which stable-audio-3's add_lora reads as "adapt nothing"
        "exclude": ["ff.ff"],
        "step": 1000,
        "epoch": 3,
        "base_model": "toy-base",
    }
    assert list(json.loads(metadata["lora_config"])) == [
        "rank",
        "alpha",
        "adapter_type",
        "include",
        "exclude",
        "step",
        "epoch",
        "base_model",
    ]
    assert {k: metadata[k] for k in LINEAGE} == LINEAGE
    # The fused layer's output rows are permuted, its input side is not; the others are as is.
    state = adapter_state(model)
    qkv, ff = "model.transformer.layers.0.self_attn.to_qkv", "model.transformer.layers.0.ff.ff.2"
    key = "parametrizations.weight.0"
    assert torch.equal(
        tensors[f"{qkv}.{key}.lora_B"], state[f"blocks.0.attn.qkv.{key}.lora_B"].half().roll(2, 0)
    )
    assert torch.equal(
        tensors[f"{qkv}.{key}.lora_A"], state[f"blocks.0.attn.qkv.{key}.lora_A"].half()
    )
    assert torch.equal(tensors[f"{ff}.{key}.lora_B"], state[f"blocks.0.ff.{key}.lora_B"].half())
    assert tensors[f"{ff}.{key}.lora_A"].shape == (RANK, 10)  # a Conv1d's A is (rank, in·k)
    if adapter_type == "dora-rows":
        magnitude = state[f"blocks.0.attn.qkv.{key}.magnitude"]
        assert torch.equal(tensors[f"{qkv}.{key}.magnitude"], magnitude.half().roll(2, 0))


@pytest.mark.parametrize("adapter_type", ["lora", "dora-rows"])
def test_write_then_read_gives_the_same_tensors_and_config(tmp_path, adapter_type):
    model = trained(adapter_type)
    path = write(tmp_path, model, adapter_type)
    state, info = read(path)
    original = adapter_state(model)
    assert set(state) == set(original)
    for key, tensor in original.items():
        assert torch.equal(state[key], tensor.half()), key
    assert info.config == AdapterConfig(adapter_type=adapter_type, exclude=("ff.ff",), **CONFIG)
    assert info.inferred_adapter_type == adapter_type
    assert info.metadata == LINEAGE
    assert info.path == path


@pytest.mark.parametrize("adapter_type", ["lora", "dora-rows"])
def test_a_file_loaded_onto_a_fresh_model_reproduces_the_rounded_adapter_to_the_bit(
    tmp_path, adapter_type
):
    model = trained(adapter_type)
    with torch.no_grad():  # what the file can hold: fp16 values
        for p in adapter_parameters(model):
            p.copy_(p.half().float())
    state, info = read(write(tmp_path, model, adapter_type))
    fresh = Toy()
    attach(fresh, TARGETS, info.config.rank, info.config.alpha, info.config.adapter_type)
    load_adapter_state(fresh, state)
    x, seconds = torch.randn(2, 4, 6), torch.rand(2, 1)
    assert torch.equal(fresh(x, seconds), model(x, seconds))


def test_baked_row_norms_are_written_in_fp32_and_read_back(tmp_path):
    model = trained("dora-rows")
    path = write(tmp_path, model, "dora-rows", baked_norms=True)
    with safe_open(str(path), framework="pt") as f:
        config = json.loads(f.metadata()["lora_config"])
        baked = [k for k in f.keys() if k.endswith(".baked_vnorm_row")]
        assert {f.get_tensor(k).dtype for k in baked} == {torch.float32}
    assert len(baked) == len(TARGETS)
    assert config["baked_norms"] == len(TARGETS) and config["norm_base"] == "toy-base"
    state, _ = read(path)
    expected = adapter_state(model, baked_norms=True)
    key = "blocks.1.attn.qkv.parametrizations.weight.0.baked_vnorm_row"
    assert torch.equal(state[key], expected[key])  # rows permuted there and back
    fresh = Toy()
    attach(fresh, TARGETS, RANK, ALPHA, "dora-rows")
    load_adapter_state(fresh, state)  # baked norms are derived: accepted and ignored


# --- writing refuses ----------------------------------------------------------------------------


def test_write_refuses_what_would_not_be_an_underfit_file(tmp_path):
    model = trained("lora")
    state = adapter_state(model)
    config = AdapterConfig(rank=RANK, alpha=ALPHA, adapter_type="lora")
    good = tmp_path / "a.safetensors"

    def attempt(path=good, state=state, config=config, name=to_checkpoint_name, extra=None):
        return write_adapter_file(
            path, state, config, to_checkpoint_name=name, extra_metadata=extra
        )

    with pytest.raises(AdapterFileError, match="ends in .safetensors"):
        attempt(path=tmp_path / "a.pt")
    with pytest.raises(AdapterFileError, match=r"outside the roots \('model.', 'conditioners.'\)"):
        attempt(name=lambda n: "transformer." + n)
    bad = {
        **state,
        "blocks.0.ff.parametrizations.weight.0.lora_B": torch.full((4, RANK), float("nan")),
    }
    with pytest.raises(AdapterFileError, match="NaN or inf"):
        attempt(state=bad)
    huge = {**state, "blocks.0.ff.parametrizations.weight.0.lora_B": torch.full((4, RANK), 1e6)}
    with pytest.raises(AdapterFileError, match="NaN or inf values in torch.float16"):
        attempt(state=huge)
    partial = {
        k: v for k, v in state.items() if not k.startswith("blocks.0.ff.") or k.endswith("lora_A")
    }
    with pytest.raises(AdapterFileError, match=r"complete layers.*ff.ff.2 lacks \['lora_B'\]"):
        attempt(state=partial)
    with pytest.raises(AdapterFileError, match="do not fit rank 3"):
        attempt(config=AdapterConfig(rank=3, alpha=ALPHA, adapter_type="lora"))
    with pytest.raises(AdapterFileError, match="param in"):
        attempt(
            state={**state, "duration.linear.parametrizations.weight.0.magnitude": torch.ones(4)}
        )
    with pytest.raises(AdapterFileError, match="'lora_config' is written from"):
        attempt(extra={"lora_config": "{}"})
    with pytest.raises(AdapterFileError, match="not one of"):
        attempt(config=AdapterConfig(rank=RANK, alpha=ALPHA, adapter_type="loha"))
    with pytest.raises(AdapterFileError, match="'dora' is not one of"):  # legacy: read, not written
        attempt(config=AdapterConfig(rank=RANK, alpha=ALPHA, adapter_type="dora"))
    assert not good.exists()


# --- validation: underfit's contract, one rule at a time ----------------------------------------


def lora_tensors(rank: int = RANK) -> dict[str, torch.Tensor]:
    key = "model.transformer.layers.0.self_attn.to_qkv.parametrizations.weight.0"
    return {
        f"{key}.lora_A": torch.zeros(rank, 4).half(),
        f"{key}.lora_B": torch.zeros(10, rank).half(),
    }


def save(path: Path, tensors: dict, lora_config=None, raw: str | None = None) -> Path:
    metadata = (
        {}
        if lora_config is None and raw is None
        else {"lora_config": raw or json.dumps(lora_config)}
    )
    save_file(tensors, str(path), metadata=metadata)
    return path


@pytest.mark.parametrize("suffix", [".pt", ".ckpt", ".bin"])
def test_a_pickle_file_is_refused_without_being_opened(tmp_path, suffix):
    marker = tmp_path / "unpickled"

    class Payload:
        def __reduce__(self):
            return (Path.touch, (marker,))

    path = tmp_path / f"adapter{suffix}"
    path.write_bytes(pickle.dumps(Payload()))
    for call in (validate_file, read):
        with pytest.raises(AdapterFileError, match="only .safetensors is accepted") as error:
            call(path)
        assert str(path) in str(error.value) and "never opened" in str(error.value)
    assert not marker.exists()


def test_a_missing_file_and_a_file_that_is_not_safetensors(tmp_path):
    with pytest.raises(AdapterFileError, match="file exists"):
        validate_file(tmp_path / "nothing.safetensors")
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"\x00" * 40)
    with pytest.raises(AdapterFileError, match="junk.safetensors: a readable safetensors file"):
        validate_file(junk)


def test_a_base_model_checkpoint_has_no_parametrization_key(tmp_path):
    path = save(tmp_path / "dit.safetensors", {"model.model.proj_in.weight": torch.zeros(2, 2)})
    with pytest.raises(AdapterFileError, match="at least one parametrization key.*not an adapter"):
        validate_file(path)


@pytest.mark.parametrize(
    ("lora_config", "raw", "message"),
    [
        (None, None, "lora_config metadata: missing"),
        (None, "{rank: 2", "lora_config metadata: not valid JSON"),
        ([2, "lora"], None, "lora_config metadata: a JSON object, got list"),
        ({"adapter_type": "lora"}, None, r"lora_config.rank: missing \(required\)"),
        ({"rank": 2}, None, r"lora_config.adapter_type: missing \(required\)"),
        ({"rank": 2.0, "adapter_type": "lora"}, None, "lora_config.rank: an integer ≥ 1, got 2.0"),
        ({"rank": 2, "adapter_type": "lokr"}, None, "'lokr' is not one of"),
        (
            {"rank": 2, "adapter_type": "lora", "include": "self_attn"},
            None,
            "include: a list of strings",
        ),
        ({"rank": 2, "adapter_type": "lora", "step": -1}, None, "lora_config.step: an integer ≥ 0"),
    ],
)
def test_each_lora_config_rule_has_its_message(tmp_path, lora_config, raw, message):
    path = save(tmp_path / "a.safetensors", lora_tensors(), lora_config, raw)
    with pytest.raises(AdapterFileError, match=message) as error:
        validate_file(path)
    assert str(path) in str(error.value)


def test_alpha_include_and_exclude_are_back_filled(tmp_path):
    path = save(tmp_path / "a.safetensors", lora_tensors(), {"rank": 2, "adapter_type": "lora"})
    info = validate_file(path)
    assert info.config == AdapterConfig(rank=2, alpha=2, adapter_type="lora")
    assert info.lora_config == {
        "rank": 2,
        "adapter_type": "lora",
        "alpha": 2,
        "include": [],
        "exclude": [],
    }


def test_back_fill_follows_underfits_order_null_filters_and_a_rank_from_the_shapes(tmp_path):
    # lora_validate.py: setdefault (a stored null stays null), alpha from the stored rank, then
    # a rank ≤ 0 recovered from the first lora_A's first dimension.
    config = {"rank": 0, "adapter_type": "lora", "include": None}
    info = validate_file(save(tmp_path / "a.safetensors", lora_tensors(rank=3), config))
    assert info.lora_config == {
        "rank": 3,
        "adapter_type": "lora",
        "alpha": 0,
        "include": None,
        "exclude": [],
    }
    assert info.config == AdapterConfig(rank=3, alpha=0, adapter_type="lora")
    config = {"rank": -1, "alpha": 4, "adapter_type": "lora"}
    assert validate_file(save(tmp_path / "b.safetensors", lora_tensors(), config)).config.rank == 2


def test_a_file_saved_as_stable_audio_3_saves_it_validates_and_reads(tmp_path):
    # save_lora_safetensors: fp16 tensors, lora_config with include/exclude null when unset.
    config = {
        "rank": 2,
        "alpha": 2,
        "adapter_type": "lora",
        "include": None,
        "exclude": None,
        "step": 7,
    }
    path = save(tmp_path / "run-step=7-epoch=0.safetensors", lora_tensors(), config)
    state, info = read(path)
    assert info.config.include == () and info.config.step == 7
    assert set(state) == {
        f"blocks.0.attn.qkv.parametrizations.weight.0.{p}" for p in ("lora_A", "lora_B")
    }


def test_key_fingerprints_are_underfits():
    def keys(*params):
        return [f"model.x.parametrizations.weight.0.{p}" for p in params]

    assert infer_adapter_type(keys("lora_A", "lora_B")) == "lora"
    assert infer_adapter_type(keys("lora_A", "lora_B", "magnitude")) == "dora-rows"
    assert infer_adapter_type(keys("lora_A", "lora_B", "magnitude_r", "magnitude_c")) == "bora"
    assert infer_adapter_type(keys("M_xs")) == "lora-xs"
    assert infer_adapter_type(keys("M_xs", "magnitude")) == "dora-rows"  # dora-rows-xs's class
    assert infer_adapter_type(keys("U")) is None
    assert infer_adapter_type(["model.x.weight"]) is None


def test_an_adapter_type_not_inferable_from_the_keys_is_refused(tmp_path):
    key = "model.x.parametrizations.weight.0"
    path = save(
        tmp_path / "a.safetensors",
        {f"{key}.U": torch.zeros(4, 2)},
        {"rank": 2, "adapter_type": "lora"},
    )
    with pytest.raises(AdapterFileError, match="adapter type inferable from key names"):
        validate_file(path)


def test_keys_that_contradict_the_adapter_type_are_refused(tmp_path):
    tensors = lora_tensors()
    tensors["model.transformer.layers.0.self_attn.to_qkv.parametrizations.weight.0.magnitude"] = (
        torch.ones(10)
    )
    path = save(tmp_path / "a.safetensors", tensors, {"rank": 2, "adapter_type": "lora"})
    with pytest.raises(
        AdapterFileError, match="keys look like 'dora-rows'.*lora_config says 'lora'"
    ):
        validate_file(path)


def test_unknown_keys_incomplete_layers_and_a_wrong_rank_are_refused(tmp_path):
    config = {"rank": 2, "adapter_type": "lora"}
    path = save(
        tmp_path / "a.safetensors",
        {**lora_tensors(), "model.proj_in.weight": torch.zeros(2)},
        config,
    )
    with pytest.raises(AdapterFileError, match="no unknown keys.*model.proj_in.weight"):
        validate_file(path)
    half = {k: v for k, v in lora_tensors().items() if k.endswith("lora_A")}
    other = {k.replace("layers.0", "layers.1"): v for k, v in lora_tensors().items()}
    path = save(tmp_path / "b.safetensors", {**half, **other}, config)
    with pytest.raises(AdapterFileError, match=r"complete layers.*lacks \['lora_B'\]"):
        validate_file(path)
    path = save(tmp_path / "c.safetensors", lora_tensors(rank=4), config)
    with pytest.raises(AdapterFileError, match="rank matches tensor shapes.*do not fit rank 2"):
        validate_file(path)


def test_legacy_dora_resolves_by_magnitude_shape(tmp_path):
    key = "model.transformer.layers.0.ff.ff.2.parametrizations.weight.0"
    tensors = {
        f"{key}.lora_A": torch.zeros(2, 10).half(),
        f"{key}.lora_B": torch.zeros(4, 2).half(),
    }
    config = {"rank": 2, "adapter_type": "dora"}
    rows = save(
        tmp_path / "rows.safetensors",
        {**tensors, f"{key}.magnitude": torch.ones(4, 1).half()},
        config,
    )
    state, info = read(rows)
    assert info.config.adapter_type == "dora-rows"
    assert state["blocks.0.ff.parametrizations.weight.0.magnitude"].shape == (4,)  # squeezed
    cols = save(
        tmp_path / "cols.safetensors",
        {**tensors, f"{key}.magnitude": torch.ones(1, 10).half()},
        config,
    )
    state, info = read(cols)
    assert info.config.adapter_type == "dora-cols"
    assert state["blocks.0.ff.parametrizations.weight.0.magnitude"].shape == (10,)  # squeezed
    wrong_axis = save(
        tmp_path / "wrong.safetensors",
        {**tensors, f"{key}.magnitude": torch.ones(1, 4).half()},  # (1, out): read as columns
        config,
    )
    with pytest.raises(AdapterFileError, match="one magnitude entry per row or column"):
        validate_file(wrong_axis)
