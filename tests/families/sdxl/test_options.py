"""kohya's SDXL training options: each loss and noise option against its formula on hand-made
tensors, the schedules against diffusers' get_scheduler, the EMA against a hand computation,
accumulation against one batch, the optimizers, a resume bit for bit with every option on,
and a run at the defaults keyed and trained as before."""

from __future__ import annotations

import json
import math
from dataclasses import fields, replace
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from tunesmith.backends.placement import Placement
from tunesmith.dataset.labels import build_labels
from tunesmith.dataset.manifest import build_manifest
from tunesmith.examples.rings import make_rings
from tunesmith.families.sdxl import FAMILY, options
from tunesmith.families.sdxl.config import LATER, SdxlTrain
from tunesmith.families.sdxl.objective import SdxlLora
from tunesmith.families.sdxl.options import LossOptions
from tunesmith.families.sdxl.trainer import SdxlTrainer
from tunesmith.family import EncodeRequest
from tunesmith.store import Store
from tunesmith.train import loop
from tunesmith.train.config import ConfigError, computed, resolve_run

SIZE = 64
CPU = Placement("torch", "cpu", "float32", "test")
LINEAGE = {"tunesmith.base_model_fingerprint": "fp", "tunesmith.training_config": "{}"}


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """The tiny UNet's ops are far too small to share out: one thread is much faster here."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# -- the formulas, on hand-made tensors ---------------------------------------------------------

AC = torch.tensor([0.9, 0.5, 0.1, 0.8], dtype=torch.float64)  # ᾱ at levels 0..3
SNR = torch.tensor([9.0, 1.0, 1 / 9, 4.0])


def test_snr_is_alpha_bar_over_its_complement():
    assert torch.allclose(options.signal_to_noise(AC, torch.arange(4)), SNR)


def test_min_snr_weight_epsilon_and_v_prediction():
    # ε: min(SNR, γ) / SNR; v: min(SNR, γ) / (SNR + 1); γ = 5 (kohya's apply_snr_weight)
    assert torch.allclose(options.min_snr_weight(SNR, 5.0, False), torch.tensor([5 / 9, 1, 1, 1]))
    v = torch.tensor([5 / 10, 1 / 2, (1 / 9) / (10 / 9), 4 / 5])
    assert torch.allclose(options.min_snr_weight(SNR, 5.0, True), v)


def test_debiased_weight_epsilon_and_v_prediction_with_kohyas_cap():
    snr = torch.tensor([9.0, 1.0, 0.25, 4000.0])
    eps = torch.tensor([1 / 3, 1.0, 2.0, 1 / math.sqrt(1000)])  # 1/√SNR, SNR capped at 1000
    assert torch.allclose(options.debiased_weight(snr, False), eps)
    v = torch.tensor([1 / 10, 1 / 2, 1 / 1.25, 1 / 1001])  # 1 / (SNR + 1)
    assert torch.allclose(options.debiased_weight(snr, True), v)


def test_huber_thresholds_of_each_schedule():
    t = torch.tensor([3, 1])
    # snr: σ = √((1 − ᾱ)/ᾱ) = 0.5 at ᾱ 0.8 and 1 at 0.5: (1 − c)/(1 + σ)² + c
    snr = options.huber_threshold(t, 0.1, "snr", AC, 1000)
    assert torch.allclose(snr, torch.tensor([0.9 / 2.25 + 0.1, 0.9 / 4 + 0.1]))
    # exponential: exp(−a·t), a = −ln(c)/levels, so c^(t/levels)
    levels = torch.tensor([500, 1000])
    exponential = options.huber_threshold(levels, 0.1, "exponential", AC, 1000)
    assert torch.allclose(exponential, torch.tensor([0.1**0.5, 0.1]))
    assert torch.equal(options.huber_threshold(t, 0.1, "constant", AC, 1000), torch.full((2,), 0.1))


def test_each_loss_type_per_element():
    prediction = torch.tensor([0.3, -0.5, 2.0, 0.0]).view(2, 1, 1, 2)
    target = torch.zeros(2, 1, 1, 2)
    c = torch.tensor([0.1, 1.0])  # one per picture
    d = prediction.flatten()
    cs = torch.tensor([0.1, 0.1, 1.0, 1.0])

    def elements(kind, threshold=None):
        return options.elementwise_loss(prediction, target, kind, threshold).flatten()

    assert torch.allclose(elements("l2"), d**2)
    assert torch.allclose(elements("l1"), d.abs())
    root = torch.sqrt(d**2 + cs**2) - cs
    assert torch.allclose(elements("huber", c), 2 * cs * root)  # 2c(√(d² + c²) − c)
    assert torch.allclose(elements("smooth_l1", c), 2 * root)  # 2(√(d² + c²) − c)
    assert elements("huber", c)[0].item() == pytest.approx(0.2 * (math.sqrt(0.1) - 0.1))


def test_noise_offset_plain_and_adaptive():
    noise = torch.zeros(1, 2, 2, 2)
    draw = torch.tensor([1.0, -2.0]).view(1, 2, 1, 1)
    plain = options.offset_noise(noise, None, 0.1, 0.0, draw)
    assert torch.allclose(plain[0, :, 0, 0], torch.tensor([0.1, -0.2]))
    # x0's channel means: 2 and −3; o = max(0, 0.1 + a·|mean|)
    x0 = torch.stack([torch.full((2, 2), 2.0), torch.full((2, 2), -3.0)])[None]
    adaptive = options.offset_noise(noise, x0, 0.1, 0.05, draw)
    assert torch.allclose(adaptive[0, :, 1, 1], torch.tensor([0.2 * 1.0, 0.25 * -2.0]))
    clamped = options.offset_noise(noise, x0, 0.1, -1.0, draw)  # 0.1 − |mean| < 0: no offset
    assert torch.equal(clamped, noise)


def test_pyramid_noise_by_hand():
    noise = torch.randn(2, 4, 8, 8, generator=torch.Generator().manual_seed(5))
    # one iteration: r^0 = 1, so a full-size N(0, 1) is added at discount^0 = 1
    got = options.pyramid_noise(noise, 1, 0.3, torch.Generator().manual_seed(9))
    g = torch.Generator().manual_seed(9)
    torch.rand((), generator=g)  # r, whose power 0 is 1
    summed = noise + torch.randn(2, 4, 8, 8, generator=g)
    assert torch.allclose(got, summed / summed.std())
    # two: the second level at ⌊8 / r⌋², bilinear up to 8 × 8, times the discount
    got = options.pyramid_noise(noise, 2, 0.3, torch.Generator().manual_seed(9))
    g = torch.Generator().manual_seed(9)
    torch.rand((), generator=g)
    summed = noise + torch.randn(2, 4, 8, 8, generator=g)
    r = float(torch.rand((), generator=g)) * 2 + 2
    side = int(8 / r)
    coarse = torch.randn(2, 4, side, side, generator=g)
    summed = summed + F.interpolate(coarse, size=(8, 8), mode="bilinear") * 0.3
    assert 2 <= side <= 4 and torch.allclose(got, summed / summed.std())
    assert noise.std() != got.std() and got.std().item() == pytest.approx(1.0)


def test_pyramid_noise_stops_at_a_single_row():
    g = torch.Generator().manual_seed(0)
    noise = torch.randn(1, 1, 4, 4, generator=g)
    ten = options.pyramid_noise(noise, 10, 0.3, torch.Generator().manual_seed(1))
    # 4 / r^i reaches 1 by i = 2 (r ≥ 2): levels 0, 1, 2 and no more draws after them
    g = torch.Generator().manual_seed(1)
    summed = noise.clone()
    for i in range(10):
        r = float(torch.rand((), generator=g)) * 2 + 2
        side = max(1, int(4 / r**i))
        summed += F.interpolate(
            torch.randn(1, 1, side, side, generator=g), size=(4, 4), mode="bilinear"
        ) * (0.3**i)
        if side == 1:
            break
    assert i <= 2 and torch.allclose(ten, summed / summed.std())


# -- the options in the SDXL objective -----------------------------------------------------------


@pytest.fixture(scope="module")
def encoded(tiny_sdxl, tmp_path_factory):
    """Eight rings encoded by the `encoded` stage's engine: seven to train on, one held out."""
    root = tmp_path_factory.mktemp("rings")
    folder, store = root / "rings", Store(root / "store")
    make_rings(folder, count=8)
    manifest, _ = build_manifest(folder, root / "hashes.json")
    labels = build_labels(folder, manifest, store).frame
    request = EncodeRequest(
        folder, labels, [run_config(tiny_sdxl)], [tiny_sdxl], root / "out", store, CPU, root / "fp"
    )
    return FAMILY.encode(request).frame.sort_values("path")


