"""An eleventh corpus of 112 songs, all held out: arrangements no earlier corpus has.

The tenth corpus (tests/analysis/corpus104.py) was scored once, with the tempo and the time
signature chosen by their summed probabilities (docs/conventions/labels.md). This one was
written after that scoring and before anything else was changed, without any analysis of its
songs, and it is kept for the next change to be measured on, once everything is set; no
choice looks at it. Its 28 arrangements are aimed at grooves and textures the earlier tables
lack:

- 4/4 with drums: trap with triplet rolls (the clap on beat 3 only, the hats in eighths, the
  second beat in eighth-note triplets and the fourth in sixteenth-note triplets, off the
  sixteenth grid), go-go (swung, the cowbell's 3-2 figure, congas, the kick on 1, the "and"
  of 2 and 3), merengue (the güira's long scrape on the beats and short ones on each "and"
  and the sixteenth after it, the tambora on 1 and 3 and rolling into the next bar, its rim
  on 2 and 4, no kit), the Bo Diddley beat (floor toms on the 3-2 clave, maracas in
  sixteenths, a tremolo guitar on the same strokes), rockabilly (swung, a slapped walking
  bass, a soft snare on every eighth under the backbeat), a tom-tom swing (swung, a floor
  tom on every beat and on the "and" of 1 and of 3, big-band brass), a blast beat (the kick
  and the snare alternating in sixteenths, a china on the beats, tremolo power chords in
  sixteenths), nyabinghi (hand drums only: the bass drum on 1 and 3, the funde on every beat
  and the sixteenth before it, the repeater's off-beats), a flamenco rumba (palmas on the
  off-beats, a cajón on congas, a nylon guitar's strum);
- 4/4 without drums: a harpsichord toccata (the right hand's arpeggio in sixteenths, the
  left in eighths), a koto's arpeggio in eighths over a shamisen on the beats (a
  shakuhachi's long notes), slap bass and clavinet in syncopated sixteenths, a woodwind
  quintet (the bassoon on the beats, the clarinet's after-beats, the flute in eighths);
- 3/4: a metal waltz (the double kick in sixteenths, the snare on beat 2 only, a china on
  the beats), a joropo (maracas on every eighth, a harp's arpeggio in sixteenths, the bass
  on 1 and on the "and" of 2), a lo-fi waltz (swung, the kick on 1 and the "and" of 3, the
  rim on 2), a piano in the manner of a gymnopédie (the bass on 1, the chord on 2 held
  through 3, no drums), a polska (a fiddle in eighths, the viola's chord held, the cello on
  1 and 3, no drums);
- 6/8: a trap-soul 6/8 (the kick on 1 and late in the second beat, a clap on the second
  dotted quarter, hats in sixteenths), a sega (the ravanne's low strokes on the dotted
  quarters, slaps on each one's last eighth, a triangle on every eighth, banjo and
  accordion), a techno 6/8 (the kick on the dotted quarters, an open hat on each one's last
  eighth, a synth bass off the beat), a marimba's tremolo chords in sixteenths over the bass
  on the dotted quarters (no drums), a trumpet voluntary over an organ (no drums);
- 12/8: an Afro-Cuban 6/8 on a kit (the standard bell on the ride, the kick on every beat,
  the hi-hat's foot on 2 and 4), an Ethio-jazz groove (the hats long-short, the kick on 1,
  the last eighth of 2 and on 3, the snare on 2 and 4, vibraphone), an mbira over the
  hosho's shakers (every eighth, each beat's last one loud), a cappella doo-wop (the bass
  singer on the beats, the choir on every eighth, no drums), pizzicato strings (the basses
  on the beats, the chords plucked on every eighth, an oboe, no drums).

The songs (`SONGS112`) are drawn by corpus96's rule and a fixed seed: styles four each, the
24 keys dealt as evenly as 112 goes (four or five times each), tempi over 55-200 BPM (45-140
dotted-quarter BPM in 6/8 and 12/8), the soundfonts and formats dealt evenly, three in ten
excerpts. The truth follows corpus60's rules, and the songs are written and rendered by its
code. Cached in data/cache/corpus112 (git-ignored), rendered where missing.
"""

from __future__ import annotations

from pathlib import Path

from tests.analysis import corpus60, corpus96
from tests.analysis.corpus import CLAP, HAT, KICK, OPEN_HAT, RIDE, SNARE, STICK
from tests.analysis.corpus52 import HIGH_BONGO
from tests.analysis.corpus56 import GUIRO
from tests.analysis.corpus60 import (
    COWBELL,
    LOW_CONGA,
    MARACAS,
    MUTE_CONGA,
    PEDAL_HAT,
    SHUFFLE_12_8,
    TRIPLETS_12_8,
    Song,
    Style,
    _every,
)
from tests.analysis.corpus64 import HIGH_FLOOR_TOM, LOW_FLOOR_TOM
from tests.analysis.corpus80 import BASS_DRUM
from tests.analysis.corpus88 import TRIANGLE
from tests.analysis.corpus104 import CABASA, ELECTRIC_SNARE, OPEN_HIGH_CONGA

