"""underfit's `lora` and `dora-rows` on torch, against the formulas of stable-audio-3's
`LoRAParametrization` (models/lora/model.py), finite differences, and PEFT; and the module's
functions over all eight types (the other six types' math: test_torch_underfit_types.py)."""

from __future__ import annotations

import math

import peft
import pytest
import torch
import torch.nn.functional as F
from peft.tuners.lora import layer as peft_lora
from torch import nn
from torch.func import functional_call

from tunesmith.adapters.torch_lora import (
    ADAPTER_TYPES,
    DORA_EPS,
    TYPE_PARAMS,
    AdapterError,
    DoRARows,
    adapter_layers,
    adapter_parameters,
    adapter_state,
    adapter_type_of,
    attach,
    from_base,
    load_adapter_state,
    merge,
    merged_weight,
    set_strength,
)

F64 = torch.float64
RANK, ALPHA = 3, 5.0  # alpha ≠ rank, so a wrong scale shows
SCALE = ALPHA / RANK


def linear(dtype=F64, seed=0, bias=True) -> nn.Linear:
    torch.manual_seed(seed)
    return nn.Linear(7, 5, bias=bias).to(dtype)


def conv(dtype=F64, seed=0, groups=1) -> nn.Conv1d:
    torch.manual_seed(seed)
    return nn.Conv1d(4, 6, 3, padding=1, groups=groups).to(dtype)


def small_conv(dtype=F64, seed=0) -> nn.Conv1d:
    """No padding: float64 convolutions with padding take a slow path on the CPU (ms a call)."""
    torch.manual_seed(seed)
    return nn.Conv1d(4, 3, 2).to(dtype)


def x_for(layer: nn.Module, dtype=F64, seed=1) -> torch.Tensor:
    torch.manual_seed(seed)
    shape = (2, 3, 7) if isinstance(layer, nn.Linear) else (2, layer.in_channels, 9)
    return torch.randn(shape).to(dtype)


