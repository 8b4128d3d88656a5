"""The twenty-second corpus keeps its promises.

tests/analysis/corpus200.py draws 200 songs in 50 arrangements no earlier corpus has: club
music and bedroom pop, new wave and post-punk, J-rock, Mandopop and Bollywood ballads, doom
metal, banda and conjunto, soul and the blues, the parlour, the baroque dances and the dance
hall. It is held out: written before the next change was chosen, it is not yet scored, and
nothing here renders or analyses it; it is scored once, when that change is chosen on
development songs only and everything is set.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.analysis import corpus60
from tests.analysis.corpus200 import SONGS200, STYLES200, songs200
from tests.analysis.test_corpus60 import (
    apart_from_every_other_corpus,
    drawn_as_promised,
    midi_says_what_the_truth_says,
)


def test_the_corpus_is_what_it_promises() -> None:
    assert len(SONGS200) == 200 and songs200() == SONGS200  # the same every time
    apart_from_every_other_corpus(SONGS200, STYLES200)
    assert Counter(s.style for s in SONGS200) == {style: 4 for style in STYLES200}
    assert {s.metre for s in SONGS200} == set(corpus60.METRES)
    assert {(s.metre, s.drums) for s in SONGS200} == {
        (metre, drums) for metre in corpus60.METRES for drums in (True, False)
    }
    keys = Counter(s.keyscale for s in SONGS200)
    assert len(keys) == 24 and Counter(keys.values()) == {9: 8, 8: 16}  # 200 over the 24 keys
    assert Counter(s.fmt for s in SONGS200) == {"wav": 50, "flac": 50, "mp3": 50, "ogg": 50}
    assert sorted(Counter(s.font for s in SONGS200).values()) == [66, 67, 67]
    drawn_as_promised(SONGS200, "held_out")


@pytest.mark.parametrize("song", SONGS200, ids=lambda s: s.name)
def test_the_midi_says_what_the_truth_says(song) -> None:
    midi_says_what_the_truth_says(song)