def run_config(tiny_sdxl, **train):
    raw = {
        "name": "rings",
        "family": "sdxl",
        "base_model": str(tiny_sdxl),
        "train": {"size": SIZE, "lr": 1e-3, "steps": 6, "eval_every": 3, **train},
        "demos": [{"prompt": "a disc", "seed": 5, "steps": 1}],
    }
    return resolve_run(raw, Path("tunesmith.toml"), 0)


def trainer(tiny_sdxl, encoded, run_dir, **train) -> SdxlTrainer:
    return SdxlTrainer(run_config(tiny_sdxl, **train), tiny_sdxl, encoded, run_dir, CPU, LINEAGE)


def fit(tiny_sdxl, encoded, run_dir, **train):
    return loop.train(trainer(tiny_sdxl, encoded, run_dir, **train), run_dir, log=lambda _: None)


def step_events(run_dir: Path) -> list[dict]:
    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    return [e for e in events if e["event"] == "step"]


def with_b(lora: SdxlLora, seed: int = 1) -> SdxlLora:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for b in lora.b_parameters():
            b.copy_(torch.randn(b.shape, generator=g) * 0.05)
    return lora


@pytest.mark.parametrize("prediction", ["epsilon", "v_prediction"])
def test_the_training_loss_is_kohyas_weighted_mean(tiny_sdxl, encoded, tmp_path, prediction):
    """loss = mean over pictures of w_b · mean ℓ, with kohya's SNR (√ᾱ/√(1 − ᾱ))² in float32;
    the validation loss stays the plain MSE."""
    settings = dict(min_snr_gamma=5.0, debiased_estimation=True, loss_type="huber")
    plain = trainer(tiny_sdxl, encoded, tmp_path / "plain")
    weighted = trainer(tiny_sdxl, encoded, tmp_path / "weighted", **settings)
    for t in (plain, weighted):
        with_b(t.lora).prediction_type = prediction
    pictures = weighted.train[:3]
    t, eps1, noise = weighted.lora.draw(pictures, torch.Generator().manual_seed(0))
    t = torch.tensor([2, 300, 900])  # level 2's SNR is above γ, 900's below
    with torch.no_grad():
        got = weighted.lora.loss(pictures, t, eps1, noise).item()
        prediction_, target = weighted.lora.prediction_and_target(pictures, t, eps1, noise)
    ac = weighted.pipe.scheduler.alphas_cumprod[t]
    snr = (torch.sqrt(ac) / torch.sqrt(1.0 - ac)) ** 2
    v = prediction == "v_prediction"
    min_snr = torch.minimum(snr, torch.tensor(5.0)) / (snr + 1 if v else snr)
    debiased = 1 / (torch.clamp(snr, max=1000) + 1) if v else 1 / torch.sqrt(snr)
    sigma = ((1 - ac) / ac) ** 0.5
    c = ((1 - 0.1) / (1 + sigma) ** 2 + 0.1).view(3, 1, 1, 1)
    huber = 2 * c * (torch.sqrt((prediction_ - target) ** 2 + c**2) - c)
    expected = (huber.mean(dim=(1, 2, 3)) * min_snr * debiased).mean().item()
    assert got == pytest.approx(expected, rel=1e-5)
    assert got != pytest.approx(plain.lora.loss(pictures, t, eps1, noise).item(), rel=1e-3)
    assert weighted.validation_loss() == plain.validation_loss()  # the same adapter, plain MSE


