import numpy as np
import pytest
import soundfile as sf
import torch

from tunesmith.media.audio import MAX_SECONDS, for_model, resample
from tunesmith.media.sniff import MediaError


def sine(freq, rate, seconds, amp=0.5):
    t = torch.arange(int(rate * seconds), dtype=torch.float64) / rate
    return amp * torch.sin(2 * torch.pi * freq * t)


@pytest.mark.parametrize("orig,new", [(48000, 44100), (22050, 44100), (44100, 32000)])
def test_resample_keeps_a_tone_and_its_level(orig, new):
    x = sine(1000.0, orig, 1.0)
    y = resample(x, orig, new)
    assert y.shape[-1] == int(np.ceil(x.shape[-1] * new / orig))
    expected = sine(1000.0, new, 1.0)[: y.shape[-1]]
    middle = slice(500, -500)  # the edges see the zero padding
    assert torch.allclose(y[middle], expected[middle], atol=2e-3)


def test_resample_removes_what_is_above_the_new_nyquist():
    x = sine(30000.0, 96000, 0.5)
    y = resample(x, 96000, 44100)
    assert y[500:-500].abs().max() < 0.01


def test_same_rate_is_untouched():
    x = torch.randn(2, 1000)
    assert resample(x, 44100, 44100) is x


def test_mono_is_repeated_resampled_and_aligned(tmp_path):
    path = tmp_path / "mono.wav"
    sf.write(path, sine(440.0, 48000, 2.0).numpy().astype(np.float32), 48000)
    audio = for_model(path, 44100, 4096)
    assert audio.samples.shape[0] == 2 and audio.samples.shape[1] % 4096 == 0
    assert torch.equal(audio.samples[0], audio.samples[1])
    assert audio.samples.shape[1] == (88200 // 4096) * 4096
    assert abs(audio.samples.abs().max().item() - 0.5) < 0.01  # no loudness change
    assert audio.source_seconds == pytest.approx(2.0)


def test_long_file_is_cut_at_the_cap_with_a_warning(tmp_path, monkeypatch):
    monkeypatch.setattr("tunesmith.media.audio.MAX_SECONDS", 1.0)
    path = tmp_path / "long.wav"
    sf.write(path, np.zeros((44100 * 3, 2), np.float32), 44100)
    audio = for_model(path, 44100, 1024)
    assert audio.samples.shape[1] == (44100 // 1024) * 1024
    assert "long.wav" in audio.warnings[0] and "cut" in audio.warnings[0]
    assert MAX_SECONDS == 600.0


def test_too_short_for_one_latent_frame_is_an_error(tmp_path):
    path = tmp_path / "tiny.wav"
    sf.write(path, np.zeros((100, 2), np.float32), 44100)
    with pytest.raises(MediaError, match="tiny.wav.*shorter than one latent frame"):
        for_model(path, 44100, 4096)
