"""The held-out corpus keeps its promises, and is scored against plain Essentia.

tests/analysis/corpus48.py draws 48 songs in 12 arrangements neither earlier corpus has.
It was written after the analysis's evidence was chosen (by cross-validation on development
songs only) and scored with everything set; a later change for short clips (chosen on
development songs too) was scored on it again. The figures asserted here are exactly what it
reached then (docs/conventions/labels.md has both scorings, and the goals not met), so that a
change that loses any of it fails; plain Essentia (RhythmExtractor2013 and KeyExtractor at
their defaults) is measured in the same run and printed.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
import soundfile as sf

from tests.analysis import corpus60, corpus96, measure
from tests.analysis.corpus48 import CACHE, SONGS48, STYLES48, make_corpus48, songs48
from tests.analysis.test_corpus60 import midi_says_what_the_truth_says


def test_the_corpus_is_what_it_promises() -> None:
    assert len(SONGS48) == 48 and songs48() == SONGS48  # the same every time
    earlier = (*corpus60.SONGS, *corpus60.DEV_EXTRA, *corpus96.SONGS96)
    assert not {s.name for s in SONGS48} & {s.name for s in earlier}
    assert not set(STYLES48) & (set(corpus60.STYLES) | set(corpus96.STYLES96))
    assert Counter(s.style for s in SONGS48) == {style: 4 for style in STYLES48}
    assert {s.metre for s in SONGS48} == set(corpus60.METRES)
    keys = Counter(s.keyscale for s in SONGS48)
    assert len(keys) == 24 and set(keys.values()) == {2}
    assert Counter(s.fmt for s in SONGS48) == {"wav": 12, "flac": 12, "mp3": 12, "ogg": 12}
    assert Counter(s.font for s in SONGS48) == {font: 16 for font in corpus60.FONTS}
    for song in SONGS48:
        low, high = corpus96.TEMPI[song.metre]
        assert low <= song.bpm <= high, song.name
        assert song.progression in corpus96.PROGRESSIONS96[song.scale]
        assert song.half == "held_out"
        if song.excerpt:
            home = "I" if song.scale == "major" else "i"
            assert home not in (song.progression[0], song.progression[-1]), song.name


@pytest.mark.parametrize("song", SONGS48[:12], ids=lambda s: s.name)
def test_the_midi_says_what_the_truth_says(song) -> None:
    midi_says_what_the_truth_says(song)


@pytest.fixture(scope="module")
def corpus():
    return make_corpus48()


@pytest.mark.slow
def test_it_renders_with_every_installed_soundfont(corpus) -> None:
    assert corpus == CACHE
    truth = json.loads((corpus / "truth.json").read_text(encoding="utf-8"))["songs"]
    entries = {t["name"]: t for t in truth}
    installed = corpus60.available_fonts()
    assert {entries[s.name]["font"] for s in SONGS48} == set(installed)
    for song in SONGS48:
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
        "plain Essentia": measure.measure(measure.plain_essentia, songs=SONGS48, workers=0),
        "tunesmith": measure.measure(measure.tunesmith_labels, songs=SONGS48, workers=0),
    }
    print("\n" + measure.table(measure.scores(found)))
    print("review list: " + measure.review_line(found["tunesmith"], "held_out"))
    return found


@pytest.mark.slow
def test_the_analysis_on_the_held_out_corpus(results) -> None:
    rows = {(row.estimator, row.half): row for row in measure.scores(results)}
    ours, plain = rows["tunesmith", "held_out"], rows["plain Essentia", "held_out"]
    assert ours.songs == plain.songs == len(SONGS48)
    assert ours.tempo >= HELD_OUT["tempo"]  # plain Essentia's 31: not above it (the docs)
    assert ours.key >= HELD_OUT["key"] and ours.key >= plain.key
    assert ours.timesignature >= HELD_OUT["timesignature"]
    assert plain.timesignature == 0  # plain Essentia gives none
    # CPU seconds a song (one core): the goal is at most twice plain Essentia's
    assert ours.seconds <= 2.0 * plain.seconds, (ours.seconds, plain.seconds)
    caught, wrong, listed, right = measure.review_rates(results["tunesmith"], "held_out")[
        "tempo and key"
    ]
    assert caught >= HELD_OUT["caught"] and listed <= HELD_OUT["listed"]


# The analysis as it is (fitted on development songs only): tempo 30/48 (plain Essentia 31),
# key 47/48 (plain 44), time signature 38/48; 0.69 CPU seconds a song against plain
# Essentia's 0.39. Of the tempi and keys the review list caught 16 of the 19 wrong and listed
# 18 of the 77 right. (First scored, before the change for short clips: 31, 47, 39; 16 of 18
# caught, 14 of 78 listed.)
HELD_OUT = {"tempo": 30, "key": 47, "timesignature": 38, "caught": 16, "listed": 18}