def test_the_noise_options_draw_after_the_plain_draws(tiny_sdxl, encoded, tmp_path):
    plain = trainer(tiny_sdxl, encoded, tmp_path / "a").lora
    offset = trainer(tiny_sdxl, encoded, tmp_path / "b", noise_offset=0.1).lora
    pictures = encoded_pictures(encoded)[:2]
    t0, e0, n0 = plain.draw(pictures, torch.Generator().manual_seed(3))
    g = torch.Generator().manual_seed(3)
    t1, e1, n1 = offset.draw(pictures, g)
    g2 = torch.Generator().manual_seed(3)
    plain.draw(pictures, g2)  # the same t, ε₁, ε; then the offset's n [B, C, 1, 1]
    n = torch.randn((2, 4, 1, 1), generator=g2)
    assert torch.equal(t0, t1) and torch.equal(e0, e1)
    assert torch.allclose(n1, n0 + 0.1 * n)
    # at the defaults: randint, then two randn of the latents' shape, nothing more
    g = torch.Generator().manual_seed(3)
    shape = (2, *pictures[0].mean.shape)
    by_hand = torch.randint(0, 1000, (2,), generator=g), torch.randn(shape, generator=g)
    assert torch.equal(t0, by_hand[0]) and torch.equal(e0, by_hand[1])
    assert torch.equal(n0, torch.randn(shape, generator=g))


