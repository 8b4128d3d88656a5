"""The eleventh corpus keeps its promises.

tests/analysis/corpus112.py draws 112 songs in 28 arrangements no earlier corpus has. It was
held out and scored once (docs/conventions/labels.md has the figures), then became development
data; the corpus the suite scores now is the twentieth, tests/analysis/test_corpus184.py.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.analysis import corpus60
from tests.analysis.corpus112 import SONGS112, STYLES112, songs112
from tests.analysis.test_corpus60 import (
    apart_from_every_other_corpus,
    drawn_as_promised,
    midi_says_what_the_truth_says,
)


def test_the_corpus_is_what_it_promises() -> None:
    assert len(SONGS112) == 112 and songs112() == SONGS112  # the same every time
    apart_from_every_other_corpus(SONGS112, STYLES112)
    assert Counter(s.style for s in SONGS112) == {style: 4 for style in STYLES112}
    assert {s.metre for s in SONGS112} == set(corpus60.METRES)
    assert {(s.metre, s.drums) for s in SONGS112} == {
        (metre, drums) for metre in corpus60.METRES for drums in (True, False)
    }
    keys = Counter(s.keyscale for s in SONGS112)
    assert len(keys) == 24 and set(keys.values()) == {4, 5}  # 112 dealt over the 24 keys
    assert Counter(s.fmt for s in SONGS112) == {"wav": 28, "flac": 28, "mp3": 28, "ogg": 28}
    assert set(Counter(s.font for s in SONGS112).values()) == {37, 38}
    drawn_as_promised(SONGS112, "held_out")


@pytest.mark.parametrize("song", SONGS112, ids=lambda s: s.name)
def test_the_midi_says_what_the_truth_says(song) -> None:
    midi_says_what_the_truth_says(song)
