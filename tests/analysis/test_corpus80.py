"""The eighth corpus keeps its promises.

tests/analysis/corpus80.py draws 80 songs in 20 arrangements no earlier corpus has, held out:
written after the seventh corpus was scored and before anything was changed since. Nothing
here measures the analysis on it, and the suite does not render it (`make_corpus80` does).
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.analysis import (
    corpus48,
    corpus52,
    corpus56,
    corpus60,
    corpus64,
    corpus72,
    corpus96,
    random_styles,
)
from tests.analysis.corpus import EXTRA_SONGS
from tests.analysis.corpus80 import SONGS80, STYLES80, songs80
from tests.analysis.test_corpus60 import drawn_as_promised, midi_says_what_the_truth_says


def test_the_corpus_is_what_it_promises() -> None:
    assert len(SONGS80) == 80 and songs80() == SONGS80  # the same every time
    earlier = (*corpus60.SONGS, *corpus60.DEV_EXTRA, *corpus96.SONGS96, *corpus48.SONGS48)
    earlier += (*corpus56.SONGS56, *corpus52.SONGS52, *corpus64.SONGS64, *corpus72.SONGS72)
    earlier += (*random_styles.RANDOM_SONGS, *EXTRA_SONGS)
    assert not {s.name for s in SONGS80} & {s.name for s in earlier}
    tables = (corpus60.STYLES, corpus96.STYLES96, corpus48.STYLES48, corpus56.STYLES56)
    tables += (corpus52.STYLES52, corpus64.STYLES64, corpus72.STYLES72)
    assert not set(STYLES80) & {name for table in tables for name in table}
    assert Counter(s.style for s in SONGS80) == {style: 4 for style in STYLES80}
    assert {s.metre for s in SONGS80} == set(corpus60.METRES)
    keys = Counter(s.keyscale for s in SONGS80)
    assert len(keys) == 24 and set(keys.values()) == {3, 4}  # 80 dealt over the 24 keys
    assert Counter(s.fmt for s in SONGS80) == {"wav": 20, "flac": 20, "mp3": 20, "ogg": 20}
    assert set(Counter(s.font for s in SONGS80).values()) == {26, 27}
    drawn_as_promised(SONGS80, "held_out")


@pytest.mark.parametrize("song", SONGS80, ids=lambda s: s.name)
def test_the_midi_says_what_the_truth_says(song) -> None:
    midi_says_what_the_truth_says(song)