def encoded_pictures(encoded):
    from tunesmith.families.sdxl.objective import pictures_from_frame

    return pictures_from_frame(encoded)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_accumulated_micro_batches_give_the_batchs_gradient(tiny_sdxl, encoded, tmp_path, dtype):
    """Two micro-batches of one picture at share ½ give the gradient of one batch of two; in
    half precision too, where each goes into backward as a sum and is divided back once."""
    placement = Placement("torch", "cpu", dtype, "test")
    run = run_config(tiny_sdxl, min_snr_gamma=5.0)
    lora = with_b(SdxlTrainer(run, tiny_sdxl, encoded, tmp_path, placement, LINEAGE).lora)
    assert lora.half == (dtype == "bfloat16")
    pictures = encoded_pictures(encoded)[:2]
    t, eps1, noise = lora.draw(pictures, torch.Generator().manual_seed(4))
    lora.backward(pictures, t, eps1, noise)
    whole = torch.cat([p.grad.flatten() for p in lora.parameters()]).double()
    for p in lora.parameters():
        p.grad = None
    count = eps1[:1].numel()
    for i in range(2):
        one = slice(i, i + 1)
        lora.accumulate(pictures[one], t[one], eps1[one], noise[one], 0.5, count)
    lora.finish(count)
    parts = torch.cat([p.grad.flatten() for p in lora.parameters()]).double()
    difference = ((parts - whole).norm() / whole.norm()).item()
    assert difference < (1e-5 if dtype == "float32" else 2e-2), difference


# -- schedules, EMA, optimizers, resume -----------------------------------------------------------


@pytest.mark.parametrize(
    "schedule",
    [
        {"lr_scheduler": "constant_with_warmup", "lr_warmup_steps": 2},
        {"lr_scheduler": "cosine", "lr_warmup_steps": 1},
        {"lr_scheduler": "cosine_with_restarts", "lr_scheduler_num_cycles": 2},
        {"lr_scheduler": "polynomial", "lr_warmup_steps": 1, "lr_scheduler_power": 2.0},
    ],
)
def test_each_step_reports_the_lr_diffusers_get_scheduler_gives(
    tiny_sdxl, encoded, tmp_path, schedule
):
    from diffusers.optimization import get_scheduler

    fit(tiny_sdxl, encoded, tmp_path, steps=5, eval_every=5, **schedule)
    reported = [e["lr"] for e in step_events(tmp_path)]
    probe = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1e-3)
    theirs = get_scheduler(
        schedule["lr_scheduler"],
        probe,
        num_warmup_steps=schedule.get("lr_warmup_steps", 0),
        num_training_steps=5,
        num_cycles=schedule.get("lr_scheduler_num_cycles", 1),
        power=schedule.get("lr_scheduler_power", 1.0),
    )
    expected = []
    for _ in range(5):
        expected.append(probe.param_groups[0]["lr"])
        probe.step()
        theirs.step()
    assert reported == expected
    if schedule["lr_scheduler"] == "cosine":  # by hand: 0 at step 0, the peak after warmup
        assert reported[:2] == [0.0, 1e-3]
        assert reported[3] == pytest.approx(1e-3 * 0.5 * (1 + math.cos(math.pi * 2 / 4)))


