"""A twelfth corpus of 120 songs, all held out: arrangements no earlier corpus has.

The eleventh corpus (tests/analysis/corpus112.py) was scored once (docs/conventions/labels.md).
This one was written after that scoring and before the next change was chosen, without any
analysis of its songs, and it is kept for that change to be measured on, once everything is
set; until then nothing analyses it and no choice looks at it. Its 30 arrangements are aimed
at grooves, textures and situations the earlier tables lack:

- 4/4 with drums: Jersey club (the kick on 1, 2, 3, the last sixteenth of 3 and the "and" of
  4, claps on 2 and 4, an 808 under the kick), qawwali (claps on every beat, the tabla's
  keherwa: the low drum on 1, its "and" and 4, the high one on every eighth; harmonium, a
  voice in eighths), soca (four on the floor, the snare on the "and" of 2 and on 4, the
  iron's eighth and two sixteenths, brass stabs), a metal breakdown (the kick and the
  palm-muted chords together on a syncopated sixteenth figure, the snare on beat 3 only, a
  china on the beats), samba-reggae (muted surdos on 1 and 3, open ones on 2 and 4, a third
  surdo's syncopation, the caixa's figure, no kit), mbalax (the sabar's open strokes on
  off-beat sixteenths over muted ones, the timbale on the "and" of 2 and of 4, a guitar's
  arpeggio in sixteenths), drift phonk (a pitched cowbell's riff in sixteenths, claps on 2
  and 4, hats in sixteenths), the wall of sound (the kick on 1, the "and" of 2 and 3, the
  snare on beat 4 only, tambourine in eighths, maracas in sixteenths, the piano pounding
  eighths), electro swing (swung, four on the floor, off-beat open hats, a walking bass,
  brass stabs on the "and" of 2 and of 4);
- 4/4 without drums: a habanera (pizzicato bass in the dotted-eighth, sixteenth, eighth,
  eighth figure, strings held a half note, a clarinet), gypsy jazz (swung, the guitar's
  pompe on every beat with the upstroke before 2 and 4, the bass on 1 and 3, a violin in
  eighths), a Berlin-school sequencer (the synth bass in sixteenths under a held pad), a
  delay guitar (an arpeggio in dotted eighths across the bar over a held fretless bass),
  piano triplets (the right hand's arpeggio in eighth-note triplets, the bass in half notes);
- 3/4: a bossa in three (a rim figure 3-3-4-2 in sixteenths, a shaker in sixteenths, the kick
  on 1 and the "and" of 2, a nylon guitar), a brushed waltz (a soft sweep in sixteenths,
  taps on 2 and 3, a feathered kick on 1), a waltz in triplets (the hats and a piano's
  arpeggio in eighth-note triplets, the snare on beat 3), a scherzo in one (the bass and the
  strings on the downbeat only, a flute in eighths, no drums), a chamber waltz (a bassoon
  on every beat, a clarinet on the off-beats, an oboe, no drums), a piano étude (an arpeggio
  in sixteenths over a held bass, no drums);
- 6/8: a ghazal (the tabla's dadra: the low drum on the first, second and fourth eighths,
  the high one on every eighth; harmonium held, a sitar), currulao (a guasá in sixteenths,
  the bombo on the dotted quarters, cununos on each one's last eighth and the sixteenth
  before, a marimba in eighths), a stomp and clap (stomps on the first and second eighth of
  each beat, a clap on its third, a harmonica in eighths), a berceuse (a piano's arpeggio in
  sixteenths, the bass on the dotted quarters, no drums), a pastorale (the bass and the
  strings held through the bar, only the oboe's rhythm, no drums);
- 12/8: Gnawa (the krakebs long-short on every beat, claps on the beats, the guembri's
  bass long-short, a chorus held, no kit), duplets (the ride on every eighth, the kick and
  the bass in dotted eighths, the electric piano on the second dotted eighth of each beat),
  a triplet metal groove (the double kick on every eighth, the snare on 2 and 4, a china on
  the beats), a chorale prelude (the cello on the beats, the organ held, an oboe on every
  eighth, no drums), a barrelhouse piano (the left hand long-short on every beat, chords on
  2 and 4, the right hand on every eighth, no drums).

The songs (`SONGS120`) are drawn by corpus96's rule and a fixed seed: styles four each, the
24 keys five times each, tempi over 55-200 BPM (45-140 dotted-quarter BPM in 6/8 and 12/8),
the soundfonts and formats dealt evenly, three in ten excerpts. The truth follows corpus60's
rules, and the songs are written and rendered by its code. Cached in data/cache/corpus120
(git-ignored), rendered where missing.
"""

