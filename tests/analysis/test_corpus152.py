"""The sixteenth corpus keeps its promises, and is scored against plain Essentia.

tests/analysis/corpus152.py draws 152 songs in 38 arrangements no earlier corpus has. It was
written before the next change was chosen (a learned beat and downbeat activation, and the
fifteenth corpus joining the development songs) and scored once, with that change chosen on
development songs only and everything set. The figures asserted here are what it reached
(docs/conventions/labels.md has them, and the goals not met), so that a change that loses any of
it fails; plain Essentia (RhythmExtractor2013 and KeyExtractor at their defaults) is measured in
the same run. Rendered (data/cache/corpus152), its songs are 14 to 43 s long.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.analysis import corpus60, measure
from tests.analysis.corpus152 import CACHE, SONGS152, STYLES152, make_corpus152, songs152
from tests.analysis.test_corpus60 import (
    apart_from_every_other_corpus,
    drawn_as_promised,
    midi_says_what_the_truth_says,
    rendered_as_promised,
)


def test_the_corpus_is_what_it_promises() -> None:
    assert len(SONGS152) == 152 and songs152() == SONGS152  # the same every time
    apart_from_every_other_corpus(SONGS152, STYLES152)
    assert Counter(s.style for s in SONGS152) == {style: 4 for style in STYLES152}
    assert {s.metre for s in SONGS152} == set(corpus60.METRES)
    assert {(s.metre, s.drums) for s in SONGS152} == {
        (metre, drums) for metre in corpus60.METRES for drums in (True, False)
    }
    keys = Counter(s.keyscale for s in SONGS152)
    assert len(keys) == 24 and set(keys.values()) == {6, 7}  # 152 dealt over the 24 keys
    assert Counter(s.fmt for s in SONGS152) == {"wav": 38, "flac": 38, "mp3": 38, "ogg": 38}
    assert sorted(Counter(s.font for s in SONGS152).values()) == [50, 51, 51]
    drawn_as_promised(SONGS152, "held_out")


@pytest.mark.parametrize("song", SONGS152, ids=lambda s: s.name)
def test_the_midi_says_what_the_truth_says(song) -> None:
    midi_says_what_the_truth_says(song)


@pytest.fixture(scope="module")
def corpus():
    return make_corpus152()


@pytest.mark.slow
def test_it_renders_with_every_installed_soundfont(corpus) -> None:
    assert corpus == CACHE
    rendered_as_promised(corpus, SONGS152)


@pytest.fixture(scope="module")
def results(corpus) -> dict[str, list[measure.Result]]:
    found = {
        "plain Essentia": measure.measure(measure.plain_essentia, songs=SONGS152, workers=0),
        "tunesmith": measure.measure(measure.tunesmith_labels, songs=SONGS152, workers=0),
    }
    print("\n" + measure.table(measure.scores(found)))
    print("review list: " + measure.review_line(found["tunesmith"], "held_out"))
    return found


@pytest.mark.slow
def test_the_analysis_on_the_held_out_corpus(results) -> None:
    rows = {(row.estimator, row.half): row for row in measure.scores(results)}
    ours, plain = rows["tunesmith", "held_out"], rows["plain Essentia", "held_out"]
    assert ours.songs == plain.songs == len(SONGS152)
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


# The analysis as it is (the level model, ten networks of 64 units, with the learned beat and
# downbeat activation, fitted on development songs only, the fifteenth corpus among them),
# scored once: tempo 128/152 (plain Essentia 96), key 144/152 (plain 140), time signature
# 132/152; 0.76 CPU seconds a song against plain Essentia's 0.47. Of the tempi and keys the
# review list caught 29 of the 32 wrong and listed 67 of the 272 right; a clean clone, which
# renders the corpus afresh, lists 68 (one right tempo sits at its review probability).
HELD_OUT = {"tempo": 128, "key": 144, "timesignature": 132, "caught": 29, "listed": 68}
