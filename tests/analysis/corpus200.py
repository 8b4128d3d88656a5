"""A twenty-second corpus of 200 songs, all held out: clubs and bedrooms, the screen, the
parlour and the dance hall, in arrangements no table has.

This corpus was written after the twenty-first (tests/analysis/corpus192.py) was scored once
and before the next change to the analysis is chosen, without any analysis of its songs. It
is kept for that change to be measured on, once everything is set; until it is scored once
nothing analyses it and no choice looks at it. It reaches where the earlier tables went
little: rocksteady, kizomba, progressive and acid house, trip-hop, chillwave, dream pop, new
wave, post-punk, electro, J-rock, Mandopop and Bollywood ballads, doom metal and sludge, banda
and conjunto, Memphis soul and hill country blues, a barbershop quartet, a gavotte, a
passepied and a forlane, stride piano, a gamelan's kotekan, a chanson, a Ländler, a kujawiak,
a hesitation waltz, a Russian romance, a cabaret, a gaita, a carol, steel pans, a guzheng and
a kalimba, each in an arrangement no earlier table has in that form. Fourteen of its 50
arrangements, about a quarter, are the harder situations real songs have (half-time drums, a
bass or chords never on the beat, no kick at all, long held chords with little else, chords
only on the pushes, tied over the beat and the bar line):

- 4/4 with drums: rocksteady (the kick on 1 and 3, the rim on 2 and 4, hats in eighths,
  soft; the bass on 1, the "and" of 2, 3 and the last sixteenth of 3, the piano's short
  chords on every "and", an organ on the beats), kizomba (the kick on 1, the "and" of 2 and
  3, a clap on 4 only, a shaker in sixteenths, soft; a synth bass with the kick, a warm pad
  held, a voice lead's long notes), progressive house (the kick on every beat, claps on 2
  and 4, the open hat on every "and", a shaker in sixteenths; the synth bass on the last two
  sixteenths of every beat, never on one, a polysynth's pluck arpeggio on 3+3+2 sixteenths
  in each half bar, each ringing three, a bowed pad's long notes), acid house (the kick on
  every beat, claps on 2 and 4, the closed hat on every "and"; a synth bass on every
  sixteenth, short, a percussive organ's stabs on 1 and the "and" of 3, a saw lead's long
  notes), trip-hop (the kick on 1, the last sixteenth of 2 and the "and" of 3, the snare on
  2 and 4, a ride's bell on the beats, soft, no hats; the bass held a bar, the strings held,
  a celesta's long notes: long held chords with little else), J-rock (the kick on 1, the
  "and" of 2, 3 and the "and" of 4, the snare on 2 and 4, hats in eighths, a splash on the
  "and" of 4; a pick bass in eighths, a distorted guitar's chords only on the "and" of 2 and
  of 4, each held through the next beat, the second tied over the bar line, an overdriven
  lead on the beats), a Mandopop ballad (the kick on 1, the "and" of 2 and 3, the rim on 2
  and 4, hats in eighths, soft; the bass on 1 and 3, held, a koto's arpeggio in eighths, as a
  guzheng's, a violin on the beats), new wave (the kick on 1 and 3, the snare on 2 and 4,
  hats in sixteenths; a synth bass in short eighths, synth brass's stabs on 1, its last
  sixteenth, the "and" of 2 and the "and" of 3, a square lead on the beats), post-punk (no
  cymbal at all: the kick on 1 and 3, the snare on 2 and 4, a floor tom in eighths; a pick
  bass in eighths, high, a clean guitar's arpeggio in sixteenths, a voice's long notes),
  electro (the kick on 1 and the "and" of 3, claps on 2 and 4, hats in sixteenths, a cowbell
  on 1, its last sixteenth, the "and" of 2, the "and" of 3 and on 4; the synth bass on 1, its
  last sixteenth and the "and" of 3, an orchestra hit on 1 and the "and" of 2, a saw lead in
  eighths), dream pop (a drum machine: the kick on 1 and the "and" of 2, the rim on 2 and 4,
  the hat only on the "and"s; the bass on 1 and 3, held, a clean guitar's arpeggio in
  eighths, each note ringing a beat and a half, a voice's long notes), chillwave (no kick:
  claps on 2 and 4 and a shaker in eighths, nothing else; the synth bass held a bar, a warm
  pad held, a synth voice's long notes), doom metal (half time: the kick on 1, the snare on
  3 only, a ride on the beats; the bass and a distorted guitar's chord held a bar, a choir's
  long notes), a Bollywood ballad (the kick on 1 and 3, the rim on 2 and 4, bongos for the
  dholak, the low one on 1, the "and" of 2 and the "and" of 3, the high one on the "and" of
  1, on 2, on 4 and its "and"; the bass on 1, the "and" of 2 and 3, the strings held, a
  sitar on the beats), banda (the tambora, a bass drum, on 1 and 3, the snare and a cymbal on
  2 and 4; a tuba walking on the beats, the horns' after-beats on every "and", a clarinet in
  eighths);
- 4/4 without drums: a barbershop quartet (the low voices on 1 and 3, held, the chord's
  voices held a bar, a lead voice on the beats), a gavotte (a bassoon walking on the beats,
  the harpsichord's chord only on 3, held to the bar line, where the gavotte's phrases begin,
  an oboe in eighths), stride piano (swung: the left hand's root on 1 and 3, short, its
  chords on 2 and 4, the right hand in eighths), a gamelan's kotekan (tubular bells for the
  gong, held a bar, the xylophone's interlocking figure on every sixteenth but the beats,
  never on one, a glockenspiel's balungan on the beats), a pushed piano ballad (the left
  hand's root only on the "and" of 4, tied over the bar line to 3, the right hand's chords on
  the "and" of 2 and of 4, each held over the next beat, the tune's long notes on 1 and 3:
  nothing but the tune starts on a beat), a chanson (a double bass on 1 and 3, the
  accordion's short chords on every eighth, a violin's long notes), a canon over a ground
  (the cello on every beat, the pizzicato strings' arpeggio in eighths, a violin's long
  notes);
- 3/4: a blues waltz (swung: the kick on 1, the snare on 3, hats in swung eighths; a walking
  bass, an organ's short chords only on the swung "and"s, never on a beat, a harmonica's long
  notes every other beat, tied over the bar line), a Tex-Mex conjunto waltz (the kick on 1,
  the snare on 2 and 3, a güiro's eighth and two sixteenths on every beat; the bass on 1 and
  3, a nylon guitar's short chords on 2 and 3, as the bajo sexto's, an accordion in eighths),
  twee pop in three (no snare: the kick on 1, a tambourine on 2 and 3, a shaker in eighths;
  the bass held a bar, the piano's short chords on every eighth, a glockenspiel on the
  beats), a cabaret waltz (no kick: a snare and the hat's foot on 2 and 3 only; a tuba on 1,
  the piano's chords on 2 and 3, a clarinet in eighths); without drums, a kujawiak (a
  cello's root held two beats, the strings' chord only on 3, a violin's long notes every
  other beat, tied over the bar line), a Ländler (an acoustic bass on 1, a dulcimer's chords
  on 2 and 3, as a zither's, a clarinet in eighths), a bluegrass waltz (an acoustic bass on 1
  and 3, a banjo's roll in eighths, a fiddle's long notes every other beat, tied over the bar
  line), a passepied (a cello on every beat, short, the harpsichord's chord on 1 only, a
  flute in eighths), a hesitation waltz (the left hand's root held a bar, the right hand's
  chord on 2 only, held through 3, the tune's long notes every other beat, tied over the bar
  line), a Russian romance (a nylon guitar's bass on 1 and the "and" of 2, its chords spread
  upward in 32nds on 2 and on 3, a violin on the beats);
- 6/8: a metal anthem in six (the kick on every eighth, the snare on the second dotted
  quarter, a china on both; the bass in eighths, a distorted guitar's chords held a beat, the
  strings' long note), an R&B ballad in six (hats in sixteenths, the kick on 1 and the last
  sixteenth before the second beat, the rim on the second; a synth bass with the kick, an
  electric piano in a quarter and an eighth on each beat, a voice lead on the beats), a one
  drop in six (the kick and the rim on the second dotted quarter only, hats in eighths; the
  bass on 1 and the third eighth, held, a muted guitar's skank on the third and sixth
  eighths, never on a beat, an organ's long note), Afro-jazz in six (a ride on the first,
  third, fifth and sixth eighths, the hat's foot on the second dotted quarter, a soft kick on
  1; a walking bass on the dotted quarters, the piano's chords on 1, the third and the sixth
  eighths, a tenor saxophone in eighths), a gaita (no kit: a low conga for the tambora on 1
  and the last eighth, a muted one on the third and fourth eighths, maracas in sixteenths, a
  güiro for the furro in a quarter and an eighth on each beat; the bass on the dotted
  quarters, a nylon guitar strumming every eighth, as the cuatro, a voice on the beats);
  without drums, a forlane (a bassoon on the dotted quarters, held, the harpsichord's chords
  in a dotted eighth, a sixteenth and an eighth on each, an oboe on the beats), a carol in six
  (an organ's pedal held a bar, the choir's chords on the dotted quarters, each held a beat, a
  flute on the beats), a piano ballad in six with pushes (the left hand on the dotted
  quarters, held, the right hand's chords only on each beat's last eighth, held over the next
  beat and the bar line, the tune's long note), a kalimba in six (pizzicato strings on the
  dotted quarters, a kalimba's arpeggio in eighths, a recorder on the beats);
- 12/8: sludge (half time: the kick on 1 and its third eighth, the snare on 3 only, a
  second crash cymbal on the beats; the bass and a distorted guitar's chord held a bar, a choir
  pad's long notes), Memphis soul in twelve (the kick on 1 and 3, the snare on 2 and 4, hats
  in the shuffle's long-short; the bass on the beats, the horns' short stabs on 2 and 4, an
  organ on the beats), hill country blues (the kick on every beat, the snare on 2 and 4, hats
  on every eighth; one bass note held a bar, an overdriven guitar's chords in the shuffle's
  long-short, a harmonica's long notes), an R&B ballad with pushes (the kick on 1 and 3, the
  rim on 2 and 4, hats on every eighth, soft; the bass on 1 and on the last eighth of 2, tied
  over 3, an electric piano's chords only on each beat's last eighth, each held over the next
  beat, the last over the bar line, a tenor saxophone's long notes), synth-pop in twelve (the
  kick on 1, the last eighth of 2 and 3, the snare on 2 and 4, hats in the shuffle's
  long-short; a synth bass on every eighth, a polysynth's chords on 1, its third eighth, 3 and
  its third eighth, a square lead on the beats); without drums, an elegy (a cello on the
  beats, held, the piano's arpeggio in the shuffle's long-short, a violin's long notes),
  vibraphone in twelve (an upright bass on 1 and 3, held, the vibraphone's chords in the
  shuffle's long-short, a flute's long notes), steel pans in twelve (the bass on the beats,
  the pans' chords on the second and third eighths of every beat, a pan's tune on the beats),
  a guzheng (a cello's drone held a bar, a koto's arpeggio on every eighth, as a guzheng's,
  each note ringing two, a flute's long notes).

The songs (`SONGS200`) are drawn by corpus96's rule and a fixed seed: styles four each, the
24 keys eight or nine times each, tempi over 55-200 BPM (45-140 dotted-quarter BPM in 6/8 and
12/8), the soundfonts and formats dealt evenly, three in ten excerpts. The truth follows
corpus60's rules (the tempo of a half-time groove is the quarter note's, or in 12/8 the dotted
quarter's, as it is tagged), and the songs are written and rendered by its code. Cached in
data/cache/corpus200 (git-ignored), rendered where missing.
"""