def test_the_written_adapter_is_the_ema_of_the_steps(tiny_sdxl, encoded, tmp_path):
    """diffusers' EMAModel, as SimpleTuner: update k decays by min(ema_decay, k/(9 + k)) from
    the second, the first copies; ema_decay 0.2 caps the third (3/12 > 0.2)."""
    run = trainer(tiny_sdxl, encoded, tmp_path, ema_decay=0.2, lr=1e-2)
    start = [p.detach().clone() for p in run.params]
    steps = []
    for _ in range(3):
        run.step()
        steps.append([p.detach().clone() for p in run.params])
    ema = [s.double() for s in start]
    for k, values in enumerate(steps, start=1):
        decay = 0.0 if k == 1 else min(0.2, k / (9 + k))
        ema = [decay * e + (1 - decay) * v.double() for e, v in zip(ema, values, strict=True)]
    assert min(0.2, 2 / 11) == 2 / 11 and min(0.2, 3 / 12) == 0.2  # both branches taken
    path = run.write_adapter(tmp_path / "rings.safetensors", 3, 0, None)
    written = load_file(path)
    names = list(run.lora.named_factors())
    for i, name in enumerate(names):
        a, b = ema[2 * i], ema[2 * i + 1]
        got = written[f"unet.{name}.lora_A.weight"], written[f"unet.{name}.lora_B.weight"]
        for value, hand in zip(got, (a, b), strict=True):  # float32 against float64
            scale = hand.abs().max().item()
            torch.testing.assert_close(value.double(), hand, rtol=1e-5, atol=1e-6 * scale)
    last = steps[-1][1].double()
    assert (ema[1] - last).norm() > 1e-3 * last.norm()  # the EMA is not the last step
    # the adapter trains on from its own values; validation measures the EMA
    assert all(torch.equal(p, s) for p, s in zip(run.params, steps[-1], strict=True))
    measured = run.validation_loss()
    with torch.no_grad():
        for p, e in zip(run.params, ema, strict=True):
            p.copy_(e.float())
    assert measured == pytest.approx(run.lora.validation_loss(run.validation), rel=1e-6)


@pytest.mark.slow
def test_a_run_with_every_option_resumes_bit_for_bit(tiny_sdxl, encoded, tmp_path):
    settings = dict(
        steps=6,
        checkpoint_every=3,
        gradient_accumulation_steps=2,
        ema_decay=0.9,
        lr_scheduler="cosine",
        lr_warmup_steps=2,
        min_snr_gamma=5.0,
        noise_offset=0.05,
        adaptive_noise_scale=0.01,
        multires_noise_iterations=3,
        loss_type="smooth_l1",
    )
    straight = fit(tiny_sdxl, encoded, tmp_path / "straight", **settings)
    fit(tiny_sdxl, encoded, tmp_path / "resumed", **{**settings, "steps": 3})
    resumed = fit(tiny_sdxl, encoded, tmp_path / "resumed", **settings)
    assert resumed.resumed_from == 3 and resumed.steps_trained == 3
    assert resumed.history == straight.history
    keep = ("loss", "t", "lr")
    ours = [{k: e[k] for k in keep} for e in step_events(tmp_path / "resumed")]
    theirs = [{k: e[k] for k in keep} for e in step_events(tmp_path / "straight")]
    assert ours == theirs and len({e["lr"] for e in theirs}) > 2
    written = sorted(p.name for p in (tmp_path / "straight").glob("*.safetensors"))
    assert written == sorted(p.name for p in (tmp_path / "resumed").glob("*.safetensors"))
    for name in written:
        a, b = load_file(tmp_path / "straight" / name), load_file(tmp_path / "resumed" / name)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name
    saved = load_file(tmp_path / "straight" / "state" / "step=6" / "state.safetensors")
    assert any(k.startswith("ema.") for k in saved)


