"""A thirteenth corpus of 128 songs, all held out: arrangements no earlier corpus has.

The twelfth corpus (tests/analysis/corpus120.py) was scored once (docs/conventions/labels.md).
This one was written after that scoring and before the next change was chosen, without any
analysis of its songs, and it is kept for that change to be measured on, once everything is
set; until then nothing analyses it and no choice looks at it. Its 32 arrangements are aimed
at grooves, textures and situations the earlier tables lack:

- 4/4 with drums: drum and bass's two-step (the kick on 1 and the "and" of 3, the snare on 2
  and 4, ghost notes on the last sixteenth of 2 and the "and" of 4, a ride in eighths, a
  synth bass with the kick, a pad held), baile funk (the kick on 1, the last sixteenth of 1
  and of 2 and the "and" of 3, a tom on the "and" of 2 and the second sixteenth of 4, claps
  on 2 and 4, an 808 with the kick), a shuffle written in triplets (the ride and the bass
  long-short on every beat, the first and third notes of each beat's eighth-note triplet,
  the piano's chords with them, the melody straight), math rock (the kick, the snare and the
  bass in groups of three sixteenths across the bar, 3+3+3+3+4, a tapped guitar in
  sixteenths, hats on every sixteenth), boom-bap with swung sixteenths (the hats long-short
  within each eighth, 2:1, the kick on 1, the swung last sixteenth of 2 and the "and" of 3),
  gqom (no backbeat: the kick on 1 and the "and" of 3, toms on syncopated sixteenths, hats
  on the off-beats), d-beat (the kick on 1, the "and" of 2, 3 and the "and" of 4, the snare
  on 2 and 4, a second crash ridden in eighths, bass and power chords in eighths), a bulgar
  (the bass drum, the tuba and the accordion 3+3+2 eighths, the snare on 2 and 4, a
  clarinet in eighths), kuduro (four on the floor, a tom on the second sixteenth of 1 and
  the last of 2, of 3 and of 4, claps on 2 and 4, stabs off the beat), maracatu (the alfaias
  on 1, the "and" of 2, 3, the last sixteenth of 3 and the "and" of 4, the gonguê's figure,
  the caixa in sixteenths, no kit);
- 4/4 without drums: a string quartet (the cello in eighths, the viola and second violin on
  the off-beats, the first violin on the beats), an organ chorale (the pedal, the chords and
  the tune on every beat), a banjo roll (the banjo's arpeggio in sixteenths, the bass on 1
  and 3, a fiddle in eighths), a piano in 3+3+2 (the left hand and the chords on 1, the
  "and" of 2 and 4);
- 3/4: a mazurka with drums (the bass drum on 1, a rim's dotted figure on 1 and 2, the
  tambourine's accent on beat 3), a tom waltz (the floor tom on every eighth, the kick on 1,
  a ride on the beats, a guitar's arpeggio), a ballroom Viennese waltz with drums (the
  snare and the chords anticipating beat 2 by a sixteenth and on beat 3, the kick on 1), a
  piano waltz (the bass held from the downbeat, chords on 2 and 3, the tune in eighths, no
  drums), a Travis-picked waltz (the bass on every beat, the pinches on the "and" and the
  last sixteenth of each beat, no drums), a jazz waltz trio without drums (swung, a walking
  bass, vibes);
- 6/8: pizzica (the tamburello's eighth, two sixteenths and eighth on each beat, the bass
  drum on the beats, an accordion off the beats, a violin in eighths), zamba (the bombo on
  the first and second eighths and the second beat, the rim on the other eighths), brushes
  in 6/8 (a sweep in sixteenths, the ride long-short, the hat foot on the second beat, a
  feathered kick), a music box (an arpeggio in sixteenths, no drums), a string quartet in
  6/8 (the viola in eighths, the cello on the beats, no drums), a choir (the chords
  long-short on each beat, no drums);
- 12/8: an Afro 12/8 with a shekere (the shekere on every eighth, the bass drum on the
  beats, a conga on each beat's last eighth), an Irish slide (a bodhrán: the low stroke on
  the beats, the high one on the other eighths, a guitar on the beats, a fiddle in
  eighths), landó (the cajón's bass on 1, the last eighth of 2 and on 3, its slap on 2, the
  second eighth of 3 and on 4, a cowbell long-short), woodwinds (the bassoon long-short, the
  clarinets on the beats, a flute in eighths, no drums), a harpsichord (the bass on the
  beats, an arpeggio on every eighth, no drums), an accordion (the bass long-short, the
  bellows on the off-beat eighths, no drums).

The songs (`SONGS128`) are drawn by corpus96's rule and a fixed seed: styles four each, the
24 keys five or six times each, tempi over 55-200 BPM (45-140 dotted-quarter BPM in 6/8 and
12/8), the soundfonts and formats dealt evenly, three in ten excerpts. The truth follows
corpus60's rules, and the songs are written and rendered by its code. Cached in
data/cache/corpus128 (git-ignored), rendered where missing.
"""

