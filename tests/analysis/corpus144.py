"""A fifteenth corpus of 144 songs, all held out: arrangements no earlier corpus has.

This corpus was written after the fourteenth (tests/analysis/corpus136.py) and before the
next change was chosen, without any analysis of its songs, and it is kept for the change
after, to be measured on once everything is set; until then nothing analyses it and no choice
looks at it. Its 36 arrangements are aimed at grooves, textures and situations the earlier
tables lack:

- 4/4 with drums: mambo (the cáscara's 3-2 figure on the timbale's shell, a side stick for
  it, the conga's tumbao: the slap on 2, open tones on 4 and its "and"; the bass never on 1,
  only on the "and" of 2 and on 4, the brass section's stabs on the "and" of 1, the "and" of
  2 and on 4, a tenor saxophone, no kit), a Sousa march (the bass drum on 1 and 3, the
  cymbals on 2 and 4, the snare in eighths and a five-stroke roll in 32nds into every bar,
  the tuba on 1 and 3, the horns' after-beats on 2 and 4, a piccolo in eighths), rumble
  techno (four on the floor, open hats off the beat, claps on 2 and 4, the synth bass on
  every sixteenth but the beats, a pad held), malfuf (the dum on 1 and 3, the tek 3+3+2
  sixteenths in each half bar, a riq in sixteenths, a qanun's chords with the dum and the
  teks, a nay in eighths), Dixieland (swung, the kick on 1 and 3, the snare's press roll in
  32nds on 2 and 4, the tuba's two-beat, a banjo on every beat, a clarinet in eighths), a
  reel on a bodhrán (the low stroke on 1 and 3, the tip on the other eighths, a guitar on
  the beats, a fiddle in eighths), unplugged pop on a cajón (its bass on 1, the "and" of 2
  and the "and" of 3, its slap on 2 and 4, ghost taps on the odd sixteenths, a shaker in
  eighths, a steel guitar's strum in sixteenths), kecak (the "cak" in two interlocking
  groups: claps 3+3+2 sixteenths in each half bar, rim clicks between, a bell for the kempli
  on every beat, the choir held, no kit), kwela (swung, a snare brushed on every eighth,
  accented on 2 and 4, the kick on 1 and 3, the bass on every beat, a guitar strumming every
  swung eighth, a pennywhistle), quarter-note toms (a floor tom and the bass drum together
  on every beat, no snare, no cymbals, the bass and the guitar in eighths, a viola's long
  notes), rockers (the kick on 1 and 3, the rim on 3, hats in sixteenths opening on the
  "and" of 2 and of 4, the organ's bubble on the "and" and the last sixteenth of every beat,
  a harmonica), matsuri bayashi (the ōdaiko on 1 and 3, the shime-daiko on every eighth, a
  kane for the atarigane on an eighth and two sixteenths every beat, a koto on the beats, a
  flute for the shinobue in eighths);
- 4/4 without drums: a clawhammer banjo (the tune on 1 and 3, the brush and the thumb's
  drone on 2 and its "and" and on 4 and its "and", the bass on 1 and 3), a bagpipe march
  (swung, the drones and the chords held, only the chanter's eighths), a tumbao without
  drums (the bass only on the "and" of 2 and on 4, the piano's chords on the off-beat
  eighths, a flute's long notes every other beat), a pavane (the lute's chords long, short,
  short: a half note and two quarters, a viol's bass on 1 and 3, a recorder on the beats), a
  ukulele's island strum (down on 1, down-up on 2, up on the "and" of 3, down-up on 4, the
  bass on 1 and 3, a steel guitar's long notes), a tanpura (its strings plucked in turn on
  every beat and left ringing a bar, the drone held, a sitar in eighths);
- 3/4: a trap waltz (the kick on 1 and the last sixteenth of 2, the clap on 3, hats in
  eighths with triplets on 2 and sixteenth-note triplets after the "and" of 3, an 808 with
  the kick, a pad held), a waltz with the ride across the bar (the ride on the two dotted
  quarters, the hat's foot on the second, the kick on 1: the drums in 6/8, the piano's
  chords on 2 and 3), a zhok (the limping waltz: the bass drum on 1, the snare on 3, the
  bass held through 2, the accordion's chord on 3 only, a clarinet in eighths), an
  orchestral waltz (the timpani on 1, the horns on 2 and 3, a flute in eighths, no drums), a
  choro waltz (a seven-string guitar's bass on every eighth, the cavaquinho's chords on 2
  and 3, a flute on the beats, no drums), a choir in three (the bass voice on every beat,
  the chords held, no drums);
- 6/8: son jarocho (the tarima's zapateado on every eighth, heel stomps on the three
  quarters across the bar, the jarana strumming every eighth, the leona on the dotted
  quarters, a harp), a kit with the hats across the bar (the hats on the three quarters, the
  kick on 1, the snare on the second dotted quarter, an electric piano's arpeggio), a desert
  blues (a calabash on the dotted quarters, claps on the second and third eighths of each,
  the guitar's arpeggio in eighths, the bass long-short), chamamé (the bass on the downbeat
  only, the guitar's chords on the second and third quarters: no chord or bass on the second
  dotted quarter, an accordion in eighths, no drums), duplets (the guitar's chords in dotted
  eighths, two a beat, over a cello long-short, an oboe, no drums), a running bass (the root
  on the downbeat, then three eighths walking to the next bar's root, the guitar's chords
  held on the dotted quarters, a fiddle, no drums);
- 12/8: a stomping boogie (a foot on every beat and nothing else, the bass and the guitar
  long-short, a harmonica), wassoulou (the karignan's scrape long-short on every beat, the
  djembe's bass on 1 and 3, its tone on the second eighth of 2 and of 4 and its slap on the
  last, a harp for the kamalengoni on every eighth), ghost notes (the snare on 2 and 4 and
  soft on the second and third eighths of 1 and of 3, the kick on 1, the last eighth of 2
  and on 3, the hat's foot on the beats, an organ on 2 and 4), marimbas (the bass marimba
  long-short, the tenor's chords on the second and third eighths of every beat, the soprano
  in eighths, no drums), horns (the brass section's stabs on 2 and 4 only, the bass
  long-short, a tenor saxophone, no drums), a kora (the thumb on the beats, the fingers'
  arpeggio on the other eighths, a voice's long notes, no drums).

The songs (`SONGS144`) are drawn by corpus96's rule and a fixed seed: styles four each, the
24 keys six times each, tempi over 55-200 BPM (45-140 dotted-quarter BPM in 6/8 and 12/8),
the soundfonts and formats dealt evenly, three in ten excerpts. The truth follows corpus60's
rules, and the songs are written and rendered by its code. Cached in data/cache/corpus144
(git-ignored), rendered where missing.
"""