@pytest.mark.parametrize("name", ["Prodigy", "Adafactor", "AdamW8bit"])
def test_each_optimizer_trains_and_resumes_exactly(tiny_sdxl, encoded, tmp_path, name):
    from importlib.util import find_spec

    lr = 1.0 if name == "Prodigy" else 1e-3
    if name == "AdamW8bit" and find_spec("bitsandbytes") is None:
        with pytest.raises(ConfigError, match=r'"AdamW8bit" needs the bitsandbytes package'):
            trainer(tiny_sdxl, encoded, tmp_path, optimizer=name)
        return
    first = trainer(tiny_sdxl, encoded, tmp_path / "a", optimizer=name, lr=lr)
    before = [p.detach().clone() for p in first.params]
    first.step()
    assert any(not torch.equal(p, b) for p, b in zip(first.params, before, strict=True))
    tensors, document = first.state()
    tensors = {k: v.clone() for k, v in tensors.items()}  # as the state's files keep them
    document = json.loads(json.dumps(document))
    second = trainer(tiny_sdxl, encoded, tmp_path / "b", optimizer=name, lr=lr)
    second.load_state(tensors, document)
    a, b = first.step(), second.step()
    assert (a.loss, a.fields) == (b.loss, b.fields)
    assert all(torch.equal(p, q) for p, q in zip(first.params, second.params, strict=True))


def test_adamw8bits_quantised_state_goes_through_the_state_files(tmp_path):
    """A factor of 4096 elements or more gets bitsandbytes' 8-bit state (uint8 moments, their
    absmax and maps), which its state dict nests: flat in the state files, and read back."""
    pytest.importorskip("bitsandbytes")
    from tunesmith.train.state import (
        load_optimizer_state,
        load_state,
        optimizer_state,
        save_state,
    )

    g = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(64, 128, generator=g)) for _ in range(2)]
    copies = [torch.nn.Parameter(p.detach().clone()) for p in params]
    first = options.build_optimizer("AdamW8bit", params, 1e-3)
    second = options.build_optimizer("AdamW8bit", copies, 1e-3)
    grads = [[torch.randn(64, 128, generator=g) for _ in params] for _ in range(2)]
    for p, grad in zip(params, grads[0], strict=True):
        p.grad = grad.clone()
    first.step()
    with torch.no_grad():
        for p, q in zip(params, copies, strict=True):
            q.copy_(p)
    tensors, document = optimizer_state(first)
    assert tensors["adam.0.state1"].dtype == torch.uint8 and "adam.0.absmax1" in tensors
    saved = save_state(tmp_path, 1, tensors, {"optimizer": document, "identity": {}})
    tensors, document = load_state(saved, {})
    load_optimizer_state(second, tensors, document["optimizer"])
    for model, grad in ((params, grads[1]), (copies, grads[1])):
        for p, gr in zip(model, grad, strict=True):
            p.grad = gr.clone()
    first.step()
    second.step()
    assert all(torch.equal(p, q) for p, q in zip(params, copies, strict=True))


def test_prodigy_at_a_low_lr_says_so(tiny_sdxl, encoded, tmp_path):
    note = trainer(tiny_sdxl, encoded, tmp_path, optimizer="Prodigy").start_note
    assert "meant to be about 1.0" in note


# -- the defaults ---------------------------------------------------------------------------------


