"""The nineteenth corpus keeps its promises, and is scored against plain Essentia.

tests/analysis/corpus176.py draws 176 songs in 44 arrangements no earlier corpus has. It was
written before the next change was chosen (the eighteenth corpus joining the development
songs, and the review's doubt) and scored once, with that change chosen on development songs
only and everything set. The figures asserted here are what it reached
(docs/conventions/labels.md has them, and the goals not met), so that a change that loses any of
it fails; plain Essentia (RhythmExtractor2013 and KeyExtractor at their defaults) is measured in
the same run. Rendered (data/cache/corpus176), its songs are 14 to 46 s long.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.analysis import corpus60, measure
from tests.analysis.corpus176 import CACHE, SONGS176, STYLES176, make_corpus176, songs176
from tests.analysis.test_corpus60 import (
    apart_from_every_other_corpus,
    drawn_as_promised,
    midi_says_what_the_truth_says,
    rendered_as_promised,
)


def test_the_corpus_is_what_it_promises() -> None:
    assert len(SONGS176) == 176 and songs176() == SONGS176  # the same every time
    apart_from_every_other_corpus(SONGS176, STYLES176)
    assert Counter(s.style for s in SONGS176) == {style: 4 for style in STYLES176}
    assert {s.metre for s in SONGS176} == set(corpus60.METRES)
    assert {(s.metre, s.drums) for s in SONGS176} == {
        (metre, drums) for metre in corpus60.METRES for drums in (True, False)
    }
    keys = Counter(s.keyscale for s in SONGS176)
    assert len(keys) == 24 and Counter(keys.values()) == {7: 16, 8: 8}  # 176 over the 24 keys
    assert Counter(s.fmt for s in SONGS176) == {"wav": 44, "flac": 44, "mp3": 44, "ogg": 44}
    assert sorted(Counter(s.font for s in SONGS176).values()) == [58, 59, 59]
    drawn_as_promised(SONGS176, "held_out")


@pytest.mark.parametrize("song", SONGS176, ids=lambda s: s.name)
def test_the_midi_says_what_the_truth_says(song) -> None:
    midi_says_what_the_truth_says(song)


@pytest.fixture(scope="module")
def corpus():
    return make_corpus176()


@pytest.mark.slow
def test_it_renders_with_every_installed_soundfont(corpus) -> None:
    assert corpus == CACHE
    rendered_as_promised(corpus, SONGS176)


@pytest.fixture(scope="module")
def results(corpus) -> dict[str, list[measure.Result]]:
    found = {
        "plain Essentia": measure.measure(measure.plain_essentia, songs=SONGS176, workers=0),
        "tunesmith": measure.measure(measure.tunesmith_labels, songs=SONGS176, workers=0),
    }
    print("\n" + measure.table(measure.scores(found)))
    print("review list: " + measure.review_line(found["tunesmith"], "held_out"))
    return found


@pytest.mark.slow
def test_the_analysis_on_the_held_out_corpus(results) -> None:
    rows = {(row.estimator, row.half): row for row in measure.scores(results)}
    ours, plain = rows["tunesmith", "held_out"], rows["plain Essentia", "held_out"]
    assert ours.songs == plain.songs == len(SONGS176)
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


# The analysis as it is (the level model, ten networks of 64 units, with the learned
# activation's beat, downbeat, metre and tempo, fitted on development songs only, the eighteenth
# corpus among them, each clip's activations from a network that never heard its corpus),
# scored once: tempo 123/176 (plain Essentia 95), key 167/176 (plain 153), time signature
# 125/176; 0.67 CPU seconds a song against plain Essentia's 0.44. Of the tempi and keys the
# review list caught 49 of the 62 wrong and listed 73 of the 290 right.
HELD_OUT = {"tempo": 123, "key": 167, "timesignature": 125, "caught": 49, "listed": 73}
