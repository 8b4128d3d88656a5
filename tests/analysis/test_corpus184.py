"""The twentieth corpus keeps its promises.

tests/analysis/corpus184.py draws 184 songs in 46 arrangements no earlier corpus has, mostly
the mainstream genres and textures a user's own songs come from. It was held out and scored
once (docs/conventions/labels.md has the figures), then joined the development songs of
tests/analysis/fit_analysis.py (the shipped models were fitted before it joined); the corpus
the suite scores now is the twenty-first, tests/analysis/test_corpus192.py.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.analysis import corpus60
from tests.analysis.corpus184 import SONGS184, STYLES184, songs184
from tests.analysis.test_corpus60 import (
    apart_from_every_other_corpus,
    drawn_as_promised,
    midi_says_what_the_truth_says,
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
