"""A ninth corpus of 88 songs, all held out: arrangements no earlier corpus has.

The eighth corpus (tests/analysis/corpus80.py) was scored once, with the compound readings'
harmony at half and twice their bar (docs/conventions/labels.md). This one was written after
that scoring and before anything else was changed, and it is kept for the next change to be
measured on, once everything is set; no choice looks at it. Its 22 arrangements are aimed at
what makes the beat's level or the bar hard to hear:

- 4/4 with drums: a half-time rock groove (the snare on beat 3 only, the ride on the beats,
  power chords in eighths), a double-time kit under a ballad (the snare on every off-beat
  eighth, hats in sixteenths, the piano and bass held), reggae steppers (the kick on every
  beat, the rim on 3 only, the organ's skank on 2 and 4), baião (the zabumba's dotted
  figure, the triangle's sixteenths, an accordion), a second line (swung, a tuba, a
  syncopated bass drum, brass stabs), footwork (the kick's 3-3-4-3-3 across the bar, claps
  on 2 and 4), calypso (the bass's "and" of 2, a cowbell on the off-beats, steel drums);
- 4/4 without drums: a boogie-woogie piano (swung eighths in the left hand, chords on every
  off-beat), a string ostinato (the cellos in eighths, the strings' arpeggio in 3-3-2), a
  sparse piano ballad (a chord on 1 and on the "and" of 2, the bass held);
- 3/4: a jazz waltz in two (swung, the ride skipping on the "and" of 3, the piano on the
  "and" of 1 and on 3, the bass held), a jota (castanets, a guitar strumming every beat), a
  stomp in three (a kick on every beat, a tambourine between, a banjo's arpeggio), a
  hemiola (the harp's chords on the two dotted quarters over a cello on every beat, no
  drums);
- 6/8: a jig on a bodhrán (low on the dotted quarters, the tip between, a whistle), a
  quickstep march (the snare on every eighth, a bass drum and cymbals on the dotted
  quarters, the horns' after-beats), a hemiola (guitar chords on the three quarters over a
  cello on the dotted quarters, no drums), a harpsichord gigue (the bass long-short, no
  drums);
- 12/8: a half-time 12/8 (the snare on beat 3 only, the hats on the dotted quarters, an
  electric piano's triplets), a jump blues (a walking bass on the dotted quarters, the
  ride's shuffle, a backbeat), a pulse of eighths (a cello repeating the root on every
  eighth under a held choir, no drums), a slow ballad (kick on 1 and 3, the rim on 2 and 4,
  nothing between: the triplets only in the melody).

The songs (`SONGS88`) are drawn by corpus96's rule and a fixed seed: styles four each, the 24
keys dealt as evenly as 88 goes (three or four times each), tempi over 55-200 BPM (45-140
dotted-quarter BPM in 6/8 and 12/8), the soundfonts and formats dealt evenly, three in ten
excerpts. The truth follows corpus60's rules, and the songs are written and rendered by its
code. Cached in data/cache/corpus88 (git-ignored), rendered where missing.
"""

from __future__ import annotations

from pathlib import Path

from tests.analysis import corpus60, corpus96
from tests.analysis.corpus import CLAP, CRASH, HAT, KICK, RIDE, SNARE, STICK
from tests.analysis.corpus60 import COWBELL, PEDAL_HAT, SHUFFLE_12_8, Song, Style, _every
from tests.analysis.corpus64 import HIGH_FLOOR_TOM, LOW_FLOOR_TOM
from tests.analysis.corpus80 import BASS_DRUM
from tests.analysis.corpus96 import TAMBOURINE

SEED = "corpus88-1"
COUNT = 88
CACHE = corpus60.DEFAULT_CACHE.with_name("corpus88")
MUTE_TRIANGLE, TRIANGLE, CASTANETS = 80, 81, 85  # General MIDI, besides the earlier corpora's
FOOTWORK = (0, 3, 6, 10, 13)  # 3-3-4-3-3 sixteenths across the bar