SEED = "corpus112-1"
COUNT = 112
CACHE = corpus60.DEFAULT_CACHE.with_name("corpus112")
CHINA, SHORT_GUIRO = 52, 73  # General MIDI, besides the earlier corpora's
# eighths, the second beat in eighth-note triplets, the fourth in sixteenth-note triplets:
# steps of 4/3 and 2/3, off the sixteenth grid
TRAP_HATS = (0, 2, *(4 + i * 4 / 3 for i in range(3)), 8, 10, *(12 + i * 2 / 3 for i in range(6)))
CLAVE_3_2 = (0, 3, 6, 10, 12)  # the son clave's three side then its two, in one bar
AFRO_BELL = (0, 4, 8, 10, 14, 18, 22)  # the standard bell of 12/8, seven strokes

STYLES112: dict[str, Style] = {
    "trap_rolls": Style(
        "4/4",
        (38, 49, 10),
        {KICK: ((0, 6, 11), 116), CLAP: ((8,), 108), HAT: (TRAP_HATS, 54)},
        ((0, 6, 11), 4),
        ("hold", (0,), 0),
        "sparse",
    ),
    "gogo": Style(
        "4/4",
        (33, 4, 61),
        {
            KICK: ((0, 6, 8), 100),
            SNARE: ((4, 12), 100),
            HAT: (_every(16), 50),
            COWBELL: (CLAVE_3_2, 66),
            LOW_CONGA: ((7, 14), 78),
            OPEN_HIGH_CONGA: ((2, 10, 15), 66),
        },
        ((0, 6, 8, 14), 2),
        ("block", (3, 6, 11, 14), 1),
        "sparse",
        swing=True,
        crash=False,
    ),
    "merengue": Style(
        "4/4",
        (33, 21, 65),
        {
            LOW_CONGA: ((0, 8, 14, 15), 92),
            STICK: ((4, 12), 66),
            GUIRO: ((0, 4, 8, 12), 60),
            SHORT_GUIRO: ((2, 3, 6, 7, 10, 11, 14, 15), 48),
        },
        ((0, 6, 12), 2),
        ("block", (2, 6, 10, 14), 1),
        "eighths",
        crash=False,
    ),
    "bodiddley": Style(
        "4/4",
        (33, 27, 22),
        {
            LOW_FLOOR_TOM: (CLAVE_3_2, 104),
            HIGH_FLOOR_TOM: ((14,), 70),
            MARACAS: (_every(16, 0, 1), 48),
        },
        (CLAVE_3_2, 2),
        ("block", CLAVE_3_2, 1),
        "sparse",
        crash=False,
    ),
    "rockabilly": Style(
        "4/4",
        (32, 26, 27),
        {KICK: ((0, 8), 96), SNARE: ((4, 12), 104), ELECTRIC_SNARE: (_every(16), 44)},
        ((0, 4, 8, 12), 3),
        ("block", (4, 12), 1),
        "eighths",
        swing=True,
        walk=True,
    ),
    "tomswing": Style(
        "4/4",
        (32, 61, 71),
        {LOW_FLOOR_TOM: ((0, 2, 4, 8, 10, 12), 96), PEDAL_HAT: ((4, 12), 60)},
        ((0, 4, 8, 12), 3),
        ("block", (0, 6), 2),
        "eighths",
        swing=True,
        walk=True,
        crash=False,
    ),
    "blast": Style(
        "4/4",
        (34, 30, 30),
        {KICK: (_every(16), 104), SNARE: (_every(16, 1), 96), CHINA: ((0, 4, 8, 12), 72)},
        (_every(16), 2),
        ("block", _every(16, 0, 1), 1),
        "sparse",
    ),
    "nyabinghi": Style(
        "4/4",
        (32, 25, 53),
        {
            BASS_DRUM: ((0, 8), 96),
            MUTE_CONGA: ((0, 3, 4, 7, 8, 11, 12, 15), 64),
            HIGH_BONGO: ((6, 14), 72),
        },
        ((0, 8), 6),
        ("block", (4, 12), 2),
        "beats",
        crash=False,
    ),
    "rumba_flamenca": Style(
        "4/4",
        (32, 24, 24),
        {CLAP: ((2, 6, 10, 14), 78), LOW_CONGA: ((0, 6, 8), 84), MUTE_CONGA: ((4, 12), 72)},
        ((0, 6, 8, 14), 2),
        ("block", (0, 3, 4, 6, 8, 11, 12, 14), 1),
        "eighths",
        crash=False,
    ),
    "toccata": Style(
        "4/4",
        (6, 6, 6),
        bass=(_every(16), 1),
        comp=("arpeggio", _every(16, 0, 1), 1),
        melody="beats",
    ),
    "koto": Style(
        "4/4",
        (106, 107, 77),
        bass=((0, 4, 8, 12), 2),
        comp=("arpeggio", _every(16), 3),
        melody="sparse",
    ),
    "slap": Style(
        "4/4",
        (36, 7, 61),
        bass=((0, 3, 6, 7, 10, 14), 1),
        comp=("block", (2, 5, 8, 11, 13), 1),
        melody="sparse",
    ),
    "winds": Style(
        "4/4",
        (70, 71, 73),
        bass=((0, 4, 8, 12), 2),
        comp=("block", (2, 6, 10, 14), 1),
        melody="eighths",
    ),
    "metal3": Style(
        "3/4",
        (34, 30, 30),
        {KICK: (_every(12, 0, 1), 96), SNARE: ((4,), 110), CHINA: ((0, 4, 8), 70)},
        (_every(12), 1),
        ("block", _every(12), 1),
        "beats",
    ),
    "joropo": Style(
        "3/4",
        (32, 46, 46),
        {MARACAS: (_every(12), 62)},
        ((0, 6), 3),
        ("arpeggio", _every(12, 0, 1), 2),
        "eighths",
        crash=False,
    ),
    "lofi3": Style(
        "3/4",
        (33, 4, 11),
        {KICK: ((0, 10), 90), STICK: ((4,), 76), HAT: (_every(12), 44)},
        ((0, 10), 3),
        ("hold", (0,), 0),
        "sparse",
        swing=True,
        crash=False,
    ),
    "gymnopedie": Style(
        "3/4",
        (0, 0, 0),
        bass=((0,), 12),
        comp=("block", (4,), 0),
        melody="sparse",
    ),
    "polska": Style(
        "3/4",
        (42, 41, 110),
        bass=((0, 8), 4),
        comp=("hold", (0,), 0),
        melody="eighths",
    ),
    "trapsoul68": Style(
        "6/8",
        (38, 4, 54),
        {KICK: ((0, 9), 108), CLAP: ((6,), 100), HAT: (_every(12, 0, 1), 46)},
        ((0, 9), 4),
        ("hold", (0,), 0),
        "sparse",
    ),
    "sega68": Style(
        "6/8",
        (32, 105, 21),
        {LOW_CONGA: ((0, 6), 90), HIGH_BONGO: ((4, 10), 70), TRIANGLE: (_every(12), 52)},
        ((0, 6), 3),
        ("block", (0, 4, 6, 10), 1),
        "eighths",
        crash=False,
    ),
    "techno68": Style(
        "6/8",
        (38, 90, 81),
        {KICK: ((0, 6), 112), CLAP: ((6,), 88), OPEN_HAT: ((4, 10), 60)},
        ((2, 4, 8, 10), 1),
        ("arpeggio", _every(12, 0, 1), 1),
        "sparse",
    ),
    "marimba68": Style(
        "6/8",
        (32, 12, 12),
        bass=((0, 6), 5),
        comp=("block", _every(12, 0, 1), 1),
        melody="eighths",
    ),
    "voluntary68": Style(
        "6/8",
        (19, 19, 56),
        bass=((0, 6), 6),
        comp=("block", (0, 6), 0),
        melody="beats",
    ),
    "afrokit128": Style(
        "12/8",
        (32, 0, 65),
        {RIDE: (AFRO_BELL, 72), KICK: ((0, 6, 12, 18), 88), PEDAL_HAT: ((6, 18), 60)},
        ((0, 10, 12, 22), 2),
        ("block", (2, 8, 14, 20), 1),
        "sparse",
        crash=False,
    ),
    "ethiojazz128": Style(
        "12/8",
        (33, 16, 11),
        {KICK: ((0, 10, 12), 96), SNARE: ((6, 18), 90), HAT: (SHUFFLE_12_8, 56)},
        ((0, 4, 6, 12, 16, 18), 2),
        ("block", (4, 16), 2),
        "sparse",
    ),
    "mbira128": Style(
        "12/8",
        (108, 108, 108),
        {CABASA: (TRIPLETS_12_8, 44), MARACAS: ((4, 10, 16, 22), 72)},
        ((0, 6, 12, 18), 4),
        ("arpeggio", TRIPLETS_12_8, 3),
        "sparse",
        crash=False,
        bass_low=48,
    ),
    "acappella128": Style(
        "12/8",
        (53, 52, 54),
        bass=((0, 6, 12, 18), 5),
        comp=("block", TRIPLETS_12_8, 2),
        melody="sparse",
    ),
    "pizz128": Style(
        "12/8",
        (45, 45, 68),
        bass=((0, 6, 12, 18), 3),
        comp=("block", TRIPLETS_12_8, 1),
        melody="sparse",
    ),
}


def songs112(count: int = COUNT, seed: str = SEED) -> tuple[Song, ...]:
    """The corpus's songs, drawn as the module docstring says; the same every call."""
    return corpus96.draw(STYLES112, count, seed, "eleventh")


SONGS112: tuple[Song, ...] = songs112()
corpus60.HALF.update({song.name: "held_out" for song in SONGS112})


def make_corpus112(folder: Path | None = None, workers: int = 0) -> Path:
    """Render the songs missing from `folder`."""
    return corpus60.make_corpus(folder or CACHE, workers, songs=SONGS112)
