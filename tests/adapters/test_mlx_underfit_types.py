"""The MLX adapters of all eight underfit types (`tunesmith.adapters.mlx_lora`) against a float64
reference written here from stable-audio-3 `models/lora/model.py` (`LoRAParametrization`):
the merged weight and the forward, the gradient of every trained tensor (torch autograd on the
same dense formula in float64), the init, the strength, the fixed SVD bases, the state.

Layers are non-square (out 5, fan_in 7) so that a row norm taken for a column norm fails, with
every factor and magnitude moved off its init so that every gradient path is awake.

Thresholds: merged weight and forward ≤ 1e-5 relative (float32 against float64); gradient
cosine ≥ 0.9999 per trained tensor.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

mx = pytest.importorskip("mlx.core")
nn = pytest.importorskip("mlx.nn")
from mlx.utils import tree_flatten  # noqa: E402

from tunesmith.adapters import mlx_lora  # noqa: E402
from tunesmith.adapters.torch_lora import PARAM_PREFIX, AdapterError  # noqa: E402

TYPES = (
    "lora",
    "dora-rows",
    "dora-cols",
    "bora",
    "lora-xs",
    "dora-rows-xs",
    "dora-cols-xs",
    "bora-xs",
)
EPS = 1e-12
MAX_RELATIVE = 1e-5
MIN_GRAD_COSINE = 0.9999
OUT, FAN_IN, RANK, ALPHA = 5, 7, 3, 6.0  # s = 2: a missing scale shows
# The trained tensors per type and the axis of each magnitude's norm (1: per row, 0: per column).
PARAMS = {
    "lora": ("lora_A", "lora_B"),
    "dora-rows": ("lora_A", "lora_B", "magnitude"),
    "dora-cols": ("lora_A", "lora_B", "magnitude"),
    "bora": ("lora_A", "lora_B", "magnitude_r", "magnitude_c"),
    "lora-xs": ("M_xs",),
    "dora-rows-xs": ("M_xs", "magnitude"),
    "dora-cols-xs": ("M_xs", "magnitude"),
    "bora-xs": ("M_xs", "magnitude_r", "magnitude_c"),
}
SHAPES = {
    "lora_A": (RANK, FAN_IN),
    "lora_B": (OUT, RANK),
    "M_xs": (RANK, RANK),
    "magnitude_r": (OUT,),
    "magnitude_c": (FAN_IN,),
}


def norm_axes(adapter_type: str) -> list[tuple[str, int]]:
    """(magnitude name, norm axis) in the order the reference applies them."""
    kind = adapter_type.removesuffix("-xs")
    return {
        "lora": [],
        "dora-rows": [("magnitude", 1)],
        "dora-cols": [("magnitude", 0)],
        "bora": [("magnitude_r", 1), ("magnitude_c", 0)],
    }[kind]


def reference_weight(w0, t: dict, adapter_type: str, scale: float, g: float, u=None, v=None):
    """W' in float64 by the formula alone; numpy or torch arrays (the same expressions)."""
    delta = u @ t["M_xs"] @ v.T if adapter_type.endswith("-xs") else t["lora_B"] @ t["lora_A"]
    w = w0 + g * scale * delta
    if not norm_axes(adapter_type):
        return w
    if g == 0:
        return w0
    for name, axis in norm_axes(adapter_type):
        base_norm = (w0 * w0).sum(axis=axis) ** 0.5
        m = t[name] if g == 1 else base_norm + g * (t[name] - base_norm)
        norm = (w * w).sum(axis=axis) ** 0.5
        factor = m / (norm + EPS)
        w = (factor[:, None] if axis == 1 else factor[None, :]) * w
    return w


def base_linear(seed: int = 0, bias: bool = True) -> nn.Linear:
    mx.random.seed(seed)
    layer = nn.Linear(FAN_IN, OUT, bias=bias)
    layer.weight = mx.random.normal((OUT, FAN_IN))
    if bias:
        layer.bias = mx.random.normal((OUT,))
    return layer


def awake(layer: mlx_lora.AdapterLinear, seed: int = 1) -> mlx_lora.AdapterLinear:
    """Every trained tensor moved off its init (δ ≠ 0, each magnitude off the base norm)."""
    rng = np.random.default_rng(seed)
    for name, value in mlx_lora._tensors(layer).items():
        noise = rng.standard_normal(value.shape).astype(np.float32)
        if name.startswith("magnitude"):
            moved = np.array(value) * (1 + 0.2 * noise)
        elif name == "lora_A":
            moved = np.array(value) + 0.1 * noise
        else:  # lora_B and M_xs start at zero
            moved = 0.3 * noise
        setattr(layer, name, mx.array(moved.astype(np.float32)))
    return layer


