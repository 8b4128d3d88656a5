"""A seventeenth corpus of 160 songs, all held out: arrangements no earlier corpus has.

This corpus was written after the sixteenth (tests/analysis/corpus152.py) and before the next
change was chosen, without any analysis of its songs, and it is kept for that change to be
measured on, once everything is set; until it is scored once nothing analyses it and no
choice looks at it. Its 40 arrangements are aimed at grooves, textures and situations the
earlier tables lack:

- 4/4 with drums: stop-time (swung, the kick and a crash on 1 and nothing else, the bass and
  the piano short on 1, a tenor saxophone's eighths carrying the time between), a house
  breakdown (the kick out and nothing from the drums on a beat: open hats on every "and", a
  shaker on the second and fourth sixteenths of every beat; the synth bass on every "and",
  the organ's stabs on the "and" of 2 and of 4, a lead's long notes), a wonky beat (the hats
  in sixteenths swung 3:2 within each eighth, a quintuplet feel, the kick on 1, the swung
  last sixteenth of 2 and the "and" of 3, the snare on 2 and 4 a 32nd late; the bass with
  the kick, an electric piano on the swung last sixteenth of 1 and of 3, a muted trumpet's
  long notes), djent (the kick, the palm-muted chords and the bass together in groups of
  five sixteenths, 5+5+6, the snare on beat 3 only, a china on the beats, a clean guitar's
  long notes), sixteenth-note triplet hats (six a beat over the kick on 1 and 3 and the rim
  on 2 and 4, the bass held a half bar, an electric piano on 1 and 3, an alto saxophone's
  long notes), Kansas City's four-beat (swung, the ride on the beats only, without its skip,
  the hat's foot on 2 and 4, no kick, a walking bass, the guitar's short chords on every
  beat: only a trumpet's eighths are off the beat), funaná (no kit: the ferrinho, as a short
  güiro, scraped on every sixteenth and, as a long güiro, on every "and"; the bass on 1, the
  "and" of 2, 3 and the "and" of 4, the accordion's chords on every eighth and its tune in
  eighths), plena (no kit: the seguidor, as a low conga, on every beat, the punteador, as a
  high conga, on every "and", the requinto's slaps, as a high bongo, on the last sixteenth
  of 2 and of 4, the güícharo, as a short güiro, in eighths; the bass on 1 and 3, a guitar
  for the cuatro on 2 and 4, a trombone on the beats), cumbia de gaita (no kit: the
  llamador, as a low bongo, on every "and", the tambor alegre, as a low conga, on the last
  sixteenth of 1 and of 3, the guache, as a shaker, in sixteenths; the bass on 1 and 3, the
  accordion's chords held a half bar, a recorder for the gaita in eighths), half-time
  triplets (the ride in quarter-note triplets, six to the bar, over the kick on 1 and the
  "and" of 3 and the snare on beat 3 only, the synth bass with the kick, a pad held, a
  flute's long notes), xote (swung, the zabumba, as a bass drum, on 1, the "and" of 2 and 3,
  its bacalhau, as a side stick, on 2 and 4, a triangle muted on the beats and open on the
  "and"s; the bass with the zabumba, a guitar on 2 and 4, the accordion's tune in eighths),
  broken beat (the kick on 1, the last sixteenth of 2 and the "and" of 3, the snare on 2
  and on the second sixteenth of 4, hats in sixteenths; the bass with the kick, an electric
  piano on the "and" of 2 and the last sixteenth of 3, a tenor saxophone's long notes), a
  Latin ballad on a kit (the rim on 2 and 4, the kick on 1 and 3, the floor tom on 4 and its
  "and", maracas in eighths; the bass on 1, the "and" of 2 and 3, a nylon guitar's arpeggio
  in eighths, a trumpet on the beats), teental in its fast tempo (the cycle's sixteen
  mātrās a bar, one a sixteenth: the tabla's high drum, as a high bongo, on every
  sixteenth, its low one, as a low bongo, on every stroke but the khālī's four, from the
  second sixteenth of 3 to beat 4; a harmonium held, the bass held a bar, a sitar in
  eighths);
- 4/4 without drums: tango's síncopa (the bass and the bandoneón's chords on the last
  sixteenth of 1, held over 2, and on 3: nothing on 1 but the violin's tune on the beats),
  three against two (the piano's left hand repeating the root in eighths, its right hand's
  arpeggio in eighth-note triplets, a long note now and then), a harp in sixteenth-note
  triplets (its arpeggio six notes a beat over a cello held a bar, a flute on the beats), a
  hocket of marimbas (the bass marimba on every eighth, the chords on every sixteenth
  between, a flute on the beats), a cakewalk (the piano's chords in the cakewalk figure, a
  sixteenth, an eighth and a sixteenth, then two eighths, in each half bar, its bass on 1
  and 3, a clarinet in eighths), a rondalla (the guitars' chords in tremolo on every 32nd,
  the bass on 1 and 3, a voice on the beats), an arpeggiator's gallop (a saw lead's
  arpeggio in an eighth and two sixteenths every beat over a synth bass held a bar, a pad's
  long notes), a ripieno (the cellos on the root, the strings' chords and the solo violin's
  tune, all in eighths);
- 3/4: an oberek (a frame drum, as a tambourine, on every eighth, the bass drum and the bass
  on 1 only, the accordion's chords on every eighth, a fiddle in eighths), a shaker waltz (a
  shaker in sixteenths, the kick on 1 only, a marimba's arpeggio in sixteenths, a fretless
  bass held from the downbeat, a flute's long notes), a tattoo (the bass drum on 1, a tenor
  drum, as a low tom, on 2, the snare's roll in 32nds through 3 into the next bar, the tuba
  on 1, the brass on 2 and 3, a piccolo on the beats), a guarania (the guitar's bass on the
  two dotted quarters, 1 and the "and" of 2, a harp's arpeggio in eighths, a flute on the
  beats, no drums), a polacca (the strings' chords in the polonaise rhythm, an eighth, two
  sixteenths and four eighths, the cellos on every beat, a violin on the beats, no drums), a
  folía (the cello and the guitar's chords in the folía's rhythm, a quarter, a dotted quarter
  and an eighth, the weight on 2, a recorder on the beats, no drums);
- 6/8: a jig in one (the bodhrán's low stroke on 1 and nothing else, a guitar's chord short
  on 1, the bass held a bar, a fiddle in eighths), a saltarello (a tambourine long-short on
  each dotted quarter, a tabor, as a low tom, on the dotted quarters, the cello's drone held,
  the pipes' chords struck on the dotted quarters, an oboe in eighths), a Morris jig (the
  dancers' bells, as jingle bells, on every eighth, their sticks clashed, as claves, on the
  second dotted quarter, the bass on the dotted quarters, the melodeon's chords on each
  one's last eighth, a fiddle in eighths), duplet hats (the hats in dotted eighths, two a
  beat, over the kick on 1 and the snare on the second dotted quarter, the bass and an
  electric piano's chords on the dotted quarters, an alto saxophone on the beats), bandari
  (the dohol's low stroke, as a low conga, on the first, third and fourth eighths, its high
  one, as a high bongo, and claps on the second, fifth and sixth; the bass with the low
  strokes, the accordion's chords with the claps, a bagpipe for the ney-anbān in eighths), a
  walking bass in three (the bass walking in quarters to the next bar's root, three to the
  bar against its two beats, the strings held, a violin in eighths, no drums);
- 12/8: a stop-time blues (the kick, the bass and the guitar on the first beat only,
  long-short, then silence; a harmonica's eighths carry the rest), maloya (the kayamb, as a
  shaker, on every eighth, the roulèr, as a low floor tom, on 1, the last eighth of 2, 3 and
  the last eighth of 4, the pikèr, as a wood block, on the second eighth of every beat; the
  bass on 1 and 3, a guitar's chords on the beats, a voice's long notes), a dirge (the bass
  drum on every beat, the cymbals on 2 and 4, the tuba walking on the beats, the brass held,
  a trumpet in eighths), a shuffled one drop (the kick and the rim on 3 only, the hats
  long-short on every beat, the bass long-short on 1 and 2 and silent through the drop, the
  guitar's skank on 2 and 4, an organ's long notes), a piano blues (the left hand long-short
  on every beat, the right hand's chords trembling in sixteenths through 2 and 4, a guitar's
  long notes, no drums), three over four (the cello every four eighths, three to the bar
  against the four beats, the harp's chords on the beats, a flute in eighths, no drums).

The songs (`SONGS160`) are drawn by corpus96's rule and a fixed seed: styles four each, the
24 keys six or seven times each, tempi over 55-200 BPM (45-140 dotted-quarter BPM in 6/8 and
12/8), the soundfonts and formats dealt evenly, three in ten excerpts. The truth follows
corpus60's rules, and the songs are written and rendered by its code. Cached in
data/cache/corpus160 (git-ignored), rendered where missing.
"""