def randomize(module: nn.Module, seed=2) -> None:
    """Non-zero B (and a magnitude away from ‖W‖), so every term of the formula matters."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in adapter_parameters(module):
            p.copy_(torch.randn_like(p) * 0.5 + (1.0 if p.dim() == 1 else 0.0))


def factors(module: nn.Module) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    state = adapter_state(module)
    a, b = state["0.parametrizations.weight.0.lora_A"], state["0.parametrizations.weight.0.lora_B"]
    return a, b, state.get("0.parametrizations.weight.0.magnitude")


def adapted(layer: nn.Module, adapter_type: str) -> nn.Sequential:
    model = nn.Sequential(layer)
    attach(model, ["0"], RANK, ALPHA, adapter_type)
    return model


def apply_weight(layer: nn.Module, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    if isinstance(layer, nn.Linear):
        return F.linear(x, weight, layer.bias)
    return F.conv1d(
        x, weight, layer.bias, layer.stride, layer.padding, layer.dilation, layer.groups
    )


def reference_weight(layer, a, b, m=None, strength=1.0) -> torch.Tensor:
    """stable-audio-3 lora_forward / dora_forward (dim 1 = rows), on the 2-D view of W."""
    w = layer.weight.detach()
    w2 = w.reshape(w.shape[0], -1)
    v = w2 + SCALE * strength * (b @ a)
    if m is None:
        return v.view(w.shape)
    if strength == 0:
        return w
    base_norm = w2.norm(dim=1, keepdim=True)
    mag = m.unsqueeze(1) if strength == 1 else base_norm + strength * (m.unsqueeze(1) - base_norm)
    return (v / (v.norm(dim=1, keepdim=True) + 1e-12) * mag).view(w.shape)


# --- the formulas -----------------------------------------------------------------------------


def test_lora_forward_is_w_x_plus_alpha_over_rank_b_a_x_exactly_in_float64():
    layer = linear()
    model = adapted(layer, "lora")
    randomize(model)
    a, b, _ = factors(model)
    x = x_for(layer)
    # PEFT's order of operations: base first, then the scaled low-rank term.
    expected = F.linear(x, layer.weight, layer.bias) + F.linear(F.linear(x, a), b) * SCALE
    assert torch.equal(model(x), expected)
    # …and the same function as underfit's merged weight W + s·B·A.
    torch.testing.assert_close(
        model(x), apply_weight(layer, x, reference_weight(layer, a, b)), rtol=0, atol=1e-12
    )


@pytest.mark.parametrize("make", [linear, conv], ids=["linear", "conv1d"])
def test_lora_equals_underfits_merged_weight(make):
    layer = make()
    model = adapted(layer, "lora")
    randomize(model)
    a, b, _ = factors(model)
    x = x_for(layer)
    expected = apply_weight(layer, x, reference_weight(layer, a, b))
    torch.testing.assert_close(model(x), expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(
        merged_weight(model[0]), reference_weight(layer, a, b), rtol=0, atol=1e-14
    )


@pytest.mark.parametrize(
    "make", [linear, conv, lambda: conv(groups=2)], ids=["linear", "conv1d", "grouped-conv1d"]
)
@pytest.mark.parametrize("strength", [1.0, 0.4])
def test_dora_rows_equals_underfits_formula_in_float64(make, strength):
    layer = make()
    model = adapted(layer, "dora-rows")
    randomize(model)
    set_strength(model, strength)
    a, b, m = factors(model)
    x = x_for(layer)
    weight = reference_weight(layer, a, b, m, strength)
    torch.testing.assert_close(model(x), apply_weight(layer, x, weight), rtol=0, atol=1e-12)
    torch.testing.assert_close(merged_weight(model[0]), weight, rtol=0, atol=1e-14)


def test_dora_rows_magnitude_is_one_norm_per_output_row_over_the_input_axis():
    layer = conv()
    model = adapted(layer, "dora-rows")
    _, b, m = factors(model)
    assert m.shape == (6,)
    assert torch.equal(b, torch.zeros(6, RANK, dtype=F64))
    torch.testing.assert_close(m, layer.weight.detach().reshape(6, -1).norm(dim=1), rtol=0, atol=0)


def test_init_draws_a_as_stable_audio_3_does_and_b_is_zero():
    layer = linear(torch.float32)
    torch.manual_seed(123)
    module = DoRARows(layer, RANK, ALPHA)
    torch.manual_seed(123)
    reference_a = torch.zeros(RANK, 7)
    nn.init.kaiming_uniform_(reference_a, a=math.sqrt(5))  # LoRAParametrization.__init__
    assert torch.equal(module.lora_A.detach(), reference_a)
    assert torch.count_nonzero(module.lora_B) == 0
    lora = from_base(linear(torch.float32), RANK, ALPHA, "lora")
    bound = 1 / math.sqrt(7)  # kaiming_uniform(a=√5) on [rank, fan_in]
    assert lora.lora_A["default"].weight.abs().max() <= bound
    assert torch.count_nonzero(lora.lora_B["default"].weight) == 0


# --- strength and init --------------------------------------------------------------------------


@pytest.mark.parametrize("adapter_type", ["lora", "dora-rows"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("make", [linear, conv], ids=["linear", "conv1d"])
def test_strength_zero_gives_exactly_the_base_output(adapter_type, dtype, make):
    layer = make(dtype)
    x = x_for(layer, dtype)
    base = layer(x)
    model = adapted(layer, adapter_type)
    randomize(model)
    assert not torch.equal(model(x), base)
    set_strength(model, 0.0)
    assert torch.equal(model(x), base)


@pytest.mark.parametrize("adapter_type", ["lora", "dora-rows"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("make", [linear, conv], ids=["linear", "conv1d"])
def test_zero_b_at_init_gives_exactly_the_base_output(adapter_type, dtype, make):
    layer = make(dtype)
    x = x_for(layer, dtype)
    base = layer(x)
    assert torch.equal(adapted(layer, adapter_type)(x), base)


def test_in_float64_dora_rows_at_init_differs_from_the_base_only_by_underfits_epsilon():
    # ‖W‖_row / (‖W‖_row + 1e-12) is not 1 in float64: the +1e-12 of stable-audio-3.
    layer = linear()
    x = x_for(layer)
    base = layer(x)
    out = adapted(layer, "dora-rows")(x)
    assert not torch.equal(out, base)
    norm = layer.weight.detach().norm(dim=1)
    expected = base + (norm / (norm + 1e-12) - 1) * F.linear(x, layer.weight)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-15)


# --- gradients ----------------------------------------------------------------------------------


@pytest.mark.parametrize("adapter_type", ["lora", "dora-rows"])
@pytest.mark.parametrize("make", [linear, small_conv], ids=["linear", "conv1d"])
def test_adapter_gradients_match_central_finite_differences(adapter_type, make):
    layer = make()
    model = adapted(layer, adapter_type)
    randomize(model)
    set_strength(model, 0.7)  # the blended magnitude too
    x = x_for(layer)
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    params = tuple(
        p.detach().clone().requires_grad_(True)
        for n, p in model.named_parameters()
        if p.requires_grad
    )
    torch.manual_seed(3)
    weights = torch.randn_like(model(x))

    def loss(*values):
        return (functional_call(model, dict(zip(names, values, strict=True)), (x,)) * weights).sum()

    assert torch.autograd.gradcheck(loss, params, eps=1e-6, atol=1e-7, rtol=1e-6)


# --- PEFT ---------------------------------------------------------------------------------------


def peft_dora(layer: nn.Linear, ours: nn.Module) -> nn.Module:
    config = peft.LoraConfig(r=RANK, lora_alpha=ALPHA, use_dora=True, init_lora_weights=True)
    module = peft_lora.Linear(layer, "default", config=config, r=RANK, lora_alpha=ALPHA)
    a, b, m = factors(ours)
    with torch.no_grad():
        module.lora_A["default"].weight.copy_(a)
        module.lora_B["default"].weight.copy_(b)
        module.lora_magnitude_vector["default"].weight.copy_(m)
    return module


def grads(module: nn.Module, x: torch.Tensor, weights: torch.Tensor) -> dict[str, torch.Tensor]:
    module.zero_grad()
    (module(x) * weights).sum().backward()
    if isinstance(module, nn.Sequential):
        ours = module[0]
        return {
            "lora_A": ours.lora_A.grad,
            "lora_B": ours.lora_B.grad,
            "magnitude": ours.magnitude.grad,
        }
    return {
        "lora_A": module.lora_A["default"].weight.grad,
        "lora_B": module.lora_B["default"].weight.grad,
        "magnitude": module.lora_magnitude_vector["default"].weight.grad,
    }


def test_peft_dora_is_the_same_function_as_dora_rows_but_not_the_same_gradient():
    layer = linear()
    ours = adapted(layer, "dora-rows")
    randomize(ours)
    theirs = peft_dora(layer, ours)
    x = x_for(layer)
    # The same forward (PEFT has no +1e-12)…
    torch.testing.assert_close(theirs(x), ours(x), rtol=0, atol=1e-11)
    torch.manual_seed(4)
    weights = torch.randn_like(ours(x))
    g_ours = grads(ours, x, weights)
    g_theirs = grads(theirs, x, weights)
    # …the same magnitude gradient (the norm does not depend on m)…
    torch.testing.assert_close(g_theirs["magnitude"], g_ours["magnitude"], rtol=1e-10, atol=1e-12)
    # …but PEFT detaches ‖V‖_row, so the direction gradients are not the forward's derivative.
    for name in ("lora_A", "lora_B"):
        relative = (g_theirs[name] - g_ours[name]).norm() / g_ours[name].norm()
        assert relative > 1e-2, name
    # Central difference of the (shared) forward along one entry of B: ours agrees, PEFT does not.
    h = 1e-6
    b = theirs.lora_B["default"].weight
    values = []
    for sign in (1, -1):
        with torch.no_grad():
            b[0, 0] += sign * h
            values.append((theirs(x) * weights).sum().item())
            b[0, 0] -= sign * h
    numeric = (values[0] - values[1]) / (2 * h)
    assert numeric == pytest.approx(g_ours["lora_B"][0, 0].item(), rel=1e-6)
    assert numeric != pytest.approx(g_theirs["lora_B"][0, 0].item(), rel=1e-3)


def test_lora_is_peft_lora_with_alpha_and_rank_and_underfit_shapes():
    layer = conv()
    model = adapted(layer, "lora")
    module = model[0]
    assert isinstance(module, peft_lora.LoraLayer) and not module.lora_variant
    assert module.scaling["default"] == SCALE
    a, b, m = factors(model)
    assert a.shape == (RANK, 4 * 3) and b.shape == (6, RANK) and m is None


# --- precision ----------------------------------------------------------------------------------


@pytest.mark.parametrize("adapter_type", ["lora", "dora-rows"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_adapter_parameters_are_fp32_over_a_half_precision_base(adapter_type, dtype):
    layer = linear(dtype)
    reference = linear(F64)
    model = adapted(layer, adapter_type)
    randomize(model)
    assert all(p.dtype == torch.float32 and p.requires_grad for p in adapter_parameters(model))
    assert layer.weight.dtype == dtype and not layer.weight.requires_grad
    x = x_for(layer, dtype)
    out = model(x)
    assert out.dtype == dtype
    out.float().square().sum().backward()
    assert all(
        p.grad is not None and p.grad.dtype == torch.float32 for p in adapter_parameters(model)
    )
    assert layer.weight.grad is None
    # Close to the same adapter over a float64 copy of the (rounded) base.
    with torch.no_grad():
        reference.weight.copy_(layer.weight.to(F64))
        reference.bias.copy_(layer.bias.to(F64))
    exact = adapted(reference, adapter_type)
    load_adapter_state(exact, adapter_state(model))
    tolerance = 2e-2 if dtype == torch.bfloat16 else 4e-3
    torch.testing.assert_close(out.to(F64), exact(x.to(F64)), rtol=tolerance, atol=tolerance)


# --- attach, state, merge ---------------------------------------------------------------------


def toy_model(dtype=F64) -> nn.Sequential:
    torch.manual_seed(5)
    return nn.Sequential(nn.Linear(4, 6), nn.SiLU(), nn.Conv1d(6, 6, 1), nn.LayerNorm(6)).to(dtype)


def test_attach_freezes_the_model_and_only_adapters_train():
    model = toy_model()
    attached = attach(model, ["0", "2"], RANK, ALPHA, "dora-rows")
    assert list(attached) == ["0", "2"] and list(adapter_layers(model)) == ["0", "2"]
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable == [
        f"{i}.adapter.{p}" for i in (0, 2) for p in ("lora_A", "lora_B", "magnitude")
    ]
    assert [id(p) for p in adapter_parameters(model)] == [
        id(p) for p in model.parameters() if p.requires_grad
    ]
    # The first parameter is still a base one (diffusers' ModelMixin.dtype reads it).
    assert next(model.parameters()) is model[0].base_layer.weight


def test_a_second_attach_keeps_the_first_adapters_trainable():
    model = toy_model()
    attach(model, ["0"], RANK, ALPHA, "lora")
    attach(model, ["2"], RANK, ALPHA, "dora-rows")
    params = adapter_parameters(model)
    assert len(params) == 2 + 3 and all(p.requires_grad for p in params)
    assert [n for n, p in model.named_parameters() if p.requires_grad] == [
        "0.lora_A.default.weight",
        "0.lora_B.default.weight",
        "2.adapter.lora_A",
        "2.adapter.lora_B",
        "2.adapter.magnitude",
    ]


@pytest.mark.parametrize("adapter_type", ["lora", "dora-rows"])
def test_a_state_loaded_onto_a_fresh_model_reproduces_its_output_exactly(adapter_type):
    x = torch.randn(2, 6, 4, dtype=F64)
    trained = toy_model()
    attach(trained, ["0", "2"], RANK, ALPHA, adapter_type)
    randomize(trained)
    state = adapter_state(trained)
    expected_keys = {
        f"{i}.parametrizations.weight.0.{p}" for i in (0, 2) for p in ("lora_A", "lora_B")
    }
    if adapter_type == "dora-rows":
        expected_keys |= {f"{i}.parametrizations.weight.0.magnitude" for i in (0, 2)}
    assert set(state) == expected_keys
    fresh = toy_model()
    attach(fresh, ["0", "2"], RANK, ALPHA, adapter_type)
    load_adapter_state(fresh, state)
    assert torch.equal(fresh(x), trained(x))


def test_load_adapter_state_refuses_missing_extra_and_misshapen_tensors():
    model = toy_model()
    attach(model, ["0"], RANK, ALPHA, "lora")
    state = adapter_state(model)
    key = "0.parametrizations.weight.0.lora_A"
    with pytest.raises(AdapterError, match=r"1 missing.*lora_A"):
        load_adapter_state(model, {k: v for k, v in state.items() if k != key})
    with pytest.raises(AdapterError, match=r"1 unexpected.*magnitude"):
        load_adapter_state(model, {**state, "0.parametrizations.weight.0.magnitude": torch.ones(6)})
    with pytest.raises(AdapterError, match=r"shape \(2, 4\).*expects \(3, 4\)"):
        load_adapter_state(model, {**state, key: torch.zeros(2, 4)})
    with pytest.raises(AdapterError, match="attach them first"):
        load_adapter_state(toy_model(), state)


@pytest.mark.parametrize("adapter_type", ["lora", "dora-rows"])
def test_merge_folds_the_adapter_into_plain_layers(adapter_type):
    x = torch.randn(2, 6, 4, dtype=F64)
    model = toy_model()
    attach(model, ["0", "2"], RANK, ALPHA, adapter_type)
    randomize(model)
    expected = model(x)
    merge(model)
    assert type(model[0]) is nn.Linear and type(model[2]) is nn.Conv1d
    torch.testing.assert_close(model(x), expected, rtol=0, atol=1e-12)


def test_baked_row_norms_are_the_unit_strength_norms_of_w_plus_s_b_a():
    model = toy_model()
    attach(model, ["0"], RANK, ALPHA, "dora-rows")
    randomize(model)
    set_strength(model, 0.3)  # baked at strength 1 regardless
    state = adapter_state(model, baked_norms=True)
    a, b = state["0.parametrizations.weight.0.lora_A"], state["0.parametrizations.weight.0.lora_B"]
    baked = state["0.parametrizations.weight.0.baked_vnorm_row"]
    assert baked.dtype == torch.float32
    expected = (model[0].weight.detach() + SCALE * b @ a).norm(dim=1).float()
    torch.testing.assert_close(baked, expected)


@pytest.mark.parametrize(
    ("targets", "rank", "alpha", "adapter_type", "message"),
    [
        (["9"], RANK, ALPHA, "lora", "has no layer '9'"),
        (["3"], RANK, ALPHA, "lora", "cannot adapt a LayerNorm"),
        (["0"], 0, ALPHA, "lora", "rank must be an integer ≥ 1"),
        (["0"], RANK, -1.0, "lora", "alpha must be a finite number > 0"),
        (["0"], RANK, ALPHA, "dora", "legacy 'dora' is 'dora-rows'"),
        (["0", "0"], RANK, ALPHA, "lora", "named twice"),
        ([], RANK, ALPHA, "lora", "no target layers"),
    ],
)
def test_attach_refuses_bad_settings_with_a_clear_message(
    targets, rank, alpha, adapter_type, message
):
    with pytest.raises(AdapterError, match=message):
        attach(toy_model(), targets, rank, alpha, adapter_type)


def test_attach_refuses_a_layer_twice_and_a_grouped_conv_for_lora():
    model = toy_model()
    attach(model, ["0"], RANK, ALPHA, "lora")
    with pytest.raises(AdapterError, match="already has an adapter"):
        attach(model, ["0"], RANK, ALPHA, "lora")
    with pytest.raises(AdapterError, match="groups=2"):
        from_base(conv(groups=2), RANK, ALPHA, "lora")
    assert isinstance(from_base(conv(groups=2), RANK, ALPHA, "dora-rows"), DoRARows)


def test_dora_eps_is_underfits():
    assert DORA_EPS == 1e-12


# --- all eight types in one model ---------------------------------------------------------------


def test_the_eight_types_are_underfits_with_their_tensors():
    assert ADAPTER_TYPES == (
        "lora",
        "dora-rows",
        "dora-cols",
        "bora",
        "lora-xs",
        "dora-rows-xs",
        "dora-cols-xs",
        "bora-xs",
    )
    assert tuple(TYPE_PARAMS) == ADAPTER_TYPES
    for adapter_type in ADAPTER_TYPES:
        module = from_base(nn.Linear(6, 5), RANK, ALPHA, adapter_type)
        assert adapter_type_of(module) == adapter_type
        model = nn.Sequential(module)
        assert (
            tuple(k.rpartition(".")[2] for k in adapter_state(model)) == TYPE_PARAMS[adapter_type]
        )


def test_types_can_be_mixed_in_one_model_and_every_function_serves_each():
    x = torch.randn(2, 6, 4, dtype=F64)
    model = toy_model()
    base = model(x)
    attach(model, ["0"], RANK, ALPHA, "lora")
    attach(model, ["2"], RANK, ALPHA, "dora-cols-xs")
    assert [adapter_type_of(m) for m in adapter_layers(model).values()] == ["lora", "dora-cols-xs"]
    params = adapter_parameters(model)
    assert len(params) == 2 + 2 and all(p.requires_grad for p in params)
    randomize(model)
    set_strength(model, 0.0)
    assert torch.equal(model(x), base)
    set_strength(model, 1.0)
    expected = model(x)
    assert not torch.equal(expected, base)
    state = adapter_state(model, baked_norms=True)  # neither type bakes a norm
    assert sorted(k.rpartition(".")[2] for k in state) == ["M_xs", "lora_A", "lora_B", "magnitude"]
    fresh = toy_model()
    attach(fresh, ["0"], RANK, ALPHA, "lora")
    attach(fresh, ["2"], RANK, ALPHA, "dora-cols-xs")
    load_adapter_state(fresh, state)
    assert torch.equal(fresh(x), expected)
    merge(fresh)
    assert not adapter_layers(fresh)
    torch.testing.assert_close(fresh(x), expected, rtol=0, atol=1e-12)


def test_dora_rows_xs_bakes_its_row_norms_too_and_loads_them_back_as_derived():
    model = toy_model()
    attach(model, ["0"], RANK, ALPHA, "dora-rows-xs")
    randomize(model)
    state = adapter_state(model, baked_norms=True)
    baked = state["0.parametrizations.weight.0.baked_vnorm_row"]
    assert baked.dtype == torch.float32 and baked.shape == (6,)
    load_adapter_state(model, state)
    with pytest.raises(AdapterError, match=r"1 unexpected.*baked_vnorm_row"):
        other = toy_model()
        attach(other, ["0"], RANK, ALPHA, "dora-cols-xs")
        load_adapter_state(other, state)
