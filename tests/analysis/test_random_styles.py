"""The randomly arranged development songs keep their promises: the same songs every time,
every metre with and without drums, parts that stay inside their bar and mark its beat."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.analysis import corpus48, corpus60, corpus96
from tests.analysis.corpus import KICK
from tests.analysis.random_styles import COUNT, RANDOM_SONGS, random_songs, random_style
from tests.analysis.test_corpus60 import midi_says_what_the_truth_says


def test_the_songs_are_the_same_every_time_and_each_has_its_own_arrangement() -> None:
    assert len(RANDOM_SONGS) == COUNT and random_songs() == RANDOM_SONGS
    assert len({s.style for s in RANDOM_SONGS}) == COUNT
    assert all(s.style.startswith("random_") and s.half == "random" for s in RANDOM_SONGS)
    assert random_style("random_007") == corpus60.style_of("random_007")
    earlier = (*corpus60.SONGS, *corpus60.DEV_EXTRA, *corpus96.SONGS96, *corpus48.SONGS48)
    assert not {s.name for s in RANDOM_SONGS} & {s.name for s in earlier}
    styles = {s.style: corpus60.style_of(s.style) for s in RANDOM_SONGS}
    assert len({repr(style) for style in styles.values()}) == COUNT  # no two alike


def test_every_metre_comes_with_and_without_drums() -> None:
    groups = Counter((s.metre, s.drums) for s in RANDOM_SONGS)
    for metre in corpus60.METRES:
        assert groups[metre, True] >= 10 and groups[metre, False] >= 5, (metre, groups)
    assert Counter(s.metre for s in RANDOM_SONGS)["4/4"] > COUNT / 3


def test_each_part_stays_in_its_bar_and_the_kick_marks_the_downbeat() -> None:
    for song in RANDOM_SONGS:
        style, metre = corpus60.style_of(song.style), corpus60.METRES[song.metre]
        patterns = [steps for steps, _ in style.drums.values()]
        patterns += [style.bass[0], style.comp[1]]
        for steps in patterns:
            assert steps and all(0 <= step < metre.steps for step in steps), (song.name, steps)
        if style.drums:
            assert 0 in style.drums[KICK][0], song.name
        assert 0 in style.bass[0], song.name
        assert not (style.swing and metre.compound), song.name  # swing: eighths in two


@pytest.mark.parametrize("song", RANDOM_SONGS[:12], ids=lambda s: s.name)
def test_the_midi_says_what_the_truth_says(song) -> None:
    midi_says_what_the_truth_says(song)