def test_the_options_at_their_defaults_leave_a_runs_key_and_training_as_before(tiny_sdxl):
    declared = {f.name: f.default for f in fields(SdxlTrain)}
    assert all(declared[k] == v for k, v in LATER["train"].items())
    loss_defaults = {f.name: f.default for f in fields(LossOptions)}
    assert all(declared[k] == v for k, v in loss_defaults.items())
    run = run_config(tiny_sdxl)
    assert not set(LATER["train"]) & set(computed(run)["train"])
    assert LossOptions.of(run.train).plain_loss and LossOptions.of(run.train).plain_noise
    changed = run_config(tiny_sdxl, min_snr_gamma=5, ema_decay=0.999, optimizer="Prodigy")
    kept = computed(changed)["train"]
    assert (kept["min_snr_gamma"], kept["ema_decay"], kept["optimizer"]) == (5, 0.999, "Prodigy")
    assert computed(replace(changed, train=run.train)) == computed(run)


def test_a_default_step_is_the_plain_step(tiny_sdxl, encoded, tmp_path):
    """At the defaults the trainer's step is `train_step`'s: one micro-batch, AdamW, no
    schedule, no EMA, the MSE; the same adapter to the bit."""
    from tunesmith.families.sdxl.trainer import train_step

    ours = trainer(tiny_sdxl, encoded, tmp_path / "a")
    theirs = trainer(tiny_sdxl, encoded, tmp_path / "b")
    assert ours.scheduler is None and ours.ema is None and ours.accumulation == 1
    for _ in range(2):
        report = ours.step()
        pictures = [theirs.train[i] for i in theirs.order.next()]
        loss, _ = train_step(theirs.lora, theirs.optimizer, pictures, theirs.generator)
        assert report.loss == loss and report.fields == {"lr": 1e-3}
    assert all(torch.equal(p, q) for p, q in zip(ours.params, theirs.params, strict=True))
    tensors, document = ours.state()  # the state as before: no counter, no EMA
    assert "updates" not in document and "ema_updates" not in document
    assert not any(k.startswith("ema.") for k in tensors)


@pytest.mark.parametrize(
    ("train", "message"),
    [
        (
            {"adaptive_noise_scale": 0.01},
            "train.adaptive_noise_scale 0.01 needs train.noise_offset",
        ),
        (
            {"lr_warmup_steps": 10},
            'train.lr_warmup_steps 10 has no effect with train.lr_scheduler "constant"',
        ),
        (
            {"lr_scheduler": "polynomial", "lr_warmup_steps": 6},
            "train.lr_warmup_steps 6 leaves the polynomial schedule no steps to decay over",
        ),
        ({"loss_type": "l3"}, "train.loss_type"),
        ({"ema_decay": 1.0}, "train.ema_decay"),
        ({"optimizer": "adamw"}, "train.optimizer"),
    ],
)
def test_settings_that_cannot_train_are_refused_in_one_line(tiny_sdxl, train, message):
    with pytest.raises(ConfigError) as caught:
        run_config(tiny_sdxl, **train)
    assert len(caught.value.problems) == 1 and message in caught.value.problems[0]


def test_the_kohya_file_records_the_options_a_run_sets_under_sd_scripts_names():
    from tunesmith.families.sdxl.files import training_metadata

    assert training_metadata(SdxlTrain()) == ()  # the defaults: the file written before
    train = replace(
        SdxlTrain(),
        min_snr_gamma=5.0,
        noise_offset=0.0357,
        loss_type="huber",
        huber_c=0.2,
        lr_scheduler="cosine",
        lr_warmup_steps=10,
        gradient_accumulation_steps=2,
        max_token_length=225,
        keep_tokens=1,
        debiased_estimation=True,
        buckets=True,
    )
    assert dict(training_metadata(train)) == {
        "ss_min_snr_gamma": "5.0",
        "ss_noise_offset": "0.0357",
        "ss_loss_type": "huber",
        "ss_huber_c": "0.2",
        "ss_lr_scheduler": "cosine",
        "ss_lr_warmup_steps": "10",
        "ss_gradient_accumulation_steps": "2",
        "ss_max_token_length": "225",
        "ss_keep_tokens": "1",
        "ss_debiased_estimation": "True",
        "ss_enable_bucket": "True",
        "ss_min_bucket_reso": "256",  # the limits the buckets were made with, as kohya's
        "ss_max_bucket_reso": "2048",
    }
