"""Training timesteps for rectified flow: the five samplers, then the model's shift.

The samplers and their defaults are Stable Audio 3's training code as underfit runs it
(`underfit/training/timestep.py`): `uniform` (the default),
`logit_normal`, `trunc_logit_normal` (left-truncated at 0.075, rescaled, then flipped),
`log_snr` (normal logSNR, mean -1.2, std 2.0) and `log_snr_uniform` (logSNR uniform on
[-6, 5]). Every draw comes from the generator passed in, so a resumed run draws the same
numbers. t = 0 is clean data, t = 1 is pure noise.

The shift `full` is the one SA3 checkpoints ship (`distribution_shift_options`:
min_length 256, max_length 4096, base_shift 0.5, max_shift 1.15), applied with the crop
length as the sequence length, or per sample with the item's effective length (underfit's
`use_effective_length_for_schedule`, `underfit/training/loop.py`):

    effective length = ceil(int(seconds_total · 44100) / 4096)

the latent frames the item's whole duration fills (underfit truncates the sample count to an
integer first), so a short item padded to the crop is shifted as the short sequence it is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

TRUNCATION = 0.075
LOG_SNR_MEAN, LOG_SNR_STD = -1.2, 2.0
LOG_SNR_MIN, LOG_SNR_MAX = -6.0, 5.0
LOG_SNR_CLIP = 1e-4
SAMPLE_RATE = 44100  # every SA3 model's (SAME-S/L `sampling_rate`)
DOWNSAMPLING_RATIO = 4096  # SAME-S/L's latent frame, in samples


def effective_length(seconds_total: float) -> int:
    """The latent frames `seconds_total` of audio fills, as underfit counts them."""
    return math.ceil(int(seconds_total * SAMPLE_RATE) / DOWNSAMPLING_RATIO)


def sample(name: str, n: int, generator: torch.Generator) -> torch.Tensor:
    """`n` timesteps in [0, 1] (float64, on the CPU) from sampler `name`."""
    if name == "uniform":
        return torch.rand(n, generator=generator, dtype=torch.float64)
    if name == "logit_normal":
        return torch.sigmoid(torch.randn(n, generator=generator, dtype=torch.float64))
    if name == "trunc_logit_normal":
        # Inverse-CDF draw of a standard normal logit above logit(0.075), squashed,
        # rescaled from [0.075, 1] to [0, 1], then flipped so the mass sits near noise.
        lower = torch.special.ndtr(torch.tensor(math.log(TRUNCATION / (1 - TRUNCATION))))
        u = lower + (1 - lower) * torch.rand(n, generator=generator, dtype=torch.float64)
        eps = torch.finfo(torch.float64).eps
        t = torch.sigmoid(torch.special.ndtri(u.clamp(eps, 1 - eps)))
        return 1.0 - (t - TRUNCATION) / (1.0 - TRUNCATION)
    if name == "log_snr":
        log_snr = torch.randn(n, generator=generator, dtype=torch.float64)
        return _from_log_snr(log_snr * LOG_SNR_STD + LOG_SNR_MEAN)
    if name == "log_snr_uniform":
        u = torch.rand(n, generator=generator, dtype=torch.float64)
        return _from_log_snr(LOG_SNR_MIN + (LOG_SNR_MAX - LOG_SNR_MIN) * u)
    raise ValueError(f"unknown timestep sampler {name!r}")


def _from_log_snr(log_snr: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(-log_snr).clamp(LOG_SNR_CLIP, 1 - LOG_SNR_CLIP)


@dataclass(frozen=True)
class FullShift:
    """The `full` distribution shift: noisier timesteps for longer sequences."""

    min_length: int = 256
    max_length: int = 4096
    base_shift: float = 0.5
    max_shift: float = 1.15

    def __call__(self, t: torch.Tensor, length: int | Sequence[int]) -> torch.Tensor:
        """`t` [B] shifted for one sequence length, or for one length per sample (each sample
        exactly as the one-length shift would shift it)."""
        if not isinstance(length, int):
            if len(length) != t.shape[0]:
                raise ValueError(f"{len(length)} lengths for {t.shape[0]} timesteps")
            return torch.cat([self(t[i : i + 1], int(n)) for i, n in enumerate(length)])
        clamped = min(max(length, self.min_length), self.max_length)
        fraction = (clamped - self.min_length) / (self.max_length - self.min_length)
        mu = -(self.base_shift + (self.max_shift - self.base_shift) * fraction)
        # 1 - e^mu / (e^mu + (1/(1-t) - 1)); the ends map to themselves.
        inner = t.clamp(0, 1)
        odds = torch.where(inner < 1, 1 / (1 - inner).clamp_min(1e-300) - 1, torch.inf)
        shifted = 1 - math.exp(mu) / (math.exp(mu) + odds)
        return torch.where(inner <= 0, torch.zeros_like(t), shifted)

    @classmethod
    def from_config(cls, options: dict | None) -> FullShift | None:
        """From a model config's `distribution_shift_options`; None when it ships none."""
        if not options or options.get("type", "full") in ("none", "identity"):
            return None
        if options.get("type", "full") != "full":
            raise ValueError(f"distribution shift {options['type']!r} is not supported")
        keys = ("min_length", "max_length", "base_shift", "max_shift")
        return cls(**{k: options[k] for k in keys if k in options})