def float64(layer: mlx_lora.AdapterLinear) -> tuple[np.ndarray, dict, np.ndarray, np.ndarray]:
    """(W0, trained tensors, U, V) of a layer as float64 numpy."""
    t = {k: np.array(v, dtype=np.float64) for k, v in mlx_lora._tensors(layer).items()}
    u = v = None
    if layer.adapter_type.endswith("-xs"):
        u, v = np.array(layer.U, np.float64), np.array(layer.V, np.float64)
    return np.array(layer.linear.weight.astype(mx.float32), np.float64), t, u, v


def relative(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / np.abs(b).max())


def cosine(a, b) -> float:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize("adapter_type", TYPES)
def test_init_shapes_dtypes_and_only_the_trained_tensors_train(adapter_type):
    base = base_linear()
    layer = mlx_lora.from_base(base, RANK, ALPHA, adapter_type)
    assert layer.adapter_type == adapter_type and layer.scale == ALPHA / RANK
    tensors = mlx_lora._tensors(layer)
    assert tuple(tensors) == PARAMS[adapter_type]
    w0 = np.array(base.weight, np.float64)
    for name, value in tensors.items():
        assert value.dtype == mx.float32
        if name == "magnitude":
            axis = norm_axes(adapter_type)[0][1]
            assert value.shape == ((OUT,) if axis == 1 else (FAN_IN,))
            assert np.allclose(np.array(value), np.linalg.norm(w0, axis=axis), rtol=1e-6)
        else:
            assert value.shape == SHAPES[name]
        if name in ("lora_B", "M_xs"):
            assert not mx.any(value).item()  # δ = 0 at init
    for name, axis in norm_axes(adapter_type):
        assert np.allclose(np.array(tensors[name]), np.linalg.norm(w0, axis=axis), rtol=1e-6)
    trainable = {k for k, _ in tree_flatten(layer.trainable_parameters())}
    assert trainable == set(PARAMS[adapter_type])
    every = {k for k, _ in tree_flatten(layer.parameters())}
    assert every == trainable | {"linear.weight", "linear.bias"}  # U, V are no parameters
    x = mx.random.normal((4, FAN_IN))
    assert mx.array_equal(layer(x), base(x)).item()  # the base's output bit for bit
    assert mx.array_equal(layer.merged_weight(), base.weight).item()


@pytest.mark.parametrize("adapter_type", TYPES)
@pytest.mark.parametrize("strength", [1.0, 0.5, 1.5])
def test_merged_weight_and_forward_are_the_float64_formula(adapter_type, strength):
    layer = awake(mlx_lora.from_base(base_linear(), RANK, ALPHA, adapter_type))
    layer.strength = strength
    w0, t, u, v = float64(layer)
    expected = reference_weight(w0, t, adapter_type, ALPHA / RANK, strength, u, v)
    assert relative(layer.merged_weight(), expected) <= MAX_RELATIVE
    assert relative(expected, w0) > 1e-2  # the adapter moved the weight: the test can fail
    x = np.random.default_rng(2).standard_normal((2, 3, FAN_IN))
    y = layer(mx.array(x.astype(np.float32)))
    assert y.shape == (2, 3, OUT)
    assert relative(y, x @ expected.T + np.array(layer.linear.bias)) <= MAX_RELATIVE


@pytest.mark.parametrize("adapter_type", TYPES)
def test_strength_zero_is_the_base_exactly(adapter_type):
    base = base_linear()
    layer = awake(mlx_lora.from_base(base, RANK, ALPHA, adapter_type))
    x = mx.random.normal((3, FAN_IN))
    assert not mx.array_equal(layer(x), base(x)).item()
    layer.strength = 0.0
    assert mx.array_equal(layer(x), base(x)).item()
    assert mx.array_equal(layer.merged_weight(), base.weight).item()


