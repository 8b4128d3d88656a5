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


@pytest.mark.parametrize(
    "rate,channels,seconds,fmt",
    [
        (44100, 2, 1.3, "WAV"),
        (48000, 1, 2.01, "WAV"),
        (22050, 2, 0.77, "FLAC"),
        (32000, 1, 1.0, "OGG"),
        (96000, 2, 0.5, "AIFF"),
        (8000, 1, 0.2, "WAV"),
        (48000, 2, 1.37, "MP3"),
    ],
)
def test_the_length_read_from_the_header_is_the_decoded_length(
    tmp_path, rate, channels, seconds, fmt
):
    """`model_length` (which the encoders plan their batches by, decoding nothing) is the length
    `for_model` gives, for each format libsndfile reads, at the model's rate and otherwise."""
    from tunesmith.media.audio import model_length

    path = tmp_path / f"clip.{fmt.lower()}"
    data = np.stack([sine(330.0, rate, seconds).numpy()] * channels, axis=1).astype(np.float32)
    sf.write(path, data, rate, format=fmt)
    for align in (1, 512, 2048):
        assert model_length(path, 44100, align) == for_model(path, 44100, align).samples.shape[1]


def test_the_length_from_the_header_is_capped_as_decoding_caps(tmp_path, monkeypatch):
    from tunesmith.media import audio

    monkeypatch.setattr(audio, "MAX_SECONDS", 0.5)
    path = tmp_path / "long.wav"
    sf.write(path, sine(440.0, 48000, 1.2).numpy().astype(np.float32), 48000)
    assert audio.model_length(path, 44100, 64) == audio.for_model(path, 44100, 64).samples.shape[1]


def test_no_length_where_the_header_does_not_say(tmp_path):
    """Not a file libsndfile reads (here: not audio at all): None, and the caller decodes."""
    from tunesmith.media.audio import model_length

    path = tmp_path / "song.m4a"
    path.write_bytes(b"\x00\x00\x00\x20ftypM4A " + bytes(64))
    assert model_length(path, 44100, 2048) is None
    assert model_length(tmp_path / "missing.wav", 44100, 2048) is None
