"""The second corpus keeps its promises, and its test half is scored against plain Essentia.

tests/analysis/corpus96.py draws 96 songs in 18 arrangements the first corpus lacks. Its dev
half joined the development songs the analysis is fitted on (tests/analysis/fit_analysis.py);
its test half was scored once, after everything was set. The figures asserted here are
exactly what it reached then (docs/conventions/labels.md has the table, and the goals it
does not meet), so that a change that loses any of it fails; plain Essentia (RhythmExtractor2013
and KeyExtractor at their defaults) is measured in the same run.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
import soundfile as sf

from tests.analysis import corpus60, measure
from tests.analysis.corpus96 import CACHE, PROGRESSIONS96, SONGS96, STYLES96, make_corpus96, songs96
from tests.analysis.test_corpus60 import _read_midi

TEST = tuple(s for s in SONGS96 if s.half == "test")


def test_the_corpus_is_what_it_promises() -> None:
    assert len(SONGS96) == 96 and songs96() == SONGS96  # the same every time
    assert not {s.name for s in SONGS96} & {s.name for s in (*corpus60.SONGS, *corpus60.DEV_EXTRA)}
    assert not set(STYLES96) & set(corpus60.STYLES)  # arrangements the first corpus lacks
    assert {s.style for s in SONGS96} == set(STYLES96)
    assert {s.metre for s in SONGS96} == set(corpus60.METRES)
    keys = Counter(s.keyscale for s in SONGS96)
    assert len(keys) == 24 and set(keys.values()) == {4}
    assert {s.fmt for s in SONGS96} == {"wav", "flac", "mp3", "ogg"}
    assert {s.font for s in SONGS96} == set(corpus60.FONTS)
    assert 55 <= min(s.bpm for s in SONGS96 if not corpus60.METRES[s.metre].compound)
    assert max(s.bpm for s in SONGS96) <= 200
    for scale, progressions in PROGRESSIONS96.items():
        home = "I" if scale == "major" else "i"
        assert all(home in p for p in progressions)  # every progression plays its tonic
        assert sum(len(p) == 8 for p in progressions) == 4  # half hold a chord two bars
    for song in SONGS96:
        if song.excerpt:
            home = "I" if song.scale == "major" else "i"
            assert home not in (song.progression[0], song.progression[-1]), song.name


def test_the_split_is_fixed_and_stratified() -> None:
    halves = Counter(s.half for s in SONGS96)
    assert halves == {"dev": 48, "test": 48}
    for metre in corpus60.METRES:
        for drums in (True, False):
            group = Counter(s.half for s in SONGS96 if (s.metre, s.drums) == (metre, drums))
            assert abs(group["dev"] - group["test"]) <= 1, (metre, drums, group)
    assert corpus60.split(tuple(reversed(SONGS96))) == corpus60.split(SONGS96)


@pytest.mark.parametrize("song", SONGS96[:12], ids=lambda s: s.name)
def test_the_midi_says_what_the_truth_says(song) -> None:
    tempo, signature, notes = _read_midi(corpus60.song_midi(song))
    metre = corpus60.METRES[song.metre]
    assert 60e6 / tempo == pytest.approx(song.bpm * metre.beat / 4, rel=1e-4)
    assert signature[:2] == (metre.numerator, metre.denominator)
    assert any(channel == 9 for channel, _, _ in notes) == song.drums


@pytest.fixture(scope="module")
def corpus():
    return make_corpus96(half="test")


@pytest.mark.slow
def test_the_test_half_renders_with_every_installed_soundfont(corpus) -> None:
    assert corpus == CACHE
    truth = json.loads((corpus / "truth.json").read_text(encoding="utf-8"))["songs"]
    entries = {t["name"]: t for t in truth}
    installed = corpus60.available_fonts()
    assert {entries[s.name]["font"] for s in TEST} == set(installed)
    for song in TEST:
        entry = entries[song.name]
        assert entry["font"] == corpus60.font_for(song, installed)
        assert (entry["bpm"], entry["keyscale"], entry["timesignature"], entry["half"]) == (
            song.bpm, song.keyscale, song.timesignature, "test",
        )  # fmt: skip
        info = sf.info(corpus / song.filename)
        assert info.samplerate == 44100 and info.channels == 2
        assert {"wav": "WAV", "flac": "FLAC", "mp3": "MP3", "ogg": "OGG"}[song.fmt] == info.format
        length = corpus60.bars(song) * corpus60.bar_seconds(song)
        if song.excerpt:  # cut at its last bar line (MP3 pads a little)
            assert info.duration == pytest.approx(length, abs=0.1), song.name
        assert 12 < info.duration < 50, (song.name, info.duration)  # 8 slow 12/8 bars: 48 s


@pytest.fixture(scope="module")
def results(corpus) -> dict[str, list[measure.Result]]:
    found = {
        "plain Essentia": measure.measure(measure.plain_essentia, songs=TEST, workers=0),
        "tunesmith": measure.measure(measure.tunesmith_labels, songs=TEST, workers=0),
    }
    print("\n" + measure.table(measure.scores(found)))
    print("review list, test half: " + measure.review_line(found["tunesmith"], "test"))
    return found


@pytest.mark.slow
def test_the_analysis_on_the_test_half(results) -> None:
    rows = {(row.estimator, row.half): row for row in measure.scores(results)}
    ours, plain = rows["tunesmith", "test"], rows["plain Essentia", "test"]
    assert ours.songs == plain.songs == len(TEST)
    assert ours.tempo >= TEST_HALF["tempo"] and ours.tempo >= plain.tempo
    assert ours.key >= TEST_HALF["key"] and ours.key >= plain.key
    assert ours.timesignature >= TEST_HALF["timesignature"]
    assert plain.timesignature == 0  # plain Essentia gives none
    # CPU seconds a song (one core): the goal is at most twice plain Essentia's
    assert ours.seconds <= 2.0 * plain.seconds, (ours.seconds, plain.seconds)
    caught, wrong, listed, right = measure.review_rates(results["tunesmith"], "test")[
        "tempo and key"
    ]
    assert caught >= TEST_HALF["caught"] and listed <= TEST_HALF["listed"]


# First scored (once, after the analysis was fitted on development songs only): tempo 36/48
# (plain Essentia 29), key 46/48 (plain 44), time signature 40/48; 0.64 CPU seconds a song
# against plain Essentia's 0.39. Of the tempi and keys the review list caught 12 of the 14
# wrong and listed 26 of the 82 right.
TEST_HALF = {"tempo": 36, "key": 46, "timesignature": 40, "caught": 12, "listed": 26}
