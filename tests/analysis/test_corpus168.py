"""The eighteenth corpus keeps its promises.

tests/analysis/corpus168.py draws 168 songs in 42 arrangements no earlier corpus has. It was
held out and scored once (docs/conventions/labels.md has the figures), then became development
data; the corpus the suite scores now is the twentieth, tests/analysis/test_corpus184.py.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.analysis import corpus60
from tests.analysis.corpus168 import SONGS168, STYLES168, songs168
from tests.analysis.test_corpus60 import (
    apart_from_every_other_corpus,
    drawn_as_promised,
    midi_says_what_the_truth_says,
)


def test_the_corpus_is_what_it_promises() -> None:
    assert len(SONGS168) == 168 and songs168() == SONGS168  # the same every time
    apart_from_every_other_corpus(SONGS168, STYLES168)
    assert Counter(s.style for s in SONGS168) == {style: 4 for style in STYLES168}
    assert {s.metre for s in SONGS168} == set(corpus60.METRES)
    assert {(s.metre, s.drums) for s in SONGS168} == {
        (metre, drums) for metre in corpus60.METRES for drums in (True, False)
    }
    keys = Counter(s.keyscale for s in SONGS168)
    assert len(keys) == 24 and set(keys.values()) == {7}  # 168 dealt over the 24 keys
    assert Counter(s.fmt for s in SONGS168) == {"wav": 42, "flac": 42, "mp3": 42, "ogg": 42}
    assert sorted(Counter(s.font for s in SONGS168).values()) == [56, 56, 56]
    drawn_as_promised(SONGS168, "held_out")


@pytest.mark.parametrize("song", SONGS168, ids=lambda s: s.name)
def test_the_midi_says_what_the_truth_says(song) -> None:
    midi_says_what_the_truth_says(song)
