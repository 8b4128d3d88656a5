"""A sixteenth corpus of 152 songs, all held out: arrangements no earlier corpus has.

This corpus was written after the fifteenth (tests/analysis/corpus144.py) and before the next
change was chosen, without any analysis of its songs, and it is kept for that change to be
measured on, once everything is set; until it is scored once nothing analyses it and no
choice looks at it. Its 38 arrangements are aimed at grooves, textures and situations the
earlier tables lack:

- 4/4 with drums: soukous (the kick on every beat, the snare's cavacha: every sixteenth, soft;
  the bass on 1, the "and" of 2, 3 and the "and" of 4, a guitar's sebene arpeggio in
  sixteenths, a second guitar in eighths), flamenco tangos (palmas on 2, 3 and 4, none on 1, a
  cajón's bass on 1 and the "and" of 2, the guitar's rasgueado on every beat and the "and" of
  2, its thumb on 1 and 3, a voice), danzón (the paila's cinquillo in the first half of the
  bar and eighths in the second, a güiro long on 1 and 3 and short on 2, 4 and their "and"s,
  the low timbale on the "and" of 4, the bass on 1 and 3, violins' chords on the beats, a
  flute in eighths, no kit), baladi (the doumbek's dums on 1, its "and" and 3, its teks on the
  "and" of 2 and on 4, a riq in eighths, the bass with the dums, the accordion's chords with
  the teks, a shakuhachi for the nay in eighths), the flying cymbal of reggae (a one drop: the
  kick and the rim on 3 only, the closed hat on the beats and the open one on every "and", the
  guitar's skank on 2 and 4, the bass on 1, 2, its "and" and the "and" of 3, a tenor
  saxophone's long notes), finger snaps (snaps, as claps, on 2 and 4 and nothing else, swung,
  the bass on every beat, a vibraphone's short chords on the "and" of 2 and of 4, a voice),
  skiffle (swung, a washboard, as a cabasa, scraped on every eighth and its thimbles, as a
  wood block, on 2 and 4, the tea-chest bass on 1 and 3, the guitar strummed on every beat, a
  harmonica's long notes, no kit), boogaloo (claps on 2 and 4, a cowbell on the beats, the
  conga's slap on 2 and open tones on 4 and its "and", the bass on 1, the "and" of 2, 3 and
  the "and" of 4, the piano's montuno on the "and" of 1, the "and" of 2, 3, 4 and its "and", a
  trumpet in eighths), konpa (the tanbou, as a conga, on the first five eighths, then the kick
  on the sixth and the eighth with a floor tom between; the graj, as a short güiro, in
  eighths, maracas and a cowbell on the off-beats, the bass with the tanbou's 1 and the kicks,
  a guitar's arpeggio in eighths, an alto saxophone), bebop (swung, the ride's pattern, the
  hat's foot on 2 and 4, no kick on the beats: the snare comping on the "and" of 2 and the
  kick dropping a bomb on the "and" of 4, a walking bass, the piano on the "and" of 1 and of
  3, an alto saxophone in eighths), hats in dotted eighths (3+3+3+3+4 sixteenths across a
  straight kick on 1 and 3 and the snare on 2 and 4, the bass held a half bar, a pad), brushes
  (swung, the sweep on every sixteenth, soft, taps on 2 and 4 with the hat's foot, a feathered
  kick on every beat, a walking bass, the piano on 1 and the "and" of 2, a muted trumpet), a
  batucada (no kit: the surdo de segunda on each half bar's downbeat and the primeira on its
  second beat, the caixa on every sixteenth, a tamborim, as a high timbale, on the
  teleco-teco, a chocalho in sixteenths, a banjo for the cavaquinho, its chords with the
  tamborim, the seven-string guitar's bass on 1 and 3, a voice);
- 4/4 without drums: a strathspey (the piano's chords in Scotch snaps on 1 and 3, a sixteenth
  then a dotted eighth, and on 2 and 4, the bass on 1 and 3, a fiddle in eighths), a milonga
  (the guitar's bass 3+3+2 in each half bar, the chords held, a bandoneón in eighths),
  kroncong (the cello plucked on 1, the "and" of 2, 3 and the "and" of 4, the cak and the cuk,
  as nylon guitars, on every sixteenth but the beats, a flute's long notes), a Charleston (the
  tuba, the banjo's chords and nothing else on the Charleston's 1 and "and" of 2, a clarinet
  in eighths), a minimalist pulse (the marimbas' chords on every eighth, the clarinet's bass
  held, a violin on the beats), chiptune (square waves: the bass in eighths, the chords as an
  arpeggio in 32nds, the lead in eighths), a French overture (the harpsichord's chords and the
  cello in dotted eighths and sixteenths on every beat, an oboe on the beats);
- 3/4: a waltz on the bodhrán (the low stroke on 1, the tip on the other eighths, the bass on
  1, the guitar on 2 and 3, a tin whistle on the beats), four against three (the hats in
  dotted eighths, four to the bar, over the kick on 1 and the snare on 3, the bass held from
  the downbeat, an electric piano on 2 and 3, a flute on the beats), a neo-soul waltz (the
  hats in sixteenths swung 2:1 within each eighth, the kick and the bass on 1 and the swung
  last sixteenth of 2, the rim on 3, an electric piano held, a tenor saxophone's long notes),
  a passacaglia (the organ's pedal walking on every beat to the next bar's root, the chords
  held, a violin in eighths, no drums), a valse manouche (swung, the bass on 1, the guitar's
  pompe short on every beat, a violin in eighths, no drums), a retreat march on the pipes (the
  drones and the chords held, only the chanter's eighths, no drums);
- 6/8: bikutsi (the kick on the dotted quarters, the hats on every eighth, the rim on the
  three quarters across them, muted guitars picking every eighth, the bass on the dotted
  quarters, a voice), cueca (claps and maracas on the dotted quarters, the bombo, as a floor
  tom, on 1 and its rim on the other eighths but the fourth, the guitar's strokes on the three
  quarters, the bass on the dotted quarters, a harp), ñáñigo on a kit (the ride's bell on the
  short 6/8 bell, the first, third, fifth and sixth eighths, the kick on the dotted quarters,
  the hat's foot on the second, the rim on the second and fifth eighths, a low tom on the
  third and sixth, the bass on 1 and the last eighth, the piano on each beat's last eighth, a
  tenor saxophone in eighths), son jalisciense (the guitarrón on the three quarters against
  the vihuela's strums on the dotted quarters, a trumpet in eighths, no drums), a harp's
  rolled chords (each dotted quarter's chord spread upward in 32nds and left ringing, a cello
  on the dotted quarters, a flute's long notes, no drums), a ground bass (the cello on the
  dotted quarters, the root and then a step to the next bar's root, a lute's broken chord on
  the other eighths, a recorder on the beats, no drums);
- 12/8: the quarter-note ride (six strokes a bar against the four beats, the kick on 1 and 3,
  the snare on 2 and 4, the bass on 1 and 3, an electric piano on the beats), a gospel shuffle
  (the snare long-short on every beat, soft, the backbeat loud on 2 and 4, the kick on 1 and
  3, a walking bass on the beats, the organ long-short, a choir's long notes), brushes in 12/8
  (the sweep on every eighth, taps on 2 and 4, a feathered kick on 1, the bass on the beats,
  the piano's chords on the beats, a tenor saxophone), a pastoral (a drone held the whole bar,
  the strings in the siciliano rhythm, a dotted eighth, a sixteenth and an eighth, on every
  beat, an oboe on the beats, no drums), a balafon (the xylophone's chords in quarters, six to
  the bar, three against each half bar's two beats, a marimba's bass on the beats, the tune in
  eighths, no drums), a tremolo (the strings' chords on every sixteenth over the bass held a
  half bar, a violin's long notes, no drums).

The songs (`SONGS152`) are drawn by corpus96's rule and a fixed seed: styles four each, the
24 keys six or seven times each, tempi over 55-200 BPM (45-140 dotted-quarter BPM in 6/8 and
12/8), the soundfonts and formats dealt evenly, three in ten excerpts. The truth follows
corpus60's rules, and the songs are written and rendered by its code. Cached in
data/cache/corpus152 (git-ignored), rendered where missing.
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
    LOW_TOM,
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
from tests.analysis.corpus96 import SHAKER, TAMBOURINE
from tests.analysis.corpus104 import CABASA, ELECTRIC_SNARE
from tests.analysis.corpus112 import SHORT_GUIRO
from tests.analysis.corpus120 import HIGH_TIMBALE, MUTE_SURDO, OPEN_SURDO
from tests.analysis.corpus128 import GROUPS_OF_3
from tests.analysis.corpus136 import HIGH_WOOD_BLOCK, LOW_TIMBALE

SEED = "corpus152-1"
COUNT = 152
CACHE = corpus60.DEFAULT_CACHE.with_name("corpus152")
OFF_BEATS = (2, 6, 10, 14)  # the "and" of every beat
# the cinquillo in the first half of the bar, plain eighths in the second
DANZON_PAILA = (0, 2, 3, 5, 6, 8, 10, 12, 14)
# the tamborim's teleco-teco: two bars of 2/4, one in each half of ours
TELECOTECO = (0, 2, 3, 5, 7, 9, 10, 12, 14)
SNAPS = (0, 1, 4, 8, 9, 12)  # a sixteenth then a dotted eighth on 1 and 3, quarters on 2, 4
MILONGA = (0, 3, 6, 8, 11, 14)  # 3+3+2 sixteenths in each half bar
BETWEEN_BEATS = tuple(step for step in range(16) if step % 4)  # every sixteenth but the beats
ARPEGGIO_32NDS = tuple(i / 2 for i in range(32))
DOTTED = (0, 3, 4, 7, 8, 11, 12, 15)  # a dotted eighth and a sixteenth on every beat
DOTTED_3_4 = (0, 3, 6, 9)  # dotted eighths, four to a bar of three
# sixteenths swung 2:1 within each eighth of a bar of three
SWUNG_16THS_3_4 = tuple(eighth + offset for eighth in range(0, 12, 2) for offset in (0, 4 / 3))
SHORT_BELL_6_8 = (0, 4, 8, 10)  # the first, third, fifth and sixth eighths
ROLLED_6_8 = (0, 0.5, 1, 1.5, 6, 6.5, 7, 7.5)  # each dotted quarter's chord spread in 32nds
QUARTERS_12_8 = (0, 4, 8, 12, 16, 20)  # six quarters across the four dotted-quarter beats
SICILIANO_12_8 = tuple(beat + offset for beat in (0, 6, 12, 18) for offset in (0, 3, 4))

STYLES152: dict[str, Style] = {
    "soukous": Style(
        "4/4",
        (33, 27, 26),
        {KICK: ((0, 4, 8, 12), 100), SNARE: (_every(16, 0, 1), 48)},
        ((0, 6, 8, 14), 2),
        ("arpeggio", _every(16, 0, 1), 1),
        "eighths",
        crash=False,
    ),
    "tangos": Style(
        "4/4",
        (24, 24, 53),
        {CLAP: ((4, 8, 12), 90), LOW_CONGA: ((0, 6), 88)},
        ((0, 8), 4),
        ("block", (0, 4, 6, 8, 12), 1),
        "beats",
        crash=False,
        bass_low=40,
    ),
    "danzon": Style(
        "4/4",
        (32, 48, 73),
        {
            STICK: (DANZON_PAILA, 70),
            GUIRO: ((0, 8), 58),
            SHORT_GUIRO: ((4, 6, 12, 14), 50),
            LOW_TIMBALE: ((14,), 84),
        },
        ((0, 8), 4),
        ("block", (0, 4, 8, 12), 2),
        "eighths",
        crash=False,
    ),
    "baladi": Style(
        "4/4",
        (32, 21, 77),
        {
            BASS_DRUM: ((0, 2, 8), 100),
            HIGH_BONGO: ((6, 12), 78),
            TAMBOURINE: (_every(16), 46),
        },
        ((0, 2, 8), 2),
        ("block", (6, 12), 1),
        "eighths",
        crash=False,
    ),
    "flyers": Style(
        "4/4",
        (33, 28, 66),
        {
            KICK: ((8,), 106),
            STICK: ((8,), 92),
            HAT: ((0, 4, 8, 12), 48),
            OPEN_HAT: (OFF_BEATS, 60),
        },
        ((0, 4, 6, 10), 2),
        ("block", (4, 12), 1),
        "sparse",
        crash=False,
    ),
    "snaps": Style(
        "4/4",
        (32, 11, 53),
        {CLAP: ((4, 12), 72)},
        ((0, 4, 8, 12), 3),
        ("block", (6, 14), 1),
        "sparse",
        swing=True,
        crash=False,
    ),
    "skiffle": Style(
        "4/4",
        (32, 25, 22),
        {CABASA: (_every(16), 56), HIGH_WOOD_BLOCK: ((4, 12), 72)},
        ((0, 8), 4),
        ("block", (0, 4, 8, 12), 1),
        "sparse",
        swing=True,
        crash=False,
    ),
    "boogaloo": Style(
        "4/4",
        (33, 0, 56),
        {
            CLAP: ((4, 12), 90),
            COWBELL: ((0, 4, 8, 12), 60),
            MUTE_CONGA: ((4,), 70),
            LOW_CONGA: ((12, 14), 80),
        },
        ((0, 6, 8, 14), 2),
        ("block", (2, 6, 8, 12, 14), 1),
        "eighths",
        crash=False,
    ),
    "konpa": Style(
        "4/4",
        (33, 27, 65),
        {
            LOW_CONGA: ((0, 2, 4, 6, 8), 84),
            KICK: ((10, 14), 100),
            LOW_FLOOR_TOM: ((12,), 88),
            SHORT_GUIRO: (_every(16), 50),
            MARACAS: (OFF_BEATS, 52),
            COWBELL: (OFF_BEATS, 58),
        },
        ((0, 10, 14), 2),
        ("arpeggio", _every(16), 2),
        "sparse",
        crash=False,
    ),
    "bebop": Style(
        "4/4",
        (32, 0, 65),
        {
            RIDE: ((0, 4, 6, 8, 12, 14), 76),
            PEDAL_HAT: ((4, 12), 64),
            SNARE: ((6,), 52),
            KICK: ((14,), 70),
        },
        ((0, 4, 8, 12), 4),
        ("block", (2, 10), 1),
        "eighths",
        swing=True,
        walk=True,
        crash=False,
    ),
    "dotted_hats": Style(
        "4/4",
        (38, 89, 81),
        {KICK: ((0, 8), 104), SNARE: ((4, 12), 100), HAT: (GROUPS_OF_3, 58)},
        ((0, 8), 8),
        ("hold", (0,), 0),
        "sparse",
    ),
    "brushes44": Style(
        "4/4",
        (32, 0, 59),
        {
            ELECTRIC_SNARE: (_every(16, 0, 1), 26),
            SNARE: ((4, 12), 52),
            PEDAL_HAT: ((4, 12), 60),
            KICK: ((0, 4, 8, 12), 40),
        },
        ((0, 4, 8, 12), 4),
        ("block", (0, 6), 2),
        "beats",
        swing=True,
        walk=True,
        crash=False,
    ),
    "batucada": Style(
        "4/4",
        (24, 105, 53),
        {
            MUTE_SURDO: ((0, 8), 88),
            OPEN_SURDO: ((4, 12), 104),
            SNARE: (_every(16, 0, 1), 50),
            HIGH_TIMBALE: (TELECOTECO, 70),
            SHAKER: (_every(16, 0, 1), 40),
        },
        ((0, 8), 4),
        ("block", TELECOTECO, 1),
        "beats",
        crash=False,
        bass_low=40,
    ),
    "strathspey": Style(
        "4/4",
        (32, 0, 110),
        bass=((0, 8), 4),
        comp=("block", SNAPS, 0),
        melody="eighths",
    ),
    "milonga": Style(
        "4/4",
        (24, 24, 23),
        bass=(MILONGA, 2),
        comp=("hold", (0,), 0),
        melody="eighths",
        bass_low=40,
    ),
    "kroncong": Style(
        "4/4",
        (45, 24, 73),
        bass=((0, 6, 8, 14), 2),
        comp=("block", BETWEEN_BEATS, 1),
        melody="sparse",
    ),
    "charleston": Style(
        "4/4",
        (58, 105, 71),
        bass=((0, 6), 2),
        comp=("block", (0, 6), 1),
        melody="eighths",
    ),
    "minimalist": Style(
        "4/4",
        (71, 12, 40),
        bass=((0,), 16),
        comp=("block", _every(16), 1),
        melody="beats",
    ),
    "chiptune": Style(
        "4/4",
        (80, 80, 80),
        bass=(_every(16), 1),
        comp=("arpeggio", ARPEGGIO_32NDS, 0.5),
        melody="eighths",
    ),
    "overture": Style(
        "4/4",
        (42, 6, 68),
        bass=(DOTTED, 1),
        comp=("block", DOTTED, 0),
        melody="beats",
    ),
    "bodhran3": Style(
        "3/4",
        (32, 25, 78),
        {LOW_FLOOR_TOM: ((0,), 96), HIGH_FLOOR_TOM: ((2, 4, 6, 8, 10), 60)},
        ((0,), 4),
        ("block", (4, 8), 2),
        "beats",
        crash=False,
    ),
    # the hats four to the bar, the harmony in three
    "fourover3": Style(
        "3/4",
        (34, 4, 73),
        {KICK: ((0,), 100), SNARE: ((8,), 94), HAT: (DOTTED_3_4, 58)},
        ((0,), 12),
        ("block", (4, 8), 3),
        "beats",
    ),
    "neosoul3": Style(
        "3/4",
        (33, 4, 66),
        {
            KICK: ((0, 6 + 4 / 3), 100),
            STICK: ((8,), 82),
            HAT: (SWUNG_16THS_3_4, 46),
        },
        ((0, 6 + 4 / 3), 3),
        ("hold", (0,), 0),
        "sparse",
    ),
    "passacaglia3": Style(
        "3/4",
        (19, 19, 40),
        bass=((0, 4, 8), 4),
        comp=("hold", (0,), 0),
        melody="eighths",
        walk=True,
    ),
    "manouche3": Style(
        "3/4",
        (32, 25, 40),
        bass=((0,), 2),
        comp=("block", (0, 4, 8), 1),
        melody="eighths",
        swing=True,
    ),
    "retreat3": Style(
        "3/4",
        (109, 109, 109),
        bass=((0,), 12),
        comp=("hold", (0,), 0),
        melody="eighths",
        bass_low=45,  # from A2, about where the drones sound
    ),
    # the rim three to the bar against the kick's two dotted quarters
    "bikutsi68": Style(
        "6/8",
        (33, 28, 53),
        {KICK: ((0, 6), 104), HAT: (_every(12), 58), STICK: ((0, 4, 8), 72)},
        ((0, 6), 4),
        ("block", _every(12), 1),
        "sparse",
        crash=False,
    ),
    # the guitar in three quarters against the claps' two dotted quarters
    "cueca68": Style(
        "6/8",
        (24, 24, 46),
        {
            CLAP: ((0, 6), 88),
            MARACAS: ((0, 6), 60),
            LOW_FLOOR_TOM: ((0,), 96),
            STICK: ((2, 4, 8, 10), 58),
        },
        ((0, 6), 3),
        ("block", (0, 4, 8), 2),
        "beats",
        crash=False,
        bass_low=40,
    ),
    "naningo68": Style(
        "6/8",
        (32, 0, 66),
        {
            RIDE_BELL: (SHORT_BELL_6_8, 70),
            KICK: ((0, 6), 90),
            PEDAL_HAT: ((6,), 56),
            STICK: ((2, 8), 58),
            LOW_TOM: ((4, 10), 72),
        },
        ((0, 10), 2),
        ("block", (4, 10), 1),
        "eighths",
        crash=False,
    ),
    # the bass in three quarters against the strums' two dotted quarters
    "sonjalisco68": Style(
        "6/8",
        (32, 24, 56),
        bass=((0, 4, 8), 3),
        comp=("block", (0, 6), 3),
        melody="eighths",
    ),
    "rolled68": Style(
        "6/8",
        (42, 46, 73),
        bass=((0, 6), 6),
        comp=("arpeggio", ROLLED_6_8, 5),
        melody="sparse",
    ),
    "ground68": Style(
        "6/8",
        (42, 24, 74),
        bass=((0, 6), 6),
        comp=("arpeggio", (2, 4, 8, 10), 2),
        melody="beats",
        walk=True,
    ),
    # the ride in quarters: six strokes against the four dotted-quarter beats
    "crossride128": Style(
        "12/8",
        (33, 4, 65),
        {RIDE: (QUARTERS_12_8, 70), KICK: ((0, 12), 98), SNARE: ((6, 18), 94)},
        ((0, 12), 10),
        ("block", (0, 6, 12, 18), 4),
        "sparse",
    ),
    "gospelshuffle128": Style(
        "12/8",
        (33, 16, 52),
        {
            SNARE: (SHUFFLE_12_8, 46),
            ELECTRIC_SNARE: ((6, 18), 100),
            KICK: ((0, 12), 96),
        },
        ((0, 6, 12, 18), 5),
        ("block", SHUFFLE_12_8, 2),
        "sparse",
        walk=True,
    ),
    "brushes128": Style(
        "12/8",
        (32, 0, 66),
        {
            ELECTRIC_SNARE: (TRIPLETS_12_8, 28),
            SNARE: ((6, 18), 56),
            KICK: ((0,), 46),
        },
        ((0, 6, 12, 18), 5),
        ("block", (0, 6, 12, 18), 4),
        "sparse",
        crash=False,
    ),
    "pifa128": Style(
        "12/8",
        (43, 48, 68),
        bass=((0,), 24),
        comp=("block", SICILIANO_12_8, 0),
        melody="beats",
    ),
    # the chords in quarters: three against each half bar's two beats
    "balafon128": Style(
        "12/8",
        (12, 13, 13),
        bass=((0, 6, 12, 18), 3),
        comp=("block", QUARTERS_12_8, 2),
        melody="eighths",
    ),
    "tremolo128": Style(
        "12/8",
        (43, 48, 40),
        bass=((0, 12), 12),
        comp=("block", tuple(range(24)), 1),
        melody="sparse",
    ),
}


def songs152(count: int = COUNT, seed: str = SEED) -> tuple[Song, ...]:
    """The corpus's songs, drawn as the module docstring says; the same every call."""
    return corpus96.draw(STYLES152, count, seed, "sixteenth")


SONGS152: tuple[Song, ...] = songs152()
corpus60.HALF.update({song.name: "held_out" for song in SONGS152})


def make_corpus152(folder: Path | None = None, workers: int = 0) -> Path:
    """Render the songs missing from `folder`."""
    return corpus60.make_corpus(folder or CACHE, workers, songs=SONGS152)
