"""The LoKr layer: its Kronecker matvec against the materialised kron, central finite differences
in float64, PEFT's LoKr layer on the same weights, shapes and init as PEFT and LyCORIS make them,
and the factor checks."""

from __future__ import annotations

import copy
import math

import peft
import pytest
import torch
from peft.tuners.lokr import layer as peft_lokr
from torch import nn
from torch.func import functional_call

from tunesmith.adapters.torch_lokr import (
    AdapterError,
    LoKrLinear,
    adapter_state,
    attach,
    kron_matvec,
    load_adapter_state,
    merge,
    named_adapter_parameters,
    set_strength,
)

# (in, out, dim, factor): full w2, factored w2, a factor that divides neither side, non-square
CASES = [(32, 64, 16, 4), (48, 40, 3, 4), (64, 96, 5, 6), (96, 32, 64, 6)]


def randomized(layer: LoKrLinear, seed: int = 1) -> LoKrLinear:
    """Every factor non-zero (w2 starts at zero), so every term shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in layer.factors().values():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype))
    return layer


def lokr(in_f, out_f, dim, factor, dtype=torch.float32, alpha=None, seed=0) -> LoKrLinear:
    torch.manual_seed(seed)
    base = nn.Linear(in_f, out_f).to(dtype)
    return LoKrLinear(base, dim, alpha if alpha is not None else 1.5 * dim, factor)


def w2_of(layer: LoKrLinear) -> tuple:
    f = layer.factors()
    return (f["lokr_w2"],) if "lokr_w2" in f else (f["lokr_w2_a"], f["lokr_w2_b"])


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("w2_first", [True, False])
def test_kron_matvec_equals_the_materialised_kron(case, w2_first):
    layer = randomized(lokr(*case))
    x = torch.randn(3, 7, case[0])
    w2 = w2_of(layer)
    full = w2[0] if len(w2) == 1 else w2[0] @ w2[1]
    kron = torch.kron(layer.factors()["lokr_w1"], full)
    expected = (x.double() @ kron.double().T).float()
    got = kron_matvec(x, layer.factors()["lokr_w1"], w2, w2_first)
    assert got.shape == (3, 7, case[1])
    assert ((got - expected).abs().max() / expected.abs().max()).item() <= 1e-6


@pytest.mark.parametrize("case", CASES[:3])
@pytest.mark.parametrize("w2_first", [True, False])
def test_every_factor_gradient_against_central_differences(case, w2_first):
    """torch.autograd.gradcheck: analytic gradients of w1, w2 (or w2_a, w2_b) and x against
    central finite differences, in float64."""
    layer = randomized(lokr(*case, dtype=torch.float64))
    layer.w2_first = w2_first
    names = list(layer.factors())
    x = torch.randn(2, 2, case[0], dtype=torch.float64, requires_grad=True)

    def forward(x, *factors):
        params = {f"adapter.{n}": f for n, f in zip(names, factors, strict=True)}
        return functional_call(layer, params, (x,))

    factors = [p.detach().clone().requires_grad_(True) for p in layer.factors().values()]
    assert torch.autograd.gradcheck(forward, (x, *factors), eps=1e-6, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("case", CASES)
def test_shapes_output_and_gradients_equal_peft_lokr_layer(case):
    in_f, out_f, dim, factor = case
    ours = randomized(lokr(*case))
    config = peft.LoKrConfig(r=dim, alpha=1.5 * dim, decompose_factor=factor)
    theirs = peft_lokr.Linear(
        copy.deepcopy(ours.base_layer), "default", config, r=dim, alpha=1.5 * dim
    )
    for name, p in ours.factors().items():
        peft_param = getattr(theirs, name)["default"]
        assert peft_param.shape == p.shape, name
        with torch.no_grad():
            peft_param.copy_(p)
    assert {n for n in peft_lokr.LoKrLayer.adapter_layer_names if getattr(theirs, n)} == set(
        ours.factors()
    )
    x = torch.randn(4, 5, in_f)
    expected, got = theirs(x), ours(x)
    assert ((got - expected).abs().max() / expected.abs().max()).item() <= 1e-6
    upstream = torch.randn_like(got)
    (got * upstream).sum().backward()
    (expected * upstream).sum().backward()
    for name, p in ours.factors().items():
        reference = getattr(theirs, name)["default"].grad
        assert ((p.grad - reference).abs().max() / reference.abs().max()).item() <= 1e-5, name


def test_init_is_lycoris_and_leaves_the_base_output():
    for case in CASES:
        layer = lokr(*case)
        factors = layer.factors()
        assert factors["lokr_w1"].abs().min() > 0  # kaiming-uniform: no exact zero
        zero = "lokr_w2" if "lokr_w2" in factors else "lokr_w2_b"
        assert torch.count_nonzero(factors[zero]) == 0
        bound = 1 / math.sqrt(factors["lokr_w1"].shape[1])  # kaiming_uniform(a=√5)
        assert factors["lokr_w1"].abs().max() <= bound
        x = torch.randn(2, case[0])
        assert torch.equal(layer(x), layer.base_layer(x))


def test_tokens_never_become_a_batched_matmul_axis():
    """HOT-Step's 16.4x: a factor's gradient over a token-batched matmul. Forward and backward
    here run as 2-D matmuls only."""
    layer = randomized(lokr(64, 96, 5, 6))
    x = torch.randn(2, 50, 64, requires_grad=True)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        layer(x).sum().backward()
    ops = {event.key for event in prof.key_averages()}
    assert "aten::mm" in ops or "aten::addmm" in ops
    assert not ops & {"aten::bmm", "aten::baddbmm", "aten::kron"}, sorted(ops)


def test_strength_merge_and_state():
    layer = randomized(lokr(48, 40, 3, 4))
    x = torch.randn(3, 48)
    full = layer(x)
    set_strength(layer, 0.0)
    assert torch.equal(layer(x), layer.base_layer(x))
    set_strength(layer, 1.0)
    model = nn.Sequential(layer)
    state = adapter_state(model)
    assert sorted(state) == ["0.lokr_w1", "0.lokr_w2_a", "0.lokr_w2_b"]
    other = nn.Sequential(copy.deepcopy(layer))
    with torch.no_grad():
        for _, p in named_adapter_parameters(other):
            p.zero_()
    load_adapter_state(other, state)
    assert torch.equal(other(x), full)
    merge(model)
    assert isinstance(model[0], nn.Linear)
    torch.testing.assert_close(model(x), full, rtol=1e-5, atol=1e-5)
    with pytest.raises(AdapterError, match="1 missing"):
        load_adapter_state(other, {k: v for k, v in state.items() if "w1" not in k})


def test_half_precision_base_keeps_fp32_factors():
    layer = randomized(lokr(32, 64, 16, 4, dtype=torch.bfloat16))
    assert {p.dtype for p in layer.factors().values()} == {torch.float32}
    x = torch.randn(2, 32, dtype=torch.bfloat16)
    out = layer(x)
    assert out.dtype == torch.bfloat16
    expected = layer.base_layer(x).float() + x.float() @ layer.delta_weight().T
    torch.testing.assert_close(out.float(), expected, rtol=1e-2, atol=1e-2)


def test_a_factor_that_does_not_split_a_layer_names_it_and_the_nearest_factor():
    model = nn.Sequential()
    model.add_module("ok", nn.Linear(64, 64))
    model.add_module("odd", nn.Linear(64, 35))  # 35 = 5 x 7: no divisor in 2..4
    model.add_module("small", nn.Linear(24, 64))  # 24 = 6 x 4: PEFT 6x4, LyCORIS 4x6
    model.add_module("prime", nn.Linear(64, 31))
    with pytest.raises(AdapterError) as info:
        attach(model, ["ok", "odd", "small"], 8, 8.0, 4)
    message = str(info.value)
    assert "'odd': factor 4: its output size 35 has no divisor in 2..4" in message
    assert "nearest factor that splits it: 5" in message
    assert "'ok'" not in message
    with pytest.raises(AdapterError, match=r"'small'.*PEFT splits its input size 24 as 6 x 4"):
        attach(model, ["small"], 8, 8.0, 6)
    with pytest.raises(AdapterError, match="'prime'.*no factor does"):
        attach(model, ["prime"], 8, 8.0, 4)
    with pytest.raises(AdapterError, match="factor must be -1"):
        attach(model, ["ok"], 8, 8.0, 1)
    assert isinstance(model.ok, nn.Linear)  # nothing was wrapped by a failed attach


def test_attach_freezes_the_model_and_trains_the_factors():
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32))
    attached = attach(model, ["0", "2"], 512, 512.0, 6)  # HOT-Step's dim, alpha and factor
    assert set(attached) == {"0", "2"}
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable == [
        "0.adapter.lokr_w1",
        "0.adapter.lokr_w2",
        "2.adapter.lokr_w1",
        "2.adapter.lokr_w2",
    ]
    assert [tuple(p.shape) for _, p in named_adapter_parameters(model)] == [
        (4, 4),
        (16, 8),
        (4, 4),
        (8, 16),  # 32 = 4 x 8, 64 = 4 x 16 under factor 6
    ]
