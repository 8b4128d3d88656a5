import math

import pytest
import torch

from tunesmith.families.stable_audio_3.timesteps import FullShift, sample

SAMPLERS = ["uniform", "logit_normal", "trunc_logit_normal", "log_snr", "log_snr_uniform"]


@pytest.mark.parametrize("name", SAMPLERS)
def test_samplers_are_in_range_and_reproducible(name):
    a = sample(name, 4096, torch.Generator().manual_seed(1))
    b = sample(name, 4096, torch.Generator().manual_seed(1))
    assert torch.equal(a, b)
    assert a.min() >= 0 and a.max() <= 1


def test_sampler_shapes_match_their_definitions():
    g = torch.Generator().manual_seed(0)
    n = 200_000
    assert abs(sample("uniform", n, g).mean().item() - 0.5) < 0.01
    assert abs(sample("logit_normal", n, g).median().item() - 0.5) < 0.01
    # flipped truncation: nothing above 1 - 0 and everything in [0, 1]; the median of the
    # unflipped, unrescaled draw is the normal median above logit(0.075)
    t = sample("trunc_logit_normal", n, g)
    lower = torch.special.ndtr(torch.tensor(math.log(0.075 / 0.925))).item()
    median_logit = torch.special.ndtri(torch.tensor((1 + lower) / 2)).item()
    median = 1 - (torch.sigmoid(torch.tensor(median_logit)).item() - 0.075) / 0.925
    assert abs(t.median().item() - median) < 0.01
    # log_snr: t = sigmoid(-logsnr), logsnr ~ N(-1.2, 2)
    t = sample("log_snr", n, g)
    assert abs(t.median().item() - 1 / (1 + math.exp(-1.2))) < 0.01
    t = sample("log_snr_uniform", n, g)
    assert t.min() >= 1 / (1 + math.exp(5)) - 1e-9 and t.max() <= 1 / (1 + math.exp(-6)) + 1e-9


def test_full_shift_formula_and_fixed_points():
    shift = FullShift()
    t = torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0], dtype=torch.float64)
    for length in (256, 1300, 4096, 9000):
        fraction = (min(max(length, 256), 4096) - 256) / (4096 - 256)
        mu = -(0.5 + 0.65 * fraction)
        expected = (
            [0.0]
            + [1 - math.exp(mu) / (math.exp(mu) + 1 / (1 - x) - 1) for x in (0.25, 0.5, 0.75)]
            + [1.0]
        )
        assert torch.allclose(shift(t, length), torch.tensor(expected, dtype=torch.float64))
    assert (shift(t, 1300)[1:4] > t[1:4]).all()  # towards noise


def test_shift_from_model_config():
    assert FullShift.from_config(None) is None
    cfg = {"type": "full", "min_length": 256, "max_length": 4096}
    assert FullShift.from_config(cfg) == FullShift()
    with pytest.raises(ValueError, match="not supported"):
        FullShift.from_config({"type": "flux"})
