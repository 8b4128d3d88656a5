"""The held-out corpus keeps its promises, and is scored against plain Essentia.

tests/analysis/corpus64.py draws 64 songs in 16 arrangements no earlier corpus has. It was
written after the fifth corpus was scored and before anything was changed, and scored once,
with the analysis refitted (on development songs only) and everything set. The figures asserted
here are exactly what it reached then (docs/conventions/labels.md has them, and the goals not
met), so that a change that loses any of it fails; plain Essentia (RhythmExtractor2013 and
KeyExtractor at their defaults) is measured in the same run.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.analysis import (
    corpus48,
    corpus52,
    corpus56,
    corpus60,
    corpus96,
    measure,
    random_styles,
)
from tests.analysis.corpus64 import CACHE, SONGS64, STYLES64, make_corpus64, songs64
from tests.analysis.test_corpus60 import (
    drawn_as_promised,
    midi_says_what_the_truth_says,
    rendered_as_promised,
)


def test_the_corpus_is_what_it_promises() -> None:
    assert len(SONGS64) == 64 and songs64() == SONGS64  # the same every time
    earlier = (*corpus60.SONGS, *corpus60.DEV_EXTRA, *corpus96.SONGS96, *corpus48.SONGS48)
    earlier += (*corpus56.SONGS56, *corpus52.SONGS52, *random_styles.RANDOM_SONGS)
    assert not {s.name for s in SONGS64} & {s.name for s in earlier}
    tables = (
        corpus60.STYLES,
        corpus96.STYLES96,
        corpus48.STYLES48,
        corpus56.STYLES56,
        corpus52.STYLES52,
    )
    assert not set(STYLES64) & {name for table in tables for name in table}
    assert Counter(s.style for s in SONGS64) == {style: 4 for style in STYLES64}
    assert {s.metre for s in SONGS64} == set(corpus60.METRES)
    keys = Counter(s.keyscale for s in SONGS64)
    assert len(keys) == 24 and set(keys.values()) == {2, 3}
    assert Counter(s.fmt for s in SONGS64) == {"wav": 16, "flac": 16, "mp3": 16, "ogg": 16}
    assert set(Counter(s.font for s in SONGS64).values()) <= {21, 22}
    drawn_as_promised(SONGS64, "held_out")


@pytest.mark.parametrize("song", SONGS64, ids=lambda s: s.name)
def test_the_midi_says_what_the_truth_says(song) -> None:
    midi_says_what_the_truth_says(song)


@pytest.fixture(scope="module")
def corpus():
    return make_corpus64()


@pytest.mark.slow
def test_it_renders_with_every_installed_soundfont(corpus) -> None:
    assert corpus == CACHE
    rendered_as_promised(corpus, SONGS64)


@pytest.fixture(scope="module")
def results(corpus) -> dict[str, list[measure.Result]]:
    found = {
        "plain Essentia": measure.measure(measure.plain_essentia, songs=SONGS64, workers=0),
        "tunesmith": measure.measure(measure.tunesmith_labels, songs=SONGS64, workers=0),
    }
    print("\n" + measure.table(measure.scores(found)))
    print("review list: " + measure.review_line(found["tunesmith"], "held_out"))
    return found


@pytest.mark.slow
def test_the_analysis_on_the_held_out_corpus(results) -> None:
    rows = {(row.estimator, row.half): row for row in measure.scores(results)}
    ours, plain = rows["tunesmith", "held_out"], rows["plain Essentia", "held_out"]
    assert ours.songs == plain.songs == len(SONGS64)
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


# The analysis as it is (fitted on development songs only), scored once: tempo 48/64 (plain
# Essentia 30), key 62/64 (plain 58), time signature 52/64; 0.73 CPU seconds a song against
# plain Essentia's 0.43. Of the tempi and keys the review list caught 13 of the 18 wrong and
# listed 22 of the 110 right.
HELD_OUT = {"tempo": 48, "key": 62, "timesignature": 52, "caught": 13, "listed": 22}
