"""The seventeenth corpus keeps its promises, and is scored against plain Essentia.

tests/analysis/corpus160.py draws 160 songs in 40 arrangements no earlier corpus has. It was
written before the next change was chosen (the learned activation's metre and tempo heads, and
the sixteenth corpus joining the development songs) and scored once, with that change chosen
on development songs only and everything set. The figures asserted here are what it reached
(docs/conventions/labels.md has them, and the goals not met), so that a change that loses any of
it fails; plain Essentia (RhythmExtractor2013 and KeyExtractor at their defaults) is measured in
the same run. Rendered (data/cache/corpus160), its songs are 13 to 47 s long.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.analysis import corpus60, measure
from tests.analysis.corpus160 import CACHE, SONGS160, STYLES160, make_corpus160, songs160
from tests.analysis.test_corpus60 import (
    apart_from_every_other_corpus,
    drawn_as_promised,
    midi_says_what_the_truth_says,
    rendered_as_promised,
)


def test_the_corpus_is_what_it_promises() -> None:
    assert len(SONGS160) == 160 and songs160() == SONGS160  # the same every time
    apart_from_every_other_corpus(SONGS160, STYLES160)
    assert Counter(s.style for s in SONGS160) == {style: 4 for style in STYLES160}
    assert {s.metre for s in SONGS160} == set(corpus60.METRES)
    assert {(s.metre, s.drums) for s in SONGS160} == {
        (metre, drums) for metre in corpus60.METRES for drums in (True, False)
    }
    keys = Counter(s.keyscale for s in SONGS160)
    assert len(keys) == 24 and set(keys.values()) == {6, 7}  # 160 dealt over the 24 keys
    assert Counter(s.fmt for s in SONGS160) == {"wav": 40, "flac": 40, "mp3": 40, "ogg": 40}
    assert sorted(Counter(s.font for s in SONGS160).values()) == [53, 53, 54]
    drawn_as_promised(SONGS160, "held_out")


@pytest.mark.parametrize("song", SONGS160, ids=lambda s: s.name)
def test_the_midi_says_what_the_truth_says(song) -> None:
    midi_says_what_the_truth_says(song)


@pytest.fixture(scope="module")
def corpus():
    return make_corpus160()


@pytest.mark.slow
def test_it_renders_with_every_installed_soundfont(corpus) -> None:
    assert corpus == CACHE
    rendered_as_promised(corpus, SONGS160)


@pytest.fixture(scope="module")
def results(corpus) -> dict[str, list[measure.Result]]:
    found = {
        "plain Essentia": measure.measure(measure.plain_essentia, songs=SONGS160, workers=0),
        "tunesmith": measure.measure(measure.tunesmith_labels, songs=SONGS160, workers=0),
    }
    print("\n" + measure.table(measure.scores(found)))
    print("review list: " + measure.review_line(found["tunesmith"], "held_out"))
    return found


@pytest.mark.slow
def test_the_analysis_on_the_held_out_corpus(results) -> None:
    rows = {(row.estimator, row.half): row for row in measure.scores(results)}
    ours, plain = rows["tunesmith", "held_out"], rows["plain Essentia", "held_out"]
    assert ours.songs == plain.songs == len(SONGS160)
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
# activation's beat, downbeat, metre and tempo, fitted on development songs only, the sixteenth
# corpus among them), scored once: tempo 116/160 (plain Essentia 78), key 152/160 (plain 145),
# time signature 117/160; 0.75 CPU seconds a song against plain Essentia's 0.46. Of the tempi
# and keys the review list caught 31 of the 52 wrong and listed 67 of the 268 right.
HELD_OUT = {"tempo": 116, "key": 152, "timesignature": 117, "caught": 31, "listed": 67}
