"""All eight of underfit's adapter types on torch, against stable-audio-3's formulas
(`models/lora/model.py`, `LoRAParametrization`) written out here from the adapter state, with
the SVD bases computed here too."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tunesmith.adapters.svd_bases import BasesCache
from tunesmith.adapters.torch_lora import (
    ADAPTER_TYPES,
    AdapterError,
    UnderfitAdapter,
    adapter_layers,
    adapter_parameters,
    adapter_state,
    adapter_type_of,
    attach,
    load_adapter_state,
    merge,
    merged_weight,
    set_strength,
)

F64 = torch.float64
RANK, ALPHA = 3, 5.0  # alpha ≠ rank, so a wrong scale shows
SCALE = ALPHA / RANK
EPS = 1e-12
XS = [t for t in ADAPTER_TYPES if t.endswith("-xs")]
NORMED = [t for t in ADAPTER_TYPES if t not in ("lora", "lora-xs")]
OWN = [t for t in ADAPTER_TYPES if t != "lora"]  # PEFT's lora has no grouped conv
PARAMS = {  # stable-audio-3 `LoRAParametrization.__init__`, per type
    "lora": ("lora_A", "lora_B"),
    "dora-rows": ("lora_A", "lora_B", "magnitude"),
    "dora-cols": ("lora_A", "lora_B", "magnitude"),
    "bora": ("lora_A", "lora_B", "magnitude_r", "magnitude_c"),
    "lora-xs": ("M_xs",),
    "dora-rows-xs": ("M_xs", "magnitude"),
    "dora-cols-xs": ("M_xs", "magnitude"),
    "bora-xs": ("M_xs", "magnitude_r", "magnitude_c"),
}


def linear(dtype=F64, seed=0) -> nn.Linear:
    torch.manual_seed(seed)
    return nn.Linear(7, 5).to(dtype)


def conv(dtype=F64, seed=0, groups=1) -> nn.Conv1d:
    torch.manual_seed(seed)
    return nn.Conv1d(4, 6, 3, padding=1, groups=groups).to(dtype)


def grouped_conv(dtype=F64, seed=0) -> nn.Conv1d:
    return conv(dtype, seed, groups=2)


def small_conv(dtype=F64, seed=0) -> nn.Conv1d:
    """No padding: float64 convolutions with padding take a slow path on the CPU."""
    torch.manual_seed(seed)
    return nn.Conv1d(4, 3, 2, stride=2).to(dtype)


LAYERS = [linear, conv, grouped_conv]
LAYER_IDS = ["linear", "conv1d", "grouped-conv1d"]


def x_for(layer: nn.Module, dtype=F64, seed=1) -> torch.Tensor:
    torch.manual_seed(seed)
    shape = (2, 3, 7) if isinstance(layer, nn.Linear) else (2, layer.in_channels, 9)
    return torch.randn(shape).to(dtype)


def adapted(layer: nn.Module, adapter_type: str, **kwargs) -> nn.Sequential:
    model = nn.Sequential(layer)
    attach(model, ["0"], RANK, ALPHA, adapter_type, **kwargs)
    return model


def randomize(model: nn.Module, seed=2) -> None:
    """Non-zero A, B, M and magnitudes away from the norms: every term of W' matters."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in adapter_parameters(model):
            p.copy_(torch.randn_like(p) * 0.5 + (1.0 if p.dim() == 1 else 0.0))


def tensors(model: nn.Module) -> dict[str, torch.Tensor]:
    prefix = "0.parametrizations.weight.0."
    return {k.removeprefix(prefix): v for k, v in adapter_state(model).items()}


