"""The twenty-first corpus keeps its promises.

tests/analysis/corpus192.py draws 192 songs in 48 arrangements no earlier corpus has: club
music, the dance music of Africa, the Caribbean and Latin America, soul, the blues, folk,
hymns and the concert hall. It is held out: written before the next change was chosen, it is
not yet scored, and nothing here renders or analyses it; it is scored once, when that change
is chosen on development songs only and everything is set.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.analysis import corpus60
from tests.analysis.corpus192 import SONGS192, STYLES192, songs192
from tests.analysis.test_corpus60 import (
    apart_from_every_other_corpus,
    drawn_as_promised,
    midi_says_what_the_truth_says,
)


def test_the_corpus_is_what_it_promises() -> None:
    assert len(SONGS192) == 192 and songs192() == SONGS192  # the same every time
    apart_from_every_other_corpus(SONGS192, STYLES192)
    assert Counter(s.style for s in SONGS192) == {style: 4 for style in STYLES192}
    assert {s.metre for s in SONGS192} == set(corpus60.METRES)
    assert {(s.metre, s.drums) for s in SONGS192} == {
        (metre, drums) for metre in corpus60.METRES for drums in (True, False)
    }
    keys = Counter(s.keyscale for s in SONGS192)
    assert len(keys) == 24 and Counter(keys.values()) == {8: 24}  # 192 over the 24 keys
    assert Counter(s.fmt for s in SONGS192) == {"wav": 48, "flac": 48, "mp3": 48, "ogg": 48}
    assert sorted(Counter(s.font for s in SONGS192).values()) == [64, 64, 64]
    drawn_as_promised(SONGS192, "held_out")


@pytest.mark.parametrize("song", SONGS192, ids=lambda s: s.name)
def test_the_midi_says_what_the_truth_says(song) -> None:
    midi_says_what_the_truth_says(song)
