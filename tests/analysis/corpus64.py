"""A sixth corpus of 64 songs: arrangements no earlier corpus has.

The fifth corpus (tests/analysis/corpus52.py) was scored once, with the bar's onset
evidence (docs/conventions/labels.md). This one was written after that scoring and before
anything else was changed, held out for the next change and scored once with it (the beat's
grid evidence); it has been development data since the seventh corpus was scored. Its 16
arrangements:

- 4/4 with drums: Afrobeats (a shaker in sixteenths, the rim's 3-3-2 over a kick on 1 and the
  "and" of 2), lo-fi hip-hop (swung, a lazy kick, electric piano held), metal (double kick in
  sixteenths, snare on 2 and 4, power chords in eighths), UK drill (the snare on beat 3, hats
  in a broken pattern, a sliding bass), cha-cha-cha (the cowbell on the beats, the guiro,
  the "cha-cha" on 4 and its "and"), zouk (kick on 1 and 3, the rim's tresillo);
- 4/4 without drums: bluegrass (banjo rolls in eighths, the bass on 1 and 3, the mandolin's
  chop on 2 and 4), a brass chorale (tuba, horns, trumpet, chords on every beat), ragtime
  piano (the left hand's "oom-pah");
- 3/4: a musette (accordion, the bass on 1, chords on 2 and 3), a strummed folk waltz
  (guitar in eighths, the bass on 1 and 3);
- 6/8: a strummed 6/8 ballad (guitar on both dotted quarters and their eighths, no drums),
  a sea shanty (accordion and fiddle, a bass drum on each dotted quarter);
- 12/8: taiko drums (low drums on the dotted quarters, the rim between), a celesta lullaby
  (no drums, a broken chord in eighths), a 12/8 slow jam (an electric piano's triplets, kick
  on 1 and the "and" of 3, snare on 2 and 4).

The songs (`SONGS64`) are drawn by corpus96's rule and a fixed seed: styles four each, the 24
keys two or three times, tempi over 55-200 BPM (45-140 dotted-quarter BPM in 6/8 and 12/8),
the soundfonts and formats dealt evenly, three in ten excerpts. The truth follows corpus60's
rules, and the songs are written and rendered by its code. Cached in data/cache/corpus64
(git-ignored), rendered where missing.
"""

from __future__ import annotations

from pathlib import Path

from tests.analysis import corpus60, corpus96
from tests.analysis.corpus import CLAP, HAT, KICK, OPEN_HAT, SNARE, STICK
from tests.analysis.corpus56 import GUIRO
from tests.analysis.corpus60 import COWBELL, LOW_TOM, Song, Style, _every
from tests.analysis.corpus96 import SHAKER

SEED = "corpus64-1"
COUNT = 64
CACHE = corpus60.DEFAULT_CACHE.with_name("corpus64")
# General MIDI percussion notes besides the earlier corpora's
LOW_FLOOR_TOM, HIGH_FLOOR_TOM, SIDE_STICK_LOW = 41, 43, 37