from __future__ import annotations

from pathlib import Path

from tests.analysis import corpus60, corpus96
from tests.analysis.corpus import CLAP, CRASH, HAT, KICK, OPEN_HAT, RIDE, SNARE, STICK
from tests.analysis.corpus52 import HIGH_BONGO
from tests.analysis.corpus56 import RIDE_BELL
from tests.analysis.corpus60 import (
    AGOGO,
    LOW_CONGA,
    MUTE_CONGA,
    PEDAL_HAT,
    SHUFFLE_12_8,
    TRIPLETS_12_8,
    Song,
    Style,
    _every,
)
from tests.analysis.corpus64 import HIGH_FLOOR_TOM, LOW_FLOOR_TOM
from tests.analysis.corpus80 import BASS_DRUM, GALLOP
from tests.analysis.corpus96 import SHAKER, TAMBOURINE
from tests.analysis.corpus104 import ELECTRIC_SNARE, OPEN_HIGH_CONGA
from tests.analysis.corpus112 import SHORT_GUIRO
from tests.analysis.corpus120 import HIGH_TIMBALE
from tests.analysis.corpus136 import LOW_WOOD_BLOCK

SEED = "corpus144-1"
COUNT = 144
CACHE = corpus60.DEFAULT_CACHE.with_name("corpus144")
# the cáscara's 3-2 figure, its two bars in one, as corpus112's CLAVE_3_2 has the clave's
CASCARA_3_2 = (0, 2, 3, 5, 7, 8, 10, 12, 13, 15)
# every eighth, the last one four 32nds: a five-stroke roll into the next bar's downbeat
FIVE_STROKE = (0, 2, 4, 6, 8, 10, 12, 14, 14.5, 15, 15.5)
PRESS_ROLL = (4, 4.5, 5, 5.5, 12, 12.5, 13, 13.5)  # a buzz in 32nds on 2 and on 4
RUMBLE = tuple(step for step in range(16) if step % 4)  # every sixteenth but the beats
MALFUF = (3, 6, 11, 14)  # the teks: 3+3+2 sixteenths from the dum, in each half bar
STRUM_16 = (0, 2, 3, 6, 8, 10, 11, 14)  # a strum in sixteenths, down and up
ISLAND_STRUM = (0, 4, 6, 10, 12, 14)  # down, down-up, up, down-up
# eighths, with eighth-note triplets on 2 and sixteenth-note triplets after the "and" of 3
TRAP_WALTZ_HATS = (0, 2, *(4 + i * 4 / 3 for i in range(3)), 8, 10, 10 + 2 / 3, 10 + 4 / 3)
SECOND_AND_THIRD_12_8 = (2, 4, 8, 10, 14, 16, 20, 22)  # every eighth but the beats'

