"""An eighteenth corpus of 168 songs, all held out: arrangements no earlier corpus has.

This corpus was written after the seventeenth (tests/analysis/corpus160.py) and before the
next change was chosen, without any analysis of its songs, and it is kept for that change to
be measured on, once everything is set; until it is scored once nothing analyses it and no
choice looks at it. Its 42 arrangements are aimed at grooves, textures and situations the
earlier tables lack:

- 4/4 with drums: yangge (the big drum, as a low floor tom, on 1, its "and", 3 and its
  "and", the cymbals, as a china, on 2 and 4, the small gong, as a low agogô, on the "and"
  of 2 and of 4; the bass on 1 and 3, a reed organ for the sheng on every beat, a shawm for
  the suona in eighths, no kit), samul nori's hwimori (the janggu's left hand, as a low
  conga, on 1 and 3, its stick, as a side stick, on 1, 2 and 4, the buk, as a bass drum, on
  1, the kkwaenggwari, as an agogô, on every eighth; a cello's drone held a bar, strings
  held, a fiddle for the haegeum in eighths, no kit), a carnival conga (the bell on every
  beat, the conga's open tone on the "and" of 1 and of 3, the bombo, as a bass drum, on 4
  only; the bass on 1 and 3, the brass's stabs on the "and" of 2 and on 4, a trumpet in
  eighths, no kit), a bon-odori ondo (swung, the ōdaiko, as a low floor tom, on every beat,
  its rim, as a side stick, on every swung "and"; the bass on 1 and 3, a shamisen's chords
  on 2 and 4, a shakuhachi in eighths), half-note triplets (the piano's chords three to the
  bar across a plain backbeat: the kick on 1 and 3, the snare on 2 and 4, hats in eighths;
  the bass on 1 and 3, a voice's long notes), fills (the drums only in a fill through beat
  4 of every bar, the toms in sixteenths from high to low, and the kick and a crash on 1;
  the bass on 1 and 3, a guitar's short chords on every beat, an organ's long notes),
  junkanoo (cowbells shaken on every eighth, the goatskin bass drum on every beat, a
  higher goatskin, as a low tom, on the "and" of 2 and of 4, a whistle on the "and" of 4;
  the tuba on 1 and 3, the trombones on every "and", an alto saxophone in eighths, no kit),
  a guaracha in 2-3 (the claves' two side first: the "and" of 1 and 2, then 3, its last
  sixteenth and the "and" of 4; the bongo bell on the beats, maracas in eighths; the bass
  on 1, the "and" of 2 and on 4, the tres's guajeo, as a steel guitar's arpeggio, in
  eighths, a flute on the beats, no kit), samba on a kit (the kick and the bass a dotted
  eighth and a sixteenth on every beat, the rim on the teleco-teco, the hats in sixteenths,
  a nylon guitar's chords with the rim, an alto saxophone on the beats), mento (maracas in
  sixteenths, a hand drum, as a low conga, on 2 and 4; the rhumba box, as a bass, on every
  beat, a banjo on every "and", a clarinet on the beats, no kit), ayoub (the doumbek's dum,
  as a low conga, on every beat, a soft ka, as a muted conga, on the last sixteenth of 1
  and of 3, its tek, as a high bongo, on the "and" of 2 and of 4; the bass with the dums,
  a harp for the qanun in sixteenths, an oboe in eighths, no kit), ʻōteʻa (two tōʻere, as
  wood blocks: the high one on every sixteenth, the low one 3+3+2 sixteenths in each half
  bar, the pahu, as a bass drum, on 1 and 3; the bass on 1 and 3, a nylon guitar for the
  ukulele on every beat, a voice on the beats, no kit), semba (the dikanza, as a cabasa, in
  sixteenths, the ngoma, as a low conga, on 1, the "and" of 2 and 3, the puíta, as an open
  cuíca, on 2 and 4; the bass with the ngoma, a guitar's arpeggio in sixteenths, an
  accordion on the beats, no kit), syrtos (the toubeleki's dum, as a low conga, on 1 and 3,
  its teks, as a high bongo, on the rest of the syrtos figure, a dotted eighth, a sixteenth
  and two eighths in each half bar; the laouto, as a nylon guitar, on the same figure, the
  bass on 1 and 3, a violin in eighths, no kit);
- 4/4 without drums: fado (the viola's bass on 1 and 3 and its chords on 2 and 4, a steel
  guitar for the guitarra in eighths), a csárdás (the bass on every beat, the cimbalom's
  chords on every "and", a violin in eighths), mbube (the bass voices on 1, the "and" of 2,
  3 and the "and" of 4, the choir's chords held a bar, a lead voice on the beats),
  quintuplets (a piano's right hand in an arpeggio five notes a beat, its left hand on every
  beat, the tune's long notes), a harmonica train (swung, the harmonica's chords on every
  swung eighth, the bass on 1 and 3, a voice's long notes), tsugaru-jamisen (the
  shamisen's open string on 1 and 3, its strokes an eighth and two sixteenths on every beat,
  a flute for the shinobue's long notes), a skank without drums (the guitar's chops on every
  "and" and nothing on a beat but the bass on 1 and 3, an accordion's long notes), jhala (a
  cello's drone held a bar, the sitar's strokes on the drone strings on every sixteenth, its
  tune on the beats);
- 3/4: a Schuhplattler (the dancers' slaps, as claps, on every eighth but the downbeat, a
  stomp, as a bass drum, on 1; the tuba on 1, the accordion on 2 and 3, a clarinet in
  eighths), sevillanas (castanets in a roll of sixteenths through beat 1 and on 2 and 3,
  palmas on 2 and 3; the guitar's bass on 1 and its chords on every beat, a voice on the
  beats), a polska with the foot (stamps, as a bass drum, on 1 and 3 and nothing else; a
  cello on 1 and 3, the second fiddle's arpeggio in sixteenths, a fiddle in eighths), a drum
  corps in three (the snare line in sixteenths, the bass drums and a cymbal on 1, the tenors,
  as a low tom, on every "and"; the tuba on 1, the brass on 2 and 3, a trumpet on the beats),
  a rasgueado (the guitar's bass on 1, held, its chords rolled in sixteenth-note triplets
  through beat 1 and struck on 2 and 3, a violin on the beats, no drums), dotted eighths in
  three (a marimba's chords four to the bar over a cello on every beat, a clarinet on the
  beats, no drums), a bourrée à trois temps (the hurdy-gurdy's drone, as a bagpipe, held,
  its trompette, as a fiddle's short chords, on every "and", its tune in eighths, no drums),
  a jazz ballad in three (the bass on every beat, the piano's chords held a bar, a muted
  trumpet's long notes, no drums);
- 6/8: baila (the rabana's low stroke, as a low conga, on the dotted quarters, its slaps, as
  a high bongo, on the other eighths, a shaker on every eighth; the bass on the dotted
  quarters, a guitar's chords with the slaps, an accordion in eighths), a duple bass (the
  kick and the bass in dotted eighths, four to the bar, the snare on the second dotted
  quarter, hats on every eighth; an electric piano's chords on the dotted quarters, an alto
  saxophone on the beats), malambo (the bombo's head, as a floor tom, on the dotted
  quarters, its rim, as a wood block, on every eighth, the zapateo, as a bass drum, in
  sixteenths through each dotted quarter's last eighth; the bass on the dotted quarters, the
  guitar's rasgueado on every eighth, a violin in eighths), son huasteco (the quinta's bass
  on the three quarters across the bar, the jarana strumming every eighth, a fiddle in
  eighths, no drums), a bellows shake (the accordion's chords shaken in sixteenths, its bass
  on the dotted quarters, a clarinet in eighths, no drums), a carillon (the bourdon on the
  dotted quarters, the chords pealing on every eighth, each left ringing, a glockenspiel on
  the beats, no drums);
- 12/8: quadruplet hats (the hats four to each beat over the kick on 1 and 3 and the snare
  on 2 and 4, the bass long-short, the piano's chords on every eighth, a tenor saxophone's
  long notes), dunun (the dununba, as a floor tom, on 1, the last eighth of 2 and 3, the
  sangban, as a low tom, on 2 and 4, the kenkeni, as a high tom, on the second eighth of
  every beat, the bells, as a cowbell, on the beats; the bass on 1 and 3, a xylophone's
  chords on the beats, a flute in eighths, no kit), a ring shout (a stick knocked on the
  floor, as a low wood block, on every beat, claps on each beat's last eighth, stomps, as a
  bass drum, on 1 and 3; the bass voices on every beat, the choir held, a lead voice on the
  beats), duplet chords (a guitar's chords in dotted eighths, two to every beat, over a
  cello on the beats, a flute in eighths, no drums), a cradle song (the harp's bass on every
  beat and its chord on 1 and 3 only, an ocarina in eighths, no drums), uilleann pipes (the
  drones and the regulators' chords held, only the chanter's eighths, no drums).

The songs (`SONGS168`) are drawn by corpus96's rule and a fixed seed: styles four each, the
24 keys seven times each, tempi over 55-200 BPM (45-140 dotted-quarter BPM in 6/8 and 12/8),
the soundfonts and formats dealt evenly, three in ten excerpts. The truth follows corpus60's
rules, and the songs are written and rendered by its code. Cached in data/cache/corpus168
(git-ignored), rendered where missing.
"""

