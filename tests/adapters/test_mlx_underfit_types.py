"""The MLX adapters of all eight underfit types (`tunesmith.adapters.mlx_lora`) against a float64
reference written here from stable-audio-3 `models/lora/model.py` (`LoRAParametrization`):
the merged weight and the forward, the gradient of every trained tensor (torch autograd on the
same dense formula in float64), the init, the strength, the fixed SVD bases, the state; then
against the torch path (`torch_lora`) on a two-layer chain: outputs, merged weights and
gradients with the torch state loaded into MLX, outputs with the MLX state loaded into torch,
the same U, V on both sides (given for one layer, computed for the other).

Layers are non-square (out 5, fan_in 7) so that a row norm taken for a column norm fails, with
every factor and magnitude moved off its init so that every gradient path is awake.

Thresholds: against float64, merged weight and forward ≤ 1e-5 relative (float32), gradient
cosine ≥ 0.9999 and ≤ 1e-4 relative per trained tensor (measured: ≤ 2.2e-7 relative
everywhere); against torch in float32, outputs and merged weights ≥ 70 dB PSNR and gradient
cosine ≥ 0.9999, the thresholds of the Stable Audio 3 parity tests (measured: 141-153 dB,
cosine 1.0 to 9 digits).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

mx = pytest.importorskip("mlx.core")
nn = pytest.importorskip("mlx.nn")
from mlx.utils import tree_flatten  # noqa: E402

from tunesmith.adapters import mlx_lora, svd_bases, torch_lora  # noqa: E402
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


@pytest.mark.parametrize("adapter_type", ["lora-xs", "bora-xs"])
def test_bases_at_attach_are_the_sign_canonical_svd_the_torch_path_computes(adapter_type):
    base = base_linear(seed=5)
    layer = mlx_lora.from_base(base, RANK, ALPHA, adapter_type)
    u, v = np.array(layer.U), np.array(layer.V)
    assert u.shape == (OUT, RANK) and v.shape == (FAN_IN, RANK) and u.dtype == np.float32
    torch_u, torch_v = svd_bases.canonical_bases(torch.from_numpy(np.array(base.weight)), RANK)
    assert np.array_equal(u, torch_u.numpy()) and np.array_equal(v, torch_v.numpy())
    # the formula, independently: float64 SVD, each U column's largest entry made positive
    w = np.array(base.weight, np.float64)
    full_u, s, full_vh = np.linalg.svd(w, full_matrices=False)
    for j in range(RANK):
        i = np.abs(full_u[:, j]).argmax()
        sign = np.sign(full_u[i, j])
        assert u[i, j] > 0
        assert np.allclose(u[:, j], sign * full_u[:, j], atol=1e-5)
        assert np.allclose(v[:, j], sign * full_vh[j], atol=1e-5)
    truncated = (full_u[:, :RANK] * s[:RANK]) @ full_vh[:RANK]
    assert np.allclose((u * s[:RANK]) @ v.T, truncated, atol=1e-5)


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
    u, v = (b.numpy() for b in svd_bases.canonical_bases(torch.from_numpy(b_weight), RANK))
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


# --- parity with the torch path ---------------------------------------------------------------

MIN_PSNR_DB = 70.0  # the thresholds of tests/families/stable_audio_3/test_mlx_training_parity.py


def psnr(reference, other) -> float:
    reference, other = np.asarray(reference, np.float64), np.asarray(other, np.float64)
    mse = np.mean((reference - other) ** 2)
    return float("inf") if mse == 0 else float(10 * np.log10(np.abs(reference).max() ** 2 / mse))


class Chain(nn.Module):
    """first (7 → 5) then second (5 → 6): the second's input carries the first's adapter."""

    def __init__(self, weights: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.first, self.second = nn.Linear(FAN_IN, OUT), nn.Linear(OUT, 6)
        self.update(_tree(weights))

    def __call__(self, x: mx.array) -> mx.array:
        return self.second(self.first(x))


def _tree(weights: dict[str, torch.Tensor]) -> dict:
    tree: dict = {}
    for key, value in weights.items():
        layer, param = key.split(".")
        tree.setdefault(layer, {})[param] = mx.array(value.numpy())
    return tree


def both_sides(adapter_type: str, bases=None):
    """(torch model, MLX model) over the same base weights, adapters attached, A drawn apart."""
    torch.manual_seed(0)
    torch_model = torch.nn.Sequential()
    torch_model.add_module("first", torch.nn.Linear(FAN_IN, OUT))
    torch_model.add_module("second", torch.nn.Linear(OUT, 6))
    weights = {k: v.detach().clone() for k, v in torch_model.state_dict().items()}
    mlx_model = Chain(weights)
    torch_lora.attach(torch_model, ["first", "second"], RANK, ALPHA, adapter_type, bases)
    mlx_lora.attach(mlx_model, ["first", "second"], RANK, ALPHA, adapter_type, bases)
    return torch_model, mlx_model


def awake_state(state: dict[str, torch.Tensor], seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    moved = {}
    for key, value in state.items():
        noise = torch.randn(value.shape, generator=generator)
        if key.endswith("magnitude") or key.endswith(("magnitude_r", "magnitude_c")):
            moved[key] = value * (1 + 0.2 * noise)
        elif key.endswith("lora_A"):
            moved[key] = value + 0.1 * noise
        else:
            moved[key] = 0.3 * noise
    return moved


def torch_run(model, x: np.ndarray, cotangent: np.ndarray):
    """(output, gradients keyed as adapter_state) of the torch side, float32."""
    for p in torch_lora.adapter_parameters(model):
        p.grad = None
    y = model(torch.from_numpy(x))
    (y * torch.from_numpy(cotangent)).sum().backward()
    keys = list(torch_lora.adapter_state(model))
    grads = {
        k: p.grad.numpy() for k, p in zip(keys, torch_lora.adapter_parameters(model), strict=True)
    }
    return y.detach().numpy(), grads


def mlx_run(model, x: np.ndarray, cotangent: np.ndarray):
    def loss(module, inputs):
        return (module(inputs) * mx.array(cotangent)).sum()

    y = model(mx.array(x))
    _, grads = nn.value_and_grad(model, loss)(model, mx.array(x))
    return np.array(y), {k: np.array(v) for k, v in mlx_lora.state_from_tree(model, grads).items()}


def given_bases() -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Bases for the first layer only (orthonormal, but not its SVD: the given ones must win);
    the second computes its own on each side."""
    generator = torch.Generator().manual_seed(7)
    u, _ = torch.linalg.qr(torch.randn(OUT, OUT, generator=generator))
    v, _ = torch.linalg.qr(torch.randn(FAN_IN, OUT, generator=generator))
    return {"first": (u, v)}


