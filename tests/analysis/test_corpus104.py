"""The tenth corpus keeps its promises.

tests/analysis/corpus104.py draws 104 songs in 26 arrangements no earlier corpus has. It was
held out and scored once (docs/conventions/labels.md has the figures), then became development
data; the corpus the suite scores now is the twentieth, tests/analysis/test_corpus184.py.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.analysis import corpus60
from tests.analysis.corpus104 import SONGS104, STYLES104, songs104
from tests.analysis.test_corpus60 import (
    apart_from_every_other_corpus,
    drawn_as_promised,
    midi_says_what_the_truth_says,
)


def test_the_corpus_is_what_it_promises() -> None:
    assert len(SONGS104) == 104 and songs104() == SONGS104  # the same every time
    apart_from_every_other_corpus(SONGS104, STYLES104)
    assert Counter(s.style for s in SONGS104) == {style: 4 for style in STYLES104}
    assert {s.metre for s in SONGS104} == set(corpus60.METRES)
    assert {(s.metre, s.drums) for s in SONGS104} == {
        (metre, drums) for metre in corpus60.METRES for drums in (True, False)
    }
    keys = Counter(s.keyscale for s in SONGS104)
    assert len(keys) == 24 and set(keys.values()) == {4, 5}  # 104 dealt over the 24 keys
    assert Counter(s.fmt for s in SONGS104) == {"wav": 26, "flac": 26, "mp3": 26, "ogg": 26}
    assert set(Counter(s.font for s in SONGS104).values()) == {34, 35}
    drawn_as_promised(SONGS104, "held_out")


@pytest.mark.parametrize("song", SONGS104, ids=lambda s: s.name)
def test_the_midi_says_what_the_truth_says(song) -> None:
    midi_says_what_the_truth_says(song)
