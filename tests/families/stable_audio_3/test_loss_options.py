"""underfit's loss options on both Stable Audio 3 trainers, against their formulas.

The formulas are underfit's (`underfit/training/loss.py`, `compute_normalized_mse` and
`compute_masked_loss`; `loop.py` for the effective length), written out here element by
element on a hand-made batch: two samples of 3 channels × 5 frames, the second with its last
two frames padded. With e = (pred − target)², valid frames V and padded frames P:

    none            e
    timestep        e / (mean_c (target − mean_c target)² + 1e-6)       per frame, at V
    sample          e / (var over V × channels of the sample + 1e-6)    at V
    sample_channel  e / (var over V of the channel + 1e-6)              at V
    loss per sample (Σ_V e' + w·Σ_P e') / (|V|·C + w·|P|·C + 1e-8); with mask_padding_attention
                    Σ_V e' / (|V|·C + 1e-8), the denominators float32 as underfit's are
    shift length    ceil(int(seconds_total · 44100) / 4096) per sample

Then the same options through the real trainers on the tiny model: the torch Objective's loss
against the formula on its own prediction, MLX against torch (losses and gradients) for each
option, and mask_padding_attention's zeroed values, with and without gradient checkpointing.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
import torch
from mlx.utils import tree_flatten

from tunesmith.adapters import mlx_lora, torch_lora
from tunesmith.backends.placement import Placement
from tunesmith.families.stable_audio_3 import timesteps
from tunesmith.families.stable_audio_3.config import Sa3Adapter, Sa3Train
from tunesmith.families.stable_audio_3.data import Batch, Item
from tunesmith.families.stable_audio_3.draws import Draws
from tunesmith.families.stable_audio_3.mlx import trainer as mlx_train
from tunesmith.families.stable_audio_3.trainer import (
    LossOptions,
    Objective,
    masked_loss,
    normalized_mse,
)
from tunesmith.train.config import RunConfig

MODES = ("none", "timestep", "sample", "sample_channel")
CPU = Placement("torch", "cpu", "float32", "test")
MLX_CPU = Placement("mlx", "cpu", "float32", "test")


# --- the formulas, on a hand-made batch ------------------------------------------------------


def hand_batch():
    """(prediction, target, valid): [2, 3, 5] float64, the second sample's frames 3-4 padded."""
    g = torch.Generator().manual_seed(0)
    prediction = torch.randn(2, 3, 5, generator=g, dtype=torch.float64)
    target = torch.randn(2, 3, 5, generator=g, dtype=torch.float64) * torch.tensor(
        [1.0, 3.0, 0.5], dtype=torch.float64
    ).view(1, 3, 1)
    valid = torch.tensor([[True] * 5, [True, True, True, False, False]])
    return prediction, target, valid


def expected_losses(prediction, target, valid, mode, weight=0.0, padding_attention=False):
    """The formula, element by element in Python floats."""
    p, y, v = prediction.tolist(), target.tolist(), valid.tolist()
    channels, frames = len(p[0]), len(p[0][0])
    losses = []
    for b in range(len(p)):
        frames_v = [f for f in range(frames) if v[b][f]]

        def variance(values):
            mean = sum(values) / len(values)
            return sum((x - mean) ** 2 for x in values) / len(values)

        signal = padding = 0.0
        for c in range(channels):
            for f in range(frames):
                e = (p[b][c][f] - y[b][c][f]) ** 2
                if not v[b][f]:
                    padding += e  # padded frames keep the plain squared error
                    continue
                if mode == "timestep":
                    e /= variance([y[b][k][f] for k in range(channels)]) + 1e-6
                elif mode == "sample":
                    e /= variance([y[b][k][g] for k in range(channels) for g in frames_v]) + 1e-6
                elif mode == "sample_channel":
                    e /= variance([y[b][c][g] for g in frames_v]) + 1e-6
                signal += e
        # underfit's counts are integer tensors; + 1e-8 makes them float32 (torch's default)
        n_valid = np.float32(len(frames_v) * channels)
        n_padded = np.float32((frames - len(frames_v)) * channels)
        if padding_attention:
            losses.append(signal / float(n_valid + np.float32(1e-8)))
        else:
            count = n_valid + np.float32(weight) * n_padded + np.float32(1e-8)
            losses.append((signal + weight * padding) / float(count))
    return losses


