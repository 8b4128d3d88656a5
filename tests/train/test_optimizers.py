"""The optimizer factory: Muon against a float64 reference written from the formulas and against
torch.optim.Muon, its per-parameter rule, and its state through the run's state files."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from tunesmith.train.optimizers import (
    BucketedMuon,
    MuonAdamW,
    OptimizerError,
    OptimizerSettings,
    _buckets,
    build_optimizer,
    newton_schulz,
)
from tunesmith.train.schedules import lr_scheduler, warmup_cosine
from tunesmith.train.state import (
    load_optimizer_state,
    load_params,
    load_state,
    optimizer_state,
    params_state,
    save_state,
)

NS = (3.4445, -4.7750, 2.0315)  # Keller Jordan's quintic, torch.optim.Muon's defaults
LR, WD, MU = 0.02, 0.01, 0.95


def reference_step(theta, grad, buf, lr=LR, wd=WD, mu=MU, nesterov=True, steps=5):
    """One Muon step in float64 from the formulas: returns (new theta, new buffer)."""
    theta, grad, buf = theta.double(), grad.double(), buf.double()
    buf = mu * buf + (1 - mu) * grad
    u = (1 - mu) * grad + mu * buf if nesterov else buf
    rows, cols = u.shape
    x = u.T if rows > cols else u
    x = x / max(torch.linalg.matrix_norm(x).item(), 1e-7)
    a, b, c = NS
    for _ in range(steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    o = x.T if rows > cols else x
    step_size = lr * math.sqrt(max(1.0, rows / cols))  # adjust_lr "original"
    return theta * (1 - lr * wd) - step_size * o, buf


def params(shapes, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [nn.Parameter(torch.randn(*s, generator=g)) for s in shapes]


def grads(shapes, seed, scales=None):
    g = torch.Generator().manual_seed(seed)
    scales = scales or [1.0] * len(shapes)
    return [s * torch.randn(*shape, generator=g) for shape, s in zip(shapes, scales, strict=True)]


@pytest.mark.parametrize("nesterov", [True, False])
def test_muon_update_matches_a_float64_reference(nesterov):
    shapes = [(24, 40), (40, 24), (32, 32), (24, 40)]  # wide, tall, square; two share a bucket
    ours = params(shapes)
    ref = [p.detach().double().clone() for p in ours]
    bufs = [torch.zeros_like(r) for r in ref]
    opt = BucketedMuon(ours, lr=LR, weight_decay=WD, momentum=MU, nesterov=nesterov)
    worst = 0.0
    for step in range(4):
        gs = grads(shapes, seed=10 + step)
        before = [p.detach().double().clone() for p in ours]
        for p, g in zip(ours, gs, strict=True):
            p.grad = g.clone()
        opt.step()
        for i, g in enumerate(gs):
            new, bufs[i] = reference_step(ref[i], g, bufs[i], nesterov=nesterov)
            expected, got = new - ref[i], ours[i].detach().double() - before[i]
            worst = max(worst, ((got - expected).abs().max() / expected.abs().max()).item())
            ref[i] = ours[i].detach().double().clone()  # each step from the same start
    assert worst <= 1e-4, f"max relative error of the update {worst:.2e}"


def test_orthogonalised_update_is_semi_orthogonal():
    """Singular values spread 100x go to the quintic's band around 1 (Keller Jordan: about
    0.7 to 1.2); the update is the band times the adjusted lr."""
    g = torch.Generator().manual_seed(3)
    u, _ = torch.linalg.qr(torch.randn(48, 48, generator=g))
    v, _ = torch.linalg.qr(torch.randn(32, 32, generator=g))
    grad = (u[:, :32] * torch.logspace(-1, 1, 32)) @ v.T  # tall: σ from 0.1 to 10
    (param,) = params([(48, 32)])
    before = param.detach().clone()
    opt = BucketedMuon([param], lr=LR, weight_decay=WD)
    param.grad = grad
    opt.step()
    step_size = LR * math.sqrt(48 / 32)
    ortho = (before * (1 - LR * WD) - param.detach()) / step_size
    sigma = torch.linalg.svdvals(ortho)
    assert torch.linalg.svdvals(grad).max() / torch.linalg.svdvals(grad).min() > 50
    assert 0.6 <= sigma.min() and sigma.max() <= 1.2, sigma


def test_a_bucket_normalises_each_parameter_by_its_own_norm():
    """Gradients x8, x1, x1/8 in one bucket: each update equals the reference of its own
    gradient alone. One Frobenius norm over the bucket would shrink the x1/8 slab's update
    ~64-fold and fail this."""
    shapes = [(32, 32)] * 3
    ours = params(shapes)
    start = [p.detach().clone() for p in ours]
    opt = BucketedMuon(ours, lr=LR, weight_decay=WD, bucket_size=16)
    assert _buckets(ours, 16) == [[0, 1, 2]]
    gs = grads(shapes, seed=5, scales=[8.0, 1.0, 1 / 8])
    for p, g in zip(ours, gs, strict=True):
        p.grad = g
    opt.step()
    for p, s, g in zip(ours, start, gs, strict=True):
        expected, _ = reference_step(s, g, torch.zeros_like(s))
        change, got = expected - s.double(), p.detach().double() - s.double()
        assert ((got - change).abs().max() / change.abs().max()).item() <= 1e-4


def test_bucketed_muon_equals_torch_muon_one_parameter_at_a_time():
    """In bfloat16 Newton–Schulz (torch's), buckets of up to 4 against torch.optim.Muon."""
    shapes = [(16, 48)] * 5 + [(48, 16)] * 5 + [(32, 32)] * 3 + [(64, 128)] * 2
    ours, theirs = params(shapes), params(shapes)
    a = BucketedMuon(ours, lr=LR, weight_decay=WD, ns_dtype="bfloat16", bucket_size=4)
    b = torch.optim.Muon(theirs, lr=LR, weight_decay=WD)
    assert max(len(bucket) for bucket in _buckets(ours, 4)) == 4
    for step in range(3):
        for p, q, g in zip(ours, theirs, grads(shapes, seed=20 + step), strict=True):
            p.grad, q.grad = g.clone(), g.clone()
        a.step()
        b.step()
    for p, q in zip(ours, theirs, strict=True):
        # One bfloat16 ulp of an update element (|O| < 1) times the largest step size.
        torch.testing.assert_close(p, q, rtol=0, atol=LR * math.sqrt(3) * 2**-8)


def test_newton_schulz_of_a_bucket_is_that_of_each_slab():
    g = torch.Generator().manual_seed(7)
    stack = (
        torch.randn(5, 24, 40, generator=g) * torch.tensor([8, 1, 1 / 8, 3, 1e-3])[:, None, None]
    )
    together = newton_schulz(stack, NS, 5, 1e-7, torch.float32)
    for i in range(5):
        alone = newton_schulz(stack[i : i + 1], NS, 5, 1e-7, torch.float32)[0]
        torch.testing.assert_close(together[i], alone, rtol=1e-5, atol=1e-6)


def named(shapes: dict[str, tuple]) -> list[tuple[str, nn.Parameter]]:
    return [(n, nn.Parameter(torch.zeros(*s))) for n, s in shapes.items()]


def test_per_parameter_rule_and_the_start_line():
    lora = {"q.lora_A": (8, 64), "q.lora_B": (64, 8), "k.lora_A": (32, 64), "k.lora_B": (64, 32)}
    lokr = {"q.lokr_w1": (4, 4), "q.lokr_w2": (512, 512), "up.lokr_w1": (6, 4)}
    opt, split = build_optimizer(named({**lora, **lokr}), 1e-3, OptimizerSettings("muon"))
    assert [n for n, _ in split.muon] == ["k.lora_A", "k.lora_B", "q.lokr_w2"]
    line = split.summary()
    assert line.startswith("optimizer muon: 3 Muon / 4 AdamW")
    assert "short side is its rank: rank 8 < muon_min_dim 16" in line
    assert "q.lora_A [8, 64]" in line
    assert isinstance(opt, MuonAdamW) and [len(g["params"]) for g in opt.param_groups] == [4, 3]
    _, plain = build_optimizer(named(lora), 1e-3, OptimizerSettings("adamw"))
    assert plain.summary() == "optimizer adamw: 4 parameters on AdamW"


def test_muon_with_no_eligible_parameter_is_adamw_on_all_and_says_so():
    shapes = {"a.lokr_w1": (4, 4), "a.lokr_w2": (8, 8), "a.bias": (32,)}
    opt, split = build_optimizer(named(shapes), 1e-3, OptimizerSettings("muon"))
    assert type(opt) is torch.optim.AdamW and len(opt.param_groups[0]["params"]) == 3
    line = split.summary()
    assert line.startswith("optimizer muon: 0 Muon / 3 AdamW")
    assert "no 2-D parameter has a short side ≥ muon_min_dim 16 (largest: 8)" in line
    assert "every parameter trains with AdamW" in line and "[runs.train] muon_min_dim" in line
    plain, _ = build_optimizer(named(shapes), 1e-3, OptimizerSettings("adamw"))
    assert opt.state_dict()["param_groups"] == plain.state_dict()["param_groups"]
    with pytest.raises(OptimizerError, match="not one of adamw, muon"):
        OptimizerSettings("sgd")


def test_the_muon_lr_scale_survives_the_schedule():
    shapes = {"w": (32, 32), "w1": (4, 4)}
    opt, _ = build_optimizer(named(shapes), 1e-3, OptimizerSettings("muon", muon_lr_scale=20))
    schedule = warmup_cosine(40)
    scheduler = lr_scheduler(opt, schedule)
    for step in range(45):
        adamw, muon = (g["lr"] for g in opt.param_groups)
        assert adamw == pytest.approx(1e-3 * schedule(step), abs=1e-15)
        assert muon == pytest.approx(20 * adamw, rel=1e-12, abs=1e-15)
        assert opt.schedule_lr == adamw
        opt.step()  # no gradients: nothing moves, the scheduler still counts
        scheduler.step()


def test_hybrid_state_round_trips_through_the_run_state_files(tmp_path):
    """3 steps, save with tunesmith.train.state, 3 more: a fresh optimizer restored from the
    files takes the same 3 steps bit for bit."""
    shapes = {"a.lora_A": (8, 32), "a.lora_B": (32, 8), "b.w2": (32, 48), "c.w2": (32, 48)}

    def setup():
        named_params = named(shapes)
        torch.manual_seed(0)
        for _, p in named_params:
            nn.init.normal_(p)
        opt, _ = build_optimizer(named_params, 1e-2, OptimizerSettings("muon"))
        return [p for _, p in named_params], opt, lr_scheduler(opt, warmup_cosine(20))

    def step(ps, opt, scheduler, seed):
        for p, g in zip(ps, grads([p.shape for p in ps], seed), strict=True):
            p.grad = g
        opt.step()
        scheduler.step()

    ps, opt, scheduler = setup()
    for s in range(3):
        step(ps, opt, scheduler, s)
    tensors, document = optimizer_state(opt)
    saved = save_state(tmp_path, 3, {**params_state(ps), **tensors}, {"optimizer": document})
    for s in range(3, 6):
        step(ps, opt, scheduler, s)

    fresh, opt2, _ = setup()
    tensors, document = load_state(saved, {})
    load_params(fresh, tensors)
    load_optimizer_state(opt2, tensors, document["optimizer"])
    scheduler2 = lr_scheduler(opt2, warmup_cosine(20), step=3)
    at_3 = warmup_cosine(20)(3)
    assert [g["lr"] for g in opt2.param_groups] == pytest.approx([1e-2 * at_3, 0.2 * at_3])
    for s in range(3, 6):
        step(fresh, opt2, scheduler2, s)
    for p, q in zip(ps, fresh, strict=True):
        assert torch.equal(p, q)


def test_hot_step_lokr_on_ace_step_shapes_puts_w2_on_muon_and_w1_on_adamw():
    """ACE-Step 1.5's DiT at its release sizes (on the meta device: shapes only), LoKr dim 512,
    factor 6 on its 264 attention and MLP projections: every w2 (short side ≥ 256) on Muon,
    every w1 (4 x 4 to 6 x 4) on AdamW."""
    from diffusers import AceStepTransformer1DModel

    from tunesmith.adapters.torch_lokr import attach, named_adapter_parameters
    from tunesmith.families.ace_step.tiny import TINY_ACE_STEP_CONFIG
    from tunesmith.train.optimizers import split_parameters

    release = dict(
        TINY_ACE_STEP_CONFIG["transformer"],
        hidden_size=2048,
        intermediate_size=6144,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
        num_hidden_layers=24,
        in_channels=192,
        audio_acoustic_hidden_dim=64,
    )
    with torch.device("meta"):
        dit = AceStepTransformer1DModel(**release)
    targets = [
        n
        for n, m in dit.named_modules()
        if isinstance(m, nn.Linear)
        and any(k in n for k in (".self_attn.", ".cross_attn.", ".mlp."))
    ]
    attach(dit, targets, 512, 512.0, 6)
    split = split_parameters(named_adapter_parameters(dit), OptimizerSettings("muon"))
    assert len(targets) == 264
    assert {n.rsplit(".", 1)[1] for n, _ in split.muon} == {"lokr_w2"}
    assert {n.rsplit(".", 1)[1] for n, _ in split.adamw} == {"lokr_w1"}
    assert split.summary().startswith("optimizer muon: 264 Muon / 264 AdamW")