from __future__ import annotations

from pathlib import Path

from tests.analysis import corpus60, corpus96
from tests.analysis.corpus import CLAP, HAT, KICK, OPEN_HAT, RIDE, SNARE, STICK
from tests.analysis.corpus52 import HIGH_BONGO
from tests.analysis.corpus56 import GUIRO, RIDE_BELL
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
from tests.analysis.corpus64 import LOW_FLOOR_TOM
from tests.analysis.corpus72 import LOW_BONGO
from tests.analysis.corpus80 import BASS_DRUM, GALLOP
from tests.analysis.corpus96 import SHAKER, TAMBOURINE
from tests.analysis.corpus112 import CHINA
from tests.analysis.corpus128 import CRASH_2
from tests.analysis.corpus144 import RUMBLE, SECOND_AND_THIRD_12_8
from tests.analysis.corpus152 import MILONGA, OFF_BEATS, SHORT_BELL_6_8
from tests.analysis.corpus160 import LONG_SHORT_6_8
from tests.analysis.corpus168 import OFF_BEATS_3_4
from tests.analysis.corpus192 import LAST_TWO

SEED = "corpus200-1"
COUNT = 200
CACHE = corpus60.DEFAULT_CACHE.with_name("corpus200")
SPLASH = 55  # General MIDI, besides the earlier corpora's
PUSHES = (6, 14)  # the "and" of 2 and of 4, where a chord comes ahead of 3 and of the bar line
GALLOP_3_4 = tuple(step for step in GALLOP if step < 12)  # an eighth and two sixteenths, in 3
ROLLED_2_AND_3 = (4, 4.5, 5, 5.5, 8, 8.5, 9, 9.5)  # a chord spread upward in 32nds on 2 and 3
FORLANE_6_8 = (0, 3, 4, 6, 9, 10)  # a dotted eighth, a sixteenth and an eighth on each beat
LAST_EIGHTHS_12_8 = (4, 10, 16, 22)  # the last eighth of every dotted-quarter beat

