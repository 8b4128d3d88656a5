"""The 64-song corpus keeps its promises, and the harness scores plain Essentia and the stage.

The corpus (tests/analysis/corpus60.py) is checked on what it says of itself (metres, keys,
tempi, arrangements, formats, soundfonts, the split) and on the MIDI it renders (the tempo,
time signature and notes the truth claims). Its test half was scored once, with the analysis
fitted on development songs only, and has been development data since the second corpus
(tests/analysis/corpus96.py); the corpus the suite scores now is the twentieth
(tests/analysis/test_corpus184.py). The figures of both halves here come from
tests/analysis/fit_analysis.py and tests/analysis/measure.py (docs/conventions/labels.md).
"""

from __future__ import annotations

import json
import struct
from collections import Counter

import numpy as np
import pytest
import soundfile as sf

from tests.analysis import fit_analysis, measure
from tests.analysis.corpus60 import (
    DEV_EXTRA,
    EXTRA_COUNT,
    FONTS,
    METRES,
    PITCH,
    SCALES,
    SONGS,
    Song,
    available_fonts,
    bar_seconds,
    bars,
    extra_songs,
    font_for,
    song_midi,
    split,
)

MAJOR_KEYS = {(tonic, "major") for tonic in ("C", "C#", "D", "Eb", "E", "F", "F#", "G", "Ab",
                                                "A", "Bb", "B")}  # fmt: skip


