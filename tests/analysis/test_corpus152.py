"""The sixteenth corpus keeps its promises.

tests/analysis/corpus152.py draws 152 songs in 38 arrangements no earlier corpus has. It was
held out and scored once (docs/conventions/labels.md has the figures), then became development
data; the corpus the suite scores now is the twentieth, tests/analysis/test_corpus184.py.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.analysis import corpus60
from tests.analysis.corpus152 import SONGS152, STYLES152, songs152
from tests.analysis.test_corpus60 import (
    apart_from_every_other_corpus,
    drawn_as_promised,
    midi_says_what_the_truth_says,
)


def test_the_corpus_is_what_it_promises() -> None:
    assert len(SONGS152) == 152 and songs152() == SONGS152  # the same every time
    apart_from_every_other_corpus(SONGS152, STYLES152)
    assert Counter(s.style for s in SONGS152) == {style: 4 for style in STYLES152}
    assert {s.metre for s in SONGS152} == set(corpus60.METRES)
    assert {(s.metre, s.drums) for s in SONGS152} == {
        (metre, drums) for metre in corpus60.METRES for drums in (True, False)
    }
    keys = Counter(s.keyscale for s in SONGS152)
    assert len(keys) == 24 and set(keys.values()) == {6, 7}  # 152 dealt over the 24 keys
    assert Counter(s.fmt for s in SONGS152) == {"wav": 38, "flac": 38, "mp3": 38, "ogg": 38}
    assert sorted(Counter(s.font for s in SONGS152).values()) == [50, 51, 51]
    drawn_as_promised(SONGS152, "held_out")


@pytest.mark.parametrize("song", SONGS152, ids=lambda s: s.name)
def test_the_midi_says_what_the_truth_says(song) -> None:
    midi_says_what_the_truth_says(song)