from __future__ import annotations

from pathlib import Path

from tests.analysis import corpus60, corpus96
from tests.analysis.corpus import CLAP, HAT, KICK, OPEN_HAT, RIDE, SNARE, STICK
from tests.analysis.corpus52 import HIGH_BONGO
from tests.analysis.corpus60 import (
    AGOGO,
    LOW_CONGA,
    MARACAS,
    MUTE_CONGA,
    SHUFFLE_12_8,
    TRIPLETS_12_8,
    Song,
    Style,
    _every,
)
from tests.analysis.corpus64 import LOW_FLOOR_TOM
from tests.analysis.corpus72 import LOW_BONGO
from tests.analysis.corpus80 import BASS_DRUM, GALLOP
from tests.analysis.corpus88 import CASTANETS
from tests.analysis.corpus96 import SHAKER, TAMBOURINE
from tests.analysis.corpus104 import ELECTRIC_SNARE, OPEN_HIGH_CONGA
from tests.analysis.corpus112 import CHINA

SEED = "corpus120-1"
COUNT = 120
CACHE = corpus60.DEFAULT_CACHE.with_name("corpus120")
HIGH_TIMBALE, MUTE_SURDO, OPEN_SURDO = 65, 86, 87  # General MIDI, besides the earlier corpora's
CHUG = (0, 3, 6, 7, 10, 13)  # the breakdown's figure, kick and chords together
# eighth-note triplets: steps of 4/3, off the sixteenth grid
TRIPLETS_4_4 = tuple(i * 4 / 3 for i in range(12))
TRIPLETS_3_4 = tuple(i * 4 / 3 for i in range(9))
DUPLETS_12_8 = (0, 9, 12, 21)  # dotted eighths: each beat's first, the second of 2 and of 4

