"""The metre and the tempo's level (analysis.meter), on their inputs and on songs of the
corpus's dev half.

The evidence first: a comb finds the period of chord changes and not its half or double, the
harmony evidence reads a chord change every bar from chromagrams, the division evidence
tells clicks in threes from clicks in twos. Then songs, one for each case the level or the
metre changes: a waltz (three beats a bar), a 6/8 jig at the tracker's tempo, a slow 6/8
ballad whose eighths the tracker counts (a third of its tempo), and a half-time trap groove,
4/4 at the tempo producers tag it with, which the tracker hears at half. All four are in the
development half of tests/analysis/corpus60.py, which the analysis was fitted on.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from tests.analysis import fit_analysis
from tests.analysis.corpus60 import DEFAULT_CACHE, SONGS, make_corpus
from tunesmith.analysis import meter
from tunesmith.analysis.chroma import FPS, Chroma
from tunesmith.analysis.tempo import Track, decide, estimate_tempo


def test_the_comb_finds_the_period_of_the_changes_not_its_half_or_double() -> None:
    rng = np.random.default_rng(0)
    changes = rng.uniform(0.0, 0.2, 96)
    changes[3::8] += 1.0  # a change every 8 half pulses: four pulses a bar
    combs = {n: meter.comb(changes, n) for n in (4, 6, 8, 12, 16)}
    assert max(combs, key=combs.get) == 8, combs
    assert combs[8] > 0.9 and combs[4] < 0.7 and combs[16] < 0.7
    assert meter.comb(np.ones(40), 4) == 0.0  # no variation, no evidence
    assert meter.comb(changes[:10], 8) == 0.0  # fewer than two periods


def _chords_every(ticks: np.ndarray, pulses_a_bar: int) -> Chroma:
    """Chromagram frames whose chord (C, F, G, A minor in turn) changes every bar."""
    chords = [(0, 4, 7), (5, 9, 0), (7, 11, 2), (9, 0, 4)]
    frames = int(ticks[-1] * FPS) + 8
    full = np.zeros((frames, 12))
    centres = (np.arange(frames) * 1024 + 2048) / 44100
    bar_of = np.searchsorted(ticks, centres, side="right") // pulses_a_bar
    for i, bar in enumerate(bar_of):
        full[i, list(chords[bar % 4])] = 1.0
    return Chroma(full=full, bass=full.copy(), low=full.copy())


def test_the_harmony_evidence_reads_the_bar_from_the_chord_changes() -> None:
    ticks = np.arange(64) * 0.5  # the tracker at 120 BPM
    lengths = {4, 6, 8, 12, 16, 24}  # half pulses a bar
    combs = meter.harmony_combs(ticks, _chords_every(ticks, 4), lengths)  # a chord every 4
    assert max(combs, key=combs.get) == 8
    flat = np.ones((int(32 * FPS), 12))
    assert set(meter.harmony_combs(ticks, Chroma(flat, flat, flat), lengths).values()) == {0.0}
    # too short for two bars of the longest reading: no reading is weighed on its harmony
    assert meter.harmony_combs(ticks[:20], _chords_every(ticks[:20], 4), lengths) == {}


def test_a_compound_reading_also_weighs_the_harmony_at_half_and_twice_its_bar() -> None:
    # the tracker on the dotted quarters at 60 (ticks a second apart), chords every two of
    # them: a 6/8 bar. Each compound reading sees its rival's comb beside its own (a 12/8 bar
    # is two 6/8 bars), the simple readings do not.
    ticks = np.arange(48.0)
    silent = _silent(int(49 * 44100 / meter.HOP))
    found = meter.hypotheses(60.0, ticks, silent, _chords_every(ticks, 2))
    by = {(h.metre, h.factor): h.evidence for h in found}
    six, twelve = by["6/8", Fraction(1)], by["12/8", Fraction(1)]
    assert six["harmony"] > twelve["harmony"]
    assert twelve["harmony_half"] == pytest.approx(six["harmony"])
    assert six["harmony_double"] == pytest.approx(twelve["harmony"])
    assert all(
        ev["harmony_half"] == ev["harmony_double"] == 0.0
        for (metre, _), ev in by.items()
        if not meter.METRES[metre].compound
    )


def _clicks(eighth: float, per_beat: int, seconds: float = 20.0) -> np.ndarray:
    """Clicks on every eighth note, the first of each beat loud."""
    rate = 44100
    mono = np.zeros(int(seconds * rate), dtype=np.float32)
    for i in range(int(seconds / eighth)):
        start = int(i * eighth * rate)
        mono[start : start + 200] = 1.0 if i % per_beat == 0 else 0.4
    return mono


def _silent(frames: int) -> meter.Onsets:
    zero = np.zeros(frames)
    return meter.Onsets(zero, zero, zero, zero)


def test_the_division_evidence_tells_threes_from_twos() -> None:
    flat = np.zeros((int(20 * FPS), 12))
    nothing = Chroma(flat, flat, flat)
    for per_beat, compound in ((3, True), (2, False)):
        mono = _clicks(0.2, per_beat)  # eighths 0.2 s apart
        beat_bpm = 60.0 / (0.2 * per_beat)
        found = meter.hypotheses(beat_bpm, np.zeros(0), meter.Onsets.of(mono), nothing)
        at_beat = {h.metre: h.evidence["division"] for h in found if h.factor == 1}
        divides = at_beat["6/8"] if compound else at_beat["4/4"]
        other = at_beat["4/4"] if compound else at_beat["6/8"]
        assert divides > 0.3 > other, at_beat
        assert {h.evidence["harmony"] for h in found} == {0.0}  # no ticks: no harmony


def _groove(beat: float, events: dict[str, list[float]], bars: int = 12) -> np.ndarray:
    """A four-beat pattern repeated `bars` times: `events` maps a sound (kick, snare, hat) to
    its onsets in beats within the bar."""
    rate = 44100
    rng = np.random.default_rng(1)
    mono = np.zeros(int((bars * 4 + 1) * beat * rate), dtype=np.float32)
    t = np.arange(int(0.08 * rate)) / rate
    sounds = {
        "kick": np.sin(2 * np.pi * 55 * t) * np.exp(-t / 0.05),
        "snare": np.diff(rng.normal(0, 0.5, len(t) + 1)) * np.exp(-t / 0.04),
        "hat": np.diff(rng.normal(0, 0.15, len(t) + 1)) * np.exp(-t / 0.01),
    }
    for bar in range(bars):
        for sound, onsets in events.items():
            for onset in onsets:
                start = int((bar * 4 + onset) * beat * rate)
                mono[start : start + len(t)] += sounds[sound].astype(np.float32)
    return mono


def _weighed(mono: np.ndarray, beat: float, shift: float = 0.0) -> dict:
    """The hypotheses at a tracker on the beat (its ticks `shift` seconds late), by (metre,
    factor)."""
    ticks = np.arange(0.0, len(mono) / 44100 - beat, beat) + shift
    flat = np.zeros((int(len(mono) / 44100 * FPS), 12))
    found = meter.hypotheses(60 / beat, ticks, meter.Onsets.of(mono), Chroma(flat, flat, flat))
    return {(h.metre, h.factor): h.evidence for h in found}


def test_the_grid_evidence_hears_the_beat_the_backbeat_and_the_swing() -> None:
    beat = 0.6  # 100 BPM
    rock = _groove(beat, {"kick": [0, 2], "snare": [1, 3]})
    found = _weighed(rock, beat, shift=0.03)  # the tracker's ticks a little late
    right, fast, slow = (found["4/4", Fraction(f)] for f in (1, 2, Fraction(1, 2)))
    assert right["backbeat"] > 0.2 > max(fast["backbeat"], slow["backbeat"])
    assert right["accent_low"] > max(fast["accent_low"], slow["accent_low"])
    # eighths divide the beat in two, triplets in three; a swung eighth (on the last third
    # only) does neither, though the onsets' autocorrelation hears thirds in it
    eighths = _weighed(_groove(beat, {"kick": [0, 2], "hat": [i / 2 for i in range(8)]}), beat)
    assert eighths["4/4", Fraction(1)]["grid_division"] > 0.2
    triplets = _weighed(_groove(beat, {"kick": [0, 2], "hat": [i / 3 for i in range(12)]}), beat)
    swing = _weighed(
        _groove(beat, {"kick": [0, 2], "hat": [i + f for i in range(4) for f in (0, 2 / 3)]}), beat
    )
    assert triplets["12/8", Fraction(1)]["grid_division"] > 0.2
    assert swing["12/8", Fraction(1)]["division"] > 0.0
    assert abs(swing["12/8", Fraction(1)]["grid_division"]) < 0.1
    # the kick on the one and nothing else on it: a downbeat every four beats
    one = _weighed(_groove(beat, {"kick": [0], "hat": [0, 1, 2, 3]}), beat)
    assert one["4/4", Fraction(1)]["downbeat_low"] > 0.3 > one["3/4", Fraction(1)]["downbeat_low"]


def test_the_chords_move_the_choice_towards_the_bar_they_change_at() -> None:
    # the tracker counts 140 a minute (ticks 60/140 s apart) and a click sounds on every one
    # of its pulses: the onsets alone do not say the level. Chords changing every eight
    # pulses (a 4/4 bar of quarter notes at 70) make the 70 reading three times likelier (or
    # more) than chords changing every four; chords every three pulses group the pulses in
    # threes: a bar of three (3/4 at 140) or a beat of three (6/8 at 46.7, the clicks its
    # eighths). A click on every pulse says nothing else, and the fitted model has read it
    # either way from one fit to the next.
    ticks = np.arange(96) * 60 / 140
    clicks = meter.Onsets.of(_clicks(60 / 140, 1, seconds=ticks[-1] + 1))

    def at_70(pulses_a_bar: int) -> float:
        found = meter.hypotheses(140.0, ticks, clicks, _chords_every(ticks, pulses_a_bar))
        p = meter.probabilities(found)
        return sum(q for q, h in zip(p, found, strict=True) if h.bpm == pytest.approx(70.0))

    assert at_70(8) > 3 * at_70(4)
    found = meter.hypotheses(140.0, ticks, clicks, _chords_every(ticks, 3))
    tempo = decide(Track(140.0, ticks, 3.0), found)
    pulses_a_beat = 140.0 / tempo.bpm
    if tempo.metre["metre"] == "3/4":
        assert pulses_a_beat == pytest.approx(1.0)
    else:
        assert tempo.metre["metre"] in ("6/8", "12/8") and pulses_a_beat == pytest.approx(3.0)
    assert tempo.metre["timesignature"] in ("3", "6")
    assert 0 < tempo.confidence <= 1 and tempo.tracker_bpm == 140.0


def test_a_short_clip_weighs_the_harmony_of_the_bars_it_holds_twice() -> None:
    # ten seconds at 120 (20 pulses): it holds two 4/4 bars at half the tracker's tempo (8
    # pulses each), but not two 12/8 bars at a third of it (12 pulses each)
    ticks = np.arange(20) * 0.5
    zero = _silent(2000)
    found = {(h.metre, h.factor): h for h in meter.hypotheses(
        120.0, ticks, zero, _chords_every(ticks, 4)
    )}  # fmt: skip
    held, long = found["4/4", Fraction(1)], found["12/8", Fraction(1, 3)]
    assert held.evidence["harmony_part"] > 0.5 and held.evidence["long_bar"] == 0.0
    assert found["4/4", Fraction(1, 2)].evidence["long_bar"] == 0.0
    assert long.evidence["harmony_part"] == 0.0 and long.evidence["long_bar"] == 1.0
    assert {h.evidence["harmony"] for h in found.values()} == {0.0}  # only for whole songs
    # a song that holds two bars of every reading weighs `harmony`, and nothing is long
    ticks = np.arange(64) * 0.5
    whole = meter.hypotheses(120.0, ticks, zero, _chords_every(ticks, 4))
    assert {h.evidence["long_bar"] for h in whole} == {h.evidence["harmony_part"] for h in whole}
    assert {h.evidence["long_bar"] for h in whole} == {0.0}
    # onset values a reading cannot measure (a lag beyond half the clip) count for none
    ones = np.ones(200)  # 1.2 s of onset frames: lags past 0.6 s are not measured
    short = meter.Onsets(ones, ones, ones, ones)
    found = meter.hypotheses(120.0, ticks, short, _chords_every(ticks, 4))
    assert {h.evidence["full_4"] for h in found} == {0.0} == {h.evidence["low_2"] for h in found}


def test_every_hypothesis_has_its_inputs_and_a_whole_number_of_half_pulses_a_bar() -> None:
    for name, bar in meter.METRES.items():
        for factor in meter.FACTORS[name]:
            assert factor in (*meter.PRIOR_FACTORS, Fraction(1))
            assert (2 * bar.beats / factor).denominator == 1
            h = meter.Hypothesis(name, factor, 120.0, dict.fromkeys(meter.FEATURES, 0.5))
            row = dict(zip(meter.INPUTS, h.inputs(), strict=True))
            assert row[f"factor {factor}"] == 1.0 if factor != 1 else f"factor {factor}" not in row
            assert sum(v for k, v in row.items() if k.startswith("metre ")) == (name != "4/4")
    assert meter.calibrated(meter.REVIEW_PROBABILITY, meter.REVIEW_PROBABILITY) == (
        pytest.approx(0.5)
    )
    assert meter.calibrated(1.0, 0.8) == 1.0 and meter.calibrated(0.0, 0.8) == 0.0
    assert meter.calibrated(0.9, 0.8) > 0.5 > meter.calibrated(0.7, 0.8)


def test_the_level_model_is_read_from_its_safetensors_file_and_refuses_other_inputs(
    tmp_path,
) -> None:
    from safetensors.numpy import save_file

    shipped = meter.level_model()
    members, hidden, inputs = shipped.hidden_weight.shape
    assert inputs == len(meter.INPUTS) and shipped.out_weight.shape == (members, hidden)
    assert len(meter.model_digest()) == 64
    # saved and read back, it scores alike
    fit_analysis.save_level(shipped, tmp_path / "model.safetensors", "a copy")
    copy = meter.LevelModel.load(tmp_path / "model.safetensors")
    rows = np.random.default_rng(0).normal(size=(7, inputs))
    assert copy.log_odds(rows) == pytest.approx(shipped.log_odds(rows), abs=1e-5)
    # the mean of its members' scores, each a network of one tanh layer
    hidden = np.tanh(rows @ shipped.hidden_weight[0].T + shipped.hidden_bias[0])
    one = hidden @ shipped.out_weight[0]
    alone = meter.LevelModel(*(a[:1] for a in vars(shipped).values()))
    assert alone.log_odds(rows) == pytest.approx(one)
    # a file fitted on other inputs is refused by name, not read in the wrong order
    tensors = {"hidden.weight": shipped.hidden_weight[:, :, :-1].copy(),
               "hidden.bias": shipped.hidden_bias, "out.weight": shipped.out_weight}  # fmt: skip
    save_file(tensors, tmp_path / "older.safetensors", {"inputs": '["harmony", "division"]'})
    with pytest.raises(ValueError, match="older.safetensors: fitted for the inputs"):
        meter.LevelModel.load(tmp_path / "older.safetensors")


def _song(name: str):
    song = next(s for s in SONGS if s.name == name)
    assert song.half == "dev"  # fitted on, so fit to show each case
    return song


def _mono(song) -> np.ndarray:
    import essentia

    essentia.log.infoActive = False
    import essentia.standard as es

    folder = make_corpus(DEFAULT_CACHE, songs=(song,))
    return es.MonoLoader(filename=str(folder / song.filename), sampleRate=44100)()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "metre", "factor"),
    [
        ("cowboy_waltz", "3/4", 1.0),
        ("kitchen_jig", "6/8", 1.0),
        ("harbour_lights", "6/8", 1 / 3),  # 55 BPM: the tracker counts its eighths at 165
        ("midnight_drip", "4/4", 2.0),  # half-time trap at 140: the tracker hears 70
    ],
)
def test_each_metre_case(name: str, metre: str, factor: float) -> None:
    from tunesmith.analysis.chroma import chroma

    song = _song(name)
    mono = _mono(song)
    tempo = estimate_tempo(mono, chroma(mono))
    assert (tempo.metre["metre"], tempo.factor) == (metre, pytest.approx(factor)), tempo.metre
    assert tempo.metre["timesignature"] == song.timesignature
    assert tempo.bpm == pytest.approx(song.bpm, rel=0.04), tempo
    assert tempo.tracker_bpm == pytest.approx(song.bpm / factor, rel=0.04)


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
