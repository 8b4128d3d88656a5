"""A nineteenth corpus of 176 songs, all held out: arrangements no earlier corpus has.

This corpus was written after the eighteenth (tests/analysis/corpus168.py) was scored once and
before the next change was chosen, without any analysis of its songs, and it is kept for that
change to be measured on, once everything is set; until it is scored once nothing analyses it
and no choice looks at it. Its 44 arrangements are aimed at grooves, textures and situations
the earlier tables cover little: cross-rhythms kept up through the whole song, slow songs with
a busy accompaniment, half-time feels, a bass only on the downbeat, and sparse textures:

- 4/4 with drums: Afro house (the kick on every beat, claps on 2 and 4, maracas in sixteenths,
  and an agogô on the standard bell's seven strokes laid on the bar's twelve eighth-note
  triplets, three against the maracas' four in every beat; the synth bass on every "and", a pad
  held, a pan flute's long notes), grime (half time: the kick on 1 only, the snare and a clap
  on 3 only, hats in eighths; the synth bass on 1 only, held a half bar, orchestra hits on the
  last sixteenth of 1 and of 3, a square lead's long notes), a quiet storm ballad (the kick on
  1 and the "and" of 3, the rim on 2 and 4, hats in sixteenths, soft; a fretless bass with the
  kick, an electric piano's arpeggio in sixteenths, a tenor saxophone's long notes), tribal
  toms (half time: a floor tom on every eighth, the kick on 1, the snare on 3 only; a
  contrabass held a bar from the downbeat, the strings' arpeggio in sixteenths, a horn's long
  notes), frevo (the caixa, as a snare, on every sixteenth, soft, the surdo, as a low floor
  tom, on 2 and 4, a pandeiro's jingles, as a tambourine, on every "and"; the tuba on 1 and 3,
  the brass's stabs on the last sixteenth of 1 and of 3 and on the "and" of 2 and of 4, a
  trumpet in eighths, no kit), dangdut (the kendang's high "tak", as a high bongo, on 1, its
  last sixteenth and the "and" of 2, its "dut", as a low conga, on 3, its deep "dang", as a low
  floor tom, on 4, the loudest stroke, and on its "and", a tambourine on every "and"; the bass
  on 1 and 4, a guitar's chords on every "and", a flute for the suling in eighths, no kit),
  khaleeji (swung, the dum, as a low conga, on 1 and 3, claps on the "and" of 1, on 2, on the
  "and" of 3 and on 4, the tek, as a high bongo, on the "and" of 2 and of 4; the bass with the
  dums, a nylon guitar for the oud with the claps, a violin in eighths, no kit), ramwong (the
  ching's open stroke, as a triangle, on every "and", its closed chap, as a muted triangle, on
  2 and 4, the thon, as a low conga, on 1 and the "and" of 3; the bass with the thon, a
  xylophone for the ranat in an arpeggio in eighths, an oboe for the pi on the beats, no kit),
  biguine (the tibwa's sticks, as a high wood block, on the cinquillo in each half bar, the
  bass drum on 1 and 3; a walking bass, a banjo on every "and", a clarinet in eighths, no kit),
  jingju's running beat (the ban, as claves, on 1 and 3, the danpigu, as a high timbale, on
  every eighth, the small gong, as a low agogô, on 2 and 4; a cello on 1 and 3, a nylon guitar
  for the yueqin on every beat, a fiddle for the jinghu in eighths, no kit), rara (the tanbou,
  as a low conga, on 1 and 3, the kata, as a side stick, on every eighth, the iron, as a
  cowbell, on the last sixteenth of every beat; the low vaksins, as blown bottles, on 1, the
  "and" of 2 and the "and" of 3, the higher ones on 2 and the "and" of 4, a trumpet on the
  beats, no kit), quintuplet hats (the hats five to the beat over the kick on 1 and 3 and the
  snare on 2 and 4; the bass on 1 and 3, an electric piano on 2 and 4, an alto saxophone's long
  notes);
- 4/4 without drums: morna (the guitar's bass on 1 and 3, a steel guitar for the cavaquinho on
  the second and fourth sixteenths of every beat, a violin's long notes), a doina (a
  contrabass's drone held a bar, the cimbalom's chord, as a dulcimer's, rolled upward in 32nds
  on the downbeat and left ringing, a clarinet's long notes), a guqin (a koto for the zither:
  its open string held a bar from the downbeat, one chord on 3, held, and the tune's long
  notes), a fingerstyle ballad (a steel guitar's bass on 1 only, held a bar, its arpeggio in
  sixteenths, a voice's long notes), sizhu (a cello on 1 and 3, a dulcimer for the yangqin in
  an arpeggio in sixteenths, a flute for the dizi in eighths), a triplet strum (a nylon
  guitar's chords in quarter-note triplets, three to each half bar's two beats, the bass on
  every beat, a flute on the beats), a krakowiak (the accordion's chords in an eighth, a
  quarter and an eighth in each half bar, the bass on 1 and 3, a violin in eighths), palm-wine
  guitar (the thumb on 1 and 3, the fingers on the "and" and the last sixteenth of 1, the "and"
  of 2, the "and" and the last sixteenth of 3 and the "and" of 4, a voice on the beats), jor (a
  cello's drone held a bar, the sitar's chikari strokes on every "and" and nothing of them on a
  beat, its tune on the beats), a corrido in two (the bass on 1 only and the bajo sexto's
  chord, as a steel guitar's, on 3 only, an accordion in eighths);
- 3/4: semachi (its nine pulses as triplets in a bar of three: the janggu's low head, as a low
  conga, on every beat, its stick, as a side stick, on 1, 2, the third triplet of 2 and the
  second of 3; a cello for the ajaeng held a bar, a koto for the gayageum in an arpeggio in
  eighth-note triplets, a flute for the daegeum's long notes), marinera (the cajón's bass, as a
  low conga, on 1 and the "and" of 2, palmas on 2 and 3; the guitar's chords on the bar's two
  dotted quarters against its bass on every beat, a voice on the beats), a java (a waltz in
  one: the bass drum on 1, a ride on every beat, soft; the bass and the accordion's chord on 1
  only, short, the accordion's tune in eighths), a bell waltz (an agogô on the standard bell's
  seven strokes laid on the bar's twelve sixteenths, the kick on 1, the rim on 3; the bass on 1
  and 3, an electric piano on 2 and 3, a clarinet on the beats), a yaraví (the guitar's bass
  held a bar, its chord struck on the downbeat and left, a pan flute's long notes every other
  beat, across the bar line, no drums), a walking bass in four (the bass walking in dotted
  eighths, four to the bar of three, to the next bar's root, the piano's chords on every beat,
  a tenor saxophone on the beats, no drums), a chaconne (nothing on the downbeat but the
  violin's eighths: the cello's ground on 2 and 3, the harpsichord's chord on 2, held, no
  drums), a motor rhythm (the cellos repeating the root on every sixteenth, the strings held, a
  horn's long notes, no drums);
- 6/8: chik-chika (the kebero's low stroke, as a low conga, on the dotted quarters, its high
  one, as a high bongo, on the second eighth of each, claps on the third; the bass on the
  dotted quarters, a harp for the krar in an arpeggio in eighths, a fiddle for the masenqo on
  the beats), a reng (the tombak's low stroke, as a low conga, on the first and fifth eighths,
  its high one, as a high bongo, on the third, fourth and sixth, the daf, as a tambourine, on
  every eighth; the bass with the low strokes, a dulcimer for the santur in an arpeggio in
  sixteenths, a shakuhachi for the ney in eighths), quadruplets (maracas four to each dotted
  quarter over the kick on 1 and the snare on the second dotted quarter; a fretless bass on the
  dotted quarters, the piano's chords on every eighth, a clarinet on the beats), garba (the
  dhol's low head, as a low floor tom, on the dotted quarters, its high head, as a high tom, on
  the second eighth of each, and three claps across the bar, on the first, third and fifth
  eighths; the bass on the dotted quarters, a reed organ for the harmonium's chords held on
  them, a voice in eighths), a criolla (the guitar's bass on 1 and on the last eighth, its
  chords on the third and fourth eighths, a voice on the beats, no drums), a slow air (a cello
  held a bar, the harp's chord rolled upward in 32nds on the downbeat and left ringing, a
  whistle's one long note a bar: nothing else sounds after the downbeat, no drums), a walking
  bass in dotted eighths (four to the bar, to the next bar's root, under a nylon guitar's
  chords on every eighth and a violin in eighths, no drums);
- 12/8: bulería (palmas on the compás's 3, 6, 8, 10 and 12, the bar's first half in dotted
  quarters and its second in quarters, muted palmas, as a side stick, on the other eighths, the
  cajón's bass, as a low conga, on 1 and 3; the guitar's bass on 1 and 3 and its chords with
  the palmas, a voice on the beats), gwo ka's léwòz (the boula, as a low conga, in quarters,
  three against each half bar's two beats, the chacha, as maracas, on every eighth; the bass on
  1 and 3, the chorus's chords on 1 and 3, a voice on the beats), a kit in three against two
  (the standard bell on the ride's bell, the hat's foot in quarters, six to the bar, the kick
  on 1 and 3, a low tom on the last eighth of 2 and of 4; the bass on 1 and 3, the piano's
  chords on 1 and 3, a tenor saxophone in eighths), gutgeori (the janggu's low head, as a low
  conga, on 1, its third eighth, on 3 and its third eighth, its stick, as a side stick, on 1, 2
  and its second eighth, on 4 and its second eighth, the buk, as a bass drum, on 1; a
  contrabass on 1 and 3, a dulcimer for the yanggeum on the beats, an oboe for the piri in
  eighths), a harp in quadruplets (its arpeggio four to each beat, in straight sixteenths,
  against a flute's eighths three to the beat, a cello on the beats, no drums), a cello gigue
  (one cello: its low root and a chord, short, on 1 and 3, its tune in eighths, no drums), a
  guitar's hemiola (the chords every four eighths, three to the bar against its four beats, the
  bass on 1 only, held a bar, a fiddle in eighths, no drums).

The songs (`SONGS176`) are drawn by corpus96's rule and a fixed seed: styles four each, the
24 keys seven or eight times each, tempi over 55-200 BPM (45-140 dotted-quarter BPM in 6/8 and
12/8), the soundfonts and formats dealt evenly, three in ten excerpts. The truth follows
corpus60's rules, and the songs are written and rendered by its code. Cached in
data/cache/corpus176 (git-ignored), rendered where missing.
"""

