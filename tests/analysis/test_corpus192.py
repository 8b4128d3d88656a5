"""The twenty-first corpus keeps its promises, and is scored against plain Essentia.

tests/analysis/corpus192.py draws 192 songs in 48 arrangements no earlier corpus has: club
music, the dance music of Africa, the Caribbean and Latin America, soul, the blues, folk,
hymns and the concert hall. It was written after the analysis that ships was fitted, and by
code alone; no design choice looked at it. It was scored once, with that analysis, when the
changes tried since (two refits) had not shipped and the study of the compound metres had
found no change worth fitting: the figures asserted here are what that analysis reached (docs/
conventions/labels.md has them, and the goals not met), so that a change that loses any of it
fails; plain Essentia (RhythmExtractor2013 and KeyExtractor at their defaults) is measured in the
same run. Rendered (data/cache/corpus192), its songs are 14 to 42 s long.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.analysis import corpus60, measure
from tests.analysis.corpus192 import CACHE, SONGS192, STYLES192, make_corpus192, songs192
from tests.analysis.test_corpus60 import (
    apart_from_every_other_corpus,
    drawn_as_promised,
    midi_says_what_the_truth_says,
    rendered_as_promised,
)


def test_the_corpus_is_what_it_promises() -> None:
    assert len(SONGS192) == 192 and songs192() == SONGS192  # the same every time
    apart_from_every_other_corpus(SONGS192, STYLES192)
    assert Counter(s.style for s in SONGS192) == {style: 4 for style in STYLES192}
    assert {s.metre for s in SONGS192} == set(corpus60.METRES)
    assert {(s.metre, s.drums) for s in SONGS192} == {
        (metre, drums) for metre in corpus60.METRES for drums in (True, False)
    }
    keys = Counter(s.keyscale for s in SONGS192)
    assert len(keys) == 24 and Counter(keys.values()) == {8: 24}  # 192 over the 24 keys
    assert Counter(s.fmt for s in SONGS192) == {"wav": 48, "flac": 48, "mp3": 48, "ogg": 48}
    assert sorted(Counter(s.font for s in SONGS192).values()) == [64, 64, 64]
    drawn_as_promised(SONGS192, "held_out")


@pytest.mark.parametrize("song", SONGS192, ids=lambda s: s.name)
def test_the_midi_says_what_the_truth_says(song) -> None:
    midi_says_what_the_truth_says(song)


@pytest.fixture(scope="module")
def corpus():
    return make_corpus192()


@pytest.mark.slow
def test_it_renders_with_every_installed_soundfont(corpus) -> None:
    assert corpus == CACHE
    rendered_as_promised(corpus, SONGS192)


@pytest.fixture(scope="module")
def results(corpus) -> dict[str, list[measure.Result]]:
    found = {
        "plain Essentia": measure.measure(measure.plain_essentia, songs=SONGS192, workers=0),
        "tunesmith": measure.measure(measure.tunesmith_labels, songs=SONGS192, workers=0),
    }
    print("\n" + measure.table(measure.scores(found)))
    print("review list: " + measure.review_line(found["tunesmith"], "held_out"))
    return found


@pytest.mark.slow
def test_the_analysis_on_the_held_out_corpus(results) -> None:
    rows = {(row.estimator, row.half): row for row in measure.scores(results)}
    ours, plain = rows["tunesmith", "held_out"], rows["plain Essentia", "held_out"]
    assert ours.songs == plain.songs == len(SONGS192)
    assert ours.tempo >= HELD_OUT["tempo"] and ours.tempo >= plain.tempo + 0.10 * len(SONGS192)
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
# activation's beat, downbeat, metre and tempo, fitted on 2,575 development songs, each clip's
# activations from a network that never heard its corpus), scored once: tempo 169/192 (plain
# Essentia 128), key 182/192 (plain 174), time signature 165/192; 1.03 CPU seconds a song
# against plain Essentia's 0.53 (1.07 against 0.59 with the beat tracker built once a thread,
# which changed no value). Of the tempi and keys the review list caught 28 of the 33 wrong and
# listed 73 of the 351 right.
HELD_OUT = {"tempo": 169, "key": 182, "timesignature": 165, "caught": 28, "listed": 73}