from __future__ import annotations

from pathlib import Path

from tests.analysis import corpus60, corpus96
from tests.analysis.corpus import CLAP, CRASH, HAT, KICK, SNARE, STICK
from tests.analysis.corpus52 import CLAVES, HIGH_BONGO
from tests.analysis.corpus56 import HIGH_TOM
from tests.analysis.corpus60 import (
    AGOGO,
    COWBELL,
    LOW_CONGA,
    LOW_TOM,
    MARACAS,
    MUTE_CONGA,
    SHUFFLE_12_8,
    TRIPLETS_12_8,
    Song,
    Style,
    _every,
)
from tests.analysis.corpus64 import LOW_FLOOR_TOM
from tests.analysis.corpus80 import BASS_DRUM, GALLOP
from tests.analysis.corpus88 import CASTANETS
from tests.analysis.corpus96 import SHAKER
from tests.analysis.corpus104 import CABASA, OPEN_HIGH_CONGA
from tests.analysis.corpus112 import CHINA
from tests.analysis.corpus128 import LOW_AGOGO, LOW_MID_TOM
from tests.analysis.corpus136 import HIGH_WOOD_BLOCK, LOW_WOOD_BLOCK
from tests.analysis.corpus152 import DOTTED, DOTTED_3_4, MILONGA, OFF_BEATS, TELECOTECO

