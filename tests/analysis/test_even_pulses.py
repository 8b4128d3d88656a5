"""The even-pulse development songs keep their promises: the same songs every time, every
metre with and without drums, and parts that play the same on every pulse, so that only the
chords (changing at the bar line) say how the pulses group."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.analysis import corpus60, random_styles
from tests.analysis.even_pulses import COUNT, EVEN_SONGS, even_songs, even_style
from tests.analysis.test_corpus60 import midi_says_what_the_truth_says


def test_the_songs_are_the_same_every_time_and_each_has_its_own_arrangement() -> None:
    assert len(EVEN_SONGS) == COUNT and even_songs() == EVEN_SONGS
    assert all(s.style.startswith("even_") and s.half == "even" for s in EVEN_SONGS)
    assert even_style("even_007") == corpus60.style_of("even_007")
    assert not {s.name for s in EVEN_SONGS} & {s.name for s in random_styles.RANDOM_SONGS}
    styles = {repr(corpus60.style_of(s.style)) for s in EVEN_SONGS}
    assert len(styles) == COUNT  # no two alike


def test_every_metre_comes_with_and_without_drums() -> None:
    groups = Counter((s.metre, s.drums) for s in EVEN_SONGS)
    for metre in corpus60.METRES:
        assert groups[metre, True] >= 10 and groups[metre, False] >= 10, (metre, groups)


def test_every_part_plays_on_every_pulse_of_its_grid() -> None:
    # a part on every beat, every eighth or every sixteenth of the bar: nothing marks the
    # downbeat but the chord that changes there
    for song in EVEN_SONGS:
        style, metre = corpus60.style_of(song.style), corpus60.METRES[song.metre]
        grids = {tuple(range(0, metre.steps, step)) for step in (metre.beat, 2, 1)}
        patterns = [steps for steps, _ in style.drums.values()]
        patterns += [style.bass[0], style.comp[1]]
        assert all(steps in grids for steps in patterns), (song.name, patterns)
        assert not style.crash and not style.swing and not style.walk, song.name


@pytest.mark.parametrize("song", EVEN_SONGS[:8], ids=lambda s: s.name)
def test_the_midi_says_what_the_truth_says(song) -> None:
    midi_says_what_the_truth_says(song)
