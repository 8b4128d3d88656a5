"""A fourth corpus of 56 songs, all held out: arrangements no earlier corpus has.

The third corpus (tests/analysis/corpus48.py) was scored twice and has been development data
since. This one was written before the analysis was refitted on that corpus and on the
randomly arranged songs (tests/analysis/random_styles.py), and it is scored once everything
is set (tests/analysis/test_corpus56.py); no choice looks at it. Its 14 arrangements:

- 4/4 with drums: a tango (bandoneon chords on every beat, the bass's "and" of two), ska
  (the guitar on every off-beat, a fast walking bass), UK garage's two-step (kick on 1 and
  the "and" of 3, swung sixteenth hats), synth-pop (four on the floor, a sixteenth synth
  bass), cumbia (the guiro's scrape, bass on 1 and 3), a drumline march (snare sixteenths, a
  bass drum on every beat);
- 4/4 without drums: pizzicato strings, a marimba ostinato in eighths;
- 3/4: a harpsichord sarabande (the long second beat, no drums), a pop song in three (kick,
  snare on beat 3, sixteenth hats);
- 6/8: a siciliana (oboe over strings, the dotted figure, no drums), tom-tom war drums;
- 12/8: a bembe (the seven-stroke bell over congas), a soul ballad (triplet hats, backbeat).

The songs (`SONGS56`) are drawn by corpus96's rule and a fixed seed: styles four each, the 24
keys twice or three times, tempi over 55-200 BPM (45-140 dotted-quarter BPM in 6/8 and 12/8),
the soundfonts and formats dealt evenly, three in ten excerpts. The truth follows corpus60's
rules, and the songs are written and rendered by its code. Cached in data/cache/corpus56
(git-ignored), rendered where missing.
"""

from __future__ import annotations

from pathlib import Path

from tests.analysis import corpus60, corpus96
from tests.analysis.corpus import CLAP, HAT, KICK, OPEN_HAT, SNARE, STICK
from tests.analysis.corpus60 import LOW_CONGA, LOW_TOM, MARACAS, MUTE_CONGA, Song, Style, _every

SEED = "corpus56-1"
COUNT = 56
CACHE = corpus60.DEFAULT_CACHE.with_name("corpus56")
# General MIDI percussion notes besides the earlier corpora's
HIGH_TOM, GUIRO, RIDE_BELL = 50, 74, 53

STYLES56: dict[str, Style] = {
    "tango": Style(
        "4/4",
        (32, 23, 40),
        {KICK: ((0, 8), 70), STICK: ((4, 12), 50)},
        ((0, 6, 8), 2),
        ("block", (0, 4, 8, 12), 2),
        "eighths",
        crash=False,
    ),
    "ska": Style(
        "4/4",
        (33, 27, 56),
        {KICK: ((0, 8), 96), SNARE: ((4, 12), 92), HAT: (_every(16), 56)},
        ((0, 4, 8, 12), 3),
        ("block", (2, 6, 10, 14), 1),
        "eighths",
        walk=True,
    ),
    "twostep": Style(
        "4/4",
        (38, 4, 81),
        {KICK: ((0, 10), 110), SNARE: ((4, 12), 96), HAT: (_every(16, 2, 4), 60)},
        ((0, 3, 10), 2),
        ("block", (3, 10), 2),
        "sparse",
        swing=True,
        crash=False,
    ),
    "synthpop": Style(
        "4/4",
        (38, 81, 80),
        {KICK: ((0, 4, 8, 12), 108), CLAP: ((4, 12), 100), OPEN_HAT: ((2, 6, 10, 14), 58)},
        (_every(16, 0, 1), 1),
        ("hold", (0,), 0),
        "beats",
    ),
    "cumbia": Style(
        "4/4",
        (33, 21, 73),
        {
            KICK: ((0, 8), 92),
            GUIRO: ((0, 3, 4, 8, 11, 12), 60),
            LOW_CONGA: ((6, 14), 70),
            MUTE_CONGA: ((4, 12), 62),
        },
        ((0, 6, 8, 14), 2),
        ("block", (2, 6, 10, 14), 1),
        "beats",
        crash=False,
    ),
    "drumline": Style(
        "4/4",
        (58, 61, 56),
        {KICK: ((0, 4, 8, 12), 100), SNARE: (_every(16, 0, 1), 54)},
        ((0, 4, 8, 12), 3),
        ("block", (0, 8), 6),
        "beats",
        bass_low=33,
    ),
    "pizzicato": Style(
        "4/4", (45, 45, 40), bass=((0, 8), 2), comp=("block", (0, 4, 8, 12), 1), melody="beats"
    ),
    "marimba": Style(
        "4/4",
        (12, 12, 73),
        bass=((0, 4, 8, 12), 2),
        comp=("arpeggio", _every(16), 2),
        melody="sparse",
    ),  # fmt: skip
    "sarabande": Style(
        "3/4", (6, 6, 6), bass=((0, 4), 4), comp=("block", (0, 4), 0), melody="beats"
    ),
    "pop3": Style(
        "3/4",
        (33, 4, 80),
        {KICK: ((0, 6), 104), SNARE: ((8,), 96), HAT: (_every(12, 0, 1), 52)},
        ((0, 6), 4),
        ("hold", (0,), 0),
        "beats",
    ),
    "siciliana": Style(
        "6/8",
        (42, 48, 68),
        bass=((0, 6), 6),
        comp=("block", (0, 3, 4, 6, 9, 10), 0),
        melody="beats",
    ),  # fmt: skip
    "wardrums68": Style(
        "6/8",
        (43, 48, 60),
        {KICK: ((0, 6), 100), LOW_TOM: (_every(12), 76), HIGH_TOM: ((10,), 70)},
        ((0, 6), 6),
        ("hold", (0,), 0),
        "beats",
        crash=False,
    ),
    "bembe128": Style(
        "12/8",
        (32, 24, 73),
        {
            RIDE_BELL: ((0, 4, 8, 10, 14, 18, 22), 72),
            LOW_CONGA: ((0, 12), 80),
            MUTE_CONGA: ((6, 8, 18, 20), 62),
            MARACAS: (_every(24, 0, 4), 44),
        },
        ((0, 10, 12, 22), 2),
        ("block", (4, 10, 16, 22), 2),
        "beats",
        crash=False,
    ),
    "soul128": Style(
        "12/8",
        (33, 16, 65),
        {KICK: ((0, 10, 12), 100), SNARE: ((6, 18), 94), HAT: (_every(24), 54)},
        ((0, 10, 12), 2),
        ("arpeggio", _every(24, 0, 4), 4),
        "sparse",
    ),
}


def songs56(count: int = COUNT, seed: str = SEED) -> tuple[Song, ...]:
    """The corpus's songs, drawn as the module docstring says; the same every call."""
    return corpus96.draw(STYLES56, count, seed, "fourth")


SONGS56: tuple[Song, ...] = songs56()
corpus60.HALF.update({song.name: "held_out" for song in SONGS56})


def make_corpus56(folder: Path | None = None, workers: int = 0) -> Path:
    """Render the songs missing from `folder`."""
    return corpus60.make_corpus(folder or CACHE, workers, songs=SONGS56)
