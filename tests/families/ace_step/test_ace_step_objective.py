"""The DiT loss as ACE-Step 1.5 trains it: the flow-matching convention against the pipeline's own
sampler, the timestep law, the null condition of CFG dropout, and the loss weights normalised
over the optimizer window (HOT-Step's batch-1 trap)."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from diffusers import FlowMatchEulerDiscreteScheduler

from tunesmith.families.ace_step import objective


def dit_inputs(pipe, frames: int = 10, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    channels = pipe.transformer.config.audio_acoustic_hidden_dim
    x0 = torch.randn(1, frames, channels, generator=g)
    noise = torch.randn(1, frames, channels, generator=g)
    conditioning = torch.randn(1, 6, pipe.transformer.config.hidden_size, generator=g)
    context = torch.randn(1, frames, 2 * channels, generator=g)
    return x0, noise, conditioning, context


def test_the_loss_is_the_reference_formula(ace_pipe):
    """ℓ = mean((DiT(t·ε + (1 − t)·x0, t, r = t) − (ε − x0))²), in float64 to the last digit."""
    dit = copy.deepcopy(ace_pipe.transformer).double()
    x0, noise, conditioning, context = (v.double() for v in dit_inputs(ace_pipe))
    t = torch.tensor([0.37], dtype=torch.float64)
    with torch.no_grad():
        ours = objective.crop_loss(dit, x0, noise, t, conditioning, context)
        x_t = 0.37 * noise + 0.63 * x0
        v = dit(
            hidden_states=x_t,
            timestep=t,
            timestep_r=t,
            encoder_hidden_states=conditioning,
            context_latents=context,
        ).sample
        reference = ((v - (noise - x0)) ** 2).sum() / v.numel()
    assert ours.dtype == torch.float64 and ours.shape == (1,)
    assert torch.allclose(ours[0], reference, rtol=1e-12, atol=0)


def test_the_target_is_the_velocity_the_pipelines_sampler_integrates():
    """The pipeline's last Euler step (its scheduler, sigmas [t, 0]) takes x_t along v to x0:
    with v = ε − x0 it lands on the data exactly, so the target's sign and scale are the
    sampler's."""
    g = torch.Generator().manual_seed(1)
    x0, noise, t = torch.randn(1, 8, 4, generator=g), torch.randn(1, 8, 4, generator=g), 0.8
    scheduler = FlowMatchEulerDiscreteScheduler(num_train_timesteps=1, shift=1.0)
    scheduler.set_timesteps(sigmas=[t])
    x_t = objective.noised(x0, noise, torch.tensor([t]))
    landed = scheduler.step(noise - x0, scheduler.timesteps[0], x_t, return_dict=False)[0]
    assert torch.allclose(landed, x0, atol=1e-6)


def test_timesteps_are_the_larger_of_two_logit_normal_draws():
    """P(t ≤ x) = Φ((logit x − μ)/σ)², the law of `sample_t_r` with r = t."""
    t = objective.timesteps(40000, torch.Generator().manual_seed(0), -0.4, 1.0)
    assert t.shape == (40000,) and 0 < t.min() and t.max() < 1
    for x in (0.2, 0.4, 0.6, 0.8):
        z = (math.log(x / (1 - x)) + 0.4) / 1.0
        expected = (0.5 * (1 + math.erf(z / math.sqrt(2)))) ** 2
        assert abs(float((t <= x).float().mean()) - expected) < 0.01


def test_cfg_dropout_puts_the_models_null_condition_on_every_token(ace_pipe):
    null = ace_pipe.condition_encoder.null_condition_emb.detach()
    conditioning = torch.randn(2, 7, null.shape[-1])
    out = objective.with_dropout(conditioning, null, torch.tensor([True, False]))
    assert torch.equal(out[0], null[0].expand(7, -1))
    assert torch.equal(out[1], conditioning[1])


def test_flow_snr_weights_are_normalised_over_the_window_not_the_micro_batch():
    t = torch.tensor([0.15, 0.4, 0.7, 0.9])
    window = objective.weights(t, "flow_snr", 5.0, 0.5)
    assert math.isclose(float(window.mean()), 1.0, rel_tol=1e-12)
    clamped = t.double().clamp(1e-4, 1 - 1e-4)
    raw = ((1 - clamped) ** 0.5 / (clamped * (1 - clamped))).clamp(max=5.0)
    assert torch.allclose(window, raw / raw.mean(), rtol=1e-12)
    assert window.max() / window.min() > 1.5  # the weighting does something
    # The trap: normalised one crop at a time (a micro-batch of one), every weight is 1.
    one_at_a_time = torch.cat([objective.weights(t[i : i + 1], "flow_snr") for i in range(4)])
    assert torch.equal(one_at_a_time, torch.ones(4, dtype=torch.float64))


def test_the_other_weightings():
    t = torch.tensor([0.1, 0.5, 0.9])
    assert torch.equal(objective.weights(t, "none"), torch.ones(3, dtype=torch.float64))
    snr = ((1 - t.double()) / t.double()) ** 2
    expected = snr.clamp(max=5.0) / snr
    assert torch.allclose(objective.weights(t, "min_snr", 5.0), expected, rtol=1e-12)
    with pytest.raises(ValueError, match="none, min_snr or flow_snr"):
        objective.weights(t, "snr")
