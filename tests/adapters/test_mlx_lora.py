"""Unit tests of the MLX adapters (`tunesmith.adapters.mlx_lora`) on small bare layers: the
shapes and init, the forward against the merged weight, strength, the names through MLX
containers, the state both ways and the QKV row reorder the files use. Fast; the parity with
the torch path on a real model is in tests/families/stable_audio_3/test_mlx_*.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

mx = pytest.importorskip("mlx.core")
nn = pytest.importorskip("mlx.nn")
from mlx.utils import tree_flatten  # noqa: E402

from tunesmith.adapters import mlx_lora, torch_lora  # noqa: E402
from tunesmith.adapters.torch_lora import PARAM_PREFIX, AdapterError  # noqa: E402
from tunesmith.families.stable_audio_3 import names as sa3_names  # noqa: E402

TYPES = mlx_lora.ADAPTER_TYPES


def linear(fan_in: int = 6, out: int = 5, bias: bool = True, seed: int = 0) -> nn.Linear:
    mx.random.seed(seed)
    layer = nn.Linear(fan_in, out, bias=bias)
    layer.weight = mx.random.normal(layer.weight.shape)
    if bias:
        layer.bias = mx.random.normal(layer.bias.shape)
    return layer


def with_b(layer: mlx_lora.AdapterLinear, seed: int = 1) -> mlx_lora.AdapterLinear:
    """B (or M_xs) moved off zero, so the adapter changes the output."""
    mx.random.seed(seed)
    name = "M_xs" if layer.xs else "lora_B"
    setattr(layer, name, 0.1 * mx.random.normal(getattr(layer, name).shape))
    return layer


def close(a, b, tol: float = 1e-5) -> bool:
    return np.allclose(np.array(a), np.array(b), rtol=tol, atol=tol)


class Block(nn.Module):
    """A pipeline-like root: a component with a Sequential and a list of blocks."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Sequential(nn.Linear(4, 6), nn.SiLU(), nn.Linear(6, 6))
        self.blocks = [nn.Linear(6, 6), nn.Linear(6, 3)]