def losses(prediction, target, valid, mode, weight=0.0, padding_attention=False):
    errors = normalized_mse(prediction, target, valid, mode)
    return masked_loss(errors, valid, padding_attention, weight)


@pytest.mark.parametrize("mode", MODES)
def test_each_normalisation_is_its_formula(mode):
    prediction, target, valid = hand_batch()
    measured = losses(prediction, target, valid, mode).tolist()
    assert measured == pytest.approx(expected_losses(prediction, target, valid, mode), rel=1e-12)


def test_the_normalisations_differ_from_each_other_and_scale_by_the_target():
    prediction, target, valid = hand_batch()
    values = {mode: losses(prediction, target, valid, mode) for mode in MODES}
    for a in MODES:
        for b in MODES:
            assert a == b or not torch.allclose(values[a], values[b])
    # Normalised by the target's own spread: scaling prediction and target together by k
    # scales the plain loss by k² and leaves the sample-normalised one as it was.
    k = 10.0
    scaled = losses(prediction * k, target * k, valid, "sample")
    torch.testing.assert_close(scaled, values["sample"], rtol=1e-5, atol=0)
    plain = losses(prediction * k, target * k, valid, "none")
    torch.testing.assert_close(plain, values["none"] * k**2, rtol=1e-12, atol=0)


def test_a_sample_without_valid_frames_divides_by_one():
    prediction, target, _ = hand_batch()
    valid = torch.tensor([[True] * 5, [False] * 5])
    for mode in ("sample", "sample_channel"):
        errors = normalized_mse(prediction, target, valid, mode)
        torch.testing.assert_close(errors[1], (prediction[1] - target[1]) ** 2, rtol=0, atol=0)


def test_the_variance_carries_no_gradient():
    prediction, target, valid = hand_batch()
    target = target.clone().requires_grad_(True)
    losses(prediction, target, valid, "sample").sum().backward()
    # ∂/∂target of e/var with var held fixed: −2 (pred − target) / var / count at valid frames
    y = target.detach()
    keep = valid[:, None, :]
    masked = torch.where(keep, y, torch.nan)
    var = torch.nanmean((masked - torch.nanmean(masked, (1, 2), True)) ** 2, (1, 2), True) + 1e-6
    count = (valid.sum(1) * 3).to(torch.float64)[:, None, None]
    expected = torch.where(keep, -2 * (prediction - y) / var / count, 0.0)
    torch.testing.assert_close(target.grad, expected, rtol=1e-10, atol=1e-12)


def test_mask_loss_weight_zero_is_the_loss_as_it_was():
    """Bit for bit the expression the trainer had before the options: mean over valid."""
    prediction, target, valid = hand_batch()
    prediction, target = prediction.float(), target.float()
    old_valid = valid.float()[:, None, :]
    old = ((prediction - target) ** 2 * old_valid).sum((1, 2)) / (old_valid.sum((1, 2)) * 3)
    assert torch.equal(losses(prediction, target, valid, "none"), old)


@pytest.mark.parametrize("weight", [0.25, 1.0])
def test_mask_loss_weight_counts_the_padded_frames(weight):
    prediction, target, valid = hand_batch()
    for mode in MODES:
        measured = losses(prediction, target, valid, mode, weight).tolist()
        expected = expected_losses(prediction, target, valid, mode, weight)
        assert measured == pytest.approx(expected, rel=1e-12)
    # the fully valid sample is the same whatever the weight
    unweighted = losses(prediction, target, valid, "none")
    weighted = losses(prediction, target, valid, "none", weight)
    assert weighted[0] == unweighted[0] and weighted[1] != unweighted[1]


def test_mask_padding_attention_takes_the_signal_only_whatever_the_weight():
    prediction, target, valid = hand_batch()
    measured = losses(prediction, target, valid, "timestep", 1.0, padding_attention=True)
    expected = expected_losses(prediction, target, valid, "timestep", 1.0, True)
    assert measured.tolist() == pytest.approx(expected, rel=1e-12)
    assert torch.equal(measured, losses(prediction, target, valid, "timestep"))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("weight", [0.0, 0.5])
def test_the_mlx_functions_equal_the_torch_ones(mode, weight):
    prediction, target, valid = (x.float() if x.is_floating_point() else x for x in hand_batch())
    reference = losses(prediction, target, valid, mode, weight).numpy()
    arrays = [mx.array(x.numpy()) for x in (prediction, target, valid)]
    errors = mlx_train.normalized_mse(*arrays, mode)
    measured = np.array(mlx_train.masked_loss(errors, arrays[2], False, weight))
    np.testing.assert_allclose(measured, reference, rtol=2e-6)