@pytest.mark.parametrize("adapter_type", TYPES)
def test_gradients_of_every_trained_tensor_are_the_float64_formula(adapter_type):
    layer = awake(mlx_lora.from_base(base_linear(), RANK, ALPHA, adapter_type))
    rng = np.random.default_rng(4)
    x = rng.standard_normal((6, FAN_IN)).astype(np.float32)
    cotangent = rng.standard_normal((6, OUT)).astype(np.float32)

    def loss(module, inputs):
        return (module(inputs) * mx.array(cotangent)).sum()

    _, grads = nn.value_and_grad(layer, loss)(layer, mx.array(x))
    grads = dict(tree_flatten(grads))
    assert set(grads) == set(PARAMS[adapter_type])  # nothing for U, V or the base

    w0, t, u, v = float64(layer)
    leaves = {k: torch.tensor(a, requires_grad=True) for k, a in t.items()}
    u, v = (None, None) if u is None else (torch.from_numpy(u), torch.from_numpy(v))
    w = reference_weight(torch.from_numpy(w0), leaves, adapter_type, ALPHA / RANK, 1.0, u, v)
    y = torch.from_numpy(x).double() @ w.T + torch.from_numpy(np.array(layer.linear.bias)).double()
    (y * torch.from_numpy(cotangent).double()).sum().backward()
    for name, leaf in leaves.items():
        expected = leaf.grad.numpy()
        assert np.abs(expected).max() > 1e-3, name  # an awake path
        assert cosine(grads[name], expected) >= MIN_GRAD_COSINE, name
        assert relative(grads[name], expected) <= 1e-4, name


@pytest.mark.parametrize("adapter_type", ["dora-rows-xs", "bora"])
def test_a_half_precision_base_gets_float32_adapters_and_its_own_output_dtype(adapter_type):
    base = base_linear()
    base.weight, base.bias = base.weight.astype(mx.float16), base.bias.astype(mx.float16)
    layer = mlx_lora.from_base(base, RANK, ALPHA, adapter_type)
    assert {v.dtype for v in mlx_lora._tensors(layer).values()} == {mx.float32}
    x = mx.random.normal((2, FAN_IN)).astype(mx.float16)
    assert mx.array_equal(layer(x), base(x)).item()  # init: the half base exactly
    awake(layer)
    assert layer(x).dtype == mx.float16
    w0, t, u, v = float64(layer)
    expected = reference_weight(w0, t, adapter_type, ALPHA / RANK, 1.0, u, v)
    assert relative(layer.merged_weight(), expected) <= MAX_RELATIVE  # fp32 over the half W
    y = np.array(x.astype(mx.float32), np.float64) @ expected.T + np.array(base.bias, np.float64)
    assert relative(layer(x), y) <= 2e-3  # half precision output


# --- SVD bases --------------------------------------------------------------------------------


def test_canonical_bases_are_the_svd_with_each_u_column_s_largest_entry_positive():
    w = np.array(base_linear().weight, np.float64)
    u, v = mlx_lora.canonical_bases(w.astype(np.float32), RANK)
    assert u.shape == (OUT, RANK) and v.shape == (FAN_IN, RANK) and u.dtype == np.float32
    full_u, s, full_vh = np.linalg.svd(w, full_matrices=False)  # float64, signs as they come
    for j in range(RANK):
        i = np.abs(u[:, j]).argmax()
        assert u[i, j] > 0
        sign = np.sign(full_u[i, j])
        assert np.allclose(u[:, j], sign * full_u[:, j], atol=1e-5)
        assert np.allclose(v[:, j], sign * full_vh[j], atol=1e-5)
    truncated = (full_u[:, :RANK] * s[:RANK]) @ full_vh[:RANK]
    assert np.allclose(u * s[:RANK] @ v.T, truncated, atol=1e-5)


def test_canonical_bases_are_those_of_torch_s_fp32_svd():
    """The torch path's SVD (fp32, canonical signs) of the same weight, to rounding."""
    w = torch.from_numpy(np.array(base_linear(seed=5).weight))
    full_u, _, full_vh = torch.linalg.svd(w, full_matrices=False)
    signs = full_u[full_u.abs().argmax(dim=0), torch.arange(full_u.shape[1])].sign()
    u, v = mlx_lora.canonical_bases(w.numpy(), RANK)
    assert np.allclose(u, (full_u * signs)[:, :RANK].numpy(), atol=1e-5)
    assert np.allclose(v, (full_vh * signs[:, None])[:RANK].T.numpy(), atol=1e-5)


