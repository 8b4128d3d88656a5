"""The fourth corpus keeps its promises.

tests/analysis/corpus56.py draws 56 songs in 14 arrangements no earlier corpus has. It was held
out and scored twice (docs/conventions/labels.md has both scorings), then became development
data; the corpus the suite scores now is the twentieth, tests/analysis/test_corpus184.py.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.analysis import corpus60
from tests.analysis.corpus56 import SONGS56, STYLES56, songs56
from tests.analysis.test_corpus60 import (
    apart_from_every_other_corpus,
    drawn_as_promised,
    midi_says_what_the_truth_says,
)


def test_the_corpus_is_what_it_promises() -> None:
    assert len(SONGS56) == 56 and songs56() == SONGS56  # the same every time
    apart_from_every_other_corpus(SONGS56, STYLES56)
    assert Counter(s.style for s in SONGS56) == {style: 4 for style in STYLES56}
    assert {s.metre for s in SONGS56} == set(corpus60.METRES)
    keys = Counter(s.keyscale for s in SONGS56)
    assert len(keys) == 24 and set(keys.values()) == {2, 3}
    assert Counter(s.fmt for s in SONGS56) == {"wav": 14, "flac": 14, "mp3": 14, "ogg": 14}
    assert set(Counter(s.font for s in SONGS56).values()) <= {18, 19}
    drawn_as_promised(SONGS56, "held_out")


@pytest.mark.parametrize("song", SONGS56[:14], ids=lambda s: s.name)
def test_the_midi_says_what_the_truth_says(song) -> None:
    midi_says_what_the_truth_says(song)