# --- the effective length ------------------------------------------------------------------


def test_the_effective_length_is_underfits():
    for seconds in (1.3, 9.288, 10.0, 29.72, 47.5, 120.0, 600.0, 4096 * 7 / 44100):
        assert timesteps.effective_length(seconds) == math.ceil(int(seconds * 44100) / 4096)
    assert timesteps.effective_length(4096 * 7 / 44100) == 7  # a whole number of frames
    assert timesteps.effective_length(10.0) == 108  # 441000 samples: 107.67 frames


def test_a_shift_per_sample_is_the_one_length_shift_of_each():
    shift = timesteps.FullShift()
    t = torch.tensor([0.0, 0.2, 0.5, 0.9, 1.0], dtype=torch.float64)
    lengths = [100, 256, 700, 4096, 9000]
    together = shift(t, lengths)
    one_by_one = torch.cat([shift(t[i : i + 1], n) for i, n in enumerate(lengths)])
    assert torch.equal(together, one_by_one)


def _items():
    seconds = (2.5, 9.0, 31.0, 47.5)  # 27, 97, 334, 512 frames; the shift's floor is 256
    g = torch.Generator().manual_seed(1)
    return [
        Item(
            path=f"song{i}.wav",
            latents=torch.randn(4, 40, generator=g),
            padding_mask=torch.ones(40, dtype=torch.bool),
            seconds_total=s,
            pieces=(f"Title: {i}",),
        )
        for i, s in enumerate(seconds)
    ]


def _run(**train) -> RunConfig:
    return RunConfig(
        name="shift",
        family="stable-audio-3",
        base_model="unused",
        adapter=Sa3Adapter(type="lora", rank=2),
        train=Sa3Train(batch_size=2, latent_crop_length=300, seed=5, **train),
    )


def test_draws_shift_each_item_by_its_full_duration():
    data = _items()
    on = Draws(data, _run(use_effective_length_for_schedule=True), timesteps.FullShift())
    off = Draws(data, _run(), timesteps.FullShift())
    raw = torch.Generator().manual_seed(5)  # the training generator draws t first
    for _ in range(3):
        a, b = on.next(), off.next()
        t = timesteps.sample("uniform", 2, raw)
        torch.randn(a.noise.shape, generator=raw)  # then the noise and the dropout coins
        torch.rand(2, generator=raw, dtype=torch.float64)
        seconds = [next(i.seconds_total for i in data if i.path == p) for p in a.batch.paths]
        lengths = [math.ceil(int(s * 44100) / 4096) for s in seconds]
        assert torch.equal(a.t, timesteps.FullShift()(t, lengths))
        assert torch.equal(b.t, timesteps.FullShift()(t, 300))
        assert not torch.equal(a.t, b.t)
        assert torch.equal(a.noise, b.noise) and torch.equal(a.drop, b.drop)
        assert a.batch.paths == b.batch.paths


# --- through the trainers --------------------------------------------------------------------

FRAMES = 24
PROMPTS = ["Genre: house, BPM: 120", "Title: a much longer prompt about a slow ambient piece"]
OPTIONS = [
    LossOptions(),
    LossOptions("timestep"),
    LossOptions("sample"),
    LossOptions("sample_channel"),
    LossOptions("none", 0.5),
    LossOptions("sample", 1.0),
    LossOptions("none", 0.5, True),
    LossOptions("sample_channel", 0.0, True),
]


def run_config(folder: Path, **train) -> RunConfig:
    return RunConfig(
        name="options",
        family="stable-audio-3",
        base_model=str(folder),
        adapter=Sa3Adapter(type="dora-rows", rank=4, alpha=8.0),
        train=Sa3Train(lr=1e-3, seed=3, mask_padding_attention=True, **train),
    )