STYLES200: dict[str, Style] = {
    "rocksteady": Style(
        "4/4",
        (33, 0, 16),
        {KICK: ((0, 8), 90), STICK: ((4, 12), 84), HAT: (_every(16), 46)},
        ((0, 6, 8, 11), 3),
        ("block", OFF_BEATS, 1),
        "beats",
        crash=False,
    ),
    "kizomba": Style(
        "4/4",
        (38, 89, 85),
        {KICK: ((0, 6, 8), 96), CLAP: ((12,), 84), SHAKER: (_every(16, 0, 1), 34)},
        ((0, 6, 8), 2),
        ("hold", (0,), 0),
        "sparse",
        crash=False,
    ),
    # the bass never on a beat, under the kick on every one
    "progressive_house": Style(
        "4/4",
        (38, 90, 92),
        {
            KICK: ((0, 4, 8, 12), 110),
            CLAP: ((4, 12), 84),
            OPEN_HAT: (OFF_BEATS, 58),
            SHAKER: (_every(16, 0, 1), 32),
        },
        (LAST_TWO, 1),
        ("arpeggio", MILONGA, 3),
        "sparse",
    ),
    "acid_house": Style(
        "4/4",
        (39, 17, 81),
        {KICK: ((0, 4, 8, 12), 112), CLAP: ((4, 12), 90), HAT: (OFF_BEATS, 56)},
        (_every(16, 0, 1), 1),
        ("block", (0, 10), 2),
        "sparse",
    ),
    # long held chords with little else over a sparse beat
    "trip_hop": Style(
        "4/4",
        (33, 48, 8),
        {KICK: ((0, 7, 10), 96), SNARE: ((4, 12), 92), RIDE_BELL: ((0, 4, 8, 12), 40)},
        ((0,), 16),
        ("hold", (0,), 0),
        "sparse",
        crash=False,
    ),
    # the chords only on the pushes, each held over the next beat, one over the bar line
    "j_rock": Style(
        "4/4",
        (34, 30, 29),
        {
            KICK: ((0, 6, 8, 14), 108),
            SNARE: ((4, 12), 110),
            HAT: (_every(16), 60),
            SPLASH: ((14,), 70),
        },
        (_every(16), 2),
        ("block", PUSHES, 6),
        "beats",
    ),
    "cpop_ballad": Style(
        "4/4",
        (33, 107, 40),
        {KICK: ((0, 6, 8), 84), STICK: ((4, 12), 70), HAT: (_every(16), 40)},
        ((0, 8), 6),
        ("arpeggio", _every(16), 4),
        "beats",
        crash=False,
    ),
    "new_wave": Style(
        "4/4",
        (38, 62, 80),
        {KICK: ((0, 8), 104), SNARE: ((4, 12), 104), HAT: (_every(16, 0, 1), 50)},
        (_every(16), 1),
        ("block", (0, 3, 6, 10), 2),
        "beats",
    ),
    # no cymbal at all: a floor tom keeps the eighths
    "post_punk": Style(
        "4/4",
        (34, 27, 53),
        {KICK: ((0, 8), 100), SNARE: ((4, 12), 100), LOW_FLOOR_TOM: (_every(16), 72)},
        (_every(16), 2),
        ("arpeggio", _every(16, 0, 1), 2),
        "sparse",
        crash=False,
        bass_low=40,
    ),
    "electro_funk": Style(
        "4/4",
        (38, 55, 81),
        {
            KICK: ((0, 10), 110),
            CLAP: ((4, 12), 96),
            HAT: (_every(16, 0, 1), 46),
            COWBELL: ((0, 3, 6, 10, 12), 60),
        },
        ((0, 3, 10), 2),
        ("block", (0, 6), 1),
        "eighths",
    ),
    "dream_pop": Style(
        "4/4",
        (33, 27, 53),
        {KICK: ((0, 6), 90), STICK: ((4, 12), 72), HAT: (OFF_BEATS, 44)},
        ((0, 8), 8),
        ("arpeggio", _every(16), 6),
        "sparse",
        crash=False,
    ),
    # no kick: claps and a shaker over held chords
    "chillwave": Style(
        "4/4",
        (38, 89, 54),
        {CLAP: ((4, 12), 80), SHAKER: (_every(16), 42)},
        ((0,), 16),
        ("hold", (0,), 0),
        "sparse",
        crash=False,
    ),
    # half time: the snare on 3 only, everything else held
    "doom_metal": Style(
        "4/4",
        (34, 30, 52),
        {KICK: ((0,), 110), SNARE: ((8,), 112), RIDE: ((0, 4, 8, 12), 60)},
        ((0,), 16),
        ("hold", (0,), 0),
        "sparse",
    ),
    "filmi_ballad": Style(
        "4/4",
        (33, 48, 104),
        {
            KICK: ((0, 8), 82),
            STICK: ((4, 12), 66),
            LOW_BONGO: ((0, 6, 10), 64),
            HIGH_BONGO: ((2, 4, 12, 14), 56),
        },
        ((0, 6, 8), 3),
        ("hold", (0,), 0),
        "beats",
        crash=False,
    ),
    "banda": Style(
        "4/4",
        (58, 60, 71),
        {BASS_DRUM: ((0, 8), 104), SNARE: ((4, 12), 84), CRASH_2: ((4, 12), 56)},
        ((0, 4, 8, 12), 3),
        ("block", OFF_BEATS, 1),
        "eighths",
        walk=True,
        crash=False,
    ),
    "barbershop": Style(
        "4/4",
        (53, 52, 85),
        bass=((0, 8), 8),
        comp=("hold", (0,), 0),
        melody="beats",
    ),
    # the chord only on 3, where the gavotte's phrases begin
    "gavotte": Style(
        "4/4",
        (70, 6, 68),
        bass=((0, 4, 8, 12), 4),
        comp=("block", (8,), 8),
        melody="eighths",
        walk=True,
    ),
    "stride": Style(
        "4/4",
        (0, 0, 0),
        bass=((0, 8), 2),
        comp=("block", (4, 12), 2),
        melody="eighths",
        swing=True,
    ),
    # the interlocking figure never on a beat
    "kotekan": Style(
        "4/4",
        (14, 13, 9),
        bass=((0,), 16),
        comp=("arpeggio", RUMBLE, 1),
        melody="beats",
        bass_low=48,
    ),
    # nothing but the tune starts on a beat: the bass tied over the bar line
    "piano_pushes": Style(
        "4/4",
        (0, 0, 0),
        bass=((14,), 10),
        comp=("block", PUSHES, 4),
        melody="sparse",
    ),
    "chanson": Style(
        "4/4",
        (43, 21, 40),
        bass=((0, 8), 4),
        comp=("block", _every(16), 1),
        melody="sparse",
    ),
    "canon_strings": Style(
        "4/4",
        (42, 45, 40),
        bass=((0, 4, 8, 12), 4),
        comp=("arpeggio", _every(16), 2),
        melody="sparse",
    ),
    # swung, the chords never on a beat
    "blues_waltz3": Style(
        "3/4",
        (33, 16, 22),
        {KICK: ((0,), 96), SNARE: ((8,), 92), HAT: (_every(12), 54)},
        ((0, 4, 8), 4),
        ("block", OFF_BEATS_3_4, 1),
        "sparse",
        swing=True,
        walk=True,
    ),
    "conjunto3": Style(
        "3/4",
        (32, 24, 21),
        {KICK: ((0,), 96), SNARE: ((4, 8), 76), GUIRO: (GALLOP_3_4, 50)},
        ((0, 8), 3),
        ("block", (4, 8), 1),
        "eighths",
        crash=False,
        bass_low=40,
    ),
    "glock_pop3": Style(
        "3/4",
        (33, 0, 9),
        {KICK: ((0,), 92), TAMBOURINE: ((4, 8), 70), SHAKER: (_every(12), 40)},
        ((0,), 12),
        ("block", _every(12), 1),
        "beats",
        crash=False,
    ),
    # no kick: brushes and the hat's foot on 2 and 3
    "cabaret3": Style(
        "3/4",
        (58, 0, 71),
        {SNARE: ((4, 8), 62), PEDAL_HAT: ((4, 8), 54)},
        ((0,), 4),
        ("block", (4, 8), 2),
        "eighths",
        crash=False,
    ),
    "kujawiak3": Style(
        "3/4",
        (42, 41, 40),
        bass=((0,), 8),
        comp=("block", (8,), 4),
        melody="sparse",
    ),
    "landler3": Style(
        "3/4",
        (32, 15, 71),
        bass=((0,), 4),
        comp=("block", (4, 8), 2),
        melody="eighths",
    ),
    "bluegrass_waltz3": Style(
        "3/4",
        (32, 105, 110),
        bass=((0, 8), 3),
        comp=("arpeggio", _every(12), 2),
        melody="sparse",
        bass_low=40,
    ),
    "passepied3": Style(
        "3/4",
        (42, 6, 73),
        bass=((0, 4, 8), 2),
        comp=("block", (0,), 4),
        melody="eighths",
    ),
    # one chord on 2, held through 3, and the tune tied over the bar line
    "hesitation3": Style(
        "3/4",
        (0, 0, 0),
        bass=((0,), 12),
        comp=("block", (4,), 8),
        melody="sparse",
    ),
    "romance3": Style(
        "3/4",
        (24, 24, 40),
        bass=((0, 6), 2),
        comp=("arpeggio", ROLLED_2_AND_3, 4),
        melody="beats",
        bass_low=40,
    ),
    "doublekick68": Style(
        "6/8",
        (34, 30, 48),
        {KICK: (_every(12), 112), SNARE: ((6,), 114), CHINA: ((0, 6), 70)},
        (_every(12), 2),
        ("block", (0, 6), 6),
        "sparse",
    ),
    "rnb_ballad68": Style(
        "6/8",
        (38, 4, 85),
        {KICK: ((0, 5), 90), STICK: ((6,), 80), HAT: (_every(12, 0, 1), 38)},
        ((0, 5), 3),
        ("block", LONG_SHORT_6_8, 2),
        "beats",
        crash=False,
    ),
    # a one drop in six: no kick on 1, the skank never on a beat
    "dub68": Style(
        "6/8",
        (33, 28, 16),
        {KICK: ((6,), 104), STICK: ((6,), 90), HAT: (_every(12), 44)},
        ((0, 4), 4),
        ("block", (4, 10), 1),
        "sparse",
        crash=False,
    ),
    "afro_jazz68": Style(
        "6/8",
        (32, 0, 66),
        {RIDE: (SHORT_BELL_6_8, 70), PEDAL_HAT: ((6,), 54), KICK: ((0,), 60)},
        ((0, 6), 6),
        ("block", (0, 4, 10), 2),
        "eighths",
        walk=True,
        crash=False,
    ),
    "gaita68": Style(
        "6/8",
        (32, 24, 53),
        {
            LOW_CONGA: ((0, 10), 90),
            MUTE_CONGA: ((4, 6), 66),
            MARACAS: (_every(12, 0, 1), 44),
            GUIRO: (LONG_SHORT_6_8, 58),
        },
        ((0, 6), 4),
        ("block", _every(12), 1),
        "beats",
        crash=False,
    ),
    "forlane68": Style(
        "6/8",
        (70, 6, 68),
        bass=((0, 6), 6),
        comp=("block", FORLANE_6_8, 1),
        melody="beats",
    ),
    "carol68": Style(
        "6/8",
        (19, 52, 73),
        bass=((0,), 12),
        comp=("block", (0, 6), 6),
        melody="beats",
    ),
    # the chords on each beat's last eighth, held over the next beat and the bar line
    "piano_pushes68": Style(
        "6/8",
        (0, 0, 0),
        bass=((0, 6), 6),
        comp=("block", (4, 10), 4),
        melody="sparse",
    ),
    "kalimba68": Style(
        "6/8",
        (45, 108, 74),
        bass=((0, 6), 2),
        comp=("arpeggio", _every(12), 3),
        melody="beats",
    ),
    # half time in twelve: the snare on 3 only, the chord held a bar
    "sludge128": Style(
        "12/8",
        (34, 30, 91),
        {KICK: ((0, 4), 112), SNARE: ((12,), 112), CRASH_2: ((0, 6, 12, 18), 58)},
        ((0,), 24),
        ("hold", (0,), 0),
        "sparse",
    ),
    "memphis_soul128": Style(
        "12/8",
        (33, 61, 16),
        {KICK: ((0, 12), 98), SNARE: ((6, 18), 100), HAT: (SHUFFLE_12_8, 50)},
        ((0, 6, 12, 18), 5),
        ("block", (6, 18), 2),
        "beats",
    ),
    "hill_country128": Style(
        "12/8",
        (33, 29, 22),
        {KICK: ((0, 6, 12, 18), 100), SNARE: ((6, 18), 96), HAT: (TRIPLETS_12_8, 48)},
        ((0,), 24),
        ("block", SHUFFLE_12_8, 2),
        "sparse",
        bass_low=40,
    ),
    # the chords only on each beat's last eighth, each held over the next beat
    "rnb_pushes128": Style(
        "12/8",
        (33, 4, 66),
        {KICK: ((0, 12), 90), STICK: ((6, 18), 80), HAT: (TRIPLETS_12_8, 40)},
        ((0, 10), 4),
        ("block", LAST_EIGHTHS_12_8, 4),
        "sparse",
        crash=False,
    ),
    "synth_pop128": Style(
        "12/8",
        (38, 90, 80),
        {KICK: ((0, 10, 12), 100), SNARE: ((6, 18), 100), HAT: (SHUFFLE_12_8, 52)},
        (TRIPLETS_12_8, 2),
        ("block", (0, 4, 12, 16), 2),
        "beats",
    ),
    "elegy128": Style(
        "12/8",
        (42, 0, 40),
        bass=((0, 6, 12, 18), 6),
        comp=("arpeggio", SHUFFLE_12_8, 4),
        melody="sparse",
    ),
    "vibes128": Style(
        "12/8",
        (32, 11, 73),
        bass=((0, 12), 12),
        comp=("block", SHUFFLE_12_8, 2),
        melody="sparse",
    ),
    "steelpan128": Style(
        "12/8",
        (32, 114, 114),
        bass=((0, 6, 12, 18), 3),
        comp=("block", SECOND_AND_THIRD_12_8, 1),
        melody="beats",
    ),
    "guzheng128": Style(
        "12/8",
        (42, 107, 73),
        bass=((0,), 24),
        comp=("arpeggio", TRIPLETS_12_8, 4),
        melody="sparse",
    ),
}


def songs200(count: int = COUNT, seed: str = SEED) -> tuple[Song, ...]:
    """The corpus's songs, drawn as the module docstring says; the same every call."""
    return corpus96.draw(STYLES200, count, seed, "twentysecond")


SONGS200: tuple[Song, ...] = songs200()
corpus60.HALF.update({song.name: "held_out" for song in SONGS200})


def make_corpus200(folder: Path | None = None, workers: int = 0) -> Path:
    """Render the songs missing from `folder`."""
    return corpus60.make_corpus(folder or CACHE, workers, songs=SONGS200)
