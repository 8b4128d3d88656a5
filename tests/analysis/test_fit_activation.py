"""The activation fit's contracts (tests/analysis/fit_activation.py): its inputs line up
with analysis.meter's onset frames, and its targets with the true beats."""

import numpy as np
import pytest

from tests.analysis import fit_activation as study
from tests.analysis import fit_analysis as fa
from tunesmith.analysis import activation, meter


def clicks(bpm: float, seconds: float) -> tuple[np.ndarray, np.ndarray]:
    """A click (a 2 ms burst of noise) on every beat, and the beats' times."""
    rng = np.random.default_rng(0)
    mono = np.zeros(int(seconds * meter.SAMPLE_RATE), np.float32)
    times = np.arange(0.5, seconds - 0.5, 60.0 / bpm)
    for t in times:
        start = int(t * meter.SAMPLE_RATE)
        mono[start : start + 88] = rng.uniform(-0.5, 0.5, 88)
    return mono, times


def test_the_bands_peak_on_the_clicks():
    mono, times = clicks(100.0, 8.0)
    full, _ = meter.onset_strength(mono)
    bands = meter.onset_bands(mono)[2]
    assert bands.shape == (len(activation.BAND_EDGES) - 1, len(full))
    top = bands[-1]
    loudest = np.sort(np.argsort(top)[-len(times) :])
    assert np.abs(study.frame_times(len(top))[loudest] - times).max() < 0.02


def test_targets_mark_each_beat_and_each_bar_s_first_beat_on_its_frame():
    song = fa.DevSong("corpus60", "x", "x.wav", 90.0, "3/4", "C", "major")
    frames = 2000
    marks = study.targets(song, frames)
    times = study.frame_times(frames)
    beats, downbeats = times[marks[0] == 1.0], times[marks[1] == 1.0]
    expected = np.arange(0.0, times[-1], 60.0 / 90.0)
    assert len(beats) == len(expected) - (expected[0] < times[0])
    assert np.abs(beats - expected[-len(beats) :]).max() <= meter.HOP / meter.SAMPLE_RATE
    assert len(downbeats) == pytest.approx(len(beats) / 3, abs=1)
    assert set(np.round(np.diff(downbeats) / (3 * 60.0 / 90.0), 1)) == {1.0}
    assert set(np.unique(marks[:2])) == {0.0, 0.5, 1.0}


def test_targets_hold_the_song_s_metre_and_tempo_on_every_frame():
    song = fa.DevSong("corpus60", "x", "x.wav", 85.0, "6/8", "C", "major")
    marks = study.targets(song, 500)
    metre = marks[activation.METRE_ROWS]
    assert (metre[activation.METRE_CLASSES.index("6/8")] == 1.0).all() and metre.sum() == 500
    tempo = marks[activation.TEMPO_ROWS]
    assert np.allclose(tempo.sum(axis=0), 1.0) and (tempo == tempo[:, :1]).all()
    bins = np.array(activation.TEMPO_BINS)
    assert set(bins[np.argsort(tempo[:, 0])[-2:]].round(1)) == {80.0, 89.8}  # its two nearest


def test_a_padded_frame_adds_nothing_to_the_heads_loss():
    import torch

    song = fa.DevSong("corpus60", "x", "x.wav", 120.0, "4/4", "C", "major")
    target = torch.from_numpy(study.targets(song, 400))[None]
    rows = len(activation.OUTPUTS)
    logits = torch.randn(1, rows, 800, generator=torch.Generator().manual_seed(0))
    padded = torch.nn.functional.pad(target, (0, 400))  # 400 frames of nothing
    whole = study.head_loss(logits[..., :400], target)
    assert study.head_loss(logits, padded) == pytest.approx(whole.item() / 2, rel=1e-6)
    assert whole > 0 and study.loss_of(logits[..., :400], target) > study.HEAD_WEIGHT * whole


def test_the_f_measure_counts_a_peak_within_seventy_milliseconds():
    truth = np.arange(0.0, 10.0, 0.5)
    assert study.f_measure(truth + 0.05, truth) == 1.0
    assert study.f_measure(truth + 0.1, truth) == 0.0
    assert study.f_measure(truth[::2], truth) == pytest.approx(2 * 1.0 * 0.5 / 1.5)
    assert study.f_measure(np.array([]), truth) == 0.0
