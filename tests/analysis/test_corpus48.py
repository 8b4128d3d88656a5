"""The third corpus keeps its promises.

tests/analysis/corpus48.py draws 48 songs in 12 arrangements neither earlier corpus has. It
was held out and scored twice (docs/conventions/labels.md has its figures), then became
development data when the fourth corpus (tests/analysis/corpus56.py, held out, scored by
tests/analysis/test_corpus56.py) was drawn; nothing here measures the analysis.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.analysis import corpus60
from tests.analysis.corpus48 import SONGS48, STYLES48, songs48
from tests.analysis.test_corpus60 import (
    apart_from_every_other_corpus,
    drawn_as_promised,
    midi_says_what_the_truth_says,
)


def test_the_corpus_is_what_it_promises() -> None:
    assert len(SONGS48) == 48 and songs48() == SONGS48  # the same every time
    apart_from_every_other_corpus(SONGS48, STYLES48)
    assert Counter(s.style for s in SONGS48) == {style: 4 for style in STYLES48}
    assert {s.metre for s in SONGS48} == set(corpus60.METRES)
    keys = Counter(s.keyscale for s in SONGS48)
    assert len(keys) == 24 and set(keys.values()) == {2}
    assert Counter(s.fmt for s in SONGS48) == {"wav": 12, "flac": 12, "mp3": 12, "ogg": 12}
    assert Counter(s.font for s in SONGS48) == {font: 16 for font in corpus60.FONTS}
    drawn_as_promised(SONGS48, "dev")


@pytest.mark.parametrize("song", SONGS48[:12], ids=lambda s: s.name)
def test_the_midi_says_what_the_truth_says(song) -> None:
    midi_says_what_the_truth_says(song)
