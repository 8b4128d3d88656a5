"""A fourteenth corpus of 136 songs, all held out: arrangements no earlier corpus has.

This corpus was written after the thirteenth (tests/analysis/corpus128.py) and before the
next change was chosen, without any analysis of its songs, and it is kept for that change to
be measured on, once everything is set; until then nothing analyses it and no choice looks
at it. Its 34 arrangements are aimed at grooves, textures and situations the earlier tables
lack:

- 4/4 with drums: candombe (a wood block's madera on the 3-2 clave's strokes, the chico on
  the second and third sixteenths of every beat, the piano drum and the bass on 1, the last
  sixteenth of 2 and the "and" of 3, a nylon guitar's arpeggio, no kit), partido alto (a
  pandeiro's tambourine in sixteenths, a floor tom on 2 and 4, the cavaquinho's chords on
  the partido alto figure: the second sixteenth of 1, 2, its "and", 3, the last sixteenth of
  3 and the "and" of 4), a jazz two-feel (swung, the bass in half notes, the ride's pattern,
  the hat's foot on 2 and 4, a guitar on the "and" of 2 and of 4, no kick), quarter-note
  triplets (the piano's chords six to the bar, three against two, over a straight kick on 1
  and 3, the snare on 2 and 4 and eighth hats), vallenato (the guacharaca's long scrape on
  the beats and short ones on the "and" and last sixteenth of each, the caja's low head on 1
  and 3 and high one on the "and" of 2 and of 4, the bass on 1, the "and" of 2, 3 and 4, an
  accordion), a Cuban bolero (the bongó's martillo in eighths, its low drum on 2 and 4,
  maracas in eighths, the guitar's cinquillo in each half of the bar, a muted trumpet, no
  kit), saidi (the tabl's dum on 1, the "and" of 2 and 3, its tek on the "and" of 1 and on
  4, the bass and the oud's chords with it, a shawm in eighths), zydeco (a rubboard scraped
  in sixteenths, the kick on 1, the "and" of 2, 3 and the "and" of 4, the snare on 2 and 4,
  an accordion's chords off the beat), ijexá (the agogô's high bell on 1, the "and" of 1 and
  the "and" of 2, its low one on 3, its "and" and 4, a shekere in eighths, the low atabaque
  on 1, the "and" of 2 and 3, the high one on 2, 4 and the "and" of 4, no kit), a linear
  funk groove (no two drums together: the kick and the bass on 1, the last sixteenth of 1, 3
  and the last sixteenth of 3, the snare on 2 and 4, the hats on the "and"s and the last
  sixteenths of 2 and of 4, an organ's stabs on the "and" of 2 and of 4), swung house (four
  on the floor, claps on 2 and 4, hats in sixteenths swung 2:1 within each eighth, the bass
  off the beat, organ stabs on the swung last sixteenth of 1 and of 3);
- 4/4 without drums: a cello suite (the cello's broken chords in sixteenths over its open
  string on 1, a second cello's long notes above), huayno (a guitar for the charango, its
  chords on an eighth and two sixteenths every beat, the bass on 1 and 3, a pan flute in
  eighths), metallophones in the manner of a gamelan (tubular bells for the gong, held from
  the downbeat, the xylophone's chords on every beat, a glockenspiel in eighths), a
  bandoneón alone (the left hand's bass on 1 and 3, the chords on the "and" of 1 and of 3,
  held), a brass fanfare (the chords tongued on every eighth-note triplet, the tuba on 1 and
  3);
- 3/4: a one-drop waltz (the kick and the rim on beat 3 only, eighth hats, the guitar's
  skank on every "and"), a sleigh-ride waltz (jingle bells on every eighth, the bass drum on
  1, a triangle and the strings on 2 and 3, a glockenspiel), a djembe waltz (the bass tone
  on 1, open tones on 2 and 3, slaps on the "and" of 2 and of 3, a harp's arpeggio in
  eighths, an ocarina), a harp in eighth-note triplets (no drums), pasillo (the bass on 1
  and 3, the chords off the beat on the "and" of 1 and of 2, a banjo for the bandola in
  eighths, no drums), a tremolo (the strings' chords on every sixteenth over the bass held
  from the downbeat, an oboe, no drums);
- 6/8: guajira (claves on the three quarters across the bar, a bongo on each dotted
  quarter's last eighth, the tres on the first two eighths of each beat), a trot (wood
  blocks high on the dotted quarters and low on each one's last eighth, a banjo strumming
  long-short, a harmonica in eighths), chaabi (the darbuka's dum on the dotted quarters and
  tek on the third, fifth and sixth eighths, a riq on every eighth, an oud's chords with the
  tek, a fiddle), bambuco (the bass on 1 and on each dotted quarter's last eighth, the
  tiple's chords on the first two eighths of each beat, a banjo for the bandola in eighths,
  no drums), a pulse of winds (the bassoon on every eighth, the clarinets held, a piccolo on
  the beats, no drums), a hammered dulcimer (one chord a beat, on its second eighth, the
  bass on the dotted quarters, a recorder in eighths, no drums);
- 12/8: an Ethiopian-style groove (a krar's arpeggio on every eighth, the kebero's low
  stroke on every beat and open one on each beat's last eighth, claps on 2 and 4, a
  masenqo's long notes, the bass long-short, no kit), hats in sixteenths (two a triplet
  eighth, the kick on 1 and 3, the snare on 2 and 4, an electric grand on the beats), a fife
  and drum band (the bass drum on every beat, the snare long-short, a fife in eighths), a
  lute's arpeggio in sixteenths over the bass on the beats (a nylon guitar, no drums),
  tubular bells pealing on the first two eighths of every beat, each left ringing, over an
  organ's pedal held a half bar (a choir, no drums), a trombone choir (the tuba on the
  beats, the chords on each beat's last eighth, no drums).

The songs (`SONGS136`) are drawn by corpus96's rule and a fixed seed: styles four each, the
24 keys five or six times each, tempi over 55-200 BPM (45-140 dotted-quarter BPM in 6/8 and
12/8), the soundfonts and formats dealt evenly, three in ten excerpts. The truth follows
corpus60's rules, and the songs are written and rendered by its code. Cached in
data/cache/corpus136 (git-ignored), rendered where missing.
"""