from __future__ import annotations

from pathlib import Path

from tests.analysis import corpus60, corpus96
from tests.analysis.corpus import CLAP, HAT, KICK, RIDE, SNARE, STICK
from tests.analysis.corpus60 import (
    COWBELL,
    PEDAL_HAT,
    SHUFFLE_12_8,
    TRIPLETS_12_8,
    Song,
    Style,
    _every,
)
from tests.analysis.corpus64 import HIGH_FLOOR_TOM, LOW_FLOOR_TOM
from tests.analysis.corpus80 import BASS_DRUM
from tests.analysis.corpus96 import TAMBOURINE
from tests.analysis.corpus104 import CABASA, ELECTRIC_SNARE, OPEN_HIGH_CONGA

SEED = "corpus128-1"
COUNT = 128
CACHE = corpus60.DEFAULT_CACHE.with_name("corpus128")
# General MIDI, besides the earlier corpora's
LOW_MID_TOM, HIGH_MID_TOM, CRASH_2, LOW_AGOGO = 47, 48, 57, 68
# a 4/4 shuffle written as triplets: each beat's first and third eighth-note triplet
SHUFFLE_4_4 = tuple(beat + offset for beat in (0, 4, 8, 12) for offset in (0, 8 / 3))
# sixteenths swung 2:1 within each eighth, off the sixteenth grid
SWUNG_16THS = tuple(eighth + offset for eighth in range(0, 16, 2) for offset in (0, 4 / 3))
GROUPS_OF_3 = (0, 3, 6, 9, 12)  # 3+3+3+3+4 sixteenths across the bar
TRESILLO = (0, 6, 12)  # 3+3+2 eighths

