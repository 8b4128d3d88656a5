"""A tenth corpus of 104 songs, all held out: arrangements no earlier corpus has.

The ninth corpus (tests/analysis/corpus88.py) was scored once, after the eighth corpus had
become development data, with a change to the tempo's levels (docs/conventions/labels.md).
This one was written while that change was chosen, without looking at it or at any analysis
of the ninth, and it is kept for the next change to be measured on, once everything is set;
no choice looks at it.
Its 26 arrangements are aimed at genres and textures the earlier tables lack:

- 4/4 with drums: drum and bass in a half-time feel (the snare on beat 3 only, ghost notes
  and a broken kick under sixteenth hats, a pad held), songo (no kick on 1: the kick and the
  bass on the "and" of 2 and of 4, the bell, the snare's accents, a piano montuno on the
  off-beat sixteenths), Italo disco (four on the floor, the hat on the off-beats, a synth
  bass on every eighth, a sixteenth arpeggio), amapiano (four on the floor, a cabasa in
  sixteenths, the log-drum bass off the beat), guaguancó (the rumba clave, three congas, no
  kit), a glam stomp (the kick on 1, its "and", 3 and its "and", claps on 2 and 4, nothing
  else), a half-time shuffle (swung, the snare on beat 3 only, ghost notes on the
  off-beats), a slow blues played straight (a walking bass, chords on every beat, the rim
  on 2 and 4), maqsum (the doumbek's dum on 1 and 3 and tek between, a riq in eighths);
- 4/4 without drums: a nylon guitar alone (the bossa thumb, syncopated chords), a saxophone
  section (swung, the Charleston's 1 and "and" of 2), a kalimba's ostinato over a fretless
  bass, a piano's Alberti bass in sixteenths;
- 3/4: a Viennese waltz (contrabass on 1, the strings' second beat a sixteenth early, no
  drums), a guitar alone (the thumb on 1, strums on 2 and 3, no drums), a Peruvian vals (the
  cajón's low and slapped strokes on congas, guitars), an electronic waltz (the kick on 1,
  a clap on 2 only, open hats on the off-beats, a cabasa in sixteenths), a Cajun waltz (a
  triangle on every eighth, accordion, fiddle);
- 6/8: festejo (the cajón on congas, a jawbone's rattle on the second dotted quarter), a
  6/8 shuffle (the ride and the bass long-short on each dotted quarter), an accordion alone
  (the bass on the dotted quarters, chords between), a hunting call on horns (the chords
  long-short, then the second beat held; no drums);
- 12/8: a gospel shout (the kick on every beat, claps on 2 and 4, a tambourine on every
  eighth, the organ's stabs on each beat's last eighth), rumba columbia (the clave's five
  strokes over congas, no kit), an Irish slide (accordion and fiddle long-short, no drums), a
  minor blues (a walking bass, the organ long-short on 1 and 3, a guitar in eighths, no
  drums).

The songs (`SONGS104`) are drawn by corpus96's rule and a fixed seed: styles four each, the
24 keys dealt as evenly as 104 goes (four or five times each), tempi over 55-200 BPM (45-140
dotted-quarter BPM in 6/8 and 12/8), the soundfonts and formats dealt evenly, three in ten
excerpts. The truth follows corpus60's rules, and the songs are written and rendered by its
code. Cached in data/cache/corpus104 (git-ignored), rendered where missing.
"""

from __future__ import annotations

from pathlib import Path

from tests.analysis import corpus60, corpus96
from tests.analysis.corpus import CLAP, HAT, KICK, OPEN_HAT, RIDE, SNARE, STICK
from tests.analysis.corpus52 import CLAVES, HIGH_BONGO
from tests.analysis.corpus56 import RIDE_BELL
from tests.analysis.corpus60 import LOW_CONGA, MUTE_CONGA, SHUFFLE_12_8, Song, Style, _every
from tests.analysis.corpus88 import MUTE_TRIANGLE, TRIANGLE
from tests.analysis.corpus96 import TAMBOURINE

SEED = "corpus104-1"
COUNT = 104
CACHE = corpus60.DEFAULT_CACHE.with_name("corpus104")
# General MIDI, besides the earlier corpora's
ELECTRIC_SNARE, VIBRASLAP, OPEN_HIGH_CONGA, CABASA = 40, 58, 63, 69

