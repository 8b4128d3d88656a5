"""An eighth corpus of 80 songs, all held out: arrangements no earlier corpus has.

The seventh corpus (tests/analysis/corpus72.py) was scored once, with the level model that
weighs the values together (docs/conventions/labels.md). This one was written after that
scoring and before anything else was changed, and it is kept for the next change to be
measured on, once everything is set; no choice looks at it. Its 20 arrangements:

- 4/4 with drums: a neo-soul groove (swung, a lazy kick, the rim on 2 and 4), trance (four on
  the floor, off-beat open hats, the bass on the off-beats), grunge (the ride in eighths,
  power chords in eighths), jungle (a broken kick, the snare on 2 and 4 and a ghost before
  the next bar, hats in sixteenths), a metal gallop (the hats' eighth and two sixteenths), a
  boom-bap groove (swung hats, a kick on 1 and the "and" of 3, piano stabs), salsa (the claves'
  three side every bar, the cowbell on the beats, the conga's tumbao, a piano montuno in
  eighths), a film
  cue (a timpani on 1 and 3, strings held, horns on the beats);
- 4/4 without drums: a walking bass under piano chords on 2 and 4, a choir holding its
  chords, a synth arpeggio in sixteenths;
- 3/4: a polonaise (the snare's eighth and two sixteenths, chords on every beat), a
  lullaby (a celesta's arpeggio, no drums), a gospel waltz (organ, claps on 2 and 3);
- 6/8: pipes over a drone (a snare on the eighths' first and fourth, a bass drum on the
  dotted quarters), a tambourine on the second dotted quarter over an arpeggiated guitar, a
  mandolin strumming every eighth (no drums);
- 12/8: a chant (organ bass on the beats, choir held, no drums), a banjo's triplet
  arpeggio (no drums), claps on 2 and 4 over piano triplets on the beats.

The songs (`SONGS80`) are drawn by corpus96's rule and a fixed seed: styles four each, the 24
keys dealt as evenly as 80 goes (three or four times each), tempi over 55-200 BPM (45-140
dotted-quarter BPM in 6/8 and 12/8), the soundfonts and formats dealt evenly, three in ten
excerpts. The truth follows corpus60's rules, and the songs are written and rendered by its
code. Cached in data/cache/corpus80 (git-ignored), rendered where missing.
"""

from __future__ import annotations

from pathlib import Path

from tests.analysis import corpus60, corpus96
from tests.analysis.corpus import CLAP, HAT, KICK, OPEN_HAT, RIDE, SNARE, STICK
from tests.analysis.corpus60 import COWBELL, LOW_CONGA, LOW_TOM, Song, Style, _every
from tests.analysis.corpus96 import SHAKER, TAMBOURINE

SEED = "corpus80-1"
COUNT = 80
CACHE = corpus60.DEFAULT_CACHE.with_name("corpus80")
BASS_DRUM, CLAVES = 35, 75  # General MIDI, besides the earlier corpora's
GALLOP = (0, 2, 3, 4, 6, 7, 8, 10, 11, 12, 14, 15)  # an eighth and two sixteenths, each beat

