"""The ninth corpus keeps its promises, and is scored against plain Essentia.

tests/analysis/corpus88.py draws 88 songs in 22 arrangements no earlier corpus has. It was
written after the eighth corpus was scored and before anything was changed, and scored once,
with the next change (the factor 1/2 of compound metres, the eighth corpus as development data)
chosen on development songs only and everything set. The figures asserted here are what it
reached (docs/conventions/labels.md has them, and the goals not met), so that a change that
loses any of it fails; plain Essentia (RhythmExtractor2013 and KeyExtractor at their defaults)
is measured in the same run.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.analysis import (
    corpus60,
    measure,
)
from tests.analysis.corpus88 import CACHE, SONGS88, STYLES88, make_corpus88, songs88
from tests.analysis.test_corpus60 import (
    apart_from_every_other_corpus,
    drawn_as_promised,
    midi_says_what_the_truth_says,
    rendered_as_promised,
)


def test_the_corpus_is_what_it_promises() -> None:
    assert len(SONGS88) == 88 and songs88() == SONGS88  # the same every time
    apart_from_every_other_corpus(SONGS88, STYLES88)
    assert Counter(s.style for s in SONGS88) == {style: 4 for style in STYLES88}
    assert {s.metre for s in SONGS88} == set(corpus60.METRES)
    assert {(s.metre, s.drums) for s in SONGS88} == {
        (metre, drums) for metre in corpus60.METRES for drums in (True, False)
    }
    keys = Counter(s.keyscale for s in SONGS88)
    assert len(keys) == 24 and set(keys.values()) == {3, 4}  # 88 dealt over the 24 keys
    assert Counter(s.fmt for s in SONGS88) == {"wav": 22, "flac": 22, "mp3": 22, "ogg": 22}
    assert set(Counter(s.font for s in SONGS88).values()) == {29, 30}
    drawn_as_promised(SONGS88, "held_out")


@pytest.mark.parametrize("song", SONGS88, ids=lambda s: s.name)
def test_the_midi_says_what_the_truth_says(song) -> None:
    midi_says_what_the_truth_says(song)


@pytest.fixture(scope="module")
def corpus():
    return make_corpus88()


@pytest.mark.slow
def test_it_renders_with_every_installed_soundfont(corpus) -> None:
    assert corpus == CACHE
    rendered_as_promised(corpus, SONGS88)


@pytest.fixture(scope="module")
def results(corpus) -> dict[str, list[measure.Result]]:
    found = {
        "plain Essentia": measure.measure(measure.plain_essentia, songs=SONGS88, workers=0),
        "tunesmith": measure.measure(measure.tunesmith_labels, songs=SONGS88, workers=0),
    }
    print("\n" + measure.table(measure.scores(found)))
    print("review list: " + measure.review_line(found["tunesmith"], "held_out"))
    return found


@pytest.mark.slow
def test_the_analysis_on_the_held_out_corpus(results) -> None:
    rows = {(row.estimator, row.half): row for row in measure.scores(results)}
    ours, plain = rows["tunesmith", "held_out"], rows["plain Essentia", "held_out"]
    assert ours.songs == plain.songs == len(SONGS88)
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
# tempo 66/88 (plain Essentia 37), key 85/88 (plain 80), time signature 76/88; 0.68 CPU
# seconds a song against plain Essentia's 0.42. Of the tempi and keys the review list caught
# 17 of the 25 wrong and listed 22 of the 151 right.
HELD_OUT = {"tempo": 66, "key": 85, "timesignature": 76, "caught": 17, "listed": 22}