from __future__ import annotations

from pathlib import Path

from tests.analysis import corpus60, corpus96
from tests.analysis.corpus import CLAP, HAT, KICK, RIDE, SNARE, STICK
from tests.analysis.corpus52 import CLAVES, HIGH_BONGO
from tests.analysis.corpus56 import HIGH_TOM, RIDE_BELL
from tests.analysis.corpus60 import (
    AGOGO,
    COWBELL,
    LOW_CONGA,
    LOW_TOM,
    MARACAS,
    PEDAL_HAT,
    TRIPLETS_12_8,
    Song,
    Style,
    _every,
)
from tests.analysis.corpus64 import LOW_FLOOR_TOM
from tests.analysis.corpus80 import BASS_DRUM
from tests.analysis.corpus88 import MUTE_TRIANGLE, TRIANGLE
from tests.analysis.corpus96 import TAMBOURINE
from tests.analysis.corpus112 import AFRO_BELL
from tests.analysis.corpus120 import HIGH_TIMBALE, TRIPLETS_3_4
from tests.analysis.corpus128 import LOW_AGOGO
from tests.analysis.corpus136 import CINQUILLO, HIGH_WOOD_BLOCK, QUARTER_TRIPLETS
from tests.analysis.corpus152 import DOTTED_3_4, OFF_BEATS, QUARTERS_12_8
from tests.analysis.corpus160 import SECOND_AND_FOURTH
from tests.analysis.corpus168 import DUPLE_6_8, QUADRUPLETS_12_8, QUINTUPLETS