SEED = "corpus168-1"
COUNT = 168
CACHE = corpus60.DEFAULT_CACHE.with_name("corpus168")
SHORT_WHISTLE, OPEN_CUICA = 71, 79  # General MIDI, besides the earlier corpora's
HALF_TRIPLETS = tuple(i * 16 / 3 for i in range(3))  # three to the bar, across the backbeat
QUINTUPLETS = tuple(i * 4 / 5 for i in range(20))  # five a beat
FILL = (12, 13, 14, 15)  # sixteenths through beat 4, into the next downbeat
CLAVE_2_3 = (2, 4, 8, 11, 14)  # the son clave's two side, then its three, in one bar
SYRTOS = (0, 3, 4, 6, 8, 11, 12, 14)  # a dotted eighth, a sixteenth, two eighths; twice
# a roll of sixteenth-note triplets through beat 1, then a stroke on 2 and on 3
RASGUEADO = (0, 2 / 3, 4 / 3, 2, 8 / 3, 10 / 3, 4, 8)
OFF_BEATS_3_4 = (2, 6, 10)  # the "and" of every beat of a bar of three
DUPLE_6_8 = (0, 3, 6, 9)  # dotted eighths, two to each dotted quarter
QUADRUPLETS_12_8 = tuple(i * 1.5 for i in range(16))  # four to each dotted quarter
DUPLE_12_8 = tuple(i * 3 for i in range(8))  # dotted eighths, two to each dotted quarter