STYLES104: dict[str, Style] = {
    "halftime_dnb": Style(
        "4/4",
        (39, 89, 4),
        {
            KICK: ((0, 2, 10), 110),
            SNARE: ((8,), 112),
            ELECTRIC_SNARE: ((7, 13), 44),
            HAT: (_every(16, 0, 1), 46),
        },
        ((0, 10), 6),
        ("hold", (0,), 0),
        "sparse",
    ),
    "songo": Style(
        "4/4",
        (33, 0, 56),
        {
            KICK: ((6, 14), 96),
            SNARE: ((3, 10, 13), 80),
            RIDE_BELL: ((0, 4, 6, 8, 12, 14), 58),
            LOW_CONGA: ((7, 15), 72),
        },
        ((6, 14), 2),
        ("block", (2, 5, 8, 11, 14), 1),
        "eighths",
        crash=False,
    ),
    "italo": Style(
        "4/4",
        (39, 81, 90),
        {KICK: ((0, 4, 8, 12), 110), SNARE: ((4, 12), 100), HAT: ((2, 6, 10, 14), 58)},
        (_every(16), 1),
        ("arpeggio", _every(16, 0, 1), 1),
        "sparse",
    ),
    "amapiano": Style(
        "4/4",
        (38, 4, 0),
        {KICK: ((0, 4, 8, 12), 100), STICK: ((6, 14), 70), CABASA: (_every(16, 0, 1), 44)},
        ((3, 6, 11, 14), 2),
        ("block", (2, 8, 14), 2),
        "sparse",
        crash=False,
    ),
    "guaguanco": Style(
        "4/4",
        (32, 52, 53),
        {
            CLAVES: ((0, 3, 7, 10, 12), 80),
            MUTE_CONGA: ((4, 12), 58),
            OPEN_HIGH_CONGA: ((6, 7), 70),
            LOW_CONGA: ((14, 15), 78),
        },
        ((0, 8), 6),
        ("hold", (0,), 0),
        "beats",
        crash=False,
    ),
    "glamstomp": Style(
        "4/4",
        (34, 30, 81),
        {KICK: ((0, 2, 8, 10), 112), CLAP: ((4, 12), 104)},
        ((0, 2, 8, 10), 2),
        ("block", (0, 2, 8, 10), 2),
        "beats",
    ),
    "purdie": Style(
        "4/4",
        (33, 5, 66),
        {
            KICK: ((0, 10), 100),
            SNARE: ((8,), 108),
            ELECTRIC_SNARE: ((2, 6, 10, 14), 40),
            HAT: (_every(16), 60),
        },
        ((0, 6, 10), 2),
        ("block", (0, 6), 2),
        "eighths",
        swing=True,
        crash=False,
    ),
    "slowblues": Style(
        "4/4",
        (32, 16, 27),
        {KICK: ((0, 8), 88), STICK: ((4, 12), 78), HAT: ((0, 4, 8, 12), 50)},
        ((0, 4, 8, 12), 4),
        ("block", (0, 4, 8, 12), 3),
        "eighths",
        walk=True,
        crash=False,
    ),
    "maqsum": Style(
        "4/4",
        (32, 46, 71),
        {
            LOW_CONGA: ((0, 8), 90),
            HIGH_BONGO: ((2, 6, 12), 70),
            TAMBOURINE: (_every(16), 48),
        },
        ((0, 8), 4),
        ("block", (0, 3, 6, 8, 12), 1),
        "eighths",
        crash=False,
    ),
    "nylon_bossa": Style(
        "4/4",
        (24, 24, 24),
        bass=((0, 6, 8, 14), 3),
        comp=("block", (3, 6, 10, 13), 2),
        melody="sparse",
        bass_low=40,
    ),
    "saxsoli": Style(
        "4/4",
        (67, 66, 65),
        bass=((0, 4, 8, 12), 3),
        comp=("block", (0, 6), 2),
        melody="eighths",
        swing=True,
    ),
    "kalimba": Style(
        "4/4",
        (35, 108, 108),
        bass=((0, 10), 6),
        comp=("arpeggio", (0, 2, 3, 6, 8, 10, 11, 14), 2),
        melody="beats",
    ),
    "alberti": Style(
        "4/4",
        (0, 0, 0),
        bass=((0,), 16),
        comp=("arpeggio", _every(16, 0, 1), 1),
        melody="beats",
    ),
    "wiener": Style(
        "3/4",
        (43, 49, 40),
        bass=((0,), 3),
        comp=("block", (3, 8), 2),
        melody="beats",
    ),
    "carter3": Style(
        "3/4",
        (25, 25, 25),
        bass=((0,), 4),
        comp=("block", (4, 6, 8, 10), 1),
        melody="beats",
        bass_low=40,
    ),
    "vals_criollo": Style(
        "3/4",
        (32, 24, 24),
        {LOW_CONGA: ((0, 6, 10), 84), MUTE_CONGA: ((4, 8), 66)},
        ((0, 8), 4),
        ("block", (0, 4, 6, 8, 10), 1),
        "eighths",
        crash=False,
    ),
    "techno3": Style(
        "3/4",
        (38, 89, 81),
        {
            KICK: ((0,), 112),
            CLAP: ((4,), 90),
            OPEN_HAT: ((2, 6, 10), 60),
            CABASA: (_every(12, 0, 1), 40),
        },
        (_every(12), 1),
        ("hold", (0,), 0),
        "sparse",
    ),
    "cajun3": Style(
        "3/4",
        (32, 21, 110),
        {MUTE_TRIANGLE: ((0, 4, 8), 48), TRIANGLE: ((2, 6, 10), 64)},
        ((0,), 4),
        ("block", (4, 8), 2),
        "eighths",
        crash=False,
    ),
    "festejo68": Style(
        "6/8",
        (32, 24, 53),
        {LOW_CONGA: ((0, 6, 10), 84), MUTE_CONGA: ((2, 4, 8), 60), VIBRASLAP: ((6,), 68)},
        ((0, 6, 10), 2),
        ("block", _every(12), 1),
        "beats",
        crash=False,
    ),
    "shuffle68": Style(
        "6/8",
        (34, 17, 56),
        {KICK: ((0,), 100), SNARE: ((6,), 96), RIDE: ((0, 4, 6, 10), 64)},
        ((0, 4, 6, 10), 2),
        ("block", (0, 6), 4),
        "eighths",
    ),
    "accordion68": Style(
        "6/8",
        (21, 21, 21),
        bass=((0, 6), 2),
        comp=("block", (2, 4, 8, 10), 1),
        melody="eighths",
    ),
    "hunt68": Style(
        "6/8",
        (58, 60, 60),
        bass=((0, 6), 4),
        comp=("block", (0, 4, 6), 0),
        melody="eighths",
    ),
    "shout128": Style(
        "12/8",
        (33, 16, 52),
        {
            KICK: ((0, 6, 12, 18), 104),
            CLAP: ((6, 18), 96),
            TAMBOURINE: (_every(24), 56),
        },
        (SHUFFLE_12_8, 2),
        ("block", (4, 10, 16, 22), 1),
        "beats",
        crash=False,
    ),
    "columbia128": Style(
        "12/8",
        (32, 48, 53),
        {
            CLAVES: ((0, 4, 10, 14, 18), 80),
            MUTE_CONGA: ((0, 6, 12, 18), 54),
            LOW_CONGA: ((10, 16, 22), 78),
        },
        ((0, 12), 12),
        ("hold", (0,), 0),
        "beats",
        crash=False,
    ),
    "slide128": Style(
        "12/8",
        (24, 21, 110),
        bass=((0, 6, 12, 18), 4),
        comp=("block", SHUFFLE_12_8, 2),
        melody="eighths",
        bass_low=40,
    ),
    "minorblues128": Style(
        "12/8",
        (32, 16, 27),
        bass=((0, 6, 12, 18), 6),
        comp=("block", (0, 4, 12, 16), 2),
        melody="eighths",
        walk=True,
    ),
}


def songs104(count: int = COUNT, seed: str = SEED) -> tuple[Song, ...]:
    """The corpus's songs, drawn as the module docstring says; the same every call."""
    return corpus96.draw(STYLES104, count, seed, "tenth")


SONGS104: tuple[Song, ...] = songs104()
corpus60.HALF.update({song.name: "held_out" for song in SONGS104})


def make_corpus104(folder: Path | None = None, workers: int = 0) -> Path:
    """Render the songs missing from `folder`."""
    return corpus60.make_corpus(folder or CACHE, workers, songs=SONGS104)
