"""The metre (analysis.meter) and the tempo level it sets, on songs of the corpus's dev half.

One song for each case the metre changes: a waltz (three beats a bar), a 6/8 jig whose
beat the tracker divides in three, a slow 6/8 ballad whose eighths the tracker counts (the
tempo is a third of the tracker's), and a half-time trap groove, 4/4 at the tempo producers
tag it with (its snare on beat 3 makes the tracker hear half of it). All four are in the
development half of tests/analysis/corpus60.py, which the analysis was designed on.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.analysis.corpus60 import SONGS, make_corpus
from tunesmith.analysis.meter import autocorrelation, decide, estimate_metre, onset_strength
from tunesmith.analysis.tempo import estimate_tempo


def _song(name: str):
    song = next(s for s in SONGS if s.name == name)
    assert song.half == "dev"  # designed on, so fit to show each case
    return song


def _mono(song) -> np.ndarray:
    import essentia

    essentia.log.infoActive = False
    import essentia.standard as es

    folder = make_corpus()
    return es.MonoLoader(filename=str(folder / song.filename), sampleRate=44100)()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "timesignature", "rule"),
    [
        ("cowboy_waltz", "3", "waltz"),
        ("kitchen_jig", "6", "triplet"),
        ("harbour_lights", "6", "eighths"),
        ("midnight_drip", "4", "simple"),
    ],
)
def test_each_metre_case(name: str, timesignature: str, rule: str) -> None:
    song = _song(name)
    tempo = estimate_tempo(_mono(song))
    metre = tempo.metre
    assert (metre["timesignature"], metre["rule"]) == (timesignature, rule), metre
    assert song.timesignature == timesignature
    assert tempo.bpm == pytest.approx(song.bpm, rel=0.04), tempo
    assert metre["confidence"] >= 0.5


@pytest.mark.slow
def test_the_eighths_of_a_slow_six_eight_are_three_to_the_beat() -> None:
    song = _song("harbour_lights")  # 55 BPM, the tracker counts its eighths at 165
    tempo = estimate_tempo(_mono(song))
    assert tempo.tracker_bpm == pytest.approx(3 * song.bpm, rel=0.04)
    assert tempo.octave == pytest.approx(1 / 3) and tempo.alternatives == (tempo.tracker_bpm,)


def test_a_pulse_train_in_threes_and_in_twos() -> None:
    # clicks on every eighth of a 6/8 at 100 BPM (0.2 s apart), every third one loud: the
    # beat divides in three. The same clicks without accents, counted at 150 BPM, do not.
    rate, eighth = 44100, 0.2
    mono = np.zeros(int(20 * rate), dtype=np.float32)
    for i in range(int(20 / eighth)):
        start = int(i * eighth * rate)
        mono[start : start + 200] = 1.0 if i % 3 == 0 else 0.4
    full, low = (autocorrelation(curve) for curve in onset_strength(mono))
    compound = decide(full, low, 3 * eighth)
    assert compound.compound and compound.timesignature in ("4", "6")
    assert compound.factor == 1.0 and compound.rule == "triplet"
    plain = estimate_metre(np.zeros(44100, dtype=np.float32), 120.0)
    assert not plain.compound and plain.confidence == 0.0


def test_the_labels_use_the_analysed_time_signature_and_list_a_doubtful_one() -> None:
    from tunesmith.dataset import review
    from tunesmith.dataset.fields import DatasetLevel, resolve

    sure = {"bpm": 132.0, "tempo_confidence": 0.9, "timesignature": "3",
            "timesignature_confidence": 0.9}  # fmt: skip
    resolved = resolve("a.wav", "audio", [], sure, DatasetLevel())
    assert resolved.values["timesignature"] == "3"
    assert resolved.fields["timesignature"] == {"source": "analysis", "confidence": 0.9}
    assert not resolved.review

    doubtful = {"bpm": 86.0, "tempo_confidence": 0.3, "tempo": {"alternatives": [172.0]},
                "timesignature": "4", "timesignature_confidence": 0.2}  # fmt: skip
    resolved = resolve("a.wav", "audio", [], doubtful, DatasetLevel())
    flags = {flag["field"]: flag for flag in resolved.review}
    assert flags["bpm"]["alternatives"] == [172.0]
    assert flags["timesignature"]["alternatives"] == ["3", "6"]
    table = review.text([{"path": "a.wav", **flag} for flag in resolved.review])
    assert "86, or 172" in table and "4, or 3, or 6" in table

    none_found = {"bpm": 0.0, "timesignature": "", "timesignature_confidence": 0.0}
    resolved = resolve("a.wav", "audio", [], none_found, DatasetLevel())
    assert resolved.fields["timesignature"]["source"] == "assumed"
    assert [flag["field"] for flag in resolved.review] == ["timesignature"]