STYLES120: dict[str, Style] = {
    "jersey_club": Style(
        "4/4",
        (38, 90, 85),
        {KICK: ((0, 4, 8, 11, 14), 116), CLAP: ((4, 12), 100), HAT: ((2, 6, 10, 14), 50)},
        ((0, 8, 11, 14), 2),
        ("block", (2, 7, 10), 1),
        "sparse",
    ),
    "qawwali": Style(
        "4/4",
        (20, 20, 53),
        {CLAP: ((0, 4, 8, 12), 92), LOW_BONGO: ((0, 2, 12), 84), HIGH_BONGO: (_every(16), 62)},
        ((0,), 16),
        ("block", (0, 6, 8, 14), 2),
        "eighths",
        crash=False,
        bass_low=48,
    ),
    "soca": Style(
        "4/4",
        (38, 61, 56),
        {KICK: ((0, 4, 8, 12), 112), SNARE: ((6, 12), 96), AGOGO: (GALLOP, 58)},
        ((0, 3, 6, 8, 11, 14), 2),
        ("block", (6, 14), 1),
        "eighths",
    ),
    "breakdown": Style(
        "4/4",
        (34, 30, 29),
        {KICK: (CHUG, 112), SNARE: ((8,), 116), CHINA: ((0, 4, 8, 12), 78)},
        (CHUG, 1),
        ("block", CHUG, 1),
        "sparse",
        bass_low=28,
    ),
    "samba_reggae": Style(
        "4/4",
        (33, 27, 65),
        {
            MUTE_SURDO: ((0, 8), 84),
            OPEN_SURDO: ((4, 12), 104),
            LOW_FLOOR_TOM: ((6, 14, 15), 86),
            SNARE: ((0, 2, 3, 6, 8, 10, 11, 14), 64),
        },
        ((0, 6, 8, 12), 2),
        ("block", (4, 12), 1),
        "eighths",
        crash=False,
    ),
    "mbalax": Style(
        "4/4",
        (33, 27, 66),
        {
            KICK: ((0, 6, 8), 96),
            HAT: (_every(16), 46),
            MUTE_CONGA: ((0, 3, 8, 11), 64),
            OPEN_HIGH_CONGA: ((2, 5, 7, 10, 13, 15), 76),
            HIGH_TIMBALE: ((6, 14), 84),
        },
        ((0, 6, 10, 14), 2),
        ("arpeggio", _every(16, 0, 1), 1),
        "sparse",
        crash=False,
    ),
    "phonk": Style(
        "4/4",
        (38, 113, 54),
        {KICK: ((0, 6, 10), 112), CLAP: ((4, 12), 102), HAT: (_every(16, 0, 1), 44)},
        ((0, 6, 10), 4),
        ("arpeggio", (0, 3, 6, 8, 10, 11, 14), 1),
        "sparse",
    ),
    "wallofsound": Style(
        "4/4",
        (33, 0, 48),
        {
            KICK: ((0, 6, 8), 104),
            SNARE: ((12,), 112),
            TAMBOURINE: (_every(16), 66),
            MARACAS: (_every(16, 0, 1), 40),
        },
        ((0, 6, 8), 2),
        ("block", _every(16), 1),
        "sparse",
    ),
    "electroswing": Style(
        "4/4",
        (32, 61, 71),
        {KICK: ((0, 4, 8, 12), 110), CLAP: ((4, 12), 96), OPEN_HAT: ((2, 6, 10, 14), 62)},
        ((0, 4, 8, 12), 3),
        ("block", (6, 14), 1),
        "eighths",
        swing=True,
        walk=True,
    ),
    "habanera": Style(
        "4/4",
        (45, 48, 71),
        bass=((0, 3, 4, 6, 8, 11, 12, 14), 1),
        comp=("block", (0, 8), 0),
        melody="beats",
    ),
    "manouche": Style(
        "4/4",
        (32, 25, 40),
        bass=((0, 8), 3),
        comp=("block", (0, 2, 4, 8, 10, 12), 1),
        melody="eighths",
        swing=True,
    ),
    "berlin": Style(
        "4/4",
        (39, 94, 81),
        bass=(_every(16, 0, 1), 1),
        comp=("hold", (0,), 0),
        melody="sparse",
    ),
    "delay_guitar": Style(
        "4/4",
        (35, 27, 48),
        bass=((0,), 16),
        comp=("arpeggio", (0, 3, 6, 9, 12), 3),
        melody="sparse",
    ),
    "piano_triplets": Style(
        "4/4",
        (0, 0, 0),
        bass=((0, 8), 8),
        comp=("arpeggio", TRIPLETS_4_4, 2),
        melody="sparse",
    ),
    "bossa3": Style(
        "3/4",
        (32, 24, 73),
        {KICK: ((0, 6), 72), STICK: ((0, 3, 6, 10), 64), SHAKER: (_every(12, 0, 1), 40)},
        ((0, 6), 3),
        ("block", (0, 3, 8), 2),
        "beats",
        crash=False,
    ),
    "brushwaltz": Style(
        "3/4",
        (32, 0, 66),
        {ELECTRIC_SNARE: (_every(12, 0, 1), 28), SNARE: ((4, 8), 56), KICK: ((0,), 50)},
        ((0,), 8),
        ("block", (4, 8), 3),
        "beats",
        crash=False,
    ),
    "triplet3": Style(
        "3/4",
        (33, 4, 65),
        {KICK: ((0,), 100), SNARE: ((8,), 94), HAT: (TRIPLETS_3_4, 50)},
        ((0,), 8),
        ("arpeggio", TRIPLETS_3_4, 2),
        "sparse",
    ),
    "scherzo": Style(
        "3/4",
        (43, 48, 73),
        bass=((0,), 2),
        comp=("block", (0,), 2),
        melody="eighths",
    ),
    "chamber3": Style(
        "3/4",
        (70, 71, 68),
        bass=((0, 4, 8), 2),
        comp=("arpeggio", (2, 6, 10), 2),
        melody="beats",
    ),
    "etude3": Style(
        "3/4",
        (0, 0, 0),
        bass=((0,), 12),
        comp=("arpeggio", _every(12, 0, 1), 1),
        melody="sparse",
    ),
    "ghazal68": Style(
        "6/8",
        (32, 20, 104),
        {LOW_BONGO: ((0, 2, 6), 86), HIGH_BONGO: (_every(12), 64)},
        ((0, 6), 4),
        ("hold", (0,), 0),
        "beats",
        crash=False,
    ),
    "currulao68": Style(
        "6/8",
        (32, 12, 53),
        {
            SHAKER: (_every(12, 0, 1), 44),
            BASS_DRUM: ((0, 6), 96),
            LOW_CONGA: ((4, 10), 78),
            OPEN_HIGH_CONGA: ((3, 9), 66),
        },
        ((0, 6), 3),
        ("arpeggio", _every(12), 2),
        "sparse",
        crash=False,
    ),
    "stompclap68": Style(
        "6/8",
        (32, 25, 22),
        {KICK: ((0, 2, 6, 8), 104), CLAP: ((4, 10), 96)},
        ((0, 6), 4),
        ("block", (0, 6), 5),
        "eighths",
        crash=False,
    ),
    "berceuse68": Style(
        "6/8",
        (0, 0, 0),
        bass=((0, 6), 6),
        comp=("arpeggio", _every(12, 0, 1), 2),
        melody="sparse",
    ),
    "pastorale68": Style(
        "6/8",
        (43, 49, 68),
        bass=((0,), 12),
        comp=("hold", (0,), 0),
        melody="beats",
    ),
    "gnawa128": Style(
        "12/8",
        (32, 52, 53),
        {CASTANETS: (SHUFFLE_12_8, 80), CLAP: ((0, 6, 12, 18), 82)},
        (SHUFFLE_12_8, 2),
        ("hold", (0,), 0),
        "beats",
        crash=False,
    ),
    "duplets128": Style(
        "12/8",
        (33, 4, 65),
        {RIDE: (TRIPLETS_12_8, 58), KICK: (DUPLETS_12_8, 96), SNARE: ((6, 18), 92)},
        (DUPLETS_12_8, 3),
        ("block", (3, 9, 15, 21), 2),
        "sparse",
    ),
    "metal128": Style(
        "12/8",
        (34, 30, 30),
        {KICK: (TRIPLETS_12_8, 100), SNARE: ((6, 18), 112), CHINA: ((0, 6, 12, 18), 72)},
        (TRIPLETS_12_8, 1),
        ("block", (0, 6, 12, 18), 5),
        "sparse",
        bass_low=28,
    ),
    "cantata128": Style(
        "12/8",
        (42, 19, 68),
        bass=((0, 6, 12, 18), 4),
        comp=("hold", (0,), 0),
        melody="eighths",
    ),
    "barrelhouse128": Style(
        "12/8",
        (0, 0, 0),
        bass=(SHUFFLE_12_8, 2),
        comp=("block", (6, 18), 2),
        melody="eighths",
    ),
}


def songs120(count: int = COUNT, seed: str = SEED) -> tuple[Song, ...]:
    """The corpus's songs, drawn as the module docstring says; the same every call."""
    return corpus96.draw(STYLES120, count, seed, "twelfth")


SONGS120: tuple[Song, ...] = songs120()
corpus60.HALF.update({song.name: "held_out" for song in SONGS120})


def make_corpus120(folder: Path | None = None, workers: int = 0) -> Path:
    """Render the songs missing from `folder`."""
    return corpus60.make_corpus(folder or CACHE, workers, songs=SONGS120)