SEED = "corpus176-1"
COUNT = 176
CACHE = corpus60.DEFAULT_CACHE.with_name("corpus176")
BELL_TRIPLETS = tuple(step * 2 / 3 for step in AFRO_BELL)  # on a 4/4 bar's twelve triplets
BELL_3_4 = tuple(step / 2 for step in AFRO_BELL)  # on the twelve sixteenths of a bar of three
ROLL_ON_1 = (0, 0.5, 1, 1.5)  # a chord spread upward in 32nds on the downbeat
KRAKOWIAK = (0, 2, 6, 8, 10, 14)  # an eighth, a quarter, an eighth; twice
SEMACHI = (0, 4, 4 + 8 / 3, 8 + 4 / 3)  # 1, 2, the third triplet of 2, the second of 3
QUADRUPLETS_6_8 = tuple(i * 1.5 for i in range(8))  # four to each dotted quarter
BULERIA = (4, 10, 14, 18, 22)  # the compás's 3, 6, 8, 10 and 12: 3+3+2+2+2 eighths
PALMAS_SORDAS = tuple(step for step in TRIPLETS_12_8 if step not in BULERIA)

STYLES176: dict[str, Style] = {
    # the standard bell in triplets: three strokes' room against four sixteenths, every beat
    "afro_house": Style(
        "4/4",
        (38, 89, 75),
        {
            KICK: ((0, 4, 8, 12), 108),
            CLAP: ((4, 12), 76),
            MARACAS: (_every(16, 0, 1), 40),
            AGOGO: (BELL_TRIPLETS, 74),
        },
        (OFF_BEATS, 2),
        ("hold", (0,), 0),
        "sparse",
    ),
    # half time: the snare on 3 only, the bass on 1 only
    "grime": Style(
        "4/4",
        (38, 55, 80),
        {KICK: ((0,), 112), SNARE: ((8,), 104), CLAP: ((8,), 92), HAT: (_every(16), 54)},
        ((0,), 8),
        ("block", (3, 11), 1),
        "sparse",
        crash=False,
    ),
    "quiet_storm": Style(
        "4/4",
        (35, 4, 66),
        {KICK: ((0, 10), 92), STICK: ((4, 12), 78), HAT: (_every(16, 0, 1), 38)},
        ((0, 10), 4),
        ("arpeggio", _every(16, 0, 1), 2),
        "sparse",
        crash=False,
    ),
    "tribal_toms": Style(
        "4/4",
        (43, 48, 60),
        {LOW_FLOOR_TOM: (_every(16), 86), KICK: ((0,), 108), SNARE: ((8,), 104)},
        ((0,), 16),
        ("arpeggio", _every(16, 0, 1), 1),
        "sparse",
    ),
    "frevo": Style(
        "4/4",
        (58, 61, 56),
        {
            SNARE: (_every(16, 0, 1), 50),
            LOW_FLOOR_TOM: ((4, 12), 100),
            TAMBOURINE: (OFF_BEATS, 64),
        },
        ((0, 8), 3),
        ("block", (3, 6, 11, 14), 1),
        "eighths",
        crash=False,
    ),
    # the deepest stroke on 4
    "dangdut": Style(
        "4/4",
        (33, 27, 73),
        {
            HIGH_BONGO: ((0, 3, 6), 70),
            LOW_CONGA: ((8,), 84),
            LOW_FLOOR_TOM: ((12, 14), 100),
            TAMBOURINE: (OFF_BEATS, 50),
        },
        ((0, 12), 3),
        ("block", OFF_BEATS, 1),
        "eighths",
        crash=False,
    ),
    "khaleeji": Style(
        "4/4",
        (32, 24, 40),
        {LOW_CONGA: ((0, 8), 92), CLAP: ((2, 4, 10, 12), 84), HIGH_BONGO: ((6, 14), 72)},
        ((0, 8), 3),
        ("block", (2, 4, 10, 12), 1),
        "eighths",
        swing=True,
        crash=False,
    ),
    # the ching off the beat, the chap on 2 and 4: on 1 only the thon and the bass
    "ramwong": Style(
        "4/4",
        (32, 13, 68),
        {TRIANGLE: (OFF_BEATS, 62), MUTE_TRIANGLE: ((4, 12), 78), LOW_CONGA: ((0, 10), 88)},
        ((0, 10), 3),
        ("arpeggio", _every(16), 2),
        "beats",
        crash=False,
    ),
    "biguine": Style(
        "4/4",
        (32, 105, 71),
        {HIGH_WOOD_BLOCK: (CINQUILLO, 70), BASS_DRUM: ((0, 8), 94)},
        ((0, 4, 8, 12), 4),
        ("block", OFF_BEATS, 1),
        "eighths",
        walk=True,
        crash=False,
    ),
    "jingju": Style(
        "4/4",
        (42, 24, 110),
        {CLAVES: ((0, 8), 86), HIGH_TIMBALE: (_every(16), 62), LOW_AGOGO: ((4, 12), 70)},
        ((0, 8), 3),
        ("block", (0, 4, 8, 12), 1),
        "eighths",
        crash=False,
    ),
    "rara": Style(
        "4/4",
        (76, 76, 56),
        {LOW_CONGA: ((0, 8), 92), STICK: (_every(16), 60), COWBELL: ((3, 7, 11, 15), 70)},
        ((0, 6, 10), 2),
        ("block", (4, 14), 1),
        "beats",
        crash=False,
    ),
    # five hats a beat against the backbeat's straight time
    "quintuplet_hats": Style(
        "4/4",
        (33, 4, 65),
        {KICK: ((0, 8), 100), SNARE: ((4, 12), 96), HAT: (QUINTUPLETS, 46)},
        ((0, 8), 6),
        ("block", (4, 12), 2),
        "sparse",
    ),
    "morna": Style(
        "4/4",
        (24, 25, 40),
        bass=((0, 8), 6),
        comp=("block", SECOND_AND_FOURTH, 1),
        melody="sparse",
        bass_low=40,
    ),
    # one chord a bar, rolled, under the clarinet
    "doina": Style(
        "4/4",
        (43, 15, 71),
        bass=((0,), 16),
        comp=("arpeggio", ROLL_ON_1, 16),
        melody="sparse",
    ),
    "guqin": Style(
        "4/4",
        (107, 107, 107),
        bass=((0,), 16),
        comp=("block", (8,), 8),
        melody="sparse",
    ),
    "fingerstyle16": Style(
        "4/4",
        (25, 25, 53),
        bass=((0,), 16),
        comp=("arpeggio", _every(16, 0, 1), 3),
        melody="sparse",
        bass_low=40,
    ),
    "sizhu": Style(
        "4/4",
        (42, 15, 73),
        bass=((0, 8), 4),
        comp=("arpeggio", _every(16, 0, 1), 1),
        melody="eighths",
    ),
    # three chords to each half bar's two beats
    "triplet_strum": Style(
        "4/4",
        (32, 24, 73),
        bass=((0, 4, 8, 12), 3),
        comp=("block", QUARTER_TRIPLETS, 2),
        melody="beats",
    ),
    "krakowiak": Style(
        "4/4",
        (32, 21, 40),
        bass=((0, 8), 3),
        comp=("block", KRAKOWIAK, 0),
        melody="eighths",
    ),
    "palmwine": Style(
        "4/4",
        (25, 25, 53),
        bass=((0, 8), 3),
        comp=("arpeggio", (2, 3, 6, 10, 11, 14), 1),
        melody="beats",
        bass_low=40,
    ),
    # nothing of the accompaniment on a beat but the drone's downbeat
    "jor": Style(
        "4/4",
        (42, 104, 104),
        bass=((0,), 16),
        comp=("block", OFF_BEATS, 1),
        melody="beats",
    ),
    # the bass and the chord a half note apart, a polka's two beats in a bar of four
    "corrido": Style(
        "4/4",
        (32, 25, 21),
        bass=((0,), 4),
        comp=("block", (8,), 4),
        melody="eighths",
    ),
    # semachi's nine pulses as triplets in a bar of three
    "semachi3": Style(
        "3/4",
        (42, 107, 73),
        {LOW_CONGA: ((0, 4, 8), 88), STICK: (SEMACHI, 72)},
        ((0,), 12),
        ("arpeggio", TRIPLETS_3_4, 1),
        "sparse",
        crash=False,
    ),
    # the cajón and the chords in two dotted quarters, the palmas and the bass in three
    "marinera3": Style(
        "3/4",
        (24, 24, 53),
        {LOW_CONGA: ((0, 6), 92), CLAP: ((4, 8), 80)},
        ((0, 4, 8), 3),
        ("block", (0, 6), 0),
        "beats",
        bass_low=40,
        crash=False,
    ),
    # a waltz in one: the bass and the chord on 1 only
    "java3": Style(
        "3/4",
        (32, 21, 21),
        {BASS_DRUM: ((0,), 96), RIDE: ((0, 4, 8), 50)},
        ((0,), 4),
        ("block", (0,), 3),
        "eighths",
        crash=False,
    ),
    "bell_waltz3": Style(
        "3/4",
        (33, 4, 71),
        {AGOGO: (BELL_3_4, 74), KICK: ((0,), 96), STICK: ((8,), 70)},
        ((0, 8), 3),
        ("block", (4, 8), 2),
        "beats",
        crash=False,
    ),
    "yaravi3": Style(
        "3/4",
        (24, 24, 75),
        bass=((0,), 12),
        comp=("hold", (0,), 0),
        melody="sparse",
        bass_low=40,
    ),
    # the bass walking four to the bar of three
    "walk_four3": Style(
        "3/4",
        (32, 0, 66),
        bass=(DOTTED_3_4, 3),
        comp=("block", (0, 4, 8), 2),
        melody="beats",
        walk=True,
    ),
    # nothing on the downbeat but the violin: the ground and the chord from beat 2
    "chaconne3": Style(
        "3/4",
        (42, 6, 40),
        bass=((4, 8), 4),
        comp=("block", (4,), 8),
        melody="eighths",
    ),
    "motor3": Style(
        "3/4",
        (42, 48, 60),
        bass=(_every(12, 0, 1), 1),
        comp=("hold", (0,), 0),
        melody="sparse",
    ),
    "chikchika68": Style(
        "6/8",
        (33, 46, 110),
        {LOW_CONGA: ((0, 6), 90), HIGH_BONGO: ((2, 8), 72), CLAP: ((4, 10), 80)},
        ((0, 6), 4),
        ("arpeggio", _every(12), 2),
        "beats",
        crash=False,
    ),
    # the low strokes on the first and fifth eighths
    "reng68": Style(
        "6/8",
        (32, 15, 77),
        {
            LOW_CONGA: ((0, 8), 92),
            HIGH_BONGO: ((4, 6, 10), 70),
            TAMBOURINE: (_every(12), 46),
        },
        ((0, 8), 3),
        ("arpeggio", _every(12, 0, 1), 1),
        "eighths",
        crash=False,
    ),
    # the maracas four to each beat, the chords three
    "quadruplets68": Style(
        "6/8",
        (35, 0, 71),
        {KICK: ((0,), 100), SNARE: ((6,), 94), MARACAS: (QUADRUPLETS_6_8, 50)},
        ((0, 6), 4),
        ("block", _every(12), 1),
        "beats",
    ),
    # three claps across the bar's two beats
    "garba68": Style(
        "6/8",
        (32, 20, 53),
        {LOW_FLOOR_TOM: ((0, 6), 96), HIGH_TOM: ((2, 8), 72), CLAP: ((0, 4, 8), 84)},
        ((0, 6), 3),
        ("block", (0, 6), 5),
        "eighths",
        crash=False,
    ),
    "criolla68": Style(
        "6/8",
        (24, 24, 53),
        bass=((0, 10), 2),
        comp=("block", (4, 6), 2),
        melody="beats",
        bass_low=40,
    ),
    # one long note a bar, and nothing else after the downbeat
    "slow_air68": Style(
        "6/8",
        (42, 46, 78),
        bass=((0,), 12),
        comp=("arpeggio", ROLL_ON_1, 12),
        melody="sparse",
    ),
    # the bass four to the bar, the chords six
    "duple_walk68": Style(
        "6/8",
        (32, 24, 40),
        bass=(DUPLE_6_8, 3),
        comp=("block", _every(12), 1),
        melody="eighths",
        walk=True,
    ),
    # the compás's accents: the second half of the bar in quarters
    "buleria128": Style(
        "12/8",
        (24, 24, 53),
        {
            CLAP: (BULERIA, 96),
            STICK: (PALMAS_SORDAS, 48),
            LOW_CONGA: ((0, 12), 84),
        },
        ((0, 12), 4),
        ("block", BULERIA, 1),
        "beats",
        bass_low=40,
        crash=False,
    ),
    # the boula three to each half bar's two beats
    "gwoka128": Style(
        "12/8",
        (32, 52, 53),
        {LOW_CONGA: (QUARTERS_12_8, 92), MARACAS: (TRIPLETS_12_8, 50)},
        ((0, 12), 6),
        ("block", (0, 12), 10),
        "beats",
        crash=False,
    ),
    "hemiola_kit128": Style(
        "12/8",
        (33, 0, 66),
        {
            RIDE_BELL: (AFRO_BELL, 74),
            PEDAL_HAT: (QUARTERS_12_8, 60),
            KICK: ((0, 12), 96),
            LOW_TOM: ((10, 22), 74),
        },
        ((0, 12), 4),
        ("block", (0, 12), 6),
        "eighths",
        crash=False,
    ),
    "gutgeori128": Style(
        "12/8",
        (43, 15, 68),
        {
            LOW_CONGA: ((0, 4, 12, 16), 88),
            STICK: ((0, 6, 8, 18, 20), 72),
            BASS_DRUM: ((0,), 96),
        },
        ((0, 12), 6),
        ("block", (0, 6, 12, 18), 2),
        "eighths",
        crash=False,
    ),
    # the harp four to each beat, the flute three
    "harp_quads128": Style(
        "12/8",
        (42, 46, 73),
        bass=((0, 6, 12, 18), 4),
        comp=("arpeggio", QUADRUPLETS_12_8, 2),
        melody="eighths",
    ),
    "cello_gigue128": Style(
        "12/8",
        (42, 42, 42),
        bass=((0, 12), 2),
        comp=("block", (0, 12), 1),
        melody="eighths",
    ),
    # the chords every four eighths, three to the bar, and the bass on 1 only
    "guitar_hemiola128": Style(
        "12/8",
        (24, 24, 110),
        bass=((0,), 24),
        comp=("block", (0, 8, 16), 0),
        melody="eighths",
        bass_low=40,
    ),
}


def songs176(count: int = COUNT, seed: str = SEED) -> tuple[Song, ...]:
    """The corpus's songs, drawn as the module docstring says; the same every call."""
    return corpus96.draw(STYLES176, count, seed, "nineteenth")


SONGS176: tuple[Song, ...] = songs176()
corpus60.HALF.update({song.name: "held_out" for song in SONGS176})


def make_corpus176(folder: Path | None = None, workers: int = 0) -> Path:
    """Render the songs missing from `folder`."""
    return corpus60.make_corpus(folder or CACHE, workers, songs=SONGS176)
