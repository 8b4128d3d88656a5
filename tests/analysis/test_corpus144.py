"""The fifteenth corpus keeps its promises.

tests/analysis/corpus144.py draws 144 songs in 36 arrangements no earlier corpus has. It was
held out and scored once (docs/conventions/labels.md has the figures), then became development
data; the corpus the suite scores now is the twentieth, tests/analysis/test_corpus184.py.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.analysis import corpus60
from tests.analysis.corpus144 import SONGS144, STYLES144, songs144
from tests.analysis.test_corpus60 import (
    apart_from_every_other_corpus,
    drawn_as_promised,
    midi_says_what_the_truth_says,
)


def test_the_corpus_is_what_it_promises() -> None:
    assert len(SONGS144) == 144 and songs144() == SONGS144  # the same every time
    apart_from_every_other_corpus(SONGS144, STYLES144)
    assert Counter(s.style for s in SONGS144) == {style: 4 for style in STYLES144}
    assert {s.metre for s in SONGS144} == set(corpus60.METRES)
    assert {(s.metre, s.drums) for s in SONGS144} == {
        (metre, drums) for metre in corpus60.METRES for drums in (True, False)
    }
    keys = Counter(s.keyscale for s in SONGS144)
    assert len(keys) == 24 and set(keys.values()) == {6}  # 144 dealt over the 24 keys
    assert Counter(s.fmt for s in SONGS144) == {"wav": 36, "flac": 36, "mp3": 36, "ogg": 36}
    assert sorted(Counter(s.font for s in SONGS144).values()) == [48, 48, 48]
    drawn_as_promised(SONGS144, "held_out")


@pytest.mark.parametrize("song", SONGS144, ids=lambda s: s.name)
def test_the_midi_says_what_the_truth_says(song) -> None:
    midi_says_what_the_truth_says(song)
