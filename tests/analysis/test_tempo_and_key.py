"""How the tempo is read from the weighed hypotheses, and the key's evidence, on their inputs."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from tunesmith.analysis import key, meter
from tunesmith.analysis.chroma import TRIADS, Chroma, chord_names, chords, segments
from tunesmith.analysis.tempo import ALTERNATIVE, REVIEW_PROBABILITY, Track, decide


def _hypothesis(metre: str, factor: Fraction, tracker: float, harmony: float):
    evidence = {k: 0.0 for k in meter.FEATURES} | {"harmony": harmony}
    return meter.Hypothesis(metre, factor, float(factor) * tracker, evidence)


def test_the_tempo_is_the_likeliest_level_and_readings_that_agree_on_it_add_up() -> None:
    found = [
        _hypothesis("3/4", Fraction(1), 120.0, 0.9),
        _hypothesis("6/8", Fraction(2, 3), 120.0, 0.3),
        _hypothesis("12/8", Fraction(1), 120.0, 0.8),  # the same tempo as the 3/4 reading
        _hypothesis("4/4", Fraction(1, 2), 120.0, 0.1),
    ]
    p = meter.probabilities(found)
    assert p.sum() == pytest.approx(1.0)
    tempo = decide(Track(120.0, np.zeros(0), 2.0), found)
    totals = {}
    for i, h in enumerate(found):
        totals[h.bpm] = totals.get(h.bpm, 0.0) + p[i]
    assert tempo.bpm == max(totals, key=totals.get)
    agree = [i for i, h in enumerate(found) if abs(h.bpm - tempo.bpm) <= 0.04 * tempo.bpm]
    assert tempo.probability == pytest.approx(sum(p[i] for i in agree), abs=1e-4)
    others = {round(h.bpm, 2): p[i] for i, h in enumerate(found) if i not in agree}
    assert set(tempo.alternatives) == {bpm for bpm, q in others.items() if q >= ALTERNATIVE}
    expected = meter.calibrated(tempo.probability, REVIEW_PROBABILITY)
    assert tempo.confidence == pytest.approx(expected, abs=1e-3)


def test_readings_that_agree_outweigh_a_likelier_one_and_the_bar_is_chosen_at_that_tempo() -> None:
    # one reading at 60 more probable than each of three at 120, less than the three together:
    # the tempo is 120; at 120, 4/4 and 12/8 (ACE-Step's "4") outweigh 6/8's "6", the single
    # likeliest reading there
    found = [
        _hypothesis("4/4", Fraction(1, 2), 120.0, 0.0),
        _hypothesis("6/8", Fraction(1), 120.0, 0.0),
        _hypothesis("4/4", Fraction(1), 120.0, 0.0),
        _hypothesis("12/8", Fraction(1), 120.0, 0.0),
    ]
    p = np.array([0.34, 0.26, 0.21, 0.19])
    best, signature, groups = meter.decision(found, p)
    assert (best.bpm, signature, best.metre) == (120.0, "4", "4/4")
    (chosen, other) = groups
    assert chosen.members == (1, 2, 3) and chosen.probability == pytest.approx(0.66)
    assert (other.bpm, other.members) == (60.0, (0,))
    # and where one reading outweighs the rest together, it is the choice
    p = np.array([0.7, 0.1, 0.1, 0.1])
    best, signature, _ = meter.decision(found, p)
    assert (best.bpm, signature, best.metre) == (60.0, "4", "4/4")


def test_no_hypothesis_no_tempo() -> None:
    tempo = decide(Track(300.0, np.zeros(0), 0.0), [])
    assert tempo.bpm == 0.0 and tempo.confidence == 0.0


def _chroma_of(names: list[str], frames_each: int = 20) -> Chroma:
    """Frames sounding each triad in turn (its three notes), the root alone in the bass."""
    full, bass = [], []
    for name in names:
        index = chord_names().index(name)
        root, quality = TRIADS[index]
        notes = [root, (root + (4 if quality == "major" else 3)) % 12, (root + 7) % 12]
        frame, low = np.zeros(12), np.zeros(12)
        frame[notes] = 1.0
        low[root] = 1.0
        full += [frame] * frames_each
        bass += [low] * frames_each
    full, bass = np.array(full), np.array(bass)
    return Chroma(full=full, bass=bass, low=np.maximum(full, bass))


def test_chords_are_read_from_chroma_and_the_bass_tips_a_shared_pair() -> None:
    names = ["C major", "A minor", "F major", "G major", "E major"]
    chroma = _chroma_of(names)
    bounds = (np.arange(len(names) + 1) * 20 * 1024 + 1) / 44100
    labels = chords(segments(chroma.full, bounds), segments(chroma.bass, bounds))
    assert [chord_names()[i] for i in labels] == names
    # C and E without a third: C major's root in the bass says C (or C minor), not A minor
    frame = np.zeros((1, 12))
    frame[0, [0, 4]] = 1.0
    bass = np.zeros((1, 12))
    bass[0, 0] = 1.0
    assert chord_names()[chords(frame, bass)[0]] in ("C major", "C minor")
    assert chords(np.zeros((1, 12)), np.zeros((1, 12)))[0] == -1  # silence: no chord


def test_a_harmonic_minor_progression_is_diatonic_to_its_key_only() -> None:
    # i iv V i in A minor, four times: the E major chord is in A minor, not in C major
    names = ["A minor", "D minor", "E major", "A minor"] * 4
    chroma = _chroma_of(names)
    seconds = len(chroma.full) * 1024 / 44100
    ticks = np.arange(len(names) + 1) * 20 * 1024 / 44100  # one pulse a chord
    rows = key.evidence((0.0, seconds), chroma, ticks, 20 * 1024 / 44100, ("C", "major"))
    by_key = {key.KEYS[i]: row for i, row in enumerate(rows)}
    a_minor, c_major = by_key[(9, "minor")], by_key[(0, "major")]
    assert a_minor["diatonic_chords"] == pytest.approx(1.0)
    assert c_major["diatonic_chords"] == pytest.approx(0.75)
    assert a_minor["tonic_chord"] == pytest.approx(0.5) and c_major["tonic_chord"] == 0.0
    assert a_minor["start_end"] > 0.99 and a_minor["start_end_bass"] == 1.0
    assert c_major["extractor"] == 1.0 and a_minor["extractor"] == 0.0
    scores = [sum(key.WEIGHTS[k] * row[k] for k in key.FEATURES) for row in rows]
    assert key.KEYS[int(np.argmax(scores))] == (9, "minor")  # over KeyExtractor's C major


def _sine_chords(names: list[str], seconds: float = 1.0) -> np.ndarray:
    rate = 44100
    t = np.arange(int(seconds * rate)) / rate
    out = []
    for name in names:
        root, quality = TRIADS[chord_names().index(name)]
        notes = [root, root + (4 if quality == "major" else 3), root + 7]
        pitches = [48 + root - 12] + [60 + n for n in notes]  # a bass note, the triad above
        freqs = [440.0 * 2 ** ((p - 69) / 12) for p in pitches]
        out.append(sum(np.sin(2 * np.pi * f * t) for f in freqs) / len(freqs))
    return np.concatenate(out).astype(np.float32)


def test_a_minor_song_of_sine_chords_is_in_its_minor_key() -> None:
    from tunesmith.analysis.chroma import chroma

    mono = _sine_chords(["A minor", "D minor", "E major", "A minor"] * 4)
    ticks = np.arange(0, len(mono) / 44100, 0.5)
    found = key.estimate_key(mono, chroma(mono), ticks, 2.0)
    assert (found.key, found.scale) == ("A", "minor"), found
    assert 0 < found.confidence <= 1 and found.probability >= found.candidates[1]["probability"]


def test_the_sound_starts_and_ends_where_it_rises_above_the_trim_level() -> None:
    rate = key.SAMPLE_RATE
    mono = np.zeros(3 * rate, dtype=np.float32)
    mono[rate // 2 : 2 * rate] = 0.5  # sound from 0.5 s to 2 s
    mono[2 * rate : 2 * rate + 100] = 0.5 * 10 ** ((key.TRIM_DB - 1) / 20)  # a tail below it
    assert key.sounding(mono) == (0.5, 2.0)
    assert key.sounding(np.zeros(rate, dtype=np.float32)) == (0.0, 0.0)
    assert key.sounding(np.zeros(0, dtype=np.float32)) == (0.0, 0.0)


def _clicks(bpm: float, seconds: float, accent_every: int) -> np.ndarray:
    """Clicks at `bpm`, every `accent_every`-th louder, at 44.1 kHz (float32)."""
    rate, out = 44100, np.zeros(int(seconds * 44100), dtype=np.float32)
    burst = np.sin(2 * np.pi * 1500 * np.arange(400) / rate) * np.hanning(400)
    for i, start in enumerate(np.arange(0, len(out) - 400, 60 / bpm * rate).astype(int)):
        out[start : start + 400] += burst * (1.0 if i % accent_every == 0 else 0.4)
    return out


def test_the_tracker_built_once_reads_each_clip_as_a_fresh_one_would() -> None:
    import essentia.standard as es

    from tunesmith.analysis.meter import MAX_TEMPO, MIN_TEMPO
    from tunesmith.analysis.tempo import track

    clips = [_clicks(96, 12, 4), _clicks(150, 9, 3), _clicks(96, 12, 4)]
    for clip in clips:  # the first again last: nothing of the second stays in the tracker
        fresh = es.RhythmExtractor2013(
            method="multifeature", minTempo=MIN_TEMPO, maxTempo=MAX_TEMPO
        )(clip)
        reused = track(clip)
        assert reused.bpm == float(fresh[0]) and reused.bpm > 0
        assert np.array_equal(reused.ticks, np.asarray(fresh[1], dtype=np.float64))
        assert reused.confidence == float(fresh[2])
    assert track(clips[0]).bpm != track(clips[1]).bpm
