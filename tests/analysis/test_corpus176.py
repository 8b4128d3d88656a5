"""The nineteenth corpus keeps its promises.

tests/analysis/corpus176.py draws 176 songs in 44 arrangements no earlier corpus has. It was
held out and scored once (docs/conventions/labels.md has the figures), then joined the
development songs of tests/analysis/fit_analysis.py (the shipped models were fitted before it
joined); the corpus the suite scores now is the twentieth, tests/analysis/test_corpus184.py.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.analysis import corpus60
from tests.analysis.corpus176 import SONGS176, STYLES176, songs176
from tests.analysis.test_corpus60 import (
    apart_from_every_other_corpus,
    drawn_as_promised,
    midi_says_what_the_truth_says,
)


def test_the_corpus_is_what_it_promises() -> None:
    assert len(SONGS176) == 176 and songs176() == SONGS176  # the same every time
    apart_from_every_other_corpus(SONGS176, STYLES176)
    assert Counter(s.style for s in SONGS176) == {style: 4 for style in STYLES176}
    assert {s.metre for s in SONGS176} == set(corpus60.METRES)
    assert {(s.metre, s.drums) for s in SONGS176} == {
        (metre, drums) for metre in corpus60.METRES for drums in (True, False)
    }
    keys = Counter(s.keyscale for s in SONGS176)
    assert len(keys) == 24 and Counter(keys.values()) == {7: 16, 8: 8}  # 176 over the 24 keys
    assert Counter(s.fmt for s in SONGS176) == {"wav": 44, "flac": 44, "mp3": 44, "ogg": 44}
    assert sorted(Counter(s.font for s in SONGS176).values()) == [58, 59, 59]
    drawn_as_promised(SONGS176, "held_out")


@pytest.mark.parametrize("song", SONGS176, ids=lambda s: s.name)
def test_the_midi_says_what_the_truth_says(song) -> None:
    midi_says_what_the_truth_says(song)
