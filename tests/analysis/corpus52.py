"""A fifth corpus of 52 songs, all held out: arrangements no earlier corpus has.

The fourth corpus (tests/analysis/corpus56.py) was scored once and has been development data
since. This one was written before anything was changed after that scoring, and it is scored
once everything is set (tests/analysis/test_corpus52.py); no choice looks at it. Its 13
arrangements:

- 4/4 with drums: reggaeton's dembow (kick on every beat, the snare's 3-3-2), son montuno
  (the clave, a tumbao bass on the "and" of 2 and on 4, piano montuno in eighths), new jack
  swing (swung sixteenths), a breakbeat (the kick and snare displaced), a country two-step
  (brushes, an alternating bass);
- 4/4 without drums: steel pans over a string pad, a tremolo string ensemble;
- 3/4: a mariachi vals (guitarron on 1, guitars on 2 and 3, trumpets), a carousel (calliope,
  bass drum on 1, cymbal on 2 and 3);
- 6/8: a chacarera (the bombo's accents across the bar), a slow 6/8 gospel ballad (organ,
  kick on 1, snare on 4);
- 12/8: a swamp-pop ballad (accordion, brushes on 2 and 4), a cello lament over strings (no
  drums).

The songs (`SONGS52`) are drawn by corpus96's rule and a fixed seed: styles four each, the 24
keys twice or three times, tempi over 55-200 BPM (45-140 dotted-quarter BPM in 6/8 and 12/8),
the soundfonts and formats dealt evenly, three in ten excerpts. The truth follows corpus60's
rules, and the songs are written and rendered by its code. Cached in data/cache/corpus52
(git-ignored), rendered where missing.
"""

from __future__ import annotations

from pathlib import Path

from tests.analysis import corpus60, corpus96
from tests.analysis.corpus import CRASH, HAT, KICK, OPEN_HAT, RIDE, SNARE, STICK
from tests.analysis.corpus60 import (
    COWBELL,
    LOW_CONGA,
    LOW_TOM,
    MUTE_CONGA,
    PEDAL_HAT,
    Song,
    Style,
    _every,
)

SEED = "corpus52-1"
COUNT = 52
CACHE = corpus60.DEFAULT_CACHE.with_name("corpus52")
# General MIDI percussion notes besides the earlier corpora's
CLAVES, HIGH_BONGO, BASS_DRUM_2 = 75, 60, 35

STYLES52: dict[str, Style] = {
    "dembow": Style(
        "4/4",
        (38, 80, 81),
        {KICK: ((0, 4, 8, 12), 110), SNARE: ((3, 6, 11, 14), 92), HAT: (_every(16), 50)},
        ((0, 3, 8, 11), 2),
        ("hold", (0,), 0),
        "sparse",
        crash=False,
    ),
    "son": Style(
        "4/4",
        (32, 0, 56),
        {
            CLAVES: ((0, 3, 6, 10, 12), 80),
            LOW_CONGA: ((6, 14), 74),
            MUTE_CONGA: ((4, 12), 60),
            COWBELL: ((0, 4, 8, 12), 58),
        },
        ((6, 12), 4),
        ("arpeggio", _every(16), 2),
        "beats",
        crash=False,
    ),
    "newjack": Style(
        "4/4",
        (38, 89, 62),
        {KICK: ((0, 3, 10), 108), SNARE: ((4, 12), 104), HAT: (_every(16, 0, 1), 56)},
        ((0, 3, 10), 2),
        ("block", (0, 6, 10), 2),
        "eighths",
        swing=True,
    ),
    "breakbeat": Style(
        "4/4",
        (33, 17, 29),
        {KICK: ((0, 2, 10), 110), SNARE: ((4, 7, 12, 15), 100), RIDE: (_every(16), 64)},
        ((0, 2, 10), 2),
        ("block", (0, 10), 4),
        "sparse",
    ),
    "twostep_country": Style(
        "4/4",
        (32, 25, 105),
        {STICK: ((4, 12), 66), PEDAL_HAT: ((4, 12), 50), KICK: ((0, 8), 70)},
        ((0, 8), 4),
        ("block", (4, 12), 2),
        "eighths",
        walk=True,
        crash=False,
    ),
    "steelpan": Style(
        "4/4", (33, 89, 114), bass=((0, 6, 8), 2), comp=("hold", (0,), 0), melody="eighths"
    ),
    "tremolo": Style(
        "4/4", (43, 44, 40), bass=((0, 8), 8), comp=("block", _every(16, 0, 1), 1), melody="sparse"
    ),
    "vals": Style(
        "3/4",
        (58, 24, 56),
        bass=((0,), 4),
        comp=("block", (4, 8), 2),
        melody="beats",
        bass_low=28,
    ),
    "carousel": Style(
        "3/4",
        (58, 20, 82),
        {BASS_DRUM_2: ((0,), 100), CRASH: ((4, 8), 50)},
        ((0,), 4),
        ("block", (4, 8), 2),
        "eighths",
        crash=False,
    ),
    "chacarera": Style(
        "6/8",
        (32, 24, 40),
        {LOW_TOM: ((0, 4, 8), 92), HIGH_BONGO: ((2, 6, 10), 60)},
        ((0, 4, 8), 2),
        ("block", (0, 4, 6, 8, 10), 1),
        "eighths",
        crash=False,
    ),
    "gospel68": Style(
        "6/8",
        (33, 16, 0),
        {KICK: ((0,), 96), SNARE: ((6,), 90), HAT: (_every(12), 48)},
        ((0, 6), 6),
        ("arpeggio", _every(12), 2),
        "beats",
    ),
    "swamp128": Style(
        "12/8",
        (32, 21, 66),
        {KICK: ((0, 12), 84), STICK: ((6, 18), 70), OPEN_HAT: (_every(24, 0, 6), 40)},
        (_every(24, 0, 4), 2),
        ("block", _every(24, 0, 2), 1),
        "beats",
        crash=False,
    ),
    "lament128": Style(
        "12/8",
        (43, 49, 42),
        bass=((0, 12), 12),
        comp=("hold", (0,), 0),
        melody="sparse",
    ),
}


def songs52(count: int = COUNT, seed: str = SEED) -> tuple[Song, ...]:
    """The corpus's songs, drawn as the module docstring says; the same every call."""
    return corpus96.draw(STYLES52, count, seed, "fifth")


SONGS52: tuple[Song, ...] = songs52()
corpus60.HALF.update({song.name: "held_out" for song in SONGS52})


def make_corpus52(folder: Path | None = None, workers: int = 0) -> Path:
    """Render the songs missing from `folder`."""
    return corpus60.make_corpus(folder or CACHE, workers, songs=SONGS52)
