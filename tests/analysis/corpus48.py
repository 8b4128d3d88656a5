"""A third corpus of 48 songs, all held out: arrangements neither earlier corpus has.

The first two corpora (tests/analysis/corpus60.py, tests/analysis/corpus96.py) were each
split into a half the analysis was fitted on and a half scored once; both of those scored
halves have been development data since. This corpus was written after the analysis's
features were chosen (by cross-validation on development songs only) and before it was
scored: none of its songs is looked at while anything is chosen, and all 48 are scored
(tests/analysis/test_corpus48.py). It has 12 arrangements that neither earlier table has:

- 4/4 with drums: samba (surdo on 2 and 4, shakers in sixteenths), a polka's oom-pah in
  four, surf rock (ride in eighths, tom fills), afrobeat (syncopated bass, muted-guitar
  skank, cowbell); without: a choir over a cello, a finger-picked guitar;
- 3/4: a bolero (the snare's triplet figure), a music box;
- 6/8: a folk song with brushes (harmonica over steel guitar), a lullaby (celesta, flute);
- 12/8: a rock ballad with a rolling bass, a brass hymn (no drums).

The songs (`SONGS48`) are drawn by a fixed seed: styles four each, the 24 keys twice each,
tempi over the ranges of corpus96 (55-200 BPM, 45-140 dotted-quarter BPM in 6/8 and 12/8),
the three soundfonts and four formats dealt evenly, three in ten excerpts; progressions from
corpus96's table (half hold each chord for two bars). The truth follows corpus60's rules,
and the songs are written and rendered by its code. Cached in data/cache/corpus48
(git-ignored), rendered where missing.
"""

from __future__ import annotations

from pathlib import Path

from tests.analysis import corpus60, corpus96
from tests.analysis.corpus import HAT, KICK, OPEN_HAT, SNARE, STICK
from tests.analysis.corpus60 import COWBELL, LOW_TOM, Song, Style, _every
from tests.analysis.corpus96 import SHAKER

SEED = "corpus48-1"
COUNT = 48
CACHE = corpus60.DEFAULT_CACHE.with_name("corpus48")
RIDE = 51  # General MIDI's ride cymbal

STYLES48: dict[str, Style] = {
    "samba": Style(
        "4/4",
        (32, 24, 56),
        {KICK: ((4, 12), 104), STICK: ((0, 3, 6, 10, 13), 60), SHAKER: (_every(16, 0, 1), 46)},
        ((0, 4, 8, 12), 2),
        ("block", (0, 3, 6, 10, 13), 1),
        "eighths",
        crash=False,
    ),
    "polka": Style(
        "4/4",
        (58, 21, 71),
        {KICK: ((0, 4, 8, 12), 96), SNARE: ((2, 6, 10, 14), 70)},
        ((0, 8), 4),
        ("block", (2, 6, 10, 14), 1),
        "eighths",
        bass_low=40,
    ),
    "surf": Style(
        "4/4",
        (33, 27, 27),
        {KICK: ((0, 8), 104), SNARE: ((4, 12), 100), RIDE: (_every(16), 64), LOW_TOM: ((14,), 80)},
        (_every(16), 2),
        ("block", (0, 8), 6),
        "eighths",
    ),
    "afrobeat": Style(
        "4/4",
        (33, 28, 61),
        {
            KICK: ((0, 10), 104),
            SNARE: ((4, 12), 84),
            HAT: (_every(16, 0, 1), 48),
            OPEN_HAT: ((2, 10), 66),
            COWBELL: ((0, 3, 6, 8, 11, 14), 58),
        },
        ((0, 3, 6, 10, 11), 1),
        ("block", (2, 6, 10, 14), 1),
        "sparse",
        crash=False,
    ),
    "choir": Style("4/4", (42, 52, 52), bass=((0, 8), 8), comp=("hold", (0,), 0), melody="sparse"),
    "fingerpick": Style(
        "4/4",
        (25, 25, 25),
        bass=((0, 4, 8, 12), 4),
        comp=("arpeggio", (2, 6, 10, 14), 2),
        bass_low=40,
    ),
    "bolero": Style(
        "3/4",
        (32, 48, 71),
        {SNARE: ((0, 2, 3, 4, 6, 8, 9, 10), 56), KICK: ((0, 8), 80)},
        ((0, 4, 8), 2),
        ("block", (0, 4, 8), 3),
    ),
    "music_box": Style(
        "3/4", (10, 10, 10), bass=((0,), 12), comp=("arpeggio", _every(12), 2), melody="sparse"
    ),
    "folk68": Style(
        "6/8",
        (32, 25, 22),
        {KICK: ((0,), 84), STICK: ((6,), 70), HAT: (_every(12), 44)},
        ((0, 6), 4),
        ("arpeggio", _every(12), 2),
        "eighths",
        crash=False,
    ),
    "lullaby68": Style(
        "6/8", (0, 8, 73), bass=((0,), 12), comp=("block", (4, 10), 2), melody="beats"
    ),
    "rockballad128": Style(
        "12/8",
        (34, 29, 30),
        {KICK: ((0, 8, 12), 100), SNARE: ((6, 18), 96), OPEN_HAT: ((0, 6, 12, 18), 60)},
        (_every(24, 0, 4), 2),
        ("block", (0, 12), 12),
        "beats",
    ),
    "hymn128": Style(
        "12/8",
        (58, 61, 56),
        bass=((0, 12), 12),
        comp=("block", (0, 6, 12, 18), 6),
        melody="beats",
    ),
}


def songs48(count: int = COUNT, seed: str = SEED) -> tuple[Song, ...]:
    """The corpus's songs, drawn as the module docstring says; the same every call."""
    return corpus96.draw(STYLES48, count, seed, "third")


SONGS48: tuple[Song, ...] = songs48()
corpus60.HALF.update({song.name: "dev" for song in SONGS48})  # held out until corpus56


def make_corpus48(folder: Path | None = None, workers: int = 0) -> Path:
    """Render the songs missing from `folder`."""
    return corpus60.make_corpus(folder or CACHE, workers, songs=SONGS48)