from __future__ import annotations

from pathlib import Path

from tests.analysis import corpus60, corpus96
from tests.analysis.corpus import CLAP, CRASH, HAT, KICK, OPEN_HAT, RIDE, SNARE, STICK
from tests.analysis.corpus52 import CLAVES, HIGH_BONGO
from tests.analysis.corpus56 import GUIRO
from tests.analysis.corpus60 import (
    LOW_CONGA,
    LOW_TOM,
    MARACAS,
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
from tests.analysis.corpus88 import MUTE_TRIANGLE, TRIANGLE
from tests.analysis.corpus96 import SHAKER, TAMBOURINE
from tests.analysis.corpus104 import OPEN_HIGH_CONGA
from tests.analysis.corpus112 import CHINA, SHORT_GUIRO
from tests.analysis.corpus120 import TRIPLETS_4_4
from tests.analysis.corpus136 import HIGH_WOOD_BLOCK, JINGLE_BELL
from tests.analysis.corpus152 import ARPEGGIO_32NDS, OFF_BEATS

SEED = "corpus160-1"
COUNT = 160
CACHE = corpus60.DEFAULT_CACHE.with_name("corpus160")
SECOND_AND_FOURTH = _every(16, 1)  # the second and fourth sixteenths of every beat
# sixteenths swung 3:2 within each eighth, a quintuplet feel (2:1 is the triplet's)
QUINTUPLET_SWING = tuple(eighth + offset for eighth in range(0, 16, 2) for offset in (0, 1.2))
FIVES = (0, 5, 10)  # groups of five sixteenths, 5+5+6
SEXTUPLETS = tuple(i * 2 / 3 for i in range(24))  # sixteenth-note triplets, six a beat
QUARTER_TRIPLETS = tuple(i * 8 / 3 for i in range(6))  # six to the bar, three against two
# teental's sixteen mātrās, one a sixteenth: the low drum on every stroke but the khālī's
TEENTAL_BAYAN = (0, 1, 2, 3, 4, 5, 6, 7, 8, 13, 14, 15)
CAKEWALK = (0, 1, 3, 4, 6, 8, 9, 11, 12, 14)  # a sixteenth, an eighth, a sixteenth, 2 eighths
POLONAISE = (0, 2, 3, 4, 6, 8, 10)  # an eighth, two sixteenths, four eighths
FOLIA = (0, 4, 10)  # a quarter, a dotted quarter, an eighth
ROLL_ON_3 = tuple(8 + i / 2 for i in range(8))  # 32nds through beat 3 into the next bar
LONG_SHORT_6_8 = (0, 4, 6, 10)  # a quarter and an eighth on each dotted quarter
TREMOLO_2_AND_4 = (*range(6, 12), *range(18, 24))  # sixteenths through the 2nd and 4th beats

STYLES160: dict[str, Style] = {
    # only the tune between the downbeats
    "stop_time": Style(
        "4/4",
        (32, 0, 66),
        {KICK: ((0,), 104), CRASH: ((0,), 92)},
        ((0,), 2),
        ("block", (0,), 2),
        "eighths",
        swing=True,
        crash=False,
    ),
    # nothing from the drums on a beat
    "house_breakdown": Style(
        "4/4",
        (39, 16, 81),
        {OPEN_HAT: (OFF_BEATS, 66), SHAKER: (SECOND_AND_FOURTH, 44)},
        (OFF_BEATS, 2),
        ("block", (6, 14), 1),
        "sparse",
        crash=False,
    ),
    "wonky": Style(
        "4/4",
        (35, 4, 59),
        {
            KICK: ((0, 7.2, 10), 100),
            SNARE: ((4.5, 12.5), 92),
            HAT: (QUINTUPLET_SWING, 50),
        },
        ((0, 7.2, 10), 2),
        ("block", (3.2, 11.2), 0),
        "sparse",
        crash=False,
    ),
    # the kick and the chords in fives across the bar, the china keeping the beats
    "djent": Style(
        "4/4",
        (34, 30, 27),
        {KICK: (FIVES, 110), SNARE: ((8,), 104), CHINA: ((0, 4, 8, 12), 74)},
        (FIVES, 2),
        ("block", FIVES, 1),
        "sparse",
    ),
    "sextuplet_hats": Style(
        "4/4",
        (33, 5, 65),
        {KICK: ((0, 8), 100), STICK: ((4, 12), 84), HAT: (SEXTUPLETS, 44)},
        ((0, 8), 6),
        ("block", (0, 8), 0),
        "sparse",
        crash=False,
    ),
    # the rhythm section on the quarters, the swing only in the tune
    "four_beat": Style(
        "4/4",
        (32, 26, 56),
        {RIDE: ((0, 4, 8, 12), 72), PEDAL_HAT: ((4, 12), 62)},
        ((0, 4, 8, 12), 4),
        ("block", (0, 4, 8, 12), 2),
        "eighths",
        swing=True,
        walk=True,
        crash=False,
    ),
    "funana": Style(
        "4/4",
        (33, 21, 21),
        {SHORT_GUIRO: (_every(16, 0, 1), 40), GUIRO: (OFF_BEATS, 64)},
        ((0, 6, 8, 14), 2),
        ("block", _every(16), 1),
        "eighths",
        crash=False,
    ),
    "plena": Style(
        "4/4",
        (32, 25, 57),
        {
            LOW_CONGA: ((0, 4, 8, 12), 86),
            OPEN_HIGH_CONGA: (OFF_BEATS, 70),
            HIGH_BONGO: ((7, 15), 66),
            SHORT_GUIRO: (_every(16), 48),
        },
        ((0, 8), 3),
        ("block", (4, 12), 2),
        "beats",
        crash=False,
    ),
    "cumbia_gaita": Style(
        "4/4",
        (33, 21, 74),
        {
            LOW_BONGO: (OFF_BEATS, 78),
            LOW_CONGA: ((3, 11), 74),
            SHAKER: (_every(16, 0, 1), 40),
        },
        ((0, 8), 3),
        ("block", (0, 8), 0),
        "eighths",
        crash=False,
    ),
    # the ride three against the half bar's two beats
    "halftime_triplets": Style(
        "4/4",
        (39, 94, 73),
        {KICK: ((0, 10), 104), SNARE: ((8,), 100), RIDE: (QUARTER_TRIPLETS, 70)},
        ((0, 10), 4),
        ("hold", (0,), 0),
        "sparse",
    ),
    "xote": Style(
        "4/4",
        (32, 25, 21),
        {
            BASS_DRUM: ((0, 6, 8), 98),
            STICK: ((4, 12), 70),
            MUTE_TRIANGLE: ((0, 4, 8, 12), 50),
            TRIANGLE: (OFF_BEATS, 58),
        },
        ((0, 6, 8), 2),
        ("block", (4, 12), 2),
        "eighths",
        swing=True,
        crash=False,
    ),
    # the second backbeat a sixteenth late
    "broken_beat": Style(
        "4/4",
        (33, 4, 66),
        {KICK: ((0, 7, 10), 100), SNARE: ((4, 13), 94), HAT: (_every(16, 0, 1), 46)},
        ((0, 7, 10), 2),
        ("block", (6, 11), 1),
        "sparse",
        crash=False,
    ),
    "bolero_ballad": Style(
        "4/4",
        (32, 24, 56),
        {
            STICK: ((4, 12), 72),
            KICK: ((0, 8), 88),
            LOW_FLOOR_TOM: ((12, 14), 80),
            MARACAS: (_every(16), 44),
        },
        ((0, 6, 8), 3),
        ("arpeggio", _every(16), 2),
        "beats",
        crash=False,
    ),
    # a whole cycle a bar: its four vibhāgs are the beats
    "teental": Style(
        "4/4",
        (32, 20, 104),
        {LOW_BONGO: (TEENTAL_BAYAN, 74), HIGH_BONGO: (_every(16, 0, 1), 52)},
        ((0,), 16),
        ("hold", (0,), 0),
        "eighths",
        crash=False,
    ),
    "sincopa": Style(
        "4/4",
        (43, 23, 40),
        bass=((3, 8), 4),
        comp=("block", (3, 8), 4),
        melody="beats",
    ),
    "three_against_two": Style(
        "4/4",
        (0, 0, 0),
        bass=(_every(16), 2),
        comp=("arpeggio", TRIPLETS_4_4, 2),
        melody="sparse",
    ),
    "harp_sextuplets": Style(
        "4/4",
        (42, 46, 73),
        bass=((0,), 16),
        comp=("arpeggio", SEXTUPLETS, 2),
        melody="beats",
    ),
    # the bass marimba on the eighths, the chords in the sixteenths between
    "hocket": Style(
        "4/4",
        (12, 12, 73),
        bass=(_every(16), 1),
        comp=("block", SECOND_AND_FOURTH, 1),
        melody="beats",
    ),
    "cakewalk": Style(
        "4/4",
        (0, 0, 71),
        bass=((0, 8), 3),
        comp=("block", CAKEWALK, 1),
        melody="eighths",
    ),
    "rondalla": Style(
        "4/4",
        (32, 25, 53),
        bass=((0, 8), 4),
        comp=("block", ARPEGGIO_32NDS, 0.5),
        melody="beats",
    ),
    "gallop_arp": Style(
        "4/4",
        (39, 81, 89),
        bass=((0,), 16),
        comp=("arpeggio", GALLOP, 1),
        melody="sparse",
    ),
    "ripieno": Style(
        "4/4",
        (42, 48, 40),
        bass=(_every(16), 2),
        comp=("block", _every(16), 1),
        melody="eighths",
    ),
    # the downbeat only in the bass drum and the bass
    "oberek3": Style(
        "3/4",
        (32, 21, 110),
        {TAMBOURINE: (_every(12), 54), BASS_DRUM: ((0,), 100)},
        ((0,), 2),
        ("block", _every(12), 1),
        "eighths",
        crash=False,
    ),
    "shaker3": Style(
        "3/4",
        (35, 12, 73),
        {SHAKER: (_every(12, 0, 1), 46), KICK: ((0,), 100)},
        ((0,), 12),
        ("arpeggio", _every(12, 0, 1), 1),
        "sparse",
        crash=False,
    ),
    "tattoo3": Style(
        "3/4",
        (58, 61, 72),
        {BASS_DRUM: ((0,), 104), LOW_TOM: ((4,), 80), SNARE: (ROLL_ON_3, 58)},
        ((0,), 4),
        ("block", (4, 8), 2),
        "beats",
    ),
    # the bass in two dotted quarters, the bar in three
    "guarania3": Style(
        "3/4",
        (24, 46, 73),
        bass=((0, 6), 4),
        comp=("arpeggio", _every(12), 2),
        melody="beats",
        bass_low=40,
    ),
    "polacca3": Style(
        "3/4",
        (42, 48, 40),
        bass=((0, 4, 8), 4),
        comp=("block", POLONAISE, 1),
        melody="beats",
    ),
    "folia3": Style(
        "3/4",
        (42, 24, 74),
        bass=(FOLIA, 2),
        comp=("block", FOLIA, 0),
        melody="beats",
    ),
    # one stroke a bar: the eighths only in the fiddle
    "onefeel68": Style(
        "6/8",
        (32, 24, 110),
        {LOW_FLOOR_TOM: ((0,), 100)},
        ((0,), 12),
        ("block", (0,), 3),
        "eighths",
        crash=False,
    ),
    "saltarello68": Style(
        "6/8",
        (42, 109, 68),
        {TAMBOURINE: (LONG_SHORT_6_8, 66), LOW_TOM: ((0, 6), 84)},
        ((0,), 12),
        ("block", (0, 6), 6),
        "eighths",
        crash=False,
    ),
    "morris68": Style(
        "6/8",
        (32, 21, 110),
        {JINGLE_BELL: (_every(12), 48), CLAVES: ((6,), 92)},
        ((0, 6), 4),
        ("block", (4, 10), 2),
        "eighths",
        crash=False,
    ),
    # the hats two to the beat, the tune in three
    "duplehats68": Style(
        "6/8",
        (33, 4, 65),
        {KICK: ((0,), 100), SNARE: ((6,), 94), HAT: ((0, 3, 6, 9), 56)},
        ((0, 6), 6),
        ("block", (0, 6), 0),
        "beats",
    ),
    "bandari68": Style(
        "6/8",
        (33, 21, 109),
        {LOW_CONGA: ((0, 4, 6), 92), HIGH_BONGO: ((2, 8, 10), 70), CLAP: ((2, 8, 10), 80)},
        ((0, 4, 6), 2),
        ("block", (2, 8, 10), 1),
        "eighths",
        crash=False,
    ),
    # the bass in three quarters against the bar's two beats
    "walk68": Style(
        "6/8",
        (32, 48, 40),
        bass=((0, 4, 8), 4),
        comp=("hold", (0,), 0),
        melody="eighths",
        walk=True,
    ),
    "stoptime128": Style(
        "12/8",
        (33, 27, 22),
        {KICK: ((0, 4), 100)},
        ((0, 4), 2),
        ("block", (0, 4), 2),
        "eighths",
        crash=False,
    ),
    "maloya128": Style(
        "12/8",
        (32, 24, 53),
        {
            SHAKER: (TRIPLETS_12_8, 52),
            LOW_FLOOR_TOM: ((0, 10, 12, 22), 96),
            HIGH_WOOD_BLOCK: ((2, 8, 14, 20), 66),
        },
        ((0, 12), 6),
        ("block", (0, 6, 12, 18), 2),
        "sparse",
        crash=False,
    ),
    # the triplets only in the trumpet
    "dirge128": Style(
        "12/8",
        (58, 61, 56),
        {BASS_DRUM: ((0, 6, 12, 18), 96), CRASH: ((6, 18), 70)},
        ((0, 6, 12, 18), 6),
        ("hold", (0,), 0),
        "eighths",
        walk=True,
        crash=False,
    ),
    "onedrop128": Style(
        "12/8",
        (33, 27, 16),
        {KICK: ((12,), 104), STICK: ((12,), 90), HAT: (SHUFFLE_12_8, 54)},
        ((0, 4, 6, 10), 2),
        ("block", (6, 18), 2),
        "sparse",
        crash=False,
    ),
    "pianoblues128": Style(
        "12/8",
        (0, 0, 27),
        bass=(SHUFFLE_12_8, 2),
        comp=("block", TREMOLO_2_AND_4, 1),
        melody="sparse",
    ),
    # the bass three to the bar, the harmony on the four beats
    "threeover128": Style(
        "12/8",
        (42, 46, 73),
        bass=((0, 8, 16), 8),
        comp=("block", (0, 6, 12, 18), 4),
        melody="eighths",
    ),
}


def songs160(count: int = COUNT, seed: str = SEED) -> tuple[Song, ...]:
    """The corpus's songs, drawn as the module docstring says; the same every call."""
    return corpus96.draw(STYLES160, count, seed, "seventeenth")


SONGS160: tuple[Song, ...] = songs160()
corpus60.HALF.update({song.name: "held_out" for song in SONGS160})


def make_corpus160(folder: Path | None = None, workers: int = 0) -> Path:
    """Render the songs missing from `folder`."""
    return corpus60.make_corpus(folder or CACHE, workers, songs=SONGS160)