def svd_bases(weight: torch.Tensor, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """stable-audio-3: fp32 SVD of the 2-D weight; the largest |U[:, j]| entry made positive."""
    w = weight.detach().reshape(weight.shape[0], -1).float()
    u, _, vh = torch.linalg.svd(w, full_matrices=False)
    for j in range(u.shape[1]):
        i = int(u[:, j].abs().argmax())
        if u[i, j] < 0:
            u[:, j] = -u[:, j]
            vh[j, :] = -vh[j, :]
    return u[:, :rank], vh[:rank, :].T


def reference_weight(
    weight: torch.Tensor, t: dict[str, torch.Tensor], adapter_type: str, strength: float = 1.0
) -> torch.Tensor:
    """W' of stable-audio-3's lora/dora/bora(_xs)_forward, on the 2-D view of W."""
    w = weight.detach()
    w2 = w.reshape(w.shape[0], -1).to(next(iter(t.values())).dtype)
    if strength == 0:
        return w2.view(w.shape)
    if adapter_type.endswith("-xs"):
        u, v = (b.to(w2.dtype) for b in svd_bases(weight, RANK))
        delta = u @ t["M_xs"] @ v.T
    else:
        delta = t["lora_B"] @ t["lora_A"]
    big_v = w2 + SCALE * strength * delta

    def blend(magnitude, dim):
        base_norm = w2.norm(dim=dim)
        return magnitude if strength == 1 else base_norm + strength * (magnitude - base_norm)

    kind = adapter_type.removesuffix("-xs")
    if kind == "lora":
        out = big_v
    elif kind == "dora-rows":
        out = blend(t["magnitude"], 1)[:, None] * big_v / (big_v.norm(dim=1)[:, None] + EPS)
    elif kind == "dora-cols":
        out = blend(t["magnitude"], 0)[None, :] * big_v / (big_v.norm(dim=0)[None, :] + EPS)
    else:
        rows = blend(t["magnitude_r"], 1)[:, None] * big_v / (big_v.norm(dim=1)[:, None] + EPS)
        out = blend(t["magnitude_c"], 0)[None, :] * rows / (rows.norm(dim=0)[None, :] + EPS)
    return out.view(w.shape)


def apply_weight(layer: nn.Module, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    bias = None if layer.bias is None else layer.bias.to(weight.dtype)
    if isinstance(layer, nn.Linear):
        return F.linear(x.to(weight.dtype), weight, bias)
    return F.conv1d(
        x.to(weight.dtype), weight, bias, layer.stride, layer.padding, layer.dilation, layer.groups
    )


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).abs().max() / b.abs().max()).item()


# --- init ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("adapter_type", ADAPTER_TYPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("make", [linear, conv], ids=["linear", "conv1d"])
def test_at_init_the_output_is_the_base_output_bit_for_bit(adapter_type, dtype, make):
    layer = make(dtype)
    x = x_for(layer, dtype)
    base = layer(x)
    model = adapted(layer, adapter_type)
    assert torch.equal(model(x), base)
    assert torch.equal(merged_weight(model[0]).to(dtype), layer.weight)


@pytest.mark.parametrize("adapter_type", ADAPTER_TYPES)
@pytest.mark.parametrize("make", LAYERS[:2], ids=LAYER_IDS[:2])
def test_in_float64_init_is_the_base_but_for_underfits_epsilon(adapter_type, make):
    # lora, lora-xs: exactly; the normed types: m/(‖W‖ + 1e-12) is not 1 in float64.
    layer = make()
    x = x_for(layer)
    base = layer(x)
    out = adapted(layer, adapter_type)(x)
    if adapter_type in NORMED:
        assert not torch.equal(out, base)
        assert relative(out, base) <= 1e-10
    else:
        assert torch.equal(out, base)


@pytest.mark.parametrize("adapter_type", OWN)
@pytest.mark.parametrize("make", LAYERS, ids=LAYER_IDS)
def test_init_tensors_shapes_and_values_are_stable_audio_3s(adapter_type, make):
    layer = make()
    out_features, fan_in = layer.weight.shape[0], layer.weight[0].numel()
    w2 = layer.weight.detach().reshape(out_features, -1)
    t = tensors(adapted(layer, adapter_type))
    assert tuple(t) == PARAMS[adapter_type]
    cols = adapter_type.startswith("dora-cols")
    expected = {
        "lora_A": (RANK, fan_in),
        "lora_B": (out_features, RANK),
        "M_xs": (RANK, RANK),
        "magnitude": (fan_in,) if cols else (out_features,),
        "magnitude_r": (out_features,),
        "magnitude_c": (fan_in,),
    }
    for name, value in t.items():
        assert tuple(value.shape) == expected[name], name
    if "lora_A" in t:
        assert t["lora_A"].abs().max() <= 1 / math.sqrt(fan_in)  # kaiming_uniform(a=√5)
        assert t["lora_A"].abs().max() > 0.5 / math.sqrt(fan_in)
        assert torch.count_nonzero(t["lora_B"]) == 0
    else:
        assert torch.count_nonzero(t["M_xs"]) == 0
    for name, dim in (("magnitude", 0 if cols else 1), ("magnitude_r", 1), ("magnitude_c", 0)):
        if name in t:
            assert torch.equal(t[name], w2.norm(dim=dim)), name


