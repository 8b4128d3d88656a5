"""The thirteenth corpus keeps its promises.

tests/analysis/corpus128.py draws 128 songs in 32 arrangements no earlier corpus has. It was
held out and scored once (docs/conventions/labels.md has the figures), then became development
data; the corpus the suite scores now is the twentieth, tests/analysis/test_corpus184.py.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.analysis import corpus60
from tests.analysis.corpus128 import SONGS128, STYLES128, songs128
from tests.analysis.test_corpus60 import (
    apart_from_every_other_corpus,
    drawn_as_promised,
    midi_says_what_the_truth_says,
)


def test_the_corpus_is_what_it_promises() -> None:
    assert len(SONGS128) == 128 and songs128() == SONGS128  # the same every time
    apart_from_every_other_corpus(SONGS128, STYLES128)
    assert Counter(s.style for s in SONGS128) == {style: 4 for style in STYLES128}
    assert {s.metre for s in SONGS128} == set(corpus60.METRES)
    assert {(s.metre, s.drums) for s in SONGS128} == {
        (metre, drums) for metre in corpus60.METRES for drums in (True, False)
    }
    keys = Counter(s.keyscale for s in SONGS128)
    assert len(keys) == 24 and set(keys.values()) == {5, 6}  # 128 dealt over the 24 keys
    assert Counter(s.fmt for s in SONGS128) == {"wav": 32, "flac": 32, "mp3": 32, "ogg": 32}
    assert sorted(Counter(s.font for s in SONGS128).values()) == [42, 43, 43]
    drawn_as_promised(SONGS128, "held_out")


@pytest.mark.parametrize("song", SONGS128, ids=lambda s: s.name)
def test_the_midi_says_what_the_truth_says(song) -> None:
    midi_says_what_the_truth_says(song)