STYLES144: dict[str, Style] = {
    "mambo": Style(
        "4/4",
        (32, 61, 66),
        {
            STICK: (CASCARA_3_2, 72),
            MUTE_CONGA: ((4,), 78),
            OPEN_HIGH_CONGA: ((12, 14), 82),
        },
        ((6, 12), 6),
        ("block", (2, 6, 12), 1),
        "eighths",
        crash=False,
    ),
    "sousa_march": Style(
        "4/4",
        (58, 60, 72),
        {BASS_DRUM: ((0, 8), 100), CRASH: ((4, 12), 62), SNARE: (FIVE_STROKE, 72)},
        ((0, 8), 3),
        ("block", (4, 12), 2),
        "eighths",
        crash=False,
    ),
    "rumble_techno": Style(
        "4/4",
        (38, 89, 81),
        {KICK: ((0, 4, 8, 12), 114), OPEN_HAT: ((2, 6, 10, 14), 58), CLAP: ((4, 12), 80)},
        (RUMBLE, 1),
        ("hold", (0,), 0),
        "sparse",
    ),
    "malfuf": Style(
        "4/4",
        (32, 15, 73),
        {
            BASS_DRUM: ((0, 8), 100),
            HIGH_BONGO: (MALFUF, 76),
            TAMBOURINE: (_every(16, 0, 1), 44),
        },
        ((0, 8), 3),
        ("block", (0, 3, 6, 8, 11, 14), 1),
        "eighths",
        crash=False,
    ),
    "dixieland": Style(
        "4/4",
        (58, 105, 71),
        {KICK: ((0, 8), 72), SNARE: (PRESS_ROLL, 54)},
        ((0, 8), 4),
        ("block", (0, 4, 8, 12), 2),
        "eighths",
        swing=True,
        crash=False,
    ),
    "reel": Style(
        "4/4",
        (32, 25, 110),
        {LOW_FLOOR_TOM: ((0, 8), 96), HIGH_FLOOR_TOM: ((2, 4, 6, 10, 12, 14), 60)},
        ((0, 8), 4),
        ("block", (0, 4, 8, 12), 2),
        "eighths",
        crash=False,
    ),
    "cajon_pop": Style(
        "4/4",
        (32, 25, 53),
        {
            LOW_CONGA: ((0, 6, 10), 96),
            MUTE_CONGA: ((4, 12), 92),
            HIGH_BONGO: (_every(16, 1), 34),
            SHAKER: (_every(16), 40),
        },
        ((0, 6, 10), 2),
        ("block", STRUM_16, 1),
        "beats",
        crash=False,
    ),
    "kecak": Style(
        "4/4",
        (52, 53, 54),
        {
            CLAP: ((0, 3, 6, 8, 11, 14), 84),
            STICK: ((2, 5, 10, 13), 70),
            RIDE_BELL: ((0, 4, 8, 12), 66),
        },
        ((0, 8), 4),
        ("hold", (0,), 0),
        "beats",
        crash=False,
    ),
    "kwela": Style(
        "4/4",
        (32, 25, 78),
        {KICK: ((0, 8), 88), SNARE: (_every(16), 44), ELECTRIC_SNARE: ((4, 12), 84)},
        ((0, 4, 8, 12), 3),
        ("block", _every(16), 1),
        "eighths",
        swing=True,
        crash=False,
    ),
    "quarter_toms": Style(
        "4/4",
        (33, 29, 41),
        {LOW_FLOOR_TOM: ((0, 4, 8, 12), 98), BASS_DRUM: ((0, 4, 8, 12), 92)},
        (_every(16), 2),
        ("block", _every(16), 2),
        "sparse",
        crash=False,
    ),
    "rockers": Style(
        "4/4",
        (33, 16, 22),
        {
            KICK: ((0, 8), 104),
            STICK: ((8,), 90),
            HAT: (tuple(step for step in range(16) if step not in (6, 14)), 44),
            OPEN_HAT: ((6, 14), 58),
        },
        ((0, 3, 8, 11), 2),
        ("block", (2, 3, 6, 7, 10, 11, 14, 15), 1),
        "sparse",
        crash=False,
    ),
    "matsuri": Style(
        "4/4",
        (32, 107, 73),
        {BASS_DRUM: ((0, 8), 104), HIGH_TIMBALE: (_every(16), 64), AGOGO: (GALLOP, 58)},
        ((0, 8), 4),
        ("block", (0, 4, 8, 12), 2),
        "eighths",
        crash=False,
    ),
    "clawhammer": Style(
        "4/4",
        (32, 105, 105),
        bass=((0, 8), 4),
        comp=("block", (4, 6, 12, 14), 1),
        melody="sparse",
    ),
    "bagpipe_march": Style(
        "4/4",
        (109, 109, 109),
        bass=((0,), 16),
        comp=("hold", (0,), 0),
        melody="eighths",
        swing=True,
        bass_low=45,  # from A2, about where the drones sound
    ),
    "tumbao": Style(
        "4/4",
        (32, 0, 73),
        bass=((6, 12), 6),
        comp=("block", (2, 6, 10, 14), 1),
        melody="sparse",
    ),
    "pavane": Style(
        "4/4",
        (42, 24, 74),
        bass=((0, 8), 8),
        comp=("block", (0, 8, 12), 0),
        melody="beats",
    ),
    "ukulele": Style(
        "4/4",
        (32, 24, 25),
        bass=((0, 8), 4),
        comp=("block", ISLAND_STRUM, 1),
        melody="sparse",
    ),
    "tanpura": Style(
        "4/4",
        (104, 104, 104),
        bass=((0,), 16),
        comp=("arpeggio", (0, 4, 8, 12), 16),
        melody="eighths",
        bass_low=48,  # from C3, about where its low strings sound
    ),
    "trap3": Style(
        "3/4",
        (38, 89, 10),
        {KICK: ((0, 7), 114), CLAP: ((8,), 106), HAT: (TRAP_WALTZ_HATS, 56)},
        ((0, 7), 4),
        ("hold", (0,), 0),
        "sparse",
    ),
    # the drums in 6/8, the harmony in 3/4: the ride on the two dotted quarters
    "crossride3": Style(
        "3/4",
        (32, 0, 66),
        {RIDE: ((0, 6), 76), PEDAL_HAT: ((6,), 62), KICK: ((0,), 88)},
        ((0,), 4),
        ("block", (4, 8), 2),
        "beats",
        crash=False,
    ),
    "zhok3": Style(
        "3/4",
        (32, 21, 71),
        {BASS_DRUM: ((0,), 100), SNARE: ((8,), 78)},
        ((0,), 8),
        ("block", (8,), 4),
        "eighths",
        crash=False,
    ),
    "orchestra3": Style(
        "3/4",
        (47, 60, 73),
        bass=((0,), 2),
        comp=("block", (4, 8), 2),
        melody="eighths",
    ),
    "choro3": Style(
        "3/4",
        (24, 25, 73),
        bass=(_every(12), 2),
        comp=("block", (4, 8), 1),
        melody="beats",
        bass_low=40,
    ),
    "choir3": Style(
        "3/4",
        (52, 53, 52),
        bass=((0, 4, 8), 4),
        comp=("hold", (0,), 0),
        melody="beats",
    ),
    "jarocho68": Style(
        "6/8",
        (32, 24, 46),
        {LOW_WOOD_BLOCK: (_every(12), 66), LOW_FLOOR_TOM: ((0, 4, 8), 86)},
        ((0, 6), 4),
        ("block", _every(12), 1),
        "beats",
        crash=False,
    ),
    # the hats on the quarters, three against the two dotted quarters
    "crosshat68": Style(
        "6/8",
        (33, 4, 65),
        {KICK: ((0,), 100), SNARE: ((6,), 96), HAT: ((0, 4, 8), 58)},
        ((0, 6), 4),
        ("arpeggio", _every(12), 2),
        "beats",
    ),
    "desert68": Style(
        "6/8",
        (33, 27, 53),
        {LOW_CONGA: ((0, 6), 96), CLAP: ((2, 4, 8, 10), 78)},
        ((0, 4, 6, 10), 2),
        ("arpeggio", _every(12), 2),
        "beats",
        crash=False,
    ),
    # no chord or bass on the second dotted quarter: only the accordion's eighths
    "chamame68": Style(
        "6/8",
        (32, 24, 21),
        bass=((0,), 4),
        comp=("block", (4, 8), 2),
        melody="eighths",
    ),
    "duplets68": Style(
        "6/8",
        (42, 24, 68),
        bass=((0, 4, 6, 10), 2),
        comp=("block", (0, 3, 6, 9), 3),
        melody="beats",
    ),
    "runbass68": Style(
        "6/8",
        (32, 25, 110),
        bass=((0, 6, 8, 10), 2),
        comp=("block", (0, 6), 6),
        melody="beats",
        walk=True,
    ),
    "stomp128": Style(
        "12/8",
        (32, 25, 22),
        {BASS_DRUM: ((0, 6, 12, 18), 104)},
        (SHUFFLE_12_8, 2),
        ("block", SHUFFLE_12_8, 2),
        "sparse",
        crash=False,
    ),
    "wassoulou128": Style(
        "12/8",
        (32, 46, 53),
        {
            SHORT_GUIRO: (SHUFFLE_12_8, 58),
            LOW_CONGA: ((0, 12), 96),
            OPEN_HIGH_CONGA: ((8, 20), 76),
            MUTE_CONGA: ((10, 22), 82),
        },
        (SHUFFLE_12_8, 2),
        ("arpeggio", TRIPLETS_12_8, 2),
        "sparse",
        crash=False,
    ),
    "ghostnotes128": Style(
        "12/8",
        (33, 16, 26),
        {
            KICK: ((0, 10, 12), 104),
            SNARE: ((6, 18), 100),
            ELECTRIC_SNARE: ((2, 4, 14, 16), 36),
            PEDAL_HAT: ((0, 6, 12, 18), 58),
        },
        ((0, 10, 12), 2),
        ("block", (6, 18), 4),
        "sparse",
    ),
    "marimbas128": Style(
        "12/8",
        (12, 12, 12),
        bass=(SHUFFLE_12_8, 3),
        comp=("block", SECOND_AND_THIRD_12_8, 1),
        melody="eighths",
    ),
    "horns128": Style(
        "12/8",
        (32, 61, 66),
        bass=(SHUFFLE_12_8, 2),
        comp=("block", (6, 18), 2),
        melody="sparse",
    ),
    "kora128": Style(
        "12/8",
        (46, 46, 53),
        bass=((0, 6, 12, 18), 2),
        comp=("arpeggio", SECOND_AND_THIRD_12_8, 2),
        melody="sparse",
    ),
}


def songs144(count: int = COUNT, seed: str = SEED) -> tuple[Song, ...]:
    """The corpus's songs, drawn as the module docstring says; the same every call."""
    return corpus96.draw(STYLES144, count, seed, "fifteenth")


SONGS144: tuple[Song, ...] = songs144()
corpus60.HALF.update({song.name: "held_out" for song in SONGS144})


def make_corpus144(folder: Path | None = None, workers: int = 0) -> Path:
    """Render the songs missing from `folder`."""
    return corpus60.make_corpus(folder or CACHE, workers, songs=SONGS144)
