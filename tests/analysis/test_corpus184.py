"""The twentieth corpus keeps its promises, and is scored against plain Essentia.

tests/analysis/corpus184.py draws 184 songs in 46 arrangements no earlier corpus has, mostly
the mainstream genres and textures a user's own songs come from. It was written before the next
change was chosen (a refit with the nineteenth corpus among the development songs) and scored
once, with that refit and with the shipped analysis beside it. The refit read no more of it and
read a unit case of tests/analysis/test_meter.py wrong, so the analysis that ships is the one
fitted before, and the figures asserted here are what that analysis reached on this corpus
(docs/conventions/labels.md has both, and the goals not met), so that a change that loses any
of it fails; plain Essentia (RhythmExtractor2013 and KeyExtractor at their defaults) is measured
in the same run. Rendered (data/cache/corpus184), its songs are 13 to 48 s long. It is now
among tests/analysis/fit_analysis.py's development songs, for the next fit; the analysis that
ships was fitted before it, so the figures here are still of music that fit had not met.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.analysis import corpus60, measure
from tests.analysis.corpus184 import CACHE, SONGS184, STYLES184, make_corpus184, songs184
from tests.analysis.test_corpus60 import (
    apart_from_every_other_corpus,
    drawn_as_promised,
    midi_says_what_the_truth_says,
    rendered_as_promised,
)


def test_the_corpus_is_what_it_promises() -> None:
    assert len(SONGS184) == 184 and songs184() == SONGS184  # the same every time
    apart_from_every_other_corpus(SONGS184, STYLES184)
    assert Counter(s.style for s in SONGS184) == {style: 4 for style in STYLES184}
    assert {s.metre for s in SONGS184} == set(corpus60.METRES)
    assert {(s.metre, s.drums) for s in SONGS184} == {
        (metre, drums) for metre in corpus60.METRES for drums in (True, False)
    }
    keys = Counter(s.keyscale for s in SONGS184)
    assert len(keys) == 24 and Counter(keys.values()) == {8: 16, 7: 8}  # 184 over the 24 keys
    assert Counter(s.fmt for s in SONGS184) == {"wav": 46, "flac": 46, "mp3": 46, "ogg": 46}
    assert sorted(Counter(s.font for s in SONGS184).values()) == [61, 61, 62]
    drawn_as_promised(SONGS184, "held_out")


@pytest.mark.parametrize("song", SONGS184, ids=lambda s: s.name)
def test_the_midi_says_what_the_truth_says(song) -> None:
    midi_says_what_the_truth_says(song)


@pytest.fixture(scope="module")
def corpus():
    return make_corpus184()


@pytest.mark.slow
def test_it_renders_with_every_installed_soundfont(corpus) -> None:
    assert corpus == CACHE
    rendered_as_promised(corpus, SONGS184)


@pytest.fixture(scope="module")
def results(corpus) -> dict[str, list[measure.Result]]:
    found = {
        "plain Essentia": measure.measure(measure.plain_essentia, songs=SONGS184, workers=0),
        "tunesmith": measure.measure(measure.tunesmith_labels, songs=SONGS184, workers=0),
    }
    print("\n" + measure.table(measure.scores(found)))
    print("review list: " + measure.review_line(found["tunesmith"], "held_out"))
    return found


@pytest.mark.slow
def test_the_analysis_on_the_held_out_corpus(results) -> None:
    rows = {(row.estimator, row.half): row for row in measure.scores(results)}
    ours, plain = rows["tunesmith", "held_out"], rows["plain Essentia", "held_out"]
    assert ours.songs == plain.songs == len(SONGS184)
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


# The analysis as it ships (the level model, ten networks of 64 units, with the learned
# activation's beat, downbeat, metre and tempo, fitted on 2,575 development songs, neither the
# nineteenth corpus nor this one among them, each clip's activations from a network that never
# heard its corpus), scored once: tempo 158/184 (plain Essentia 114), key 181/184 (plain 172),
# time signature 161/184; 0.97 CPU seconds a song against plain Essentia's 0.59. Of the tempi
# and keys the review list caught 25 of the 29 wrong and listed 70 of the 339 right.
HELD_OUT = {"tempo": 158, "key": 181, "timesignature": 161, "caught": 25, "listed": 70}
