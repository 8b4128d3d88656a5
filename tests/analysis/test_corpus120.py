"""The twelfth corpus keeps its promises.

tests/analysis/corpus120.py draws 120 songs in 30 arrangements no earlier corpus has. It was
held out and scored once (docs/conventions/labels.md has the figures), then became development
data; the corpus the suite scores now is the twentieth, tests/analysis/test_corpus184.py.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.analysis import corpus60
from tests.analysis.corpus120 import SONGS120, STYLES120, songs120
from tests.analysis.test_corpus60 import (
    apart_from_every_other_corpus,
    drawn_as_promised,
    midi_says_what_the_truth_says,
)


def test_the_corpus_is_what_it_promises() -> None:
    assert len(SONGS120) == 120 and songs120() == SONGS120  # the same every time
    apart_from_every_other_corpus(SONGS120, STYLES120)
    assert Counter(s.style for s in SONGS120) == {style: 4 for style in STYLES120}
    assert {s.metre for s in SONGS120} == set(corpus60.METRES)
    assert {(s.metre, s.drums) for s in SONGS120} == {
        (metre, drums) for metre in corpus60.METRES for drums in (True, False)
    }
    keys = Counter(s.keyscale for s in SONGS120)
    assert len(keys) == 24 and set(keys.values()) == {5}  # 120 dealt over the 24 keys
    assert Counter(s.fmt for s in SONGS120) == {"wav": 30, "flac": 30, "mp3": 30, "ogg": 30}
    assert set(Counter(s.font for s in SONGS120).values()) == {40}
    drawn_as_promised(SONGS120, "held_out")


@pytest.mark.parametrize("song", SONGS120, ids=lambda s: s.name)
def test_the_midi_says_what_the_truth_says(song) -> None:
    midi_says_what_the_truth_says(song)