def _awake(torch_side, mlx_side=None) -> None:
    """B off zero and the magnitudes off ‖W‖, the same on both sides."""
    generator = torch.Generator().manual_seed(7)
    state = torch_lora.adapter_state(torch_side.modules)
    for key, value in state.items():
        if key.endswith("lora_B"):
            state[key] = 0.05 * torch.randn(value.shape, generator=generator)
        elif key.endswith("magnitude"):
            state[key] = value * (1 + 0.1 * torch.rand(value.shape, generator=generator))
    torch_lora.load_adapter_state(torch_side.modules, state)
    if mlx_side is not None:
        mlx_lora.load_adapter_state(mlx_side.modules, state)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    from tunesmith.families.stable_audio_3.tiny import make_tiny_stable_audio_3

    return make_tiny_stable_audio_3(tmp_path_factory.mktemp("models") / "tiny-sa3", seed=0)


@pytest.fixture(scope="module")
def sides(folder):
    """A torch and an MLX objective holding the same adapter, built with
    mask_padding_attention (its hooks in place); each test sets `loss_options` itself."""
    run = run_config(folder)
    torch_side = Objective(folder, run, CPU)
    mlx_side = mlx_train.MLXObjective(folder, run, MLX_CPU)
    _awake(torch_side, mlx_side)
    return torch_side, mlx_side


def draws(seed: int, channels: int = 16):
    generator = torch.Generator().manual_seed(seed)
    mask = torch.ones(2, FRAMES, dtype=torch.bool)
    mask[1, 15:] = False
    batch = Batch(
        latents=torch.randn(2, channels, FRAMES, generator=generator),
        mask=mask,
        seconds_total=torch.tensor([10.0, 47.5]),
        pieces=[(), ()],
        paths=["a", "b"],
    )
    t = torch.rand(2, generator=generator, dtype=torch.float64)
    noise = torch.randn(2, channels, FRAMES, generator=generator)
    drop = torch.tensor([False, False])
    return batch, PROMPTS, t, noise, drop


def _prediction_and_loss(objective, inputs):
    """(the DiT's prediction, the per-sample losses) of one `loss` call."""
    seen = []
    hook = objective.pipe.transformer.register_forward_hook(lambda m, a, out: seen.append(out))
    try:
        with torch.no_grad():
            loss = objective.loss(*inputs)
    finally:
        hook.remove()
    return seen[0].sample, loss


@pytest.mark.parametrize("options", OPTIONS, ids=str)
def test_the_torch_objective_computes_the_formula_on_its_prediction(sides, options):
    torch_side, _ = sides
    torch_side.loss_options = options
    batch, prompts, t, noise, drop = draws(0)
    prediction, loss = _prediction_and_loss(torch_side, (batch, prompts, t, noise, drop))
    target = noise - batch.latents  # x0 = latents (scale 1)
    expected = expected_losses(
        prediction.double(),
        target.double(),
        batch.mask,
        options.normalization,
        options.mask_weight,
        options.padding_attention,
    )
    assert loss.tolist() == pytest.approx(expected, rel=2e-5)


def _cosine(a, b) -> float:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize("options", OPTIONS, ids=str)
def test_mlx_equals_torch_for_each_option(sides, options):
    torch_side, mlx_side = sides
    torch_side.loss_options = mlx_side.loss_options = options
    inputs = draws(1)
    for p in torch_side.parameters():
        p.grad = None
    reference = torch_side.loss(*inputs)
    reference.mean().backward()
    torch_grads = dict(
        zip(
            torch_lora.adapter_state(torch_side.modules),
            (p.grad for p in torch_side.parameters()),
            strict=True,
        )
    )
    mlx_loss = mlx_side.loss(*inputs)
    np.testing.assert_allclose(mlx_loss.numpy(), reference.detach().numpy(), rtol=2e-5)
    _, grads = mlx_train.loss_and_grads(
        mlx_side.modules, *mlx_side.inputs(*inputs), options=options
    )
    mlx_grads = mlx_lora.state_from_tree(mlx_side.modules, grads)
    assert set(mlx_grads) == set(torch_grads)
    worst = min(_cosine(torch_grads[k].numpy(), np.array(mlx_grads[k])) for k in torch_grads)
    assert worst >= 0.9999, f"{options}: worst gradient cosine {worst}"


def test_padding_attention_changes_only_the_padded_sample(sides):
    """The first sample has no padded frame: zeroing no value leaves it bit for bit."""
    torch_side, mlx_side = sides
    inputs = draws(2)
    results = {}
    for attention in (False, True):
        torch_side.loss_options = mlx_side.loss_options = LossOptions(padding_attention=attention)
        with torch.no_grad():
            results[attention] = (torch_side.loss(*inputs), mlx_side.loss(*inputs))
    for side in (0, 1):
        off, on = results[False][side], results[True][side]
        assert off[0] == on[0]
        assert abs(off[1] - on[1]) > 1e-6 * abs(off[1])