STYLES64: dict[str, Style] = {
    "afrobeats": Style(
        "4/4",
        (38, 4, 78),
        {
            KICK: ((0, 6, 8), 104),
            STICK: ((3, 6, 10, 12), 72),
            SHAKER: (_every(16, 0, 1), 44),
        },
        ((0, 6, 8), 2),
        ("block", (2, 6, 10, 14), 1),
        "eighths",
        crash=False,
    ),
    "lofi": Style(
        "4/4",
        (32, 4, 11),
        {KICK: ((0, 5, 10), 96), SNARE: ((4, 12), 82), HAT: (_every(16), 44)},
        ((0, 10), 4),
        ("hold", (0,), 0),
        "sparse",
        swing=True,
        crash=False,
    ),
    "metal": Style(
        "4/4",
        (33, 30, 29),
        {KICK: (_every(16, 0, 1), 100), SNARE: ((4, 12), 110), OPEN_HAT: (_every(16, 0, 4), 60)},
        (_every(16), 1),
        ("block", _every(16), 1),
        "beats",
    ),
    "drill": Style(
        "4/4",
        (38, 88, 80),
        {KICK: ((0, 10), 108), SNARE: ((8,), 100), HAT: ((0, 3, 6, 8, 11, 14), 56)},
        ((0, 3, 10), 3),
        ("hold", (0,), 0),
        "sparse",
        crash=False,
    ),
    "chacha": Style(
        "4/4",
        (32, 0, 73),
        {
            COWBELL: ((0, 4, 8, 12), 70),
            GUIRO: ((0, 4, 8, 12, 14), 54),
            LOW_TOM: ((12, 14), 80),
        },
        ((0, 6, 8), 2),
        ("block", (0, 6, 8, 14), 1),
        "beats",
        crash=False,
    ),
    "zouk": Style(
        "4/4",
        (38, 5, 81),
        {KICK: ((0, 8), 100), STICK: ((0, 3, 6, 8, 11, 14), 70), HAT: (_every(16, 2, 4), 50)},
        ((0, 3, 8, 11), 2),
        ("block", (0, 3, 6), 2),
        "eighths",
        crash=False,
    ),
    "bluegrass": Style(
        "4/4",
        (32, 105, 40),
        bass=((0, 8), 4),
        comp=("arpeggio", _every(16), 2),
        melody="eighths",
    ),
    "brass": Style(
        "4/4",
        (58, 60, 56),
        bass=((0, 4, 8, 12), 4),
        comp=("block", (0, 4, 8, 12), 4),
        melody="beats",
        bass_low=28,
    ),
    "ragtime": Style(
        "4/4",
        (0, 0, 0),
        bass=((0, 8), 2),
        comp=("block", (4, 12), 2),
        melody="eighths",
    ),
    "musette": Style(
        "3/4",
        (21, 21, 23),
        bass=((0,), 4),
        comp=("block", (4, 8), 2),
        melody="eighths",
    ),
    "folkwaltz": Style(
        "3/4",
        (32, 25, 73),
        bass=((0, 8), 4),
        comp=("block", _every(12), 1),
        melody="beats",
    ),
    "strum68": Style(
        "6/8",
        (32, 25, 24),
        bass=((0, 6), 6),
        comp=("block", (0, 4, 6, 10), 2),
        melody="beats",
    ),
    "shanty68": Style(
        "6/8",
        (32, 21, 40),
        {LOW_FLOOR_TOM: ((0, 6), 96)},
        ((0, 6), 4),
        ("block", (0, 2, 4, 6, 8, 10), 1),
        "eighths",
        crash=False,
    ),
    "taiko128": Style(
        "12/8",
        (43, 48, 77),
        {
            LOW_FLOOR_TOM: ((0, 6, 12, 18), 108),
            HIGH_FLOOR_TOM: ((4, 16), 80),
            SIDE_STICK_LOW: ((2, 8, 10, 14, 20, 22), 56),
        },
        ((0, 12), 12),
        ("hold", (0,), 0),
        "sparse",
        crash=False,
    ),
    "celesta128": Style(
        "12/8",
        (32, 8, 10),
        bass=((0, 12), 12),
        comp=("arpeggio", _every(24), 2),
        melody="sparse",
    ),
    "slowjam128": Style(
        "12/8",
        (33, 4, 52),
        {KICK: ((0, 16), 96), SNARE: ((6, 18), 90), CLAP: ((18,), 50), HAT: (_every(24), 40)},
        ((0, 16), 4),
        ("block", _every(24), 1),
        "beats",
    ),
}


def songs64(count: int = COUNT, seed: str = SEED) -> tuple[Song, ...]:
    """The corpus's songs, drawn as the module docstring says; the same every call."""
    return corpus96.draw(STYLES64, count, seed, "sixth")


SONGS64: tuple[Song, ...] = songs64()
corpus60.HALF.update({song.name: "held_out" for song in SONGS64})


def make_corpus64(folder: Path | None = None, workers: int = 0) -> Path:
    """Render the songs missing from `folder`."""
    return corpus60.make_corpus(folder or CACHE, workers, songs=SONGS64)