class Root(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.transformer = Block()


@pytest.mark.parametrize("adapter_type", ["lora", "dora-rows"])
def test_shapes_and_init_as_the_torch_path_stores_them(adapter_type):
    base = linear(fan_in=16, out=5)
    layer = mlx_lora.from_base(base, 3, 6.0, adapter_type)
    assert layer.lora_A.shape == (3, 16) and layer.lora_B.shape == (5, 3)
    assert float(mx.abs(layer.lora_A).max()) <= 1 / math.sqrt(16)  # PEFT's kaiming bound
    assert not mx.any(layer.lora_B).item() and layer.scale == 2.0
    if adapter_type == "dora-rows":
        assert close(layer.magnitude, mx.linalg.norm(base.weight, axis=1))
    x = mx.random.normal((2, 16))
    assert mx.array_equal(layer(x), base(x)).item()  # B = 0 (and factor 1): the base exactly


def test_adapter_parameters_are_float32_over_a_half_precision_base():
    base = linear()
    base.weight, base.bias = base.weight.astype(mx.float16), base.bias.astype(mx.float16)
    layer = mlx_lora.from_base(base, 2, 2.0, "dora-rows")
    assert layer.lora_A.dtype == layer.lora_B.dtype == layer.magnitude.dtype == mx.float32
    assert layer(mx.random.normal((1, 6)).astype(mx.float16)).dtype == mx.float16
    assert mlx_lora.adapter_dtype(mx.bfloat16) == mx.float32


@pytest.mark.parametrize("adapter_type", TYPES)
def test_the_forward_is_the_merged_weight_and_strength_scales_it(adapter_type):
    base = linear()
    layer = with_b(mlx_lora.from_base(base, 2, 4.0, adapter_type))
    x = mx.random.normal((3, 6))
    assert close(layer(x), x @ layer.merged_weight().T + base.bias)
    if adapter_type in ("lora", "lora-xs"):  # W + g·s·δ
        expected = base.weight + 0.5 * 2.0 * layer.delta()
        layer.strength = 0.5
        assert close(layer.merged_weight(), expected)
        assert close(layer(x), x @ expected.T + base.bias)
    layer.strength = 0.5
    assert close(layer(x), x @ layer.merged_weight().T + base.bias)
    layer.strength = 0.0
    assert mx.array_equal(layer(x), base(x)).item()
    assert close(layer.merged_weight(), base.weight)


def test_dora_rows_rows_have_the_magnitude_at_full_strength():
    layer = with_b(mlx_lora.from_base(linear(), 2, 2.0, "dora-rows"))
    mx.random.seed(3)
    layer.magnitude = mx.abs(mx.random.normal(layer.magnitude.shape)) + 0.5
    assert close(mx.linalg.norm(layer.merged_weight(), axis=1), layer.magnitude)


@pytest.mark.parametrize(("rank", "alpha"), [(0, 1.0), (True, 1.0), (2, 0.0), (2, math.inf)])
def test_bad_ranks_and_alphas_are_refused(rank, alpha):
    message = "rank must be an integer ≥ 1" if alpha == 1.0 else "alpha must be a finite number"
    with pytest.raises(AdapterError, match=message):
        mlx_lora.from_base(linear(), rank, alpha, "lora")


def test_only_a_plain_linear_is_adapted_and_only_once():
    with pytest.raises(AdapterError, match="cannot adapt a Conv1d"):
        mlx_lora.from_base(nn.Conv1d(2, 2, 1), 1, 1.0, "lora")
    with pytest.raises(AdapterError, match="is not one of"):
        mlx_lora.from_base(linear(), 1, 1.0, "lokr")
    root = Root()
    mlx_lora.attach(root, ["transformer.blocks.0"], 1, 1.0, "lora")
    with pytest.raises(AdapterError, match="already has an adapter"):
        mlx_lora.attach(root, ["transformer.blocks.0"], 1, 1.0, "lora")
    refusals = {
        "no target layers": [],
        "twice": ["transformer.blocks.1"] * 2,
        "index 5": ["transformer.blocks.5"],
        "at 'nothing'": ["transformer.nothing"],
    }
    for message, targets in refusals.items():
        with pytest.raises(AdapterError, match=message):
            mlx_lora.attach(Root(), targets, 1, 1.0, "lora")


@pytest.mark.parametrize("adapter_type", ["dora-rows", "bora-xs"])
def test_diffusers_names_reach_through_sequentials_and_lists_in_module_order(adapter_type):
    root = Root()
    targets = ["transformer.blocks.1", "transformer.embed.0", "transformer.embed.2"]
    attached = mlx_lora.attach(root, targets, 2, 2.0, adapter_type)
    assert root.transformer.embed.layers[0] is attached["transformer.embed.0"]
    assert root.transformer.blocks[1] is attached["transformer.blocks.1"]
    layers = mlx_lora.adapter_layers(root)
    assert list(layers) == ["transformer.embed.0", "transformer.embed.2", "transformer.blocks.1"]
    # only the adapters train (not U, V)
    trainable = {k for k, _ in tree_flatten(root.trainable_parameters())}
    assert trainable == {
        f"transformer.{path}.{p}"
        for path in ("embed.layers.0", "embed.layers.2", "blocks.1")
        for p in torch_lora.TYPE_PARAMS[adapter_type]
    }


@pytest.mark.parametrize("adapter_type", TYPES)
def test_the_state_goes_out_as_torch_tensors_and_back_exactly(adapter_type):
    root = Root()
    targets = ["transformer.embed.2", "transformer.blocks.0"]
    for layer in mlx_lora.attach(root, targets, 2, 2.0, adapter_type).values():
        with_b(layer)
    state = mlx_lora.adapter_state(root)
    params = torch_lora.TYPE_PARAMS[adapter_type]
    assert set(state) == {f"{t}.{PARAM_PREFIX}.{p}" for t in targets for p in params}
    factor = "M_xs" if adapter_type.endswith("-xs") else "lora_B"
    assert state[f"transformer.blocks.0.{PARAM_PREFIX}.{factor}"].shape == (
        (2, 2) if factor == "M_xs" else (6, 2)
    )
    assert all(isinstance(v, torch.Tensor) and v.dtype == torch.float32 for v in state.values())
    other = Root()
    mlx_lora.attach(other, targets, 2, 2.0, adapter_type)
    mlx_lora.load_adapter_state(other, state)
    again = mlx_lora.adapter_state(other)
    assert all(torch.equal(state[k], again[k]) for k in state)
    grads = mlx_lora.state_from_tree(other, other.trainable_parameters())
    assert set(grads) == set(state)


def test_a_state_that_does_not_fit_is_refused_naming_what():
    root = Root()
    mlx_lora.attach(root, ["transformer.blocks.0"], 2, 2.0, "lora")
    state = mlx_lora.adapter_state(root)
    key = f"transformer.blocks.0.{PARAM_PREFIX}.lora_A"
    with pytest.raises(AdapterError, match="1 missing"):
        mlx_lora.load_adapter_state(root, {k: v for k, v in state.items() if k != key})
    with pytest.raises(AdapterError, match="1 unexpected"):
        mlx_lora.load_adapter_state(root, {**state, "transformer.x.lora_A": state[key]})
    with pytest.raises(AdapterError, match=r"has shape \(3, 6\), the adapter expects \(2, 6\)"):
        mlx_lora.load_adapter_state(root, {**state, key: torch.zeros(3, 6)})
    with pytest.raises(AdapterError, match="no adapters are attached"):
        mlx_lora.load_adapter_state(Root(), state)


def test_set_strength_reaches_every_adapter():
    root = Root()
    mlx_lora.attach(root, ["transformer.embed.0", "transformer.blocks.1"], 1, 1.0, "lora")
    mlx_lora.set_strength(root, 0.25)
    assert {m.strength for m in mlx_lora.adapter_layers(root).values()} == {0.25}


def test_the_fused_qkv_rows_reorder_for_the_files_and_back():
    # the rows of a differential QKV: five blocks, [q1|q2|k1|k2|v] in diffusers' order
    rows = torch.arange(5 * 4, dtype=torch.float32).reshape(20, 1).repeat(1, 3)
    underfit = sa3_names.qkv_rows_to_underfit(rows)
    assert not torch.equal(underfit, rows)
    assert torch.equal(sa3_names.qkv_rows_to_diffusers(underfit), rows)
    assert sorted(underfit[:, 0].tolist()) == rows[:, 0].tolist()  # a permutation of rows
    assert sa3_names.is_fused_qkv("transformer.transformer_blocks.0.self_attn.to_qkv")
    assert not sa3_names.is_fused_qkv("transformer.transformer_blocks.0.cross_attn.to_q")