@pytest.mark.parametrize("adapter_type", ["lora-xs", "dora-cols-xs"])
def test_attach_uses_given_bases_exactly_and_computes_the_rest(adapter_type):
    class Root(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = base_linear(seed=1), base_linear(seed=2)

    root = Root()
    rng = np.random.default_rng(0)
    # as underfit's precomputed file: fp16, every column (truncated to rank at attach)
    given_u = torch.from_numpy(rng.standard_normal((OUT, OUT))).half()
    given_v = torch.from_numpy(rng.standard_normal((FAN_IN, OUT))).half()
    b_weight = np.array(root.b.weight)
    layers = mlx_lora.attach(root, ["a", "b"], RANK, ALPHA, adapter_type, {"a": (given_u, given_v)})
    assert np.array_equal(np.array(layers["a"].U), given_u[:, :RANK].float().numpy())
    assert np.array_equal(np.array(layers["a"].V), given_v[:, :RANK].float().numpy())
    u, v = mlx_lora.canonical_bases(b_weight, RANK)
    assert np.array_equal(np.array(layers["b"].U), u)
    assert np.array_equal(np.array(layers["b"].V), v)
    assert "U" not in mlx_lora._tensors(layers["a"]) and "V" not in mlx_lora._tensors(layers["b"])


def test_bases_of_the_wrong_shape_and_a_rank_above_the_bases_are_refused():
    with pytest.raises(AdapterError, match=r"basis V has shape \(5, 3\), expected \(7, ≥ 3\)"):
        mlx_lora.from_base(base_linear(), RANK, ALPHA, "lora-xs", (np.eye(OUT), np.eye(OUT, 3)))
    with pytest.raises(AdapterError, match=r"basis U has shape \(5, 2\), expected \(5, ≥ 3\)"):
        mlx_lora.from_base(base_linear(), RANK, ALPHA, "bora-xs", (np.eye(OUT, 2), np.eye(7, 3)))
    with pytest.raises(AdapterError, match="rank 6 exceeds min"):
        mlx_lora.from_base(base_linear(), 6, ALPHA, "dora-rows-xs")
    assert mlx_lora.from_base(base_linear(), 6, ALPHA, "dora-rows").lora_A.shape == (6, FAN_IN)


# --- state ------------------------------------------------------------------------------------


class Pair(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first, self.second = base_linear(seed=1), base_linear(seed=2)


@pytest.mark.parametrize("adapter_type", TYPES)
def test_the_state_has_the_type_s_tensors_and_loads_back_exactly(adapter_type):
    root = Pair()
    for layer in mlx_lora.attach(root, ["first", "second"], RANK, ALPHA, adapter_type).values():
        awake(layer)
    state = mlx_lora.adapter_state(root)
    assert list(state) == [
        f"{name}.{PARAM_PREFIX}.{p}" for name in ("first", "second") for p in PARAMS[adapter_type]
    ]
    assert all(isinstance(v, torch.Tensor) and v.dtype == torch.float32 for v in state.values())
    other = Pair()
    mlx_lora.attach(other, ["first", "second"], RANK, ALPHA, adapter_type)
    x = mx.random.normal((2, FAN_IN))
    assert not mx.array_equal(other.first(x), root.first(x)).item()
    mlx_lora.load_adapter_state(other, state)
    assert all(torch.equal(v, mlx_lora.adapter_state(other)[k]) for k, v in state.items())
    assert mx.array_equal(other.first(x), root.first(x)).item()  # same U, V from the same W
    grads = mlx_lora.state_from_tree(other, other.trainable_parameters())
    assert list(grads) == list(state)
    baked = {**state, f"first.{PARAM_PREFIX}.baked_vnorm_row": torch.ones(OUT)}
    if adapter_type in ("dora-rows", "dora-rows-xs"):
        mlx_lora.load_adapter_state(other, baked)  # derived, ignored
    else:
        with pytest.raises(AdapterError, match="1 unexpected"):
            mlx_lora.load_adapter_state(other, baked)


def test_a_state_of_another_type_is_refused():
    root = Pair()
    mlx_lora.attach(root, ["first", "second"], RANK, ALPHA, "dora-cols")
    state = mlx_lora.adapter_state(root)
    other = Pair()
    mlx_lora.attach(other, ["first", "second"], RANK, ALPHA, "dora-rows")
    with pytest.raises(AdapterError, match=r"has shape \(7,\), the adapter expects \(5,\)"):
        mlx_lora.load_adapter_state(other, state)
    xs = Pair()
    mlx_lora.attach(xs, ["first", "second"], RANK, ALPHA, "dora-cols-xs")
    with pytest.raises(AdapterError, match="2 missing.*4 unexpected"):
        mlx_lora.load_adapter_state(xs, state)