STYLES80: dict[str, Style] = {
    "neosoul": Style(
        "4/4",
        (33, 4, 65),
        {KICK: ((0, 7, 10), 90), STICK: ((4, 12), 75), HAT: (_every(16), 45)},
        ((0, 7, 10), 3),
        ("hold", (0,), 0),
        "sparse",
        swing=True,
        crash=False,
    ),
    "trance": Style(
        "4/4",
        (38, 90, 81),
        {KICK: ((0, 4, 8, 12), 110), CLAP: ((4, 12), 85), OPEN_HAT: ((2, 6, 10, 14), 65)},
        ((2, 6, 10, 14), 2),
        ("hold", (0,), 0),
        "eighths",
    ),
    "grunge": Style(
        "4/4",
        (34, 30, 29),
        {KICK: ((0, 6, 8), 112), SNARE: ((4, 12), 112), RIDE: (_every(16), 70)},
        (_every(16), 2),
        ("block", _every(16), 2),
        "beats",
    ),
    "jungle": Style(
        "4/4",
        (38, 89, 81),
        {KICK: ((0, 10), 110), SNARE: ((4, 12, 15), 100), HAT: (_every(16, 0, 1), 45)},
        ((0,), 16),
        ("hold", (0,), 0),
        "sparse",
    ),
    "gallop": Style(
        "4/4",
        (34, 30, 30),
        {KICK: ((0, 8), 110), SNARE: ((4, 12), 110), HAT: (GALLOP, 60)},
        (GALLOP, 1),
        ("block", (0, 8), 8),
        "beats",
    ),
    "boombap": Style(
        "4/4",
        (33, 0, 11),
        {KICK: ((0, 10, 11), 105), SNARE: ((4, 12), 100), HAT: (_every(16), 55)},
        ((0, 10), 4),
        ("block", (0, 6), 2),
        "sparse",
        swing=True,
        crash=False,
    ),
    "salsa": Style(
        "4/4",
        (32, 0, 56),
        {
            CLAVES: ((0, 6, 12), 70),
            COWBELL: ((0, 4, 8, 12), 60),
            LOW_CONGA: ((6, 14), 70),
        },
        ((6, 12), 4),
        ("block", _every(16), 1),
        "eighths",
        crash=False,
    ),
    "cinematic": Style(
        "4/4",
        (48, 48, 60),
        {LOW_TOM: ((0, 8), 90)},
        ((0,), 16),
        ("hold", (0,), 0),
        "beats",
        crash=False,
    ),
    "walking": Style(
        "4/4",
        (32, 0, 65),
        bass=((0, 4, 8, 12), 4),
        comp=("block", (4, 12), 2),
        melody="eighths",
        swing=True,
        walk=True,
    ),
    "choral": Style(
        "4/4",
        (52, 52, 52),
        bass=((0, 8), 8),
        comp=("hold", (0,), 0),
        melody="beats",
    ),
    "arp16": Style(
        "4/4",
        (38, 81, 88),
        bass=((0, 8), 8),
        comp=("arpeggio", _every(16, 0, 1), 1),
        melody="sparse",
    ),
    "polonaise": Style(
        "3/4",
        (42, 0, 40),
        {SNARE: ((0, 2, 3, 4, 8), 70), BASS_DRUM: ((0,), 90)},
        ((0, 4, 8), 4),
        ("block", (0, 4, 8), 3),
        "beats",
        crash=False,
    ),
    "lullaby3": Style(
        "3/4",
        (32, 8, 8),
        bass=((0,), 12),
        comp=("arpeggio", _every(12), 2),
        melody="sparse",
    ),
    "gospel3": Style(
        "3/4",
        (32, 16, 16),
        {KICK: ((0,), 90), CLAP: ((4, 8), 75)},
        ((0, 4, 8), 4),
        ("block", (0, 4, 8), 4),
        "beats",
        crash=False,
    ),
    "pipes68": Style(
        "6/8",
        (109, 109, 109),
        {SNARE: ((0, 6), 80), BASS_DRUM: ((0, 6), 90)},
        ((0,), 12),
        ("hold", (0,), 0),
        "eighths",
        crash=False,
    ),
    "tambourine68": Style(
        "6/8",
        (32, 25, 73),
        {TAMBOURINE: ((6,), 80), SHAKER: (_every(12), 35)},
        ((0, 6), 6),
        ("arpeggio", _every(12), 2),
        "beats",
        crash=False,
    ),
    "mandolin68": Style(
        "6/8",
        (32, 105, 105),
        bass=((0, 6), 6),
        comp=("block", _every(12), 1),
        melody="beats",
    ),
    "chant128": Style(
        "12/8",
        (19, 52, 52),
        bass=((0, 6, 12, 18), 6),
        comp=("hold", (0,), 0),
        melody="sparse",
    ),
    "banjo128": Style(
        "12/8",
        (32, 105, 24),
        bass=((0, 12), 12),
        comp=("arpeggio", _every(24), 2),
        melody="beats",
    ),
    "claps128": Style(
        "12/8",
        (33, 0, 56),
        {CLAP: ((6, 18), 85), KICK: ((0, 12), 90)},
        ((0, 6, 12, 18), 6),
        ("block", _every(24), 1),
        "eighths",
        crash=False,
    ),
}


def songs80(count: int = COUNT, seed: str = SEED) -> tuple[Song, ...]:
    """The corpus's songs, drawn as the module docstring says; the same every call."""
    return corpus96.draw(STYLES80, count, seed, "eighth")


SONGS80: tuple[Song, ...] = songs80()
corpus60.HALF.update({song.name: "held_out" for song in SONGS80})


def make_corpus80(folder: Path | None = None, workers: int = 0) -> Path:
    """Render the songs missing from `folder`."""
    return corpus60.make_corpus(folder or CACHE, workers, songs=SONGS80)
