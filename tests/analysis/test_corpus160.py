"""The seventeenth corpus keeps its promises.

tests/analysis/corpus160.py draws 160 songs in 40 arrangements no earlier corpus has. It was
held out and scored once (docs/conventions/labels.md has the figures), then became development
data; the corpus the suite scores now is the twentieth, tests/analysis/test_corpus184.py.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.analysis import corpus60
from tests.analysis.corpus160 import SONGS160, STYLES160, songs160
from tests.analysis.test_corpus60 import (
    apart_from_every_other_corpus,
    drawn_as_promised,
    midi_says_what_the_truth_says,
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