STYLES88: dict[str, Style] = {
    "halftime": Style(
        "4/4",
        (34, 29, 30),
        {KICK: ((0, 11), 108), SNARE: ((8,), 110), RIDE: ((0, 4, 8, 12), 70)},
        ((0, 11), 5),
        ("block", _every(16), 2),
        "sparse",
    ),
    "doubletime": Style(
        "4/4",
        (33, 0, 65),
        {KICK: ((0, 4, 8, 12), 96), SNARE: ((2, 6, 10, 14), 90), HAT: (_every(16, 0, 1), 46)},
        ((0, 8), 8),
        ("hold", (0,), 0),
        "sparse",
    ),
    "steppers": Style(
        "4/4",
        (33, 16, 22),
        {KICK: ((0, 4, 8, 12), 104), STICK: ((8,), 92), HAT: ((2, 6, 10, 14), 56)},
        (_every(16), 2),
        ("block", (4, 12), 1),
        "sparse",
        crash=False,
    ),
    "baiao": Style(
        "4/4",
        (32, 21, 72),
        {
            BASS_DRUM: ((0, 3, 8, 11), 100),
            STICK: ((4, 12), 60),
            MUTE_TRIANGLE: ((0, 1, 3, 4, 5, 7, 8, 9, 11, 12, 13, 15), 40),
            TRIANGLE: ((2, 6, 10, 14), 60),
        },
        ((0, 3, 8, 11), 2),
        ("block", (0, 3, 6, 8, 11, 14), 2),
        "eighths",
        crash=False,
    ),
    "secondline": Style(
        "4/4",
        (58, 61, 56),
        {KICK: ((0, 6, 8, 14), 100), SNARE: ((4, 7, 10, 12), 80), RIDE: (_every(16), 56)},
        ((0, 6, 8, 14), 2),
        ("block", (4, 10, 12), 2),
        "eighths",
        swing=True,
        crash=False,
    ),
    "footwork": Style(
        "4/4",
        (39, 90, 80),
        {KICK: (FOOTWORK, 110), CLAP: ((4, 12), 88), HAT: ((2, 6, 10, 14), 52)},
        (FOOTWORK, 2),
        ("hold", (0,), 0),
        "sparse",
    ),
    "calypso": Style(
        "4/4",
        (32, 25, 114),
        {KICK: ((0, 6, 8), 96), STICK: ((4, 12), 70), COWBELL: ((2, 6, 10, 14), 60)},
        ((0, 6, 8), 2),
        ("block", (2, 4, 6, 10, 12, 14), 1),
        "eighths",
        crash=False,
    ),
    "boogie": Style(
        "4/4",
        (0, 0, 0),
        bass=(_every(16), 2),
        comp=("block", (2, 6, 10, 14), 1),
        melody="eighths",
        swing=True,
    ),
    "ostinato": Style(
        "4/4",
        (42, 48, 40),
        bass=(_every(16), 2),
        comp=("arpeggio", (0, 3, 6, 8, 11, 14), 2),
        melody="sparse",
    ),
    "pianoballad": Style(
        "4/4",
        (0, 0, 0),
        bass=((0,), 16),
        comp=("block", (0, 6), 0),
        melody="sparse",
    ),
    "twofeel3": Style(
        "3/4",
        (32, 0, 11),
        {RIDE: ((0, 4, 8, 10), 70), PEDAL_HAT: ((4,), 56)},
        ((0,), 12),
        ("block", (2, 8), 2),
        "eighths",
        swing=True,
        crash=False,
    ),
    "jota": Style(
        "3/4",
        (32, 24, 105),
        {CASTANETS: ((0, 2, 3, 4, 8, 10), 72)},
        ((0,), 4),
        ("block", (0, 4, 8), 2),
        "eighths",
        crash=False,
    ),
    "stomp3": Style(
        "3/4",
        (32, 105, 22),
        {KICK: ((0, 4, 8), 104), TAMBOURINE: ((2, 6, 10), 70)},
        ((0, 4, 8), 3),
        ("arpeggio", _every(12), 2),
        "beats",
        crash=False,
    ),
    "hemiola3": Style(
        "3/4",
        (42, 46, 73),
        bass=((0, 4, 8), 4),
        comp=("block", (0, 6), 6),
        melody="beats",
    ),
    "bodhran68": Style(
        "6/8",
        (32, 24, 78),
        {LOW_FLOOR_TOM: ((0, 6), 96), HIGH_FLOOR_TOM: ((2, 4, 8, 10), 62)},
        ((0, 6), 6),
        ("arpeggio", _every(12), 2),
        "eighths",
        crash=False,
    ),
    "quickstep68": Style(
        "6/8",
        (58, 60, 72),
        {BASS_DRUM: ((0, 6), 100), SNARE: (_every(12), 62), CRASH: ((0, 6), 60)},
        ((0, 6), 3),
        ("block", (2, 4, 8, 10), 2),
        "eighths",
        crash=False,
    ),
    "hemiola68": Style(
        "6/8",
        (42, 24, 73),
        bass=((0, 6), 6),
        comp=("block", (0, 4, 8), 4),
        melody="beats",
    ),
    "gigue68": Style(
        "6/8",
        (6, 6, 6),
        bass=((0, 4, 6, 10), 2),
        comp=("block", (0, 6), 4),
        melody="eighths",
    ),
    "halftime128": Style(
        "12/8",
        (33, 4, 29),
        {KICK: ((0, 10), 100), SNARE: ((12,), 104), HAT: (_every(24, 0, 6), 50)},
        ((0, 12), 12),
        ("block", _every(24), 1),
        "sparse",
    ),
    "jump128": Style(
        "12/8",
        (32, 0, 65),
        {KICK: ((0, 6, 12, 18), 60), SNARE: ((6, 18), 90), RIDE: (SHUFFLE_12_8, 70)},
        ((0, 6, 12, 18), 5),
        ("block", SHUFFLE_12_8, 2),
        "eighths",
        walk=True,
        crash=False,
    ),
    "pulse128": Style(
        "12/8",
        (42, 52, 71),
        bass=(_every(24), 2),
        comp=("hold", (0,), 0),
        melody="beats",
    ),
    "ballad128": Style(
        "12/8",
        (35, 11, 71),
        {KICK: ((0, 12), 90), STICK: ((6, 18), 80)},
        ((0, 12), 12),
        ("block", (0, 6, 12, 18), 6),
        "eighths",
        crash=False,
    ),
}


def songs88(count: int = COUNT, seed: str = SEED) -> tuple[Song, ...]:
    """The corpus's songs, drawn as the module docstring says; the same every call."""
    return corpus96.draw(STYLES88, count, seed, "ninth")


SONGS88: tuple[Song, ...] = songs88()
corpus60.HALF.update({song.name: "held_out" for song in SONGS88})


def make_corpus88(folder: Path | None = None, workers: int = 0) -> Path:
    """Render the songs missing from `folder`."""
    return corpus60.make_corpus(folder or CACHE, workers, songs=SONGS88)