@pytest.mark.parametrize("adapter_type", TYPES)
def test_parity_with_the_torch_path_forward_gradients_and_states_both_ways(adapter_type):
    assert torch_lora.ADAPTER_TYPES == mlx_lora.ADAPTER_TYPES
    xs = adapter_type.endswith("-xs")
    bases = given_bases() if xs else None
    torch_model, mlx_model = both_sides(adapter_type, bases)
    if xs:  # the same U, V on both sides: given for the first, computed for the second
        for name in ("first", "second"):
            t, m = torch_model.get_submodule(name), getattr(mlx_model, name)
            assert np.array_equal(t.U.numpy(), np.array(m.U))
            assert np.array_equal(t.V.numpy(), np.array(m.V))
        assert np.array_equal(np.array(mlx_model.first.U), bases["first"][0][:, :RANK].numpy())
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, FAN_IN)).astype(np.float32)
    cotangent = rng.standard_normal((4, 6)).astype(np.float32)

    # torch's state into MLX
    state = awake_state(torch_lora.adapter_state(torch_model), seed=1)
    torch_lora.load_adapter_state(torch_model, state)
    mlx_lora.load_adapter_state(mlx_model, state)
    assert {k: tuple(v.shape) for k, v in mlx_lora.adapter_state(mlx_model).items()} == {
        k: tuple(v.shape) for k, v in state.items()
    }
    for strength in (1.0, 0.5):
        torch_lora.set_strength(torch_model, strength)
        mlx_lora.set_strength(mlx_model, strength)
        torch_y, torch_grads = torch_run(torch_model, x, cotangent)
        mlx_y, mlx_grads = mlx_run(mlx_model, x, cotangent)
        assert psnr(torch_y, mlx_y) >= MIN_PSNR_DB
        assert list(mlx_grads) == list(torch_grads)
        for key in torch_grads:
            assert cosine(torch_grads[key], mlx_grads[key]) >= MIN_GRAD_COSINE, key
        for name in ("first", "second"):
            merged_t = torch_lora.merged_weight(torch_model.get_submodule(name)).detach().numpy()
            assert psnr(merged_t, np.array(getattr(mlx_model, name).merged_weight())) >= MIN_PSNR_DB
    torch_lora.set_strength(torch_model, 1.0)
    mlx_lora.set_strength(mlx_model, 1.0)

    # MLX's state into torch
    other = awake_state(mlx_lora.adapter_state(mlx_model), seed=2)
    mlx_lora.load_adapter_state(mlx_model, other)
    torch_lora.load_adapter_state(torch_model, mlx_lora.adapter_state(mlx_model))
    torch_y, _ = torch_run(torch_model, x, cotangent)
    mlx_y, _ = mlx_run(mlx_model, x, cotangent)
    assert psnr(torch_y, mlx_y) >= MIN_PSNR_DB
    assert psnr(torch_y, torch_run(both_sides(adapter_type, bases)[0], x, cotangent)[0]) < 40

    # a state with baked norms, as torch writes it for dora-rows(-xs), loads into MLX
    baked = torch_lora.adapter_state(torch_model, baked_norms=True)
    mlx_lora.load_adapter_state(mlx_model, baked)
