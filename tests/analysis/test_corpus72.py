"""The held-out corpus keeps its promises, and is scored against plain Essentia.

tests/analysis/corpus72.py draws 72 songs in 18 arrangements no earlier corpus has. It was
written after the sixth corpus was scored and before anything was changed, and scored once,
with the level model refitted (on development songs only) and everything set. The figures
asserted here are exactly what it reached then (docs/conventions/labels.md has them, and the
goals not met), so that a change that loses any of it fails; plain Essentia
(RhythmExtractor2013 and KeyExtractor at their defaults) is measured in the same run.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.analysis import (
    corpus48,
    corpus52,
    corpus56,
    corpus60,
    corpus64,
    corpus96,
    measure,
    random_styles,
)
from tests.analysis.corpus72 import CACHE, SONGS72, STYLES72, make_corpus72, songs72
from tests.analysis.test_corpus60 import (
    drawn_as_promised,
    midi_says_what_the_truth_says,
    rendered_as_promised,
)


def test_the_corpus_is_what_it_promises() -> None:
    assert len(SONGS72) == 72 and songs72() == SONGS72  # the same every time
    earlier = (*corpus60.SONGS, *corpus60.DEV_EXTRA, *corpus96.SONGS96, *corpus48.SONGS48)
    earlier += (*corpus56.SONGS56, *corpus52.SONGS52, *corpus64.SONGS64)
    earlier += random_styles.RANDOM_SONGS
    assert not {s.name for s in SONGS72} & {s.name for s in earlier}
    tables = (corpus60.STYLES, corpus96.STYLES96, corpus48.STYLES48, corpus56.STYLES56)
    tables += (corpus52.STYLES52, corpus64.STYLES64)
    assert not set(STYLES72) & {name for table in tables for name in table}
    assert Counter(s.style for s in SONGS72) == {style: 4 for style in STYLES72}
    assert {s.metre for s in SONGS72} == set(corpus60.METRES)
    assert set(Counter(s.keyscale for s in SONGS72).values()) == {3}  # the 24 keys, 3 times
    assert Counter(s.fmt for s in SONGS72) == {"wav": 18, "flac": 18, "mp3": 18, "ogg": 18}
    assert set(Counter(s.font for s in SONGS72).values()) == {24}
    drawn_as_promised(SONGS72, "held_out")


@pytest.mark.parametrize("song", SONGS72, ids=lambda s: s.name)
def test_the_midi_says_what_the_truth_says(song) -> None:
    midi_says_what_the_truth_says(song)


@pytest.fixture(scope="module")
def corpus():
    return make_corpus72()


@pytest.mark.slow
def test_it_renders_with_every_installed_soundfont(corpus) -> None:
    assert corpus == CACHE
    rendered_as_promised(corpus, SONGS72)


@pytest.fixture(scope="module")
def results(corpus) -> dict[str, list[measure.Result]]:
    found = {
        "plain Essentia": measure.measure(measure.plain_essentia, songs=SONGS72, workers=0),
        "tunesmith": measure.measure(measure.tunesmith_labels, songs=SONGS72, workers=0),
    }
    print("\n" + measure.table(measure.scores(found)))
    print("review list: " + measure.review_line(found["tunesmith"], "held_out"))
    return found


@pytest.mark.slow
def test_the_analysis_on_the_held_out_corpus(results) -> None:
    rows = {(row.estimator, row.half): row for row in measure.scores(results)}
    ours, plain = rows["tunesmith", "held_out"], rows["plain Essentia", "held_out"]
    assert ours.songs == plain.songs == len(SONGS72)
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


# The analysis as it is (the level model fitted on development songs only), scored once:
# tempo 67/72 (plain Essentia 49), key 71/72 (plain 65), time signature 63/72; 0.80 CPU
# seconds a song against plain Essentia's 0.43. Of the tempi and keys the review list caught
# 5 of the 6 wrong and listed 27 of the 138 right.
HELD_OUT = {"tempo": 67, "key": 71, "timesignature": 63, "caught": 5, "listed": 27}
