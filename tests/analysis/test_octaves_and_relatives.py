"""The two decisions the analysis adds to Essentia's answers, on their inputs."""

from __future__ import annotations

import numpy as np
import pytest

from tunesmith.analysis.key import boundary_evidence, relative_key
from tunesmith.analysis.tempo import MAX_TEMPO, choose_octave


def test_a_slow_song_read_at_double_speed_is_halved() -> None:
    # 136 BPM from the tracker, but only 1.4 kick/snare/bass onsets a second: 0.6 a beat
    tempo = choose_octave(136.0, beat_confidence=3.6, onset_rate=1.4, second=136.0)
    assert tempo.bpm == 68.0 and tempo.octave == 0.5 and tempo.tracker_bpm == 136.0


def test_a_fast_song_read_at_half_speed_is_doubled() -> None:
    # 80 BPM with 6.5 low onsets a second: nearly five a beat, about two and a half at 160
    tempo = choose_octave(80.0, beat_confidence=3.0, onset_rate=6.5, second=80.0)
    assert tempo.bpm == 160.0


def test_the_trackers_level_stands_without_evidence_against_it() -> None:
    # two low onsets a beat at 100 BPM: the density and the prior agree with the tracker
    tempo = choose_octave(100.0, beat_confidence=3.5, onset_rate=100 / 60 * 2, second=100.0)
    assert tempo.bpm == 100.0 and tempo.octave == 1.0
    assert choose_octave(150.0, 3.5, onset_rate=0.0, second=150.0).bpm == 150.0  # no onsets
    fast = choose_octave(180.0, 3.5, onset_rate=6.0, second=0.0)  # two a beat at 180
    assert fast.bpm == 180.0 and 2 * fast.bpm > MAX_TEMPO  # no double above the range


def test_confidence_falls_with_the_tracker_and_with_a_disagreeing_estimator() -> None:
    sure = choose_octave(100.0, 3.5, 100 / 60 * 2, second=100.0).confidence
    assert choose_octave(100.0, 1.75, 100 / 60 * 2, second=100.0).confidence == pytest.approx(
        sure / 2, abs=1e-3
    )
    assert choose_octave(100.0, 3.5, 100 / 60 * 2, second=133.0).confidence == pytest.approx(
        sure / 2, abs=1e-3
    )  # 133 is no octave of 100
    assert choose_octave(100.0, 3.5, 100 / 60 * 2, second=50.0).confidence == sure


@pytest.mark.parametrize(
    ("key", "relative"),
    [
        (("C", "major"), ("A", "minor")),
        (("Eb", "major"), ("C", "minor")),
        (("F#", "minor"), ("A", "major")),
        (("Bb", "minor"), ("C#", "major")),
    ],
)
def test_relative_keys(key, relative) -> None:
    assert relative_key(*key) == relative and relative_key(*relative) == key


def _chord(pitches: list[float], seconds: float = 2.0) -> np.ndarray:
    t = np.arange(int(seconds * 44100)) / 44100
    return sum(np.sin(2 * np.pi * f * t) for f in pitches).astype(np.float32) / len(pitches)


def test_a_song_that_starts_and_ends_on_a_minor_is_in_a_minor() -> None:
    a_minor = [110.0, 220.0, 261.63, 329.63]  # A2 bass, A3 C4 E4
    c_major = [130.81, 261.63, 329.63, 392.0]  # C3 bass, C4 E4 G4
    song = np.concatenate([_chord(a_minor), _chord(c_major), _chord(c_major), _chord(a_minor)])
    assert boundary_evidence(song, 2.0, ("C", "major"), ("A", "minor")) < -0.3
    flipped = np.concatenate([_chord(c_major), _chord(a_minor), _chord(c_major)])
    assert boundary_evidence(flipped, 2.0, ("C", "major"), ("A", "minor")) > 0.3
