"""The compound study reads a song's MIDI as its docstring says."""

from __future__ import annotations

from tests.analysis import corpus60
from tests.analysis.study_compound import outcome, score_of


def _song(name: str) -> corpus60.Song:
    return next(s for s in corpus60.SONGS if s.name == name)


def test_a_12_8_blues_is_note_for_note_a_6_8_song_with_a_chord_every_two_bars() -> None:
    # kick on 1 and 3, snare on 2 and 4, hats in triplets, a chord a bar: the halves of each
    # bar are the same but for the chord, which changes every four dotted quarters
    assert score_of(corpus60.song_midi(_song("slow_burn"))) == (True, "4")


def test_the_bell_of_a_12_8_song_says_where_its_bar_starts() -> None:
    # the standard bell (0, 4, 8, 10, 14, 18, 22 of 24 sixteenths) is not the same in both halves
    assert score_of(corpus60.song_midi(_song("village_bell"))) == (False, "4")


def test_a_6_8_song_with_a_chord_a_bar_and_a_crash_every_four_bars() -> None:
    # the crash marks four 6/8 bars, two 12/8 bars: a phrase either reading holds, not a cue
    assert corpus60.style_of(_song("highland").style).crash
    assert score_of(corpus60.song_midi(_song("highland"))) == (True, "2")


def test_what_a_reading_counts_as() -> None:
    assert outcome("6/8", "6/8", False) == "right"
    assert outcome("12/8", "4/4", False) == "right"  # both "4" for ACE-Step
    assert outcome("6/8", "12/8", True) == "swapped"
    assert outcome("6/8", "12/8", False) == outcome("3/4", "6/8", True) == "other"