def test_padding_attention_zeroes_the_values_of_padded_frames_only(sides):
    torch_side, _ = sides
    torch_side.loss_options = LossOptions(padding_attention=True)
    transformer = torch_side.pipe.transformer
    memory, width = transformer.config.num_memory_tokens, transformer.config.embed_dim
    seen = []
    hooks = [  # registered after the trainer's: they see what the attention gets
        block.self_attn.to_qkv.register_forward_hook(lambda m, a, out: seen.append(out))
        for block in transformer.transformer_blocks
    ]
    try:
        with torch.no_grad():
            torch_side.loss(*draws(3))
    finally:
        for hook in hooks:
            hook.remove()
    assert len(seen) == len(transformer.transformer_blocks)
    for qkv in seen:
        values = qkv[..., -width:]
        assert values[1, memory + 15 :].abs().max() == 0  # the padded frames' values
        assert values[1, : memory + 15].abs().min() > 0  # the memory tokens' and the audio's
        assert values[0].abs().min() > 0
        assert qkv[1, memory + 15 :, :-width].abs().max() > 0  # queries and keys untouched


def test_padding_attention_outside_a_loss_call_is_off(sides):
    """The hooks act only within a loss call: the pipeline's own forward (the demos) is
    diffusers' as it was."""
    torch_side, _ = sides
    torch_side.loss_options = LossOptions(padding_attention=True)
    torch_side.loss(*draws(4))  # leaves nothing set behind
    assert torch_side.padded_values.valid is None


def test_padding_attention_under_gradient_checkpointing_has_the_same_gradients(folder):
    """The blocks run again in the backward: the recompute must zero the same values."""
    grads = []
    for checkpointing in (False, True):
        run = run_config(folder, gradient_checkpointing=checkpointing)
        objective = Objective(folder, run, CPU)
        _awake(objective)
        assert objective.pipe.transformer.gradient_checkpointing is checkpointing
        objective.loss(*draws(5)).mean().backward()
        grads.append([p.grad.clone() for p in objective.parameters()])
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
    # and MLX's checkpointed blocks take the mask too
    run = run_config(folder)
    mlx_side = mlx_train.MLXObjective(folder, run, MLX_CPU)
    inputs = mlx_side.inputs(*draws(5))
    options = LossOptions(padding_attention=True)
    plain = mlx_train.loss_and_grads(mlx_side.modules, *inputs, options=options)
    mlx_side.modules.transformer.gradient_checkpointing = True
    checkpointed = mlx_train.loss_and_grads(mlx_side.modules, *inputs, options=options)
    assert np.array(plain[0]) == np.array(checkpointed[0])
    for (_, a), (_, b) in zip(tree_flatten(plain[1]), tree_flatten(checkpointed[1]), strict=True):
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-5, atol=1e-7)


def test_the_trainers_take_the_options_from_the_run(folder):
    run = run_config(folder, loss_normalization="sample", mask_loss_weight=0.5)
    expected = LossOptions("sample", 0.5, True)
    assert LossOptions.of(run.train) == expected
    assert dataclasses.asdict(expected) == {
        "normalization": "sample",
        "mask_weight": 0.5,
        "padding_attention": True,
    }
    assert Objective(folder, run, CPU).loss_options == expected
    assert mlx_train.MLXObjective(folder, run, MLX_CPU).loss_options == expected


def test_the_compiled_mlx_step_trains_on_the_runs_options(folder):
    """The step's loss (before its update) is the options' loss, not the default one."""
    run = run_config(folder, loss_normalization="sample_channel", mask_loss_weight=0.5)
    mlx_side = mlx_train.MLXObjective(folder, run, MLX_CPU)
    _awake(Objective(folder, run, CPU), mlx_side)
    inputs = draws(6)
    expected = mlx_side.loss(*inputs).mean().item()
    default = mlx_train.per_sample_loss(mlx_side.modules, *mlx_side.inputs(*inputs)).mean().item()
    loss, grad_norm, magnitude = mlx_side.step(*inputs)
    assert loss == pytest.approx(expected, rel=1e-6)
    assert abs(default - expected) > 1e-3 * expected
    assert grad_norm > 0 and magnitude > 0
