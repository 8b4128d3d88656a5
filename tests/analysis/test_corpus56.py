"""The held-out corpus keeps its promises, and is scored against plain Essentia.

tests/analysis/corpus56.py draws 56 songs in 14 arrangements no earlier corpus has. It was
written before the analysis was refitted (on development songs only, the third corpus and
the randomly arranged songs among them) and scored once, with everything set. The figures
asserted here are exactly what it reached then (docs/conventions/labels.md has them, and the
goals not met), so that a change that loses any of it fails; plain Essentia
(RhythmExtractor2013 and KeyExtractor at their defaults) is measured in the same run.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
import soundfile as sf

from tests.analysis import corpus48, corpus60, corpus96, measure, random_styles
from tests.analysis.corpus56 import CACHE, SONGS56, STYLES56, make_corpus56, songs56
from tests.analysis.test_corpus60 import drawn_as_promised, midi_says_what_the_truth_says


def test_the_corpus_is_what_it_promises() -> None:
    assert len(SONGS56) == 56 and songs56() == SONGS56  # the same every time
    earlier = (*corpus60.SONGS, *corpus60.DEV_EXTRA, *corpus96.SONGS96, *corpus48.SONGS48)
    earlier += random_styles.RANDOM_SONGS
    assert not {s.name for s in SONGS56} & {s.name for s in earlier}
    tables = (corpus60.STYLES, corpus96.STYLES96, corpus48.STYLES48)
    assert not set(STYLES56) & {name for table in tables for name in table}
    assert not any(name.startswith("random_") for name in STYLES56)
    assert Counter(s.style for s in SONGS56) == {style: 4 for style in STYLES56}
    assert {s.metre for s in SONGS56} == set(corpus60.METRES)
    keys = Counter(s.keyscale for s in SONGS56)
    assert len(keys) == 24 and set(keys.values()) == {2, 3}
    assert Counter(s.fmt for s in SONGS56) == {"wav": 14, "flac": 14, "mp3": 14, "ogg": 14}
    assert set(Counter(s.font for s in SONGS56).values()) <= {18, 19}
    drawn_as_promised(SONGS56, "held_out")


@pytest.mark.parametrize("song", SONGS56[:14], ids=lambda s: s.name)
def test_the_midi_says_what_the_truth_says(song) -> None:
    midi_says_what_the_truth_says(song)


@pytest.fixture(scope="module")
def corpus():
    return make_corpus56()


@pytest.mark.slow
def test_it_renders_with_every_installed_soundfont(corpus) -> None:
    assert corpus == CACHE
    truth = json.loads((corpus / "truth.json").read_text(encoding="utf-8"))["songs"]
    entries = {t["name"]: t for t in truth}
    installed = corpus60.available_fonts()
    assert {entries[s.name]["font"] for s in SONGS56} == set(installed)
    for song in SONGS56:
        entry = entries[song.name]
        assert entry["font"] == corpus60.font_for(song, installed)
        assert (entry["bpm"], entry["keyscale"], entry["timesignature"], entry["half"]) == (
            song.bpm, song.keyscale, song.timesignature, "held_out",
        )  # fmt: skip
        info = sf.info(corpus / song.filename)
        assert info.samplerate == 44100 and info.channels == 2
        assert {"wav": "WAV", "flac": "FLAC", "mp3": "MP3", "ogg": "OGG"}[song.fmt] == info.format
        length = corpus60.bars(song) * corpus60.bar_seconds(song)
        if song.excerpt:  # cut at its last bar line (MP3 pads a little)
            assert info.duration == pytest.approx(length, abs=0.1), song.name
        assert 12 < info.duration < 50, (song.name, info.duration)


@pytest.fixture(scope="module")
def results(corpus) -> dict[str, list[measure.Result]]:
    found = {
        "plain Essentia": measure.measure(measure.plain_essentia, songs=SONGS56, workers=0),
        "tunesmith": measure.measure(measure.tunesmith_labels, songs=SONGS56, workers=0),
    }
    print("\n" + measure.table(measure.scores(found)))
    print("review list: " + measure.review_line(found["tunesmith"], "held_out"))
    return found


@pytest.mark.slow
def test_the_analysis_on_the_held_out_corpus(results) -> None:
    rows = {(row.estimator, row.half): row for row in measure.scores(results)}
    ours, plain = rows["tunesmith", "held_out"], rows["plain Essentia", "held_out"]
    assert ours.songs == plain.songs == len(SONGS56)
    assert ours.tempo >= HELD_OUT["tempo"] and ours.tempo > plain.tempo
    assert ours.key >= HELD_OUT["key"] and ours.key >= plain.key
    assert ours.timesignature >= HELD_OUT["timesignature"]
    assert plain.timesignature == 0  # plain Essentia gives none
    # CPU seconds a song (one core): the goal is at most twice plain Essentia's
    assert ours.seconds <= 2.0 * plain.seconds, (ours.seconds, plain.seconds)
    caught, wrong, listed, right = measure.review_rates(results["tunesmith"], "held_out")[
        "tempo and key"
    ]
    assert caught >= HELD_OUT["caught"] and listed <= HELD_OUT["listed"]


# The analysis as it is (fitted on development songs only), scored once: tempo 38/56 (plain
# Essentia 34), key 52/56 (plain 48), time signature 36/56; 0.68 CPU seconds a song against
# plain Essentia's 0.40. Of the tempi and keys the review list caught 16 of the 22 wrong and
# listed 19 of the 90 right.
HELD_OUT = {"tempo": 38, "key": 52, "timesignature": 36, "caught": 16, "listed": 19}