def test_the_corpus_is_what_it_promises() -> None:
    assert len(SONGS) >= 60 and len({s.name for s in SONGS}) == len(SONGS)
    metres = Counter(s.metre for s in SONGS)
    assert set(metres) == {"4/4", "3/4", "6/8", "12/8"}
    assert all(metres[m] >= 5 for m in ("3/4", "6/8", "12/8")), metres
    assert {(s.metre, s.drums) for s in SONGS} == {(m, d) for m in METRES for d in (True, False)}
    keys = {(s.tonic, s.scale) for s in SONGS}
    assert keys == MAJOR_KEYS | {(t, "minor") for t, _ in MAJOR_KEYS}
    # tempi 55 to 200, evenly: each fifth of the range holds 11 to 15 of the 64
    assert min(s.bpm for s in SONGS) == 55 and max(s.bpm for s in SONGS) == 200
    fifths = Counter(min(4, (s.bpm - 55) * 5 // 146) for s in SONGS)
    assert all(11 <= fifths[i] <= 15 for i in range(5)), fifths
    styles = {s.style for s in SONGS}
    for style in ("piano", "strings", "guitar", "waltz", "trap", "swing", "sparse", "pop"):
        assert style in styles
    assert {"rock", "house"} <= styles
    assert {s.fmt for s in SONGS} == {"wav", "flac", "mp3", "ogg"}
    assert {s.font for s in SONGS} == set(FONTS)
    # excerpts start and end on a chord other than the tonic
    excerpts = [s for s in SONGS if s.excerpt]
    assert len(excerpts) >= 12
    for s in excerpts:
        assert s.progression[0] != _tonic(s) and s.progression[-1] != _tonic(s), s.name
    assert sum(s.progression[0] != _tonic(s) and not s.excerpt for s in SONGS) >= 6


def test_the_truth_of_compound_metres() -> None:
    jig = next(s for s in SONGS if s.style == "jig")
    assert (jig.metre, jig.timesignature, jig.eighth_bpm) == ("6/8", "6", 3 * jig.bpm)
    blues = next(s for s in SONGS if s.style == "blues128")
    assert (blues.metre, blues.timesignature, blues.eighth_bpm) == ("12/8", "4", 3 * blues.bpm)
    waltz = next(s for s in SONGS if s.style == "waltz")
    assert (waltz.timesignature, waltz.eighth_bpm) == ("3", 2 * waltz.bpm)


def test_the_split_is_fixed_and_stratified() -> None:
    halves = Counter(s.half for s in SONGS)
    assert set(halves) == {"dev", "test"} and abs(halves["dev"] - halves["test"]) <= 1
    for metre in METRES:
        for drums in (True, False):
            group = Counter(s.half for s in SONGS if (s.metre, s.drums) == (metre, drums))
            assert group["dev"] >= 1 and group["test"] >= 1, (metre, drums, group)
            assert abs(group["dev"] - group["test"]) <= 1
    assert split(tuple(reversed(SONGS))) == split(SONGS)  # the order of the table is no input


@pytest.mark.parametrize("song", SONGS, ids=lambda s: s.name)
def test_the_midi_says_what_the_truth_says(song) -> None:
    tempo, signature, notes = _read_midi(song_midi(song))
    metre = METRES[song.metre]
    quarter_bpm = 60e6 / tempo
    assert quarter_bpm == pytest.approx(song.bpm * metre.beat / 4, rel=1e-4)
    assert signature[:2] == (metre.numerator, metre.denominator)
    pitched = [n for n in notes if n[0] != 9]
    allowed = {(PITCH[song.tonic] + step) % 12 for step in SCALES[song.scale]}
    if song.scale == "minor":
        allowed.add((PITCH[song.tonic] + 11) % 12)  # the leading tone of V
    assert {pitch % 12 for _, pitch, _ in pitched} <= allowed, song.name
    assert any(channel == 9 for channel, _, _ in notes) == song.drums
    # the bass on the last downbeat: the tonic where the song ends, the progression's last
    # chord's root where an excerpt stops, at its last bar line
    bar = metre.steps * 480 // 4
    downbeats = [n for n in pitched if n[0] == 0 and min(n[2] % bar, -n[2] % bar) <= 6]
    last_bass = max(downbeats, key=lambda n: n[2])[1] % 12
    assert (last_bass == PITCH[song.tonic]) != song.excerpt
    end = max(tick for _, _, tick in notes) * 60.0 / (quarter_bpm * 480)
    assert end <= (bars(song) + (0 if song.excerpt else 1)) * bar_seconds(song) + 1e-6


def _tonic(song) -> str:
    return "I" if song.scale == "major" else "i"


def apart_from_every_other_corpus(songs, styles: dict) -> None:
    """No song of `songs` shares its name with a song of another corpus (corpus60's, its
    DEV_EXTRA, the random arrangements, the 22-song corpus's extra songs, every table of
    corpus60.LATER_TABLES), and no style of `styles` its name with another corpus's style."""
    import importlib

    from tests.analysis import corpus60, random_styles
    from tests.analysis.corpus import EXTRA_SONGS

    others = [*corpus60.SONGS, *corpus60.DEV_EXTRA, *random_styles.RANDOM_SONGS, *EXTRA_SONGS]
    tables = [corpus60.STYLES]
    for module, table in corpus60.LATER_TABLES:
        found = importlib.import_module(f"tests.analysis.{module}")
        if getattr(found, table) is not styles:
            tables.append(getattr(found, table))
            others += getattr(found, table.replace("STYLES", "SONGS"))
    assert len(tables) == len(corpus60.LATER_TABLES)  # `styles` is one of them
    assert not {s.name for s in songs} & {s.name for s in others}
    assert not set(styles) & {name for table in tables for name in table}
    assert not any(name.startswith("random_") for name in styles)


def drawn_as_promised(songs, half: str) -> None:
    """Every song of a corpus drawn by corpus96's rule (`corpus96.draw`): a tempo in its
    metre's range, a progression of its scale's table, an excerpt that neither starts nor
    ends on the tonic, and the half it is in."""
    from tests.analysis import corpus96

    for song in songs:
        low, high = corpus96.TEMPI[song.metre]
        assert low <= song.bpm <= high, song.name
        assert song.progression in corpus96.PROGRESSIONS96[song.scale]
        assert song.half == half, song.name
        if song.excerpt:
            assert _tonic(song) not in (song.progression[0], song.progression[-1]), song.name


def rendered_as_promised(folder, songs, half: str = "held_out") -> None:
    """A rendered corpus of corpus96's rule: every installed soundfont dealt as corpus60
    deals them, truth.json saying what the songs say, each file in its format, stereo at
    44.1 kHz, 12 to 50 s long, an excerpt cut at its last bar line."""
    truth = json.loads((folder / "truth.json").read_text(encoding="utf-8"))["songs"]
    entries = {t["name"]: t for t in truth}
    installed = available_fonts()
    assert {entries[s.name]["font"] for s in songs} == set(installed)
    for song in songs:
        entry = entries[song.name]
        assert entry["font"] == font_for(song, installed)
        assert (entry["bpm"], entry["keyscale"], entry["timesignature"], entry["half"]) == (
            song.bpm, song.keyscale, song.timesignature, half,
        )  # fmt: skip
        info = sf.info(folder / song.filename)
        assert info.samplerate == 44100 and info.channels == 2
        assert {"wav": "WAV", "flac": "FLAC", "mp3": "MP3", "ogg": "OGG"}[song.fmt] == info.format
        length = bars(song) * bar_seconds(song)
        if song.excerpt:  # cut at its last bar line (MP3 pads a little)
            assert info.duration == pytest.approx(length, abs=0.1), song.name
        assert 12 < info.duration < 50, (song.name, info.duration)


def midi_says_what_the_truth_says(song: Song) -> None:
    """A song's MIDI file has its tempo, its time signature, and drums if its style has."""
    tempo, signature, notes = _read_midi(song_midi(song))
    metre = METRES[song.metre]
    assert 60e6 / tempo == pytest.approx(song.bpm * metre.beat / 4, rel=1e-4)
    assert signature[:2] == (metre.numerator, metre.denominator)
    assert any(channel == 9 for channel, _, _ in notes) == song.drums


def _read_midi(data: bytes) -> tuple[int, tuple[int, int], list[tuple[int, int, int]]]:
    """µs a quarter, (numerator, denominator), and (channel, pitch, tick) of every note-on, of
    a format-0 file with no running status (what corpus.py's writer makes)."""
    assert data[:4] == b"MThd" and struct.unpack(">IHHH", data[4:14])[:2] == (6, 0)
    assert data[14:18] == b"MTrk"
    track, i, tick = data[22:], 0, 0
    tempo, signature, notes = 0, (0, 0), []
    while i < len(track):
        delta = 0
        while True:
            byte = track[i]
            i += 1
            delta = delta << 7 | byte & 0x7F
            if byte < 0x80:
                break
        tick += delta
        status = track[i]
        if status == 0xFF:
            kind, length = track[i + 1], track[i + 2]
            body = track[i + 3 : i + 3 + length]
            if kind == 0x51:
                tempo = int.from_bytes(body, "big")
            elif kind == 0x58:
                signature = (body[0], 2 ** body[1])
            i += 3 + length
        elif status & 0xF0 == 0xC0:
            i += 2
        else:
            if status & 0xF0 == 0x90 and track[i + 2] > 0:
                notes.append((status & 0x0F, track[i + 1], tick))
            i += 3
    return tempo, signature, notes


def test_the_extra_development_songs_are_apart_from_the_corpus() -> None:
    assert len(DEV_EXTRA) == EXTRA_COUNT and extra_songs() == DEV_EXTRA  # the same every time
    names = {s.name for s in DEV_EXTRA}
    assert len(names) == len(DEV_EXTRA) and not names & {s.name for s in SONGS}
    assert {s.half for s in DEV_EXTRA} == {"dev_extra"}
    assert set(split(SONGS)) == {s.name for s in SONGS}  # the split is SONGS' alone
    assert {s.metre for s in DEV_EXTRA} == set(METRES)
    for song in DEV_EXTRA:
        same_metre = [s.bpm for s in SONGS if s.metre == song.metre]
        assert min(same_metre) <= song.bpm <= max(same_metre), song
        assert song.progression in {s.progression for s in SONGS if s.scale == song.scale}
        if song.excerpt:
            assert _tonic(song) not in (song.progression[0], song.progression[-1]), song
    for song in DEV_EXTRA[:8]:  # the generator writes them as it writes the corpus
        tempo, signature, _ = _read_midi(song_midi(song))
        assert 60e6 / tempo == pytest.approx(song.bpm * METRES[song.metre].beat / 4, rel=1e-4)
        assert signature[:2] == (METRES[song.metre].numerator, METRES[song.metre].denominator)


def test_the_fit_recovers_the_weights_of_a_conditional_logit() -> None:
    # 400 songs of 6 candidates, 3 features; the right candidate drawn from the softmax of
    # known weights: the fit finds them back
    rng = np.random.default_rng(1)
    truth = np.array([2.0, -1.0, 0.5])
    problem = []
    for _ in range(400):
        x = rng.normal(size=(6, 3))
        p = np.exp(x @ truth)
        y = np.zeros(6)
        y[rng.choice(6, p=p / p.sum())] = 1.0
        problem.append((x, y))
    found = fit_analysis.fit(problem, 3)
    assert found == pytest.approx(truth, abs=0.35)
    assert fit_analysis.fit(problem[:0], 3) == pytest.approx(np.zeros(3))


def test_the_level_fit_learns_what_the_values_say_together() -> None:
    # 300 songs of 4 candidates, 2 values; the right candidate is the one whose two values
    # agree in sign most strongly (x0 * x1 highest), which no weighted sum of them can tell:
    # the fitted networks choose it nearly always, out of sample too
    from tunesmith.analysis import meter

    rng = np.random.default_rng(2)

    def songs(n):
        problem = []
        for _ in range(n):
            x = rng.normal(size=(4, 2))
            y = np.zeros(4)
            y[int(np.argmax(x[:, 0] * x[:, 1]))] = 1.0
            problem.append((x, y))
        return problem

    model = fit_analysis.fit_level(songs(300))
    assert isinstance(model, meter.LevelModel)
    assert model.hidden_weight.shape == (fit_analysis.LEVEL_MEMBERS, fit_analysis.LEVEL_HIDDEN, 2)
    fresh = songs(200)
    chosen = [int(np.argmax(model.log_odds(x))) == int(np.argmax(y)) for x, y in fresh]
    linear = fit_analysis.fit(songs(300), 2)
    weighed = [int(np.argmax(x @ linear)) == int(np.argmax(y)) for x, y in fresh]
    assert np.mean(chosen) > 0.85 > 0.6 > np.mean(weighed)


def test_the_scoring_rules() -> None:
    song = next(s for s in SONGS if s.style == "jig")
    found = measure.Estimate(song.bpm * 1.03, song.tonic, song.scale, "6/8")
    right = measure.Result(song, found, 1.0)
    assert right.tempo_right and right.tempo_any_level and right.timesignature_right
    found = measure.Estimate(song.eighth_bpm, song.tonic.lower(), song.scale.title(), "6")
    eighths = measure.Result(song, found, 1.0)
    assert not eighths.tempo_right and eighths.tempo_any_level and eighths.key_right
    assert measure.tonic("G#") == "Ab" and measure.tonic("db") == "C#"
    assert measure.ace_timesignature("12/8") == "4" and measure.ace_timesignature(None) is None
    wrong = measure.Result(song, measure.Estimate(None, None, None), 1.0)
    assert not (wrong.tempo_right or wrong.tempo_any_level or wrong.key_right)
    assert not wrong.timesignature_right


def test_a_cross_validation_fold_holds_whole_tables() -> None:
    # corpus60's three sources are one table of arrangements, corpus96's two another; each
    # later corpus and the random arrangements are a table of their own
    sizes = {"corpus60": 32, "corpus60_test": 32, "dev_extra": 64, "corpus96": 48}
    sizes |= {"corpus96_test": 48, "corpus104": 104, "corpus112": 112, "random": 40}
    songs = [
        fit_analysis.DevSong(source, f"{source}{i}", "", 100.0, "4/4", "C", "major")
        for source, n in sizes.items()
        for i in range(n)
    ]
    songs += fit_analysis.excerpts(songs)
    folds = fit_analysis.table_folds(songs)
    assert len(folds) == fit_analysis.FOLDS and set().union(*folds) == set(range(len(songs)))
    assert sum(len(f) for f in folds) == len(songs)  # each song in one fold
    tables = [{fit_analysis.table_of(songs[i]) for i in fold} for fold in folds]
    assert sorted(len(t) for t in tables) == [1, 1, 1, 2]  # five tables in four folds
    assert {"corpus60", "corpus96"} not in tables  # the two largest apart
    for fold, held in zip(folds, tables, strict=True):
        others = set(range(len(songs))) - fold
        assert not any(fit_analysis.table_of(songs[i]) in held for i in others)
    assert {songs[i].source for i in folds[0]} == {"corpus60", "corpus60_test", "dev_extra"}
    assert fit_analysis.table_folds(songs) == folds  # the same every run