STYLES168: dict[str, Style] = {
    # dong dong qiang: the drum twice, then the cymbals
    "yangge": Style(
        "4/4",
        (32, 20, 111),
        {
            LOW_FLOOR_TOM: ((0, 2, 8, 10), 98),
            CHINA: ((4, 12), 80),
            LOW_AGOGO: ((6, 14), 62),
        },
        ((0, 8), 3),
        ("block", (0, 4, 8, 12), 2),
        "eighths",
        crash=False,
    ),
    "samulnori": Style(
        "4/4",
        (42, 48, 110),
        {
            LOW_CONGA: ((0, 8), 90),
            STICK: ((0, 4, 12), 80),
            BASS_DRUM: ((0,), 100),
            AGOGO: (_every(16), 58),
        },
        ((0,), 16),
        ("hold", (0,), 0),
        "eighths",
        crash=False,
    ),
    # the bombo's kick on 4, nothing from the drums but the bell on 1
    "conga_comparsa": Style(
        "4/4",
        (32, 61, 56),
        {
            COWBELL: ((0, 4, 8, 12), 74),
            OPEN_HIGH_CONGA: ((2, 10), 72),
            BASS_DRUM: ((12,), 108),
        },
        ((0, 8), 3),
        ("block", (6, 12), 2),
        "eighths",
        crash=False,
    ),
    "ondo": Style(
        "4/4",
        (32, 106, 77),
        {LOW_FLOOR_TOM: ((0, 4, 8, 12), 96), STICK: (OFF_BEATS, 70)},
        ((0, 8), 3),
        ("block", (4, 12), 1),
        "eighths",
        swing=True,
        crash=False,
    ),
    # the chords three against the bar's two half notes
    "half_triplets": Style(
        "4/4",
        (33, 0, 53),
        {KICK: ((0, 8), 100), SNARE: ((4, 12), 96), HAT: (_every(16), 52)},
        ((0, 8), 4),
        ("block", HALF_TRIPLETS, 0),
        "sparse",
    ),
    # the drums only at the end of the bar and on its downbeat
    "tom_fills": Style(
        "4/4",
        (34, 29, 18),
        {
            KICK: ((0,), 104),
            CRASH: ((0,), 92),
            HIGH_TOM: (FILL[:2], 88),
            LOW_MID_TOM: (FILL[2:3], 92),
            LOW_FLOOR_TOM: (FILL[3:], 96),
        },
        ((0, 8), 4),
        ("block", (0, 4, 8, 12), 2),
        "sparse",
        crash=False,
    ),
    "junkanoo": Style(
        "4/4",
        (58, 57, 65),
        {
            COWBELL: (_every(16), 60),
            BASS_DRUM: ((0, 4, 8, 12), 98),
            LOW_TOM: ((6, 14), 80),
            SHORT_WHISTLE: ((14,), 70),
        },
        ((0, 8), 3),
        ("block", OFF_BEATS, 1),
        "eighths",
        crash=False,
    ),
    # the clave's two side first: nothing of it on the downbeat
    "guaracha": Style(
        "4/4",
        (32, 25, 73),
        {
            CLAVES: (CLAVE_2_3, 86),
            COWBELL: ((0, 4, 8, 12), 66),
            MARACAS: (_every(16), 44),
        },
        ((0, 6, 12), 2),
        ("arpeggio", _every(16), 2),
        "beats",
        crash=False,
    ),
    "samba_kit": Style(
        "4/4",
        (33, 24, 65),
        {KICK: (DOTTED, 90), STICK: (TELECOTECO, 70), HAT: (_every(16, 0, 1), 46)},
        (DOTTED, 1),
        ("block", TELECOTECO, 1),
        "beats",
        crash=False,
    ),
    "mento": Style(
        "4/4",
        (32, 105, 71),
        {MARACAS: (_every(16, 0, 1), 42), LOW_CONGA: ((4, 12), 80)},
        ((0, 4, 8, 12), 2),
        ("block", OFF_BEATS, 1),
        "beats",
        crash=False,
    ),
    # D - - k D - T - in each half bar: a dum on every beat
    "ayoub": Style(
        "4/4",
        (32, 46, 68),
        {
            LOW_CONGA: ((0, 4, 8, 12), 92),
            MUTE_CONGA: ((3, 11), 58),
            HIGH_BONGO: ((6, 14), 76),
        },
        ((0, 4, 8, 12), 2),
        ("arpeggio", _every(16, 0, 1), 1),
        "eighths",
        crash=False,
    ),
    "otea": Style(
        "4/4",
        (32, 24, 53),
        {
            HIGH_WOOD_BLOCK: (_every(16, 0, 1), 52),
            LOW_WOOD_BLOCK: (MILONGA, 80),
            BASS_DRUM: ((0, 8), 100),
        },
        ((0, 8), 2),
        ("block", (0, 4, 8, 12), 2),
        "beats",
        crash=False,
    ),
    "semba": Style(
        "4/4",
        (33, 25, 21),
        {
            CABASA: (_every(16, 0, 1), 42),
            LOW_CONGA: ((0, 6, 8), 88),
            OPEN_CUICA: ((4, 12), 72),
        },
        ((0, 6, 8), 2),
        ("arpeggio", _every(16, 0, 1), 1),
        "beats",
        crash=False,
    ),
    "syrtos": Style(
        "4/4",
        (32, 24, 40),
        {LOW_CONGA: ((0, 8), 90), HIGH_BONGO: ((3, 4, 6, 11, 12, 14), 70)},
        ((0, 8), 3),
        ("block", SYRTOS, 1),
        "eighths",
        crash=False,
    ),
    "fado": Style(
        "4/4",
        (24, 24, 25),
        bass=((0, 8), 3),
        comp=("block", (4, 12), 2),
        melody="eighths",
        bass_low=40,
    ),
    "csardas": Style(
        "4/4",
        (43, 15, 40),
        bass=((0, 4, 8, 12), 2),
        comp=("block", OFF_BEATS, 1),
        melody="eighths",
    ),
    "mbube": Style(
        "4/4",
        (52, 52, 53),
        bass=((0, 6, 8, 14), 2),
        comp=("hold", (0,), 0),
        melody="beats",
    ),
    # five notes a beat against the left hand's one
    "piano_quintuplets": Style(
        "4/4",
        (0, 0, 0),
        bass=((0, 4, 8, 12), 4),
        comp=("arpeggio", QUINTUPLETS, 1),
        melody="sparse",
    ),
    "harmonica_train": Style(
        "4/4",
        (32, 22, 53),
        bass=((0, 8), 4),
        comp=("block", _every(16), 1),
        melody="sparse",
        swing=True,
    ),
    "tsugaru": Style(
        "4/4",
        (106, 106, 73),
        bass=((0, 8), 2),
        comp=("block", GALLOP, 1),
        melody="sparse",
    ),
    # only the bass on a beat
    "skank_unplugged": Style(
        "4/4",
        (32, 25, 21),
        bass=((0, 8), 3),
        comp=("block", OFF_BEATS, 1),
        melody="sparse",
    ),
    "jhala": Style(
        "4/4",
        (42, 104, 104),
        bass=((0,), 16),
        comp=("block", _every(16, 0, 1), 1),
        melody="beats",
    ),
    # the downbeat only in the stomp and the tuba
    "schuhplattler3": Style(
        "3/4",
        (58, 21, 71),
        {CLAP: ((2, 4, 6, 8, 10), 74), BASS_DRUM: ((0,), 100)},
        ((0,), 4),
        ("block", (4, 8), 2),
        "eighths",
        crash=False,
    ),
    "sevillanas3": Style(
        "3/4",
        (24, 24, 53),
        {CASTANETS: ((0, 1, 2, 3, 4, 8), 72), CLAP: ((4, 8), 80)},
        ((0,), 4),
        ("block", (0, 4, 8), 2),
        "beats",
        bass_low=40,
        crash=False,
    ),
    "stomp_polska3": Style(
        "3/4",
        (42, 110, 110),
        {BASS_DRUM: ((0, 8), 96)},
        ((0, 8), 4),
        ("arpeggio", _every(12, 0, 1), 1),
        "eighths",
        crash=False,
    ),
    "drumcorps3": Style(
        "3/4",
        (58, 61, 56),
        {
            SNARE: (_every(12, 0, 1), 54),
            BASS_DRUM: ((0,), 104),
            CRASH: ((0,), 84),
            LOW_TOM: (OFF_BEATS_3_4, 70),
        },
        ((0,), 4),
        ("block", (4, 8), 2),
        "beats",
        crash=False,
    ),
    "rasgueado3": Style(
        "3/4",
        (24, 24, 40),
        bass=((0,), 12),
        comp=("block", RASGUEADO, 0),
        melody="beats",
        bass_low=40,
    ),
    # four chords against the bar's three beats
    "dotted_chords3": Style(
        "3/4",
        (42, 12, 71),
        bass=((0, 4, 8), 4),
        comp=("block", DOTTED_3_4, 2),
        melody="beats",
    ),
    "bourree3": Style(
        "3/4",
        (109, 110, 110),
        bass=((0,), 12),
        comp=("block", OFF_BEATS_3_4, 1),
        melody="eighths",
    ),
    "jazzballad3": Style(
        "3/4",
        (32, 0, 59),
        bass=((0, 4, 8), 3),
        comp=("hold", (0,), 0),
        melody="sparse",
    ),
    "baila68": Style(
        "6/8",
        (32, 25, 21),
        {
            LOW_CONGA: ((0, 6), 90),
            HIGH_BONGO: ((2, 4, 8, 10), 66),
            SHAKER: (_every(12), 44),
        },
        ((0, 6), 3),
        ("block", (2, 4, 8, 10), 1),
        "eighths",
        crash=False,
    ),
    # the kick and the bass two to the beat, the hats three
    "duple_bass68": Style(
        "6/8",
        (33, 4, 65),
        {KICK: (DUPLE_6_8, 96), SNARE: ((6,), 94), HAT: (_every(12), 50)},
        (DUPLE_6_8, 2),
        ("block", (0, 6), 4),
        "beats",
    ),
    "malambo68": Style(
        "6/8",
        (32, 24, 40),
        {
            LOW_FLOOR_TOM: ((0, 6), 96),
            HIGH_WOOD_BLOCK: (_every(12), 60),
            BASS_DRUM: ((4, 5, 10, 11), 82),
        },
        ((0, 6), 4),
        ("block", _every(12), 1),
        "eighths",
        crash=False,
    ),
    # the bass in three quarters against the strum's two beats
    "huasteco68": Style(
        "6/8",
        (24, 24, 110),
        bass=((0, 4, 8), 3),
        comp=("block", _every(12), 1),
        melody="eighths",
        bass_low=40,
    ),
    "bellows_shake68": Style(
        "6/8",
        (21, 21, 71),
        bass=((0, 6), 4),
        comp=("block", _every(12, 0, 1), 1),
        melody="eighths",
    ),
    "carillon68": Style(
        "6/8",
        (14, 14, 9),
        bass=((0, 6), 6),
        comp=("arpeggio", _every(12), 6),
        melody="beats",
    ),
    # straight sixteenths over the triplets: four hats to each beat
    "quadruplets128": Style(
        "12/8",
        (33, 0, 66),
        {KICK: ((0, 12), 100), SNARE: ((6, 18), 96), HAT: (QUADRUPLETS_12_8, 48)},
        (SHUFFLE_12_8, 2),
        ("block", TRIPLETS_12_8, 1),
        "sparse",
    ),
    "dunun128": Style(
        "12/8",
        (32, 13, 73),
        {
            LOW_FLOOR_TOM: ((0, 10, 12), 96),
            LOW_TOM: ((6, 18), 84),
            HIGH_TOM: ((2, 8, 14, 20), 70),
            COWBELL: ((0, 6, 12, 18), 64),
        },
        ((0, 12), 4),
        ("block", (0, 6, 12, 18), 2),
        "eighths",
        crash=False,
    ),
    "ring_shout128": Style(
        "12/8",
        (52, 52, 53),
        {
            LOW_WOOD_BLOCK: ((0, 6, 12, 18), 86),
            CLAP: ((4, 10, 16, 22), 80),
            BASS_DRUM: ((0, 12), 92),
        },
        ((0, 6, 12, 18), 4),
        ("hold", (0,), 0),
        "beats",
        crash=False,
    ),
    # the chords two to the beat, the tune three
    "duplet_chords128": Style(
        "12/8",
        (42, 24, 73),
        bass=((0, 6, 12, 18), 4),
        comp=("block", DUPLE_12_8, 2),
        melody="eighths",
    ),
    "cradle128": Style(
        "12/8",
        (46, 46, 79),
        bass=((0, 6, 12, 18), 4),
        comp=("block", (0, 12), 0),
        melody="eighths",
    ),
    # only the chanter's rhythm
    "uilleann128": Style(
        "12/8",
        (109, 109, 109),
        bass=((0,), 24),
        comp=("hold", (0,), 0),
        melody="eighths",
    ),
}


def songs168(count: int = COUNT, seed: str = SEED) -> tuple[Song, ...]:
    """The corpus's songs, drawn as the module docstring says; the same every call."""
    return corpus96.draw(STYLES168, count, seed, "eighteenth")


SONGS168: tuple[Song, ...] = songs168()
corpus60.HALF.update({song.name: "held_out" for song in SONGS168})


def make_corpus168(folder: Path | None = None, workers: int = 0) -> Path:
    """Render the songs missing from `folder`."""
    return corpus60.make_corpus(folder or CACHE, workers, songs=SONGS168)
