"""The loss ACE-Step 1.5's DiT is trained with, as Side-Step trains adapters on it.

Flow matching in ACE-Step's convention (its `modeling_acestep_v15_base.py`, Side-Step's
`lora_module.py`): t in [0, 1] with t = 1 pure noise,

    x_t  = t·ε + (1 − t)·x0          ε ~ N(0, I), x0 the clean latents [T, C]
    v    = DiT(x_t, t, r = t, conditioning, context)
    ℓ    = mean over the crop's frames and channels of (v − (ε − x0))²

The timestep is the model's own `sample_t_r` with mean-flow off: two logit-normal draws
sigmoid(σ·n + μ), t the larger of the two, r = t (μ −0.4 and σ 1.0 in ACE-Step 1.5's
config.json; `timesteps`). CFG dropout replaces a crop's whole conditioning by the condition
encoder's learned `null_condition_emb`, broadcast over its tokens, with probability 0.15: the
same null condition the pipeline's guidance uses at inference.

The loss weightings Side-Step documents (`weights`): `none` (flat), `min_snr` (DDPM's
min(SNR, γ)/SNR with SNR = ((1 − t)/t)²) and `flow_snr` (w = (1 − t)^bias / (t(1 − t)), clamped at
γ, then divided by its mean). That mean is over every crop of one optimizer step (`window`):
HOT-Step's trap is that with one crop a micro-batch, a mean over the micro-batch makes every
weight exactly 1, so the weighting silently does nothing. Each crop's ℓ is its own mean
(normalised per crop: a short crop weighs as much as a long one), and the step's loss is the
mean over the window of w·ℓ, as Side-Step's global mean of per-sample means.
"""

from __future__ import annotations

import torch

T_EPS = 1e-4  # Side-Step's clamp of t before dividing by t(1 − t)
SNR_MAX = 1e6  # Side-Step's clamp of min_snr's SNR
MODEL_MU, MODEL_SIGMA = -0.4, 1.0  # ACE-Step 1.5's config.json timestep_mu / timestep_sigma


def timesteps(count: int, generator: torch.Generator, mu: float, sigma: float) -> torch.Tensor:
    """t [count] (float32, CPU): per crop the larger of two logit-normal draws (`sample_t_r`'s
    distribution; r = t is not returned)."""
    normal = torch.randn(2, count, generator=generator)
    return torch.sigmoid(normal * sigma + mu).max(dim=0).values


def weights(t: torch.Tensor, kind: str, gamma: float = 5.0, bias: float = 0.5) -> torch.Tensor:
    """The weight of each crop of one optimizer window (t: every crop's level), float64."""
    t = t.to(torch.float64)
    if kind == "none":
        return torch.ones_like(t)
    clamped = t.clamp(T_EPS, 1 - T_EPS)
    if kind == "min_snr":
        snr = (((1 - clamped) / clamped) ** 2).clamp(max=SNR_MAX)
        return snr.clamp(max=gamma) / snr.clamp(min=1e-6)
    if kind == "flow_snr":
        w = ((1 - clamped) ** bias / (clamped * (1 - clamped))).clamp(max=gamma)
        return w / w.mean().clamp(min=1e-8)  # over the whole window: see the docstring
    raise ValueError(f"loss weighting {kind!r}: expected none, min_snr or flow_snr")


def noised(x0: torch.Tensor, noise: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """x_t = t·ε + (1 − t)·x0 for x0, ε [B, T, C] and t [B]."""
    t = t.to(x0.dtype)[:, None, None]
    return t * noise + (1 - t) * x0


def with_dropout(
    conditioning: torch.Tensor, null: torch.Tensor, drop: torch.Tensor
) -> torch.Tensor:
    """conditioning [B, S, H] with the crops where `drop` [B] (bool) is set replaced by the null
    condition [1, 1, H] broadcast over their tokens."""
    if not bool(drop.any()):
        return conditioning
    null = null.to(conditioning).expand_as(conditioning)
    return torch.where(drop.to(conditioning.device)[:, None, None], null, conditioning)


def crop_loss(
    transformer,
    x0: torch.Tensor,
    noise: torch.Tensor,
    t: torch.Tensor,
    conditioning: torch.Tensor,
    context: torch.Tensor,
) -> torch.Tensor:
    """ℓ per crop [B] (float32, or float64 over a float64 model): the mean squared error of the
    DiT's velocity against ε − x0 over each crop's frames and channels. Inputs on the model's
    device; x0, noise [B, T, C] and t [B] in float32 (or float64)."""
    dtype = transformer.dtype
    acc = torch.promote_types(dtype, torch.float32)
    x0, noise, t = x0.to(acc), noise.to(acc), t.to(acc)
    velocity = transformer(
        hidden_states=noised(x0, noise, t).to(dtype),
        timestep=t.to(dtype),
        timestep_r=t.to(dtype),
        encoder_hidden_states=conditioning.to(dtype),
        context_latents=context.to(dtype),
    ).sample
    return ((velocity.to(acc) - (noise - x0)) ** 2).mean(dim=(1, 2))
