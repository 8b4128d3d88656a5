"""The eighteenth corpus keeps its promises, and is scored against plain Essentia.

tests/analysis/corpus168.py draws 168 songs in 42 arrangements no earlier corpus has. It was
written before the next change was chosen (the seventeenth corpus joining the development
songs, and the fit's folds holding whole corpora) and scored once, with that change chosen on
development songs only and everything set. The figures asserted here are what it reached
(docs/conventions/labels.md has them, and the goals not met), so that a change that loses any of
it fails; plain Essentia (RhythmExtractor2013 and KeyExtractor at their defaults) is measured in
the same run. Rendered (data/cache/corpus168), its songs are 13 to 47 s long.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.analysis import corpus60, measure
from tests.analysis.corpus168 import CACHE, SONGS168, STYLES168, make_corpus168, songs168
from tests.analysis.test_corpus60 import (
    apart_from_every_other_corpus,
    drawn_as_promised,
    midi_says_what_the_truth_says,
    rendered_as_promised,
)


def test_the_corpus_is_what_it_promises() -> None:
    assert len(SONGS168) == 168 and songs168() == SONGS168  # the same every time
    apart_from_every_other_corpus(SONGS168, STYLES168)
    assert Counter(s.style for s in SONGS168) == {style: 4 for style in STYLES168}
    assert {s.metre for s in SONGS168} == set(corpus60.METRES)
    assert {(s.metre, s.drums) for s in SONGS168} == {
        (metre, drums) for metre in corpus60.METRES for drums in (True, False)
    }
    keys = Counter(s.keyscale for s in SONGS168)
    assert len(keys) == 24 and set(keys.values()) == {7}  # 168 dealt over the 24 keys
    assert Counter(s.fmt for s in SONGS168) == {"wav": 42, "flac": 42, "mp3": 42, "ogg": 42}
    assert sorted(Counter(s.font for s in SONGS168).values()) == [56, 56, 56]
    drawn_as_promised(SONGS168, "held_out")


@pytest.mark.parametrize("song", SONGS168, ids=lambda s: s.name)
def test_the_midi_says_what_the_truth_says(song) -> None:
    midi_says_what_the_truth_says(song)


@pytest.fixture(scope="module")
def corpus():
    return make_corpus168()


@pytest.mark.slow
def test_it_renders_with_every_installed_soundfont(corpus) -> None:
    assert corpus == CACHE
    rendered_as_promised(corpus, SONGS168)


@pytest.fixture(scope="module")
def results(corpus) -> dict[str, list[measure.Result]]:
    found = {
        "plain Essentia": measure.measure(measure.plain_essentia, songs=SONGS168, workers=0),
        "tunesmith": measure.measure(measure.tunesmith_labels, songs=SONGS168, workers=0),
    }
    print("\n" + measure.table(measure.scores(found)))
    print("review list: " + measure.review_line(found["tunesmith"], "held_out"))
    return found


@pytest.mark.slow
def test_the_analysis_on_the_held_out_corpus(results) -> None:
    rows = {(row.estimator, row.half): row for row in measure.scores(results)}
    ours, plain = rows["tunesmith", "held_out"], rows["plain Essentia", "held_out"]
    assert ours.songs == plain.songs == len(SONGS168)
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
# activation's beat, downbeat, metre and tempo, fitted on development songs only, the seventeenth
# corpus among them, each clip's activations from a network that never heard its corpus),
# scored once: tempo 133/168 (plain Essentia 94), key 161/168 (plain 146), time signature
# 145/168; 0.67 CPU seconds a song against plain Essentia's 0.42. Of the tempi and keys the
# review list caught 29 of the 42 wrong and listed 76 of the 294 right.
HELD_OUT = {"tempo": 133, "key": 161, "timesignature": 145, "caught": 29, "listed": 76}