from __future__ import annotations

from pathlib import Path

from tests.analysis import corpus60, corpus96
from tests.analysis.corpus import CLAP, HAT, KICK, RIDE, SNARE, STICK
from tests.analysis.corpus52 import CLAVES, HIGH_BONGO
from tests.analysis.corpus56 import GUIRO
from tests.analysis.corpus60 import (
    AGOGO,
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
from tests.analysis.corpus64 import LOW_FLOOR_TOM
from tests.analysis.corpus72 import LOW_BONGO
from tests.analysis.corpus80 import BASS_DRUM, GALLOP
from tests.analysis.corpus88 import TRIANGLE
from tests.analysis.corpus96 import TAMBOURINE
from tests.analysis.corpus104 import CABASA, OPEN_HIGH_CONGA
from tests.analysis.corpus112 import CLAVE_3_2, SHORT_GUIRO
from tests.analysis.corpus120 import HIGH_TIMBALE, TRIPLETS_3_4, TRIPLETS_4_4
from tests.analysis.corpus128 import LOW_AGOGO, SWUNG_16THS

SEED = "corpus136-1"
COUNT = 136
CACHE = corpus60.DEFAULT_CACHE.with_name("corpus136")
# General MIDI, besides the earlier corpora's (jingle bell is GS's, which all three fonts have)
LOW_TIMBALE, HIGH_WOOD_BLOCK, LOW_WOOD_BLOCK, JINGLE_BELL = 66, 76, 77, 83
# six chords a bar, each a quarter-note triplet long: three against the two half notes
QUARTER_TRIPLETS = tuple(i * 8 / 3 for i in range(6))
# the cinquillo (eighth, sixteenth, eighth, sixteenth, eighth) in each half of the bar
CINQUILLO = (0, 2, 3, 5, 6, 8, 10, 11, 13, 14)
PARTIDO_ALTO = (1, 4, 6, 8, 11, 14)
CHICO = (1, 2, 5, 6, 9, 10, 13, 14)  # the second and third sixteenths of every beat

STYLES136: dict[str, Style] = {
    "candombe": Style(
        "4/4",
        (33, 24, 65),
        {
            HIGH_WOOD_BLOCK: (CLAVE_3_2, 80),
            HIGH_BONGO: (CHICO, 62),
            LOW_CONGA: ((0, 7, 10), 96),
        },
        ((0, 7, 10), 3),
        ("arpeggio", _every(16), 2),
        "sparse",
        crash=False,
    ),
    "partido_alto": Style(
        "4/4",
        (32, 25, 64),
        {TAMBOURINE: (_every(16, 0, 1), 48), LOW_FLOOR_TOM: ((4, 12), 98)},
        ((0, 6, 8, 14), 2),
        ("block", PARTIDO_ALTO, 1),
        "eighths",
        crash=False,
    ),
    "twofeel44": Style(
        "4/4",
        (32, 26, 56),
        {RIDE: ((0, 4, 6, 8, 12, 14), 74), PEDAL_HAT: ((4, 12), 62)},
        ((0, 8), 8),
        ("block", (6, 14), 2),
        "beats",
        swing=True,
        crash=False,
    ),
    "quarter_triplets": Style(
        "4/4",
        (34, 1, 29),
        {KICK: ((0, 8), 104), SNARE: ((4, 12), 100), HAT: (_every(16), 56)},
        ((0, 8), 8),
        ("block", QUARTER_TRIPLETS, 2),
        "sparse",
    ),
    "vallenato": Style(
        "4/4",
        (33, 21, 21),
        {
            GUIRO: ((0, 4, 8, 12), 70),
            SHORT_GUIRO: ((2, 3, 6, 7, 10, 11, 14, 15), 54),
            LOW_TIMBALE: ((0, 8), 88),
            HIGH_TIMBALE: ((6, 14), 80),
        },
        ((0, 6, 8, 12), 2),
        ("block", (0, 4, 8, 12), 1),
        "eighths",
        crash=False,
    ),
    "bolero_cubano": Style(
        "4/4",
        (32, 24, 59),
        {
            HIGH_BONGO: ((0, 2, 6, 8, 10, 14), 66),
            LOW_BONGO: ((4, 12), 80),
            MARACAS: (_every(16), 42),
        },
        ((0, 8), 6),
        ("block", CINQUILLO, 1),
        "beats",
        crash=False,
    ),
    "saidi": Style(
        "4/4",
        (32, 24, 111),
        {BASS_DRUM: ((0, 6, 8), 104), STICK: ((2, 12), 84)},
        ((0, 6, 8), 2),
        ("block", (0, 2, 6, 8, 12), 1),
        "eighths",
        crash=False,
    ),
    "zydeco": Style(
        "4/4",
        (33, 21, 21),
        {
            KICK: ((0, 6, 8, 14), 104),
            SNARE: ((4, 12), 100),
            SHORT_GUIRO: (_every(16, 0, 1), 50),
        },
        ((0, 8), 4),
        ("block", (2, 6, 10, 14), 1),
        "eighths",
    ),
    "ijexa": Style(
        "4/4",
        (32, 24, 53),
        {
            AGOGO: ((0, 2, 6), 78),
            LOW_AGOGO: ((8, 10, 12), 74),
            CABASA: (_every(16), 48),
            LOW_CONGA: ((0, 6, 8), 90),
            OPEN_HIGH_CONGA: ((4, 12, 14), 76),
        },
        ((0, 6, 8), 3),
        ("arpeggio", _every(16), 2),
        "sparse",
        crash=False,
    ),
    # no two drums strike together: the kick, the snare and the hats take turns
    "linear_funk": Style(
        "4/4",
        (33, 17, 62),
        {
            KICK: ((0, 3, 8, 11), 108),
            SNARE: ((4, 12), 104),
            HAT: ((2, 6, 7, 10, 14, 15), 54),
        },
        ((0, 3, 8, 11), 1),
        ("block", (6, 14), 1),
        "sparse",
        crash=False,
    ),
    "swung_house": Style(
        "4/4",
        (38, 16, 80),
        {KICK: ((0, 4, 8, 12), 112), CLAP: ((4, 12), 94), HAT: (SWUNG_16THS, 46)},
        ((2, 6, 10, 14), 2),
        ("block", (2 + 4 / 3, 10 + 4 / 3), 1),
        "sparse",
    ),
    "cello_suite": Style(
        "4/4",
        (42, 42, 42),
        bass=((0,), 4),
        comp=("arpeggio", _every(16, 0, 1), 1),
        melody="sparse",
    ),
    "huayno": Style(
        "4/4",
        (32, 24, 75),
        bass=((0, 8), 4),
        comp=("block", GALLOP, 1),
        melody="eighths",
    ),
    "metallophones": Style(
        "4/4",
        (14, 13, 9),
        bass=((0,), 16),
        comp=("block", (0, 4, 8, 12), 3),
        melody="eighths",
    ),
    "bandoneon": Style(
        "4/4",
        (23, 23, 23),
        bass=((0, 8), 2),
        comp=("block", (2, 10), 0),
        melody="beats",
    ),
    "fanfare": Style(
        "4/4",
        (58, 61, 56),
        bass=((0, 8), 6),
        comp=("block", TRIPLETS_4_4, 1),
        melody="beats",
    ),
    "onedrop3": Style(
        "3/4",
        (33, 27, 22),
        {KICK: ((8,), 106), STICK: ((8,), 94), HAT: (_every(12), 50)},
        ((0, 6), 3),
        ("block", (2, 6, 10), 1),
        "sparse",
        crash=False,
    ),
    "sleigh3": Style(
        "3/4",
        (32, 48, 9),
        {JINGLE_BELL: (_every(12), 70), BASS_DRUM: ((0,), 88), TRIANGLE: ((4, 8), 66)},
        ((0,), 4),
        ("block", (4, 8), 2),
        "beats",
        crash=False,
    ),
    "djembe3": Style(
        "3/4",
        (32, 46, 79),
        {LOW_CONGA: ((0,), 100), OPEN_HIGH_CONGA: ((4, 8), 80), MUTE_CONGA: ((6, 10), 74)},
        ((0,), 8),
        ("arpeggio", _every(12), 2),
        "sparse",
        crash=False,
    ),
    "harp3": Style(
        "3/4",
        (46, 46, 46),
        bass=((0,), 12),
        comp=("arpeggio", TRIPLETS_3_4, 3),
        melody="sparse",
    ),
    "pasillo3": Style(
        "3/4",
        (24, 24, 105),
        bass=((0, 8), 2),
        comp=("block", (2, 6), 1),
        melody="eighths",
        bass_low=40,
    ),
    "tremolo3": Style(
        "3/4",
        (43, 49, 68),
        bass=((0,), 12),
        comp=("block", _every(12, 0, 1), 1),
        melody="beats",
    ),
    "guajira68": Style(
        "6/8",
        (32, 25, 56),
        {CLAVES: ((0, 4, 8), 82), HIGH_BONGO: ((4, 10), 70)},
        ((0, 6), 4),
        ("block", (0, 2, 6, 8), 1),
        "beats",
        crash=False,
    ),
    "trot68": Style(
        "6/8",
        (32, 105, 22),
        {HIGH_WOOD_BLOCK: ((0, 6), 84), LOW_WOOD_BLOCK: ((4, 10), 74)},
        ((0, 6), 4),
        ("block", (0, 4, 6, 10), 1),
        "eighths",
        crash=False,
    ),
    "chaabi68": Style(
        "6/8",
        (32, 24, 110),
        {LOW_CONGA: ((0, 6), 96), HIGH_BONGO: ((4, 8, 10), 76), TAMBOURINE: (_every(12), 52)},
        ((0, 6), 3),
        ("block", (4, 8, 10), 1),
        "sparse",
        crash=False,
    ),
    "bambuco68": Style(
        "6/8",
        (32, 24, 105),
        bass=((0, 4, 10), 2),
        comp=("block", (0, 2, 6, 8), 1),
        melody="eighths",
    ),
    "pulse68": Style(
        "6/8",
        (70, 71, 72),
        bass=(_every(12), 2),
        comp=("hold", (0,), 0),
        melody="beats",
    ),
    "dulcimer68": Style(
        "6/8",
        (32, 15, 74),
        bass=((0, 6), 6),
        comp=("block", (2, 8), 2),
        melody="eighths",
    ),
    "eskista128": Style(
        "12/8",
        (32, 107, 110),
        {
            LOW_CONGA: ((0, 6, 12, 18), 96),
            OPEN_HIGH_CONGA: ((4, 10, 16, 22), 74),
            CLAP: ((6, 18), 84),
        },
        (SHUFFLE_12_8, 2),
        ("arpeggio", TRIPLETS_12_8, 2),
        "sparse",
        crash=False,
    ),
    # the hats twice as fast as the triplet eighths: sixteenths in a compound bar
    "sixteenths128": Style(
        "12/8",
        (34, 2, 66),
        {KICK: ((0, 12), 104), SNARE: ((6, 18), 100), HAT: (_every(24, 0, 1), 44)},
        ((0, 12), 10),
        ("block", (0, 6, 12, 18), 4),
        "sparse",
    ),
    "fifedrum128": Style(
        "12/8",
        (32, 25, 72),
        {BASS_DRUM: ((0, 6, 12, 18), 100), SNARE: (SHUFFLE_12_8, 82)},
        ((0, 12), 6),
        ("block", (0, 12), 6),
        "eighths",
        crash=False,
    ),
    "lute128": Style(
        "12/8",
        (24, 24, 24),
        bass=((0, 6, 12, 18), 4),
        comp=("arpeggio", _every(24, 0, 1), 1),
        melody="sparse",
        bass_low=40,
    ),
    "bells128": Style(
        "12/8",
        (19, 14, 52),
        bass=((0, 12), 12),
        comp=("arpeggio", (0, 2, 6, 8, 12, 14, 18, 20), 4),
        melody="beats",
    ),
    "trombones128": Style(
        "12/8",
        (58, 57, 57),
        bass=((0, 6, 12, 18), 5),
        comp=("block", (4, 10, 16, 22), 1),
        melody="sparse",
    ),
}


def songs136(count: int = COUNT, seed: str = SEED) -> tuple[Song, ...]:
    """The corpus's songs, drawn as the module docstring says; the same every call."""
    return corpus96.draw(STYLES136, count, seed, "fourteenth")


SONGS136: tuple[Song, ...] = songs136()
corpus60.HALF.update({song.name: "held_out" for song in SONGS136})


def make_corpus136(folder: Path | None = None, workers: int = 0) -> Path:
    """Render the songs missing from `folder`."""
    return corpus60.make_corpus(folder or CACHE, workers, songs=SONGS136)