@pytest.mark.parametrize("adapter_type", XS)
@pytest.mark.parametrize("make", LAYERS, ids=LAYER_IDS)
def test_xs_bases_are_the_canonical_svd_and_fixed_buffers(adapter_type, make):
    layer = make()
    model = adapted(layer, adapter_type)
    module = model[0]
    u, v = svd_bases(layer.weight, RANK)
    assert torch.equal(module.U, u.to(F64)) and torch.equal(module.V, v.to(F64))
    assert not module.U.requires_grad and not module.V.requires_grad
    params = {id(p) for p in model.parameters()}
    assert id(module.U) not in params and id(module.V) not in params
    assert not any(k.endswith((".U", ".V")) for k in model.state_dict())
    assert not any(k.endswith((".U", ".V")) for k in adapter_state(model, baked_norms=True))


# --- the formulas -------------------------------------------------------------------------------


@pytest.mark.parametrize("adapter_type", ADAPTER_TYPES)
@pytest.mark.parametrize("strength", [1.0, 0.5])
@pytest.mark.parametrize("make", LAYERS, ids=LAYER_IDS)
def test_merged_weight_and_forward_are_the_formula_in_float64(adapter_type, strength, make):
    if adapter_type == "lora" and make is grouped_conv:
        pytest.skip("lora on a grouped conv is refused (PEFT's conv LoRA)")
    layer = make()
    model = adapted(layer, adapter_type)
    randomize(model)
    set_strength(model, strength)
    expected = reference_weight(layer.weight, tensors(model), adapter_type, strength)
    assert relative(merged_weight(model[0]), expected) <= 1e-12
    x = x_for(layer)
    out = model(x)
    assert relative(out, apply_weight(layer, x, merged_weight(model[0]))) <= 1e-12
    assert relative(out, apply_weight(layer, x, expected)) <= 1e-12


@pytest.mark.parametrize("adapter_type", ADAPTER_TYPES)
@pytest.mark.parametrize("strength", [1.0, 0.5])
@pytest.mark.parametrize("make", [linear, conv], ids=["linear", "conv1d"])
def test_merged_weight_and_forward_are_the_formula_in_float32(adapter_type, strength, make):
    layer = make(torch.float32)
    model = adapted(layer, adapter_type)
    randomize(model)
    set_strength(model, strength)
    expected = reference_weight(layer.weight, tensors(model), adapter_type, strength)
    assert relative(merged_weight(model[0]), expected) <= 1e-6
    x = x_for(layer, torch.float32)
    assert relative(model(x), apply_weight(layer, x, expected)) <= 1e-5


@pytest.mark.parametrize("adapter_type", ADAPTER_TYPES)
@pytest.mark.parametrize("make", [linear, small_conv], ids=["linear", "conv1d"])
@pytest.mark.parametrize("strength", [1.0, 0.7])
def test_gradients_are_those_of_the_dense_formula_so_no_norm_is_detached(
    adapter_type, make, strength
):
    layer = make()
    model = adapted(layer, adapter_type)
    randomize(model)
    set_strength(model, strength)
    x = x_for(layer)
    torch.manual_seed(3)
    weights = torch.randn_like(model(x))
    (model(x) * weights).sum().backward()
    ours = {
        name: p.grad
        for name, p in zip(PARAMS[adapter_type], adapter_parameters(model), strict=True)
    }

    leaves = {k: v.clone().requires_grad_(True) for k, v in tensors(model).items()}
    expected_weight = reference_weight(layer.weight, leaves, adapter_type, strength)
    loss = (apply_weight(layer, x, expected_weight) * weights).sum()
    theirs = dict(zip(leaves, torch.autograd.grad(loss, list(leaves.values())), strict=True))
    for name, grad in theirs.items():
        assert grad.abs().max() > 0, name
        assert relative(ours[name].reshape(grad.shape), grad) <= 1e-9, name