STYLES128: dict[str, Style] = {
    "twostep_dnb": Style(
        "4/4",
        (38, 95, 5),
        {
            KICK: ((0, 10), 112),
            SNARE: ((4, 12), 106),
            ELECTRIC_SNARE: ((7, 14), 40),
            RIDE: (_every(16), 56),
        },
        ((0, 10), 6),
        ("hold", (0,), 0),
        "sparse",
    ),
    "baile_funk": Style(
        "4/4",
        (38, 81, 85),
        {
            KICK: ((0, 3, 7, 10), 116),
            LOW_MID_TOM: ((6, 13), 90),
            CLAP: ((4, 12), 100),
        },
        ((0, 3, 7, 10), 2),
        ("block", (0, 3, 6), 1),
        "sparse",
    ),
    "triplet_shuffle": Style(
        "4/4",
        (33, 0, 22),
        {KICK: ((0, 8), 100), SNARE: ((4, 12), 98), RIDE: (SHUFFLE_4_4, 66)},
        (SHUFFLE_4_4, 2),
        ("block", SHUFFLE_4_4, 1),
        "sparse",
    ),
    "mathrock": Style(
        "4/4",
        (33, 26, 27),
        {KICK: (TRESILLO, 104), SNARE: ((3, 9), 96), HAT: (_every(16, 0, 1), 40)},
        (GROUPS_OF_3, 2),
        ("arpeggio", _every(16, 0, 1), 1),
        "sparse",
    ),
    "swung_boombap": Style(
        "4/4",
        (33, 4, 65),
        {KICK: ((0, 6 + 4 / 3, 10), 106), SNARE: ((4, 12), 102), HAT: (SWUNG_16THS, 50)},
        ((0, 10), 4),
        ("block", (0, 6), 2),
        "sparse",
    ),
    "gqom": Style(
        "4/4",
        (38, 89, 80),
        {
            KICK: ((0, 10), 114),
            LOW_MID_TOM: ((3, 6, 13), 94),
            HIGH_MID_TOM: ((7, 14), 80),
            HAT: ((2, 6, 10, 14), 50),
        },
        ((0, 10), 6),
        ("hold", (0,), 0),
        "sparse",
    ),
    "dbeat": Style(
        "4/4",
        (34, 30, 29),
        {KICK: ((0, 6, 8, 14), 112), SNARE: ((4, 12), 110), CRASH_2: (_every(16), 62)},
        (_every(16), 2),
        ("block", _every(16), 1),
        "sparse",
    ),
    "bulgar": Style(
        "4/4",
        (58, 21, 71),
        {BASS_DRUM: (TRESILLO, 100), SNARE: ((4, 12), 76), HAT: (_every(16), 48)},
        (TRESILLO, 3),
        ("block", TRESILLO, 2),
        "eighths",
        crash=False,
    ),
    "kuduro": Style(
        "4/4",
        (38, 81, 80),
        {
            KICK: ((0, 4, 8, 12), 114),
            HIGH_MID_TOM: ((1, 7, 11, 15), 84),
            CLAP: ((4, 12), 92),
        },
        ((0, 7, 10), 2),
        ("block", (3, 6, 11), 1),
        "sparse",
    ),
    "maracatu": Style(
        "4/4",
        (32, 24, 71),
        {
            BASS_DRUM: ((0, 6, 8, 11, 14), 100),
            LOW_AGOGO: ((0, 2, 4, 7, 10, 12), 72),
            SNARE: (_every(16, 0, 1), 44),
        },
        ((0, 6, 8), 3),
        ("block", (0, 4, 8, 12), 2),
        "beats",
        crash=False,
    ),
    "string_quartet": Style(
        "4/4",
        (42, 41, 40),
        bass=(_every(16), 2),
        comp=("block", (2, 6, 10, 14), 1),
        melody="beats",
    ),
    "organ_chorale": Style(
        "4/4",
        (19, 19, 19),
        bass=((0, 4, 8, 12), 4),
        comp=("block", (0, 4, 8, 12), 4),
        melody="beats",
    ),
    "banjo_roll": Style(
        "4/4",
        (32, 105, 110),
        bass=((0, 8), 4),
        comp=("arpeggio", _every(16, 0, 1), 1),
        melody="eighths",
    ),
    "piano_332": Style(
        "4/4",
        (0, 0, 0),
        bass=(TRESILLO, 4),
        comp=("block", TRESILLO, 0),
        melody="sparse",
    ),
    "mazurek": Style(
        "3/4",
        (43, 21, 40),
        {BASS_DRUM: ((0,), 84), STICK: ((0, 3, 4), 58), TAMBOURINE: ((8,), 104)},
        ((0,), 4),
        ("block", (4, 8), 2),
        "eighths",
        crash=False,
    ),
    "tomwaltz": Style(
        "3/4",
        (33, 25, 73),
        {KICK: ((0,), 100), LOW_FLOOR_TOM: (_every(12), 78), RIDE: ((0, 4, 8), 56)},
        ((0,), 12),
        ("arpeggio", _every(12), 3),
        "sparse",
    ),
    "ballroom3": Style(
        "3/4",
        (32, 0, 65),
        {KICK: ((0,), 90), SNARE: ((3, 8), 58), RIDE: ((0, 4, 8), 60)},
        ((0,), 3),
        ("block", (3, 8), 2),
        "beats",
        crash=False,
    ),
    "piano_waltz": Style(
        "3/4",
        (0, 0, 0),
        bass=((0,), 12),
        comp=("block", (4, 8), 3),
        melody="eighths",
    ),
    "travis3": Style(
        "3/4",
        (25, 25, 25),
        bass=((0, 4, 8), 2),
        comp=("arpeggio", (2, 3, 6, 7, 10, 11), 1),
        melody="sparse",
        bass_low=40,
    ),
    "vibes3": Style(
        "3/4",
        (32, 11, 11),
        bass=((0, 4, 8), 4),
        comp=("block", (0, 6), 4),
        melody="eighths",
        swing=True,
        walk=True,
    ),
    "pizzica68": Style(
        "6/8",
        (32, 21, 40),
        {TAMBOURINE: ((0, 2, 3, 4, 6, 8, 9, 10), 74), BASS_DRUM: ((0, 6), 92)},
        ((0, 6), 3),
        ("block", (2, 4, 8, 10), 1),
        "eighths",
        crash=False,
    ),
    "zamba68": Style(
        "6/8",
        (32, 24, 73),
        {BASS_DRUM: ((0, 2, 6), 92), STICK: ((4, 8, 10), 60)},
        ((0, 6), 4),
        ("arpeggio", _every(12), 3),
        "beats",
        crash=False,
    ),
    "brush68": Style(
        "6/8",
        (32, 0, 66),
        {
            ELECTRIC_SNARE: (_every(12, 0, 1), 26),
            RIDE: ((0, 4, 6, 10), 62),
            PEDAL_HAT: ((6,), 56),
            KICK: ((0,), 46),
        },
        ((0, 6), 5),
        ("block", (4, 10), 2),
        "beats",
        crash=False,
    ),
    "musicbox68": Style(
        "6/8",
        (10, 10, 10),
        bass=((0, 6), 4),
        comp=("arpeggio", _every(12, 0, 1), 2),
        melody="sparse",
    ),
    "quartet68": Style(
        "6/8",
        (42, 41, 40),
        bass=((0, 6), 6),
        comp=("block", _every(12), 2),
        melody="beats",
    ),
    "choir68": Style(
        "6/8",
        (52, 52, 53),
        bass=((0, 6), 6),
        comp=("block", (0, 4, 6, 10), 0),
        melody="beats",
    ),
    "shekere128": Style(
        "12/8",
        (32, 24, 73),
        {
            CABASA: (TRIPLETS_12_8, 56),
            BASS_DRUM: ((0, 6, 12, 18), 92),
            OPEN_HIGH_CONGA: ((4, 10, 16, 22), 72),
        },
        ((0, 10, 12, 22), 2),
        ("block", (4, 10, 16, 22), 1),
        "sparse",
        crash=False,
    ),
    "irishslide128": Style(
        "12/8",
        (32, 25, 110),
        {
            LOW_FLOOR_TOM: ((0, 6, 12, 18), 94),
            HIGH_FLOOR_TOM: ((2, 4, 8, 10, 14, 16, 20, 22), 62),
        },
        ((0, 12), 6),
        ("block", (0, 6, 12, 18), 3),
        "eighths",
        crash=False,
    ),
    "lando128": Style(
        "12/8",
        (32, 24, 53),
        {
            BASS_DRUM: ((0, 10, 12), 96),
            OPEN_HIGH_CONGA: ((6, 14, 18), 78),
            COWBELL: (SHUFFLE_12_8, 56),
        },
        ((0, 10, 12), 2),
        ("block", (2, 6, 8, 14, 18, 20), 1),
        "beats",
        crash=False,
    ),
    "winds128": Style(
        "12/8",
        (70, 71, 73),
        bass=(SHUFFLE_12_8, 2),
        comp=("block", (0, 6, 12, 18), 4),
        melody="eighths",
    ),
    "harpsichord128": Style(
        "12/8",
        (6, 6, 6),
        bass=((0, 6, 12, 18), 4),
        comp=("arpeggio", TRIPLETS_12_8, 1),
        melody="beats",
    ),
    "accordion128": Style(
        "12/8",
        (32, 21, 23),
        bass=(SHUFFLE_12_8, 3),
        comp=("block", (2, 4, 8, 10, 14, 16, 20, 22), 1),
        melody="sparse",
    ),
}


def songs128(count: int = COUNT, seed: str = SEED) -> tuple[Song, ...]:
    """The corpus's songs, drawn as the module docstring says; the same every call."""
    return corpus96.draw(STYLES128, count, seed, "thirteenth")


SONGS128: tuple[Song, ...] = songs128()
corpus60.HALF.update({song.name: "held_out" for song in SONGS128})


def make_corpus128(folder: Path | None = None, workers: int = 0) -> Path:
    """Render the songs missing from `folder`."""
    return corpus60.make_corpus(folder or CACHE, workers, songs=SONGS128)
