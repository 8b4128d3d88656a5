"""The fourteenth corpus keeps its promises.

tests/analysis/corpus136.py draws 136 songs in 34 arrangements no earlier corpus has. It was
held out and scored once (docs/conventions/labels.md has the figures), then became development
data; the corpus the suite scores now is the twentieth, tests/analysis/test_corpus184.py.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.analysis import corpus60
from tests.analysis.corpus136 import SONGS136, STYLES136, songs136
from tests.analysis.test_corpus60 import (
    apart_from_every_other_corpus,
    drawn_as_promised,
    midi_says_what_the_truth_says,
)


def test_the_corpus_is_what_it_promises() -> None:
    assert len(SONGS136) == 136 and songs136() == SONGS136  # the same every time
    apart_from_every_other_corpus(SONGS136, STYLES136)
    assert Counter(s.style for s in SONGS136) == {style: 4 for style in STYLES136}
    assert {s.metre for s in SONGS136} == set(corpus60.METRES)
    assert {(s.metre, s.drums) for s in SONGS136} == {
        (metre, drums) for metre in corpus60.METRES for drums in (True, False)
    }
    keys = Counter(s.keyscale for s in SONGS136)
    assert len(keys) == 24 and set(keys.values()) == {5, 6}  # 136 dealt over the 24 keys
    assert Counter(s.fmt for s in SONGS136) == {"wav": 34, "flac": 34, "mp3": 34, "ogg": 34}
    assert sorted(Counter(s.font for s in SONGS136).values()) == [45, 45, 46]
    drawn_as_promised(SONGS136, "held_out")


@pytest.mark.parametrize("song", SONGS136, ids=lambda s: s.name)
def test_the_midi_says_what_the_truth_says(song) -> None:
    midi_says_what_the_truth_says(song)