def test_a_detached_norm_would_give_other_gradients():
    # The gradient test above can fail: the same formula with ‖V‖ detached (PEFT's DoRA) is
    # far from the adapters' gradients.
    layer = linear()
    model = adapted(layer, "bora-xs")
    randomize(model)
    x = x_for(layer)
    (model(x).square()).sum().backward()
    m = model[0].M_xs.grad
    leaves = {k: v.clone().requires_grad_(True) for k, v in tensors(model).items()}
    u, v = (b.to(F64) for b in svd_bases(layer.weight, RANK))
    big_v = layer.weight.detach() + SCALE * u @ leaves["M_xs"] @ v.T
    rows = leaves["magnitude_r"][:, None] * big_v / (big_v.norm(dim=1)[:, None].detach() + EPS)
    out = leaves["magnitude_c"][None, :] * rows / (rows.norm(dim=0)[None, :].detach() + EPS)
    (detached,) = torch.autograd.grad(apply_weight(layer, x, out).square().sum(), [leaves["M_xs"]])
    assert relative(m, detached) > 1e-2


# --- strength -----------------------------------------------------------------------------------


@pytest.mark.parametrize("adapter_type", ADAPTER_TYPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("make", [linear, conv], ids=["linear", "conv1d"])
def test_strength_zero_gives_exactly_the_base(adapter_type, dtype, make):
    layer = make(dtype)
    x = x_for(layer, dtype)
    base = layer(x)
    model = adapted(layer, adapter_type)
    randomize(model)
    assert not torch.equal(model(x), base)
    set_strength(model, 0.0)
    assert torch.equal(model(x), base)
    assert torch.equal(merged_weight(model[0]), layer.weight.detach().float())


@pytest.mark.parametrize("adapter_type", NORMED)
def test_a_small_strength_is_close_to_the_base_because_the_magnitude_is_blended(adapter_type):
    # Without the blend, g → 0 would leave (m/‖W‖)·W, not W (stable-audio-3 `_blend_magnitude`).
    layer = linear()
    x = x_for(layer)
    model = adapted(layer, adapter_type)
    randomize(model)
    set_strength(model, 1e-6)
    torch.testing.assert_close(model(x), layer(x), rtol=0, atol=1e-4)


# --- dtypes -------------------------------------------------------------------------------------


@pytest.mark.parametrize("adapter_type", ADAPTER_TYPES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("make", [linear, conv], ids=["linear", "conv1d"])
def test_over_a_half_precision_base_the_adapter_is_fp32(adapter_type, dtype, make):
    layer = make(dtype)
    model = adapted(layer, adapter_type)
    randomize(model)
    module = model[0]
    assert all(p.dtype == torch.float32 and p.requires_grad for p in adapter_parameters(model))
    if adapter_type in XS:
        assert module.U.dtype == module.V.dtype == torch.float32
    x = x_for(layer, dtype)
    out = model(x)
    assert out.dtype == dtype
    out.float().square().sum().backward()
    assert all(
        p.grad is not None and p.grad.dtype == torch.float32 for p in adapter_parameters(model)
    )
    assert layer.weight.grad is None and layer.weight.dtype == dtype
    # Close to the formula over a float64 copy of the (rounded) base.
    expected = reference_weight(
        layer.weight, {k: v.to(F64) for k, v in tensors(model).items()}, adapter_type
    )
    reference = apply_weight(layer, x.to(F64), expected.to(F64))
    tolerance = 3e-2 if dtype == torch.bfloat16 else 5e-3
    torch.testing.assert_close(out.to(F64), reference, rtol=tolerance, atol=tolerance)


# --- state, trainability, merge -----------------------------------------------------------------


@pytest.mark.parametrize("adapter_type", ADAPTER_TYPES)
def test_only_the_types_tensors_train(adapter_type):
    layer = conv(groups=1)
    model = adapted(layer, adapter_type)
    trainable = [p for p in model.parameters() if p.requires_grad]
    assert [id(p) for p in trainable] == [id(p) for p in adapter_parameters(model)]
    assert len(trainable) == len(PARAMS[adapter_type])
    if isinstance(model[0], UnderfitAdapter):
        names = [n for n, p in model.named_parameters() if p.requires_grad]
        assert names == [f"0.adapter.{p}" for p in PARAMS[adapter_type]]
    assert adapter_type_of(model[0]) == adapter_type
    assert next(model.parameters()) is layer.weight  # diffusers' ModelMixin.dtype reads it


def toy_model(dtype=F64) -> nn.Sequential:
    torch.manual_seed(5)
    return nn.Sequential(nn.Linear(4, 6), nn.SiLU(), nn.Conv1d(6, 6, 1), nn.LayerNorm(6)).to(dtype)


@pytest.mark.parametrize("adapter_type", ADAPTER_TYPES)
def test_state_round_trip_and_merge(adapter_type):
    x = torch.randn(2, 6, 4, dtype=F64)
    trained = toy_model()
    attach(trained, ["0", "2"], RANK, ALPHA, adapter_type)
    randomize(trained)
    state = adapter_state(trained)
    assert set(state) == {
        f"{i}.parametrizations.weight.0.{p}" for i in (0, 2) for p in PARAMS[adapter_type]
    }
    fresh = toy_model()
    attach(fresh, ["0", "2"], RANK, ALPHA, adapter_type)
    assert not torch.equal(fresh(x), trained(x))
    load_adapter_state(fresh, adapter_state(trained, baked_norms=True))  # baked: ignored
    assert torch.equal(fresh(x), trained(x))
    expected = trained(x)
    merge(trained)
    assert type(trained[0]) is nn.Linear and type(trained[2]) is nn.Conv1d
    assert not adapter_layers(trained)
    torch.testing.assert_close(trained(x), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("adapter_type", ADAPTER_TYPES)
def test_baked_row_norms_only_for_dora_rows_and_dora_rows_xs(adapter_type):
    model = toy_model(torch.float32)
    attach(model, ["0"], RANK, ALPHA, adapter_type)
    randomize(model)
    set_strength(model, 0.3)  # baked at strength 1 regardless
    state = adapter_state(model, baked_norms=True)
    key = "0.parametrizations.weight.0.baked_vnorm_row"
    if adapter_type not in ("dora-rows", "dora-rows-xs"):
        assert key not in state
        return
    t = {k.removeprefix("0.parametrizations.weight.0."): v for k, v in state.items()}
    w = model[0].weight.detach()
    if adapter_type == "dora-rows":
        delta = t["lora_B"] @ t["lora_A"]
    else:
        u, v = svd_bases(w, RANK)
        delta = u @ t["M_xs"] @ v.T
    baked = state[key]
    assert baked.dtype == torch.float32 and baked.shape == (6,)
    torch.testing.assert_close(baked, (w + SCALE * delta).norm(dim=1))  # no eps


@pytest.mark.parametrize("adapter_type", XS)
def test_xs_load_refuses_lora_tensors_and_lora_refuses_m_xs(adapter_type):
    model = toy_model()
    attach(model, ["0"], RANK, ALPHA, adapter_type)
    state = adapter_state(model)
    with pytest.raises(AdapterError, match=r"1 unexpected.*lora_A"):
        load_adapter_state(model, {**state, "0.parametrizations.weight.0.lora_A": torch.ones(3)})
    with pytest.raises(AdapterError, match=r"shape \(2, 2\).*expects \(3, 3\)"):
        load_adapter_state(model, {**state, "0.parametrizations.weight.0.M_xs": torch.ones(2, 2)})
    other = toy_model()
    attach(other, ["0"], RANK, ALPHA, "lora")
    with pytest.raises(AdapterError, match=r"2 missing.*1 unexpected.*M_xs"):
        load_adapter_state(other, {k: v for k, v in state.items() if k.endswith("M_xs")})


# --- the bases ----------------------------------------------------------------------------------


def orthonormal(rows: int, cols: int, seed: int) -> torch.Tensor:
    torch.manual_seed(seed)
    return torch.linalg.qr(torch.randn(rows, cols, dtype=F64))[0]


def test_given_bases_are_used_truncated_and_cast():
    layer = linear()
    # Wider than the rank and in fp16, as underfit's precomputed file keeps them.
    u, v = orthonormal(5, 5, 1).half(), orthonormal(7, 5, 2).half()
    model = adapted(layer, "dora-rows-xs", bases={"0": (u, v), "elsewhere": (u, v)})
    assert torch.equal(model[0].U, u[:, :RANK].to(F64))
    assert torch.equal(model[0].V, v[:, :RANK].to(F64))
    x = x_for(layer)
    randomize(model)
    t = tensors(model)
    big_v = layer.weight.detach() + SCALE * model[0].U @ t["M_xs"] @ model[0].V.T
    expected = t["magnitude"][:, None] * big_v / (big_v.norm(dim=1)[:, None] + EPS)
    assert relative(model(x), apply_weight(layer, x, expected)) <= 1e-12


def test_bases_for_other_layers_or_other_types_are_not_needed():
    model = toy_model()
    u, v = svd_bases(model[0].weight, RANK)
    attach(model, ["0", "2"], RANK, ALPHA, "lora-xs", bases={"0": (u, v)})
    u2, v2 = svd_bases(model[2].weight, RANK)  # layer 2: computed at attach time
    assert torch.equal(model[2].U, u2.to(F64)) and torch.equal(model[2].V, v2.to(F64))
    attach(toy_model(), ["0"], RANK, ALPHA, "dora-rows", bases={"0": (u, v)})  # ignored


def test_a_cached_run_starts_from_the_bases_an_attach_time_run_computes(tmp_path):
    cache = BasesCache(tmp_path / "bases.safetensors", fingerprint="toy")
    computed = toy_model(torch.float32)
    attach(computed, ["0", "2"], RANK, ALPHA, "bora-xs")
    cached_model = toy_model(torch.float32)
    layers = {"0": cached_model[0].weight, "2": lambda: cached_model[2].weight}
    cache.get_or_compute(layers, RANK)
    result = cache.get_or_compute(layers, RANK)
    assert (result.cached, result.computed) == (2, 0)
    attach(cached_model, ["0", "2"], RANK, ALPHA, "bora-xs", bases=result.bases)
    for name in ("0", "2"):
        assert torch.equal(cached_model.get_submodule(name).U, computed.get_submodule(name).U)
        assert torch.equal(cached_model.get_submodule(name).V, computed.get_submodule(name).V)


@pytest.mark.parametrize(
    ("bases", "message"),
    [
        ((torch.zeros(6, 3), torch.zeros(7, 3)), r"do not fit a 5x7 weight"),
        ((torch.zeros(5, 2), torch.zeros(7, 2)), r"rank 2 < rank 3"),
    ],
)
def test_bases_that_do_not_fit_are_refused(bases, message):
    with pytest.raises(AdapterError, match=message):
        adapted(linear(), "lora-xs", bases={"0": bases})


@pytest.mark.parametrize("adapter_type", XS)
def test_an_xs_rank_above_the_weights_is_refused_with_a_clear_message(adapter_type):
    layer = nn.Linear(7, 2)
    with pytest.raises(AdapterError, match=r"rank ≤ min\(out, fan_in\) = 2.*got rank 3"):
        adapted(layer, adapter_type)
    adapted(nn.Linear(7, 2), "dora-cols")  # B·A has no such limit


def test_legacy_dora_is_refused_with_the_hint():
    with pytest.raises(AdapterError, match="legacy 'dora' is 'dora-rows'"):
        adapted(linear(), "dora")
