"""A 64-song corpus for tempo, key and time signature, with the truth and a fixed split.

The songs are written as MIDI here and rendered by `fluidsynth` through three General MIDI
soundfonts (Debian's `fluid-soundfont-gm`, `timgm6mb-soundfont` and
`musescore-general-soundfont`), so that no analysis can be tuned to one set of samples.
They cover what the 22-song corpus (tests/analysis/corpus.py) does not:

- tempi from 55 to 200 BPM, spread evenly (each fifth of the range holds 11 to 15 songs);
- metres 4/4 (41 songs), 3/4 (8), 6/8 (8) and 12/8 (7), each with and without drums;
- all 24 keys, 12 major and 12 minor, each at least twice;
- arrangements: piano alone, strings, fingerpicked and strummed guitar, waltzes (musette and
  Viennese), a half-time trap groove, swing (4/4 and a jazz waltz, eighths played 2:1),
  sparse percussion (side stick, maracas and a conga; an Afro 12/8 bell over two congas),
  ordinary pop, rock, punk, house, hip-hop and drum and bass grooves, 6/8 ballads, a jig and
  a march, 12/8 blues, shuffle and doo-wop;
- 19 excerpts (`Song.excerpt`): cut from the middle of a piece, they start on a chord other
  than the tonic and stop at a bar line on another one, with no final tonic bar; 9 more
  songs start away from the tonic and end on it;
- WAV, FLAC, MP3 and Ogg Vorbis, 16 songs each.

The truth is what the score says, the way a musician notates it:

- `bpm` is the tempo of the beat: the quarter note in 4/4 and 3/4, the dotted quarter in 6/8
  and 12/8 (common practice: a 6/8 jig "at 112" has 112 dotted-quarter beats a minute and
  336 eighths). This is the BPM a 6/8 or 12/8 song is tagged with and the one scored;
  `eighth_bpm` is the eighth-note tempo, three a beat in 6/8 and 12/8, two in 4/4 and 3/4.
  A half-time trap groove (snare on beat 3) at 140 is 140, as producers tag it.
- `tonic` and `scale`: the key, spelled as tunesmith reports keys (C C# D Eb E F F# G Ab
  A Bb B).
- `timesignature`: ACE-Step 1.5's value. Its metadata allows 2, 3, 4 and 6 ("2 for 2/4,
  3 for 3/4, 4 for 4/4, 6 for 6/8": `VALID_TIME_SIGNATURES` in `acestep/constants.py`,
  enforced by its constrained decoder), and tunesmith writes the same spelling
  (`dataset/fields.py`). 12/8 has no value of its own there: its bar is four dotted-quarter
  beats, so it is "4", the same beats a bar at the same BPM (`metre` keeps "12/8").

The corpus is split once into a development half ("dev", looked at while improving the
analysis) and a test half ("test", scored only to report), by this rule: order the songs
by metre, then drums or none, then the SHA-256 of their name, and deal them out in that
order, dev, test, dev, test, ... So each half has every metre with and without drums, and
the halves differ by at most one song in every one of those groups (`HALF`).

More development songs: `DEV_EXTRA` (`extra_songs`) draws 192 more from the same generator
with another seed (metre in the table's proportions, style, tempo over the table's range for
the metre, key, progression, soundfont, format, excerpt or not), named `extra_NNN`, half
"dev_extra". They are development data only, rendered into their own folder
(`make_corpus(extra=True)`, `data/cache/corpus60_dev_extra`), so that what the analysis
fits is fitted on some two hundred songs, never on the test half.

Nothing is committed as audio: `make_corpus(folder)` renders what is missing into a cache
folder (git-ignored `data/cache/corpus60` by default) and reuses a song while its MIDI, its
soundfont and the renderer are unchanged. Each song names a soundfont; where that one is
not installed the first installed one of FONTS renders it instead, and `truth.json` says
which one each song used. `fluidsynth` loads only the samples a song plays
(`synth.dynamic-sample-loading`), as MuseScore's compressed SF3 would otherwise take seconds
a song to decode; even so, rendering all 64 takes about 70 s of one core, 40 of them
MuseScore's. The MIDI is written by the Standard MIDI File writer of corpus.py.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib
import json
import math
import random
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import soundfile as sf

from tests.analysis.corpus import (
    CLAP,
    CRASH,
    GROOVES,
    HAT,
    KICK,
    NUMERALS,
    OPEN_HAT,
    PEAK,
    PITCH,
    PPQ,
    RIDE,
    SAMPLE_RATE,
    SCALES,
    SNARE,
    STICK,
    _smf,
)
from tunesmith.dataset.workers import pool_size

CORPUS_VERSION = 1  # bump when the audio made from the same MIDI changes (cut, level, codec)
DEFAULT_CACHE = Path(__file__).resolve().parents[2] / "data" / "cache" / "corpus60"
TARGET_SECONDS = 20.0  # each song is whole cycles of its progression, about this long
STEP = PPQ // 4  # a sixteenth note, the grid every pattern is written on
FADE_SECONDS = 0.05  # an excerpt's cut at a bar line is faded over this long
# libsndfile's Vorbis encoder overflows the stack (SIGSEGV) when one call hands it ~40 s of
# stereo audio at once: the audio is written this many frames a call
WRITE_FRAMES = 1 << 16

# Soundfonts by name: the paths each Debian package installs, and the package.
FONTS: dict[str, tuple[tuple[Path, ...], str]] = {
    "fluidr3": ((Path("/usr/share/sounds/sf2/FluidR3_GM.sf2"),), "fluid-soundfont-gm"),
    "timgm6mb": ((Path("/usr/share/sounds/sf2/TimGM6mb.sf2"),), "timgm6mb-soundfont"),
    "musescore": (
        (
            Path("/usr/share/sounds/sf3/MuseScore_General.sf3"),
            Path("/usr/share/sounds/sf3/MuseScore_General_Full.sf3"),
        ),
        "musescore-general-soundfont",
    ),
}

# General MIDI percussion notes (channel 10) besides corpus.py's
PEDAL_HAT, LOW_TOM, COWBELL, LOW_CONGA, MUTE_CONGA, AGOGO, MARACAS = 44, 45, 56, 64, 62, 67, 70


@dataclass(frozen=True)
class Metre:
    steps: int  # sixteenths a bar
    beat: int  # sixteenths a beat: 4 (quarter) or 6 (dotted quarter)
    numerator: int
    denominator: int
    timesignature: str  # ACE-Step 1.5's value (module docstring)

    @property
    def compound(self) -> bool:
        return self.beat == 6


METRES = {
    "4/4": Metre(16, 4, 4, 4, "4"),
    "3/4": Metre(12, 4, 3, 4, "3"),
    "6/8": Metre(12, 6, 6, 8, "6"),
    "12/8": Metre(24, 6, 12, 8, "4"),
}


@dataclass(frozen=True)
class Style:
    """An arrangement: drums, bass, chords and melody, on the sixteenth grid of one bar."""

    metre: str
    programs: tuple[int, int, int]  # GM programs (0-based) of bass, chords, melody
    drums: dict[int, tuple[tuple[int, ...], int]] = field(default_factory=dict)  # steps, vel
    bass: tuple[tuple[int, ...], int] = ((0,), 16)  # steps the root is played on, length
    comp: tuple[str, tuple[int, ...], int] = ("hold", (0,), 0)  # kind, steps, length (0: on)
    melody: Literal["beats", "sparse", "eighths"] = "beats"
    swing: bool = False  # eighths played long-short, 2:1
    walk: bool = False  # the bass walks in quarters: root, chord tones, a step to the next
    crash: bool = True  # a crash cymbal every four bars (kits only)
    bass_low: int = 36  # the bass plays from this MIDI note up an octave (C2..B2)


def _every(steps: int, start: int = 0, step: int = 2) -> tuple[int, ...]:
    return tuple(range(start, steps, step))


TRIPLETS_12_8 = _every(24)  # the twelve eighths of a 12/8 bar
SHUFFLE_12_8 = (0, 4, 6, 10, 12, 16, 18, 22)  # long-short on each dotted-quarter beat

STYLES: dict[str, Style] = {
    # 4/4 with drums: the grooves of corpus.py, and the ones it lacks
    "pop": Style("4/4", (33, 0, 65), GROOVES["pop"], (_every(16), 2), ("block", (0, 4, 8, 12), 0)),
    "rock": Style("4/4", (34, 29, 30), GROOVES["rock"], (_every(16), 2), ("block", (0, 8), 0)),
    "punk": Style("4/4", (34, 30, 29), GROOVES["punk"], (_every(16), 2), ("block", _every(16), 0)),
    "house": Style("4/4", (38, 89, 81), GROOVES["house"], ((2, 6, 10, 14), 2), ("hold", (0,), 0)),
    "hiphop": Style(
        "4/4", (38, 4, 73), GROOVES["hiphop"], ((0, 7, 10), 3), ("block", (0, 6, 10), 0)
    ),
    "dnb": Style("4/4", (38, 90, 81), GROOVES["dnb"], ((0, 10), 6), ("hold", (0,), 0), "sparse"),
    "ballad": Style(
        "4/4", (35, 0, 48), GROOVES["ballad"], ((0, 8), 8), ("arpeggio", _every(16), 4)
    ),
    "sixteenths": Style(
        "4/4", (33, 4, 81), GROOVES["sixteenths"], (_every(16), 2), ("block", (0, 4, 8, 12), 0)
    ),
    # half time: the snare on beat 3 only, sixteenth hats, an 808 under the kick
    "trap": Style(
        "4/4",
        (38, 89, 11),
        {
            KICK: ((0, 3, 10), 118),
            CLAP: ((8,), 110),
            HAT: (_every(16, 0, 1), 58),
            OPEN_HAT: ((14,), 64),
        },
        ((0, 3, 10), 3),
        ("hold", (0,), 0),
        "sparse",
    ),
    "swing": Style(
        "4/4",
        (32, 0, 66),
        {RIDE: ((0, 4, 6, 8, 12, 14), 78), PEDAL_HAT: ((4, 12), 66), KICK: ((0, 4, 8, 12), 44)},
        ((0, 4, 8, 12), 4),
        ("block", (4, 12), 2),
        "eighths",
        swing=True,
        walk=True,
        crash=False,
    ),
    "sparse": Style(
        "4/4",
        (32, 4, 73),
        {STICK: ((12,), 74), MARACAS: ((0, 4, 8, 12), 40), LOW_CONGA: ((0, 10), 78)},
        ((0, 8), 8),
        ("block", (0, 8), 0),
        "sparse",
        crash=False,
    ),
    # 4/4 without drums
    "piano": Style("4/4", (0, 0, 0), bass=((0, 8), 8), comp=("arpeggio", _every(16), 4)),
    "strings": Style("4/4", (42, 48, 40), comp=("hold", (0,), 0), melody="sparse"),
    "guitar": Style(
        "4/4", (25, 25, 24), bass=((0, 8), 8), comp=("arpeggio", _every(16), 4), bass_low=40
    ),
    "strum": Style(
        "4/4",
        (25, 25, 22),
        bass=((0, 8), 8),
        comp=("block", (0, 4, 6, 10, 12, 14), 0),
        bass_low=40,
    ),
    # 3/4
    "waltz": Style(
        "3/4",
        (32, 0, 21),
        {KICK: ((0,), 96), STICK: ((4, 8), 60), HAT: ((0, 4, 8), 48)},
        ((0,), 4),
        ("block", (4, 8), 4),
        crash=False,
    ),
    "ballad3": Style(
        "3/4",
        (33, 0, 71),
        {KICK: ((0,), 100), SNARE: ((8,), 90), HAT: (_every(12), 60)},
        ((0,), 12),
        ("arpeggio", _every(12), 4),
    ),
    "rock3": Style(
        "3/4",
        (34, 29, 30),
        {KICK: ((0, 6), 110), SNARE: ((4, 8), 104), RIDE: (_every(12), 72)},
        (_every(12), 2),
        ("block", (0, 4, 8), 0),
    ),
    "jazzwaltz": Style(
        "3/4",
        (32, 0, 56),
        {RIDE: ((0, 4, 6, 8), 76), PEDAL_HAT: ((8,), 60), KICK: ((0,), 48)},
        ((0, 4, 8), 4),
        ("block", (4, 8), 2),
        "eighths",
        swing=True,
        walk=True,
        crash=False,
    ),
    "viennese": Style("3/4", (45, 48, 40), bass=((0,), 4), comp=("block", (4, 8), 4)),
    "piano3": Style("3/4", (0, 0, 0), bass=((0,), 12), comp=("arpeggio", _every(12), 4)),
    "guitar3": Style(
        "3/4", (24, 24, 24), bass=((0,), 12), comp=("arpeggio", _every(12), 4), bass_low=40
    ),
    # 6/8: two dotted-quarter beats a bar
    "ballad68": Style(
        "6/8",
        (33, 0, 68),
        {KICK: ((0,), 100), SNARE: ((6,), 94), HAT: (_every(12), 62)},
        ((0, 6), 6),
        ("arpeggio", _every(12), 4),
    ),
    "jig": Style(
        "6/8",
        (32, 25, 110),
        {KICK: ((0, 6), 92), LOW_TOM: ((4, 10), 70), HAT: (_every(12), 52)},
        ((0, 6), 4),
        ("block", (0, 4, 6, 10), 2),
        "eighths",
        crash=False,
    ),
    "march68": Style(
        "6/8",
        (58, 61, 56),
        {KICK: ((0, 6), 104), SNARE: ((0, 4, 6, 10), 98)},
        ((0, 6), 3),
        ("block", (4, 10), 2),
    ),
    "jig_unplugged": Style(
        "6/8",
        (24, 24, 73),
        bass=((0, 6), 4),
        comp=("block", (0, 4, 6, 10), 2),
        melody="eighths",
        bass_low=40,
    ),
    "piano68": Style("6/8", (0, 0, 0), bass=((0, 6), 6), comp=("arpeggio", _every(12), 4)),
    "guitar68": Style(
        "6/8", (24, 24, 24), bass=((0, 6), 6), comp=("arpeggio", _every(12), 4), bass_low=40
    ),
    "strings68": Style("6/8", (42, 48, 40), bass=((0,), 12), comp=("block", (0, 6), 0)),
    # 12/8: four dotted-quarter beats a bar
    "blues128": Style(
        "12/8",
        (33, 0, 27),
        {KICK: ((0, 12), 100), SNARE: ((6, 18), 98), HAT: (TRIPLETS_12_8, 60)},
        (SHUFFLE_12_8, 2),
        ("block", TRIPLETS_12_8, 2),
    ),
    "doowop": Style(
        "12/8",
        (32, 0, 65),
        {KICK: ((0, 12), 84), STICK: ((6, 18), 80), HAT: (TRIPLETS_12_8, 48)},
        ((0, 6, 12, 18), 5),
        ("block", TRIPLETS_12_8, 2),
        "sparse",
    ),
    "shuffle128": Style(
        "12/8",
        (34, 26, 56),
        {KICK: ((0, 12), 104), SNARE: ((6, 18), 100), RIDE: (SHUFFLE_12_8, 72)},
        (SHUFFLE_12_8, 2),
        ("block", SHUFFLE_12_8, 2),
    ),
    # the standard bell of West African 12/8 over two congas, nothing else on the beat
    "afro": Style(
        "12/8",
        (32, 12, 73),
        {
            AGOGO: ((0, 4, 8, 10, 14, 18, 22), 80),
            LOW_CONGA: ((0, 12), 76),
            MUTE_CONGA: ((6, 18), 58),
        },
        ((0, 12), 10),
        ("arpeggio", (0, 6, 12, 18), 6),
        "sparse",
        crash=False,
    ),
    "piano128": Style(
        "12/8", (0, 0, 0), bass=((0, 12), 12), comp=("block", TRIPLETS_12_8, 2), melody="sparse"
    ),
    "strings128": Style(
        "12/8", (42, 48, 40), bass=((0, 12), 12), comp=("block", (0, 6, 12, 18), 6)
    ),
    "guitar128": Style(
        "12/8", (25, 25, 25), bass=((0, 12), 12), comp=("arpeggio", TRIPLETS_12_8, 4), bass_low=40
    ),
}


def style_of(name: str) -> Style:
    """A style of STYLES, of a later corpus's table (LATER_TABLES), a random arrangement
    named `random_NNN` (tests/analysis/random_styles.py) or an even-pulse one named
    `even_NNN` (tests/analysis/even_pulses.py). Those modules build on this one, so
    they are imported only when one of their songs is asked about."""
    if name in STYLES:
        return STYLES[name]
    if name.startswith("random_"):
        from tests.analysis.random_styles import random_style

        return random_style(name)
    if name.startswith("even_"):
        from tests.analysis.even_pulses import even_style

        return even_style(name)
    # one table at a time, in the order they were written: each module draws its songs when
    # imported, asking for its own table's styles before the later modules exist
    for module, table in LATER_TABLES:
        styles = getattr(importlib.import_module(f"tests.analysis.{module}"), table)
        if name in styles:
            return styles[name]
    raise KeyError(f"no corpus has a style named {name!r}")


LATER_TABLES = (
    ("corpus96", "STYLES96"),
    ("corpus48", "STYLES48"),
    ("corpus56", "STYLES56"),
    ("corpus52", "STYLES52"),
    ("corpus64", "STYLES64"),
    ("corpus72", "STYLES72"),
    ("corpus80", "STYLES80"),
    ("corpus88", "STYLES88"),
    ("corpus104", "STYLES104"),
    ("corpus112", "STYLES112"),
    ("corpus120", "STYLES120"),
    ("corpus128", "STYLES128"),
    ("corpus136", "STYLES136"),
    ("corpus144", "STYLES144"),
    ("corpus152", "STYLES152"),
    ("corpus160", "STYLES160"),
    ("corpus168", "STYLES168"),
    ("corpus176", "STYLES176"),
    ("corpus184", "STYLES184"),
    ("corpus192", "STYLES192"),
    ("corpus200", "STYLES200"),
)


@dataclass(frozen=True)
class Song:
    """One song of the corpus and its truth (module docstring)."""

    name: str
    bpm: int  # the beat: quarter note in 4/4 and 3/4, dotted quarter in 6/8 and 12/8
    tonic: str  # spelled as tunesmith reports keys: C C# D Eb E F F# G Ab A Bb B
    scale: Literal["major", "minor"]
    style: str  # a key of STYLES, which fixes the metre
    progression: tuple[str, ...]  # roman numerals, upper case major, lower case minor
    font: Literal["fluidr3", "timgm6mb", "musescore"]  # the soundfont it is written for
    fmt: Literal["wav", "flac", "mp3", "ogg"]
    excerpt: bool = False  # cut from a longer piece: no final tonic bar, ends at a bar line

    @property
    def metre(self) -> str:
        return style_of(self.style).metre

    @property
    def timesignature(self) -> str:
        """ACE-Step 1.5's value: "4", "3", "6"; "4" for 12/8 (module docstring)."""
        return METRES[self.metre].timesignature

    @property
    def eighth_bpm(self) -> int:
        return self.bpm * (3 if METRES[self.metre].compound else 2)

    @property
    def drums(self) -> bool:
        return bool(style_of(self.style).drums)

    @property
    def keyscale(self) -> str:
        return f"{self.tonic} {self.scale}"

    @property
    def filename(self) -> str:
        return f"{self.name}.{self.fmt}"

    @property
    def half(self) -> str:
        return HALF[self.name]


W, F, M, V = "wav", "flac", "mp3", "ogg"  # the formats (V: Ogg Vorbis), short for the table
FL, TM, MS = "fluidr3", "timgm6mb", "musescore"

# Ordered by metre, then tempo; the tonics step down by semitones, each major then minor.
SONGS: tuple[Song, ...] = (
    Song("velvet_hour", 61, "C", "major", "ballad", ("I", "V", "vi", "IV"), FL, W),
    Song("lantern_keys", 64, "C", "minor", "piano", ("iv", "V", "i", "VI"), TM, F, True),
    Song("winter_hall", 79, "B", "major", "strings", ("I", "IV", "V", "I"), MS, M),
    Song("sidewalk_smoke", 88, "B", "minor", "hiphop", ("VI", "VII", "i", "iv"), FL, V),
    Song("river_stones", 94, "Bb", "major", "guitar", ("I", "vi", "IV", "V"), TM, W),
    Song("quiet_porch", 98, "Bb", "minor", "sparse", ("i", "VI", "III", "VII"), MS, F),
    Song("tin_whistle", 102, "A", "major", "sixteenths", ("IV", "V", "I", "vi"), FL, M, True),
    Song("blue_lounge", 110, "A", "minor", "swing", ("iv", "V", "i", "VI"), TM, V, True),
    Song("paper_moon", 114, "Ab", "major", "pop", ("I", "iii", "IV", "V"), MS, W),
    Song("morning_keys", 116, "Ab", "minor", "piano", ("iv", "i", "VII", "V"), FL, F, True),
    Song("copper_wire", 118, "G", "major", "sixteenths", ("I", "IV", "I", "V"), TM, M),
    Song("warehouse_glow", 120, "G", "minor", "house", ("VI", "V", "i", "iv"), MS, V),
    Song("open_road", 122, "F#", "major", "strum", ("ii", "V", "I", "IV"), FL, W),
    Song("neon_tide", 124, "F#", "minor", "house", ("i", "iv", "v", "i"), TM, F),
    Song("dry_creek", 128, "F", "major", "sparse", ("IV", "I", "ii", "V"), MS, M, True),
    Song("dark_hallway", 130, "F", "minor", "trap", ("i", "VII", "VI", "V"), FL, V),
    Song("rust_belt", 138, "E", "major", "rock", ("I", "ii", "V", "I"), TM, W),
    Song("midnight_drip", 140, "E", "minor", "trap", ("iv", "V", "i", "VI"), MS, F, True),
    Song("cathedral", 143, "Eb", "major", "strings", ("I", "V", "vi", "IV"), FL, M),
    Song("bright_window", 145, "Eb", "minor", "pop", ("VI", "VII", "i", "iv"), TM, V),
    Song("gravel_road", 148, "D", "major", "rock", ("I", "IV", "V", "I"), MS, W),
    Song("violet_smoke", 150, "D", "minor", "trap", ("i", "iv", "VII", "III"), FL, F),
    Song("rolling_keys", 152, "C#", "major", "piano", ("V", "I", "vi", "IV"), TM, M, True),
    Song("broken_strings", 156, "C#", "minor", "punk", ("i", "VI", "iv", "V"), MS, V),
    Song("summer_rush", 158, "C", "major", "pop", ("I", "vi", "IV", "V"), FL, W),
    Song("cool_cats", 160, "C", "minor", "swing", ("iv", "V", "i", "VI"), TM, F, True),
    Song("dust_road", 162, "B", "major", "strum", ("I", "iii", "IV", "V"), MS, M),
    Song("iron_gate", 164, "B", "minor", "rock", ("iv", "i", "VII", "V"), FL, V),
    Song("high_strings", 166, "Bb", "major", "strings", ("IV", "V", "I", "vi"), TM, W, True),
    Song("jungle_run", 170, "Bb", "minor", "dnb", ("i", "iv", "i", "V"), MS, F),
    Song("handclaps", 172, "A", "major", "sparse", ("ii", "V", "I", "IV"), FL, M, True),
    Song("concrete_rain", 174, "A", "minor", "dnb", ("i", "VI", "III", "VII"), TM, V),
    Song("banjo_morning", 178, "Ab", "major", "guitar", ("I", "IV", "I", "V"), MS, W),
    Song("safety_pin", 180, "Ab", "minor", "punk", ("VI", "V", "i", "iv"), FL, F, True),
    Song("racing_keys", 182, "G", "major", "piano", ("I", "ii", "V", "I"), TM, M),
    Song("thunder_road", 184, "G", "minor", "rock", ("iv", "V", "i", "VI"), MS, V),
    Song("bebop_alley", 186, "F#", "major", "swing", ("ii", "V", "I", "vi"), FL, W, True),
    Song("fast_lane", 188, "F#", "minor", "punk", ("i", "iv", "v", "i"), TM, F),
    Song("sugar_rush", 190, "F", "major", "pop", ("IV", "I", "ii", "V"), MS, M, True),
    Song("front_porch", 198, "F", "minor", "strum", ("i", "VII", "VI", "V"), FL, V),
    Song("last_train", 200, "E", "major", "punk", ("I", "V", "vi", "IV"), TM, W),
    Song("candlelight", 58, "E", "minor", "ballad3", ("VI", "VII", "i", "iv"), MS, F, True),
    Song("old_music_box", 68, "Eb", "major", "piano3", ("I", "IV", "V", "I"), FL, M),
    Song("paris_cafe", 86, "Eb", "minor", "waltz", ("iv", "i", "VII", "V"), TM, V),
    Song("nylon_waltz", 104, "D", "major", "guitar3", ("V", "I", "vi", "IV"), MS, W),
    Song("cowboy_waltz", 132, "D", "minor", "rock3", ("i", "iv", "VII", "III"), FL, F),
    Song("sunday_brunch", 154, "C#", "major", "jazzwaltz", ("ii", "V", "I", "vi"), TM, M, True),
    Song("ballroom", 176, "C#", "minor", "viennese", ("i", "VI", "iv", "V"), MS, V),
    Song("spinning_top", 194, "C", "major", "piano3", ("I", "vi", "IV", "V"), FL, W),
    Song("harbour_lights", 55, "C", "minor", "ballad68", ("VI", "V", "i", "iv"), TM, F, True),
    Song("lullaby", 62, "B", "major", "piano68", ("I", "iii", "IV", "V"), MS, M),
    Song("campfire", 70, "B", "minor", "guitar68", ("iv", "V", "i", "VI"), FL, V, True),
    Song("highland", 76, "Bb", "major", "ballad68", ("I", "IV", "I", "V"), TM, W),
    Song("stillwater", 92, "Bb", "minor", "strings68", ("i", "iv", "i", "V"), MS, F),
    Song("kitchen_jig", 112, "A", "major", "jig", ("IV", "V", "I", "vi"), FL, M, True),
    Song("green_hills", 126, "A", "minor", "jig_unplugged", ("i", "VI", "III", "VII"), TM, V),
    Song("parade_ground", 136, "Ab", "major", "march68", ("I", "ii", "V", "I"), MS, W),
    Song("slow_burn", 57, "Ab", "minor", "blues128", ("i", "iv", "i", "V"), FL, F),
    Song("gospel_morning", 60, "G", "major", "piano128", ("I", "V", "vi", "IV"), TM, M),
    Song("corner_doowop", 66, "G", "minor", "doowop", ("VI", "VII", "i", "iv"), MS, V, True),
    Song("autumn_strings", 73, "F#", "major", "strings128", ("ii", "V", "I", "IV"), FL, W),
    Song("delta_picking", 84, "F#", "minor", "guitar128", ("i", "iv", "v", "i"), TM, F),
    Song("juke_joint", 96, "F", "major", "shuffle128", ("I", "IV", "I", "V"), MS, M),
    Song("village_bell", 108, "F", "minor", "afro", ("i", "VII", "VI", "V"), FL, V),
)  # fmt: skip


def split(songs: tuple[Song, ...]) -> dict[str, str]:
    """The fixed split (module docstring): by metre, drums, SHA-256 of the name; alternate."""
    order = sorted(
        songs,
        key=lambda s: (s.metre, s.drums, hashlib.sha256(s.name.encode()).hexdigest()),
    )
    return {song.name: ("dev", "test")[i % 2] for i, song in enumerate(order)}


HALF: dict[str, str] = split(SONGS)

EXTRA_SEED = "dev_extra-1"
EXTRA_COUNT = 192
EXTRA_CACHE = DEFAULT_CACHE.with_name("corpus60_dev_extra")
TONICS = ("C", "C#", "D", "Eb", "E", "F", "F#", "G", "Ab", "A", "Bb", "B")


def extra_songs(count: int = EXTRA_COUNT, seed: str = EXTRA_SEED) -> tuple[Song, ...]:
    """`count` more songs drawn by `seed` from what SONGS is made of: development data only.

    The metre is drawn in SONGS' proportions (41:8:8:7), the style evenly among that metre's
    styles, the tempo evenly (whole BPM) over the range SONGS gives the metre (4/4 61-200,
    3/4 58-194, 6/8 55-136, 12/8 57-108), the key evenly among the 24, the progression among
    SONGS' progressions in that mode, the soundfont and the format evenly; three in ten are
    excerpts (a progression that neither starts nor ends on the tonic, cut at a bar line),
    as 19 of SONGS' 64 are. Names are `extra_NNN`, so each melody is its own. None of these
    is in the test half: they make the development data larger, so that a rule set on it is
    set on some two hundred songs rather than 32.
    """
    rng = random.Random(seed)
    metres = sorted({s.metre for s in SONGS})
    weights = [sum(s.metre == m for s in SONGS) for m in metres]
    tempi = {
        m: (min(s.bpm for s in SONGS if s.metre == m), max(s.bpm for s in SONGS if s.metre == m))
        for m in metres
    }
    styles = {m: sorted(name for name, st in STYLES.items() if st.metre == m) for m in metres}
    progressions = {
        scale: sorted({s.progression for s in SONGS if s.scale == scale})
        for scale in ("major", "minor")
    }
    songs = []
    for i in range(count):
        metre = rng.choices(metres, weights)[0]
        scale = rng.choice(("major", "minor"))
        tonic_numeral = "I" if scale == "major" else "i"
        excerpt = rng.random() < 0.3
        pool = [p for p in progressions[scale] if not excerpt or tonic_numeral not in (p[0], p[-1])]
        songs.append(
            Song(
                name=f"extra_{i:03d}",
                bpm=rng.randint(*tempi[metre]),
                tonic=rng.choice(TONICS),
                scale=scale,
                style=rng.choice(styles[metre]),
                progression=rng.choice(pool),
                font=rng.choice((FL, TM, MS)),
                fmt=rng.choice((W, F, M, V)),
                excerpt=excerpt,
            )
        )
    return tuple(songs)


DEV_EXTRA: tuple[Song, ...] = extra_songs()
HALF.update({song.name: "dev_extra" for song in DEV_EXTRA})


def available_fonts() -> dict[str, Path]:
    """The soundfonts of FONTS that are installed, by name, in FONTS' order."""
    found = {}
    for name, (paths, _) in FONTS.items():
        path = next((p for p in paths if p.is_file()), None)
        if path is not None:
            found[name] = path
    return found


def font_for(song: Song, fonts: dict[str, Path]) -> str:
    """The song's own soundfont where installed, else the first installed one."""
    return song.font if song.font in fonts else next(iter(fonts))


def make_corpus(
    folder: Path | None = None,
    workers: int = 0,
    extra: bool = False,
    songs: tuple[Song, ...] | None = None,
) -> Path:
    """Render every song of SONGS that is missing or stale into `folder`; return the folder.

    With `extra`, the songs of DEV_EXTRA instead, into EXTRA_CACHE by default; with `songs`,
    those (another corpus's, which names its folder). truth.json keeps the entries of songs
    rendered there by an earlier call for other songs, after the ones asked for.

    `folder/truth.json` lists each song with its truth, its half and the soundfont it was
    rendered with (`font`, `font_path`); `folder/<name>.mid` is the MIDI it was rendered
    from. Songs are rendered `workers` at a time (0: one a core). Raises RuntimeError naming
    the Debian packages when fluidsynth or every soundfont is missing.
    """
    if songs is None:
        songs = DEV_EXTRA if extra else SONGS
    elif folder is None:
        raise ValueError("make_corpus(songs=...) needs the folder to render them into")
    folder = Path(folder or (EXTRA_CACHE if extra else DEFAULT_CACHE))
    fluidsynth = shutil.which("fluidsynth")
    fonts = available_fonts()
    if fluidsynth is None or not fonts:
        packages = " ".join(package for _, package in FONTS.values())
        raise RuntimeError(
            f"the test corpus needs fluidsynth and a soundfont (apt-get install fluidsynth "
            f"{packages})"
        )
    version = subprocess.run(
        [fluidsynth, "--version"], capture_output=True, text=True, check=True
    ).stdout.splitlines()[0]
    folder.mkdir(parents=True, exist_ok=True)
    # one call at a time a folder: test processes render into the same cache
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _render_missing(folder, songs, fonts, version, fluidsynth, workers)
    return folder


def _render_missing(
    folder: Path, songs: tuple[Song, ...], fonts: dict, version: str, fluidsynth: str, workers: int
) -> None:
    old = {
        entry["name"]: entry for entry in (_read_json(folder / "truth.json") or {}).get("songs", [])
    }
    entries, todo = [], []
    for song in songs:
        font = font_for(song, fonts)
        midi = song_midi(song)
        stamp = _stamp(midi, song, version, fonts[font])
        entry = truth(song) | {"font": font, "font_path": str(fonts[font]), "stamp": stamp}
        entries.append(entry)
        if old.get(song.name, {}).get("stamp") != stamp or not (folder / song.filename).is_file():
            todo.append((song, midi, fonts[font]))
    if todo:
        with ThreadPoolExecutor(max_workers=pool_size(workers)) as pool:
            list(pool.map(lambda job: _render(*job, folder, fluidsynth), todo))
    asked = {song.name for song in songs}
    entries += [
        entry for name, entry in old.items()
        if name not in asked and (folder / entry["filename"]).is_file()
    ]  # fmt: skip
    document = {"version": CORPUS_VERSION, "songs": entries}
    if _read_json(folder / "truth.json") != document:  # whole or not at all, for its readers
        partial = folder / ".truth.json.part"
        partial.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
        partial.replace(folder / "truth.json")


def truth(song: Song) -> dict:
    """What truth.json says of a song (without how it was rendered)."""
    return asdict(song) | {
        "filename": song.filename,
        "metre": song.metre,
        "timesignature": song.timesignature,
        "eighth_bpm": song.eighth_bpm,
        "keyscale": song.keyscale,
        "drums": song.drums,
        "half": song.half,
    }


def _stamp(midi: bytes, song: Song, version: str, font: Path) -> str:
    """What a song's audio depends on: its MIDI, format, renderer, soundfont, the cut."""
    stat = font.resolve().stat()
    parts = [CORPUS_VERSION, hashlib.sha256(midi).hexdigest(), song.fmt, song.excerpt, version,
             str(font.resolve()), stat.st_size, SAMPLE_RATE]  # fmt: skip
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _render(song: Song, midi: bytes, font: Path, folder: Path, fluidsynth: str) -> None:
    (folder / f"{song.name}.mid").write_bytes(midi)
    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "song.wav"
        subprocess.run(
            [fluidsynth, "-ni", "-q", "-o", "synth.dynamic-sample-loading=1", "-g", "0.5",
             "-r", str(SAMPLE_RATE), "-F", str(wav), str(font), str(folder / f"{song.name}.mid")],
            check=True, capture_output=True,
        )  # fmt: skip
        audio, rate = sf.read(wav, dtype="float64", always_2d=True)
    if song.excerpt:
        end = round(bars(song) * bar_seconds(song) * rate)
        audio = audio[:end].copy()
        fade = round(FADE_SECONDS * rate)
        audio[-fade:] *= np.linspace(1.0, 0.0, fade)[:, None]
    else:
        loud = np.nonzero(np.abs(audio).max(axis=1) > 1e-3)[0]  # fluidsynth's silent tail
        audio = audio[: int(loud[-1]) + 1 if len(loud) else len(audio)]
    audio = (audio * PEAK / max(np.abs(audio).max(), 1e-9)).astype(np.float32)
    target = folder / song.filename
    partial = target.with_name(f".{target.name}.part")
    subtype = {"mp3": "MPEG_LAYER_III", "ogg": "VORBIS"}.get(song.fmt, "PCM_16")
    with sf.SoundFile(partial, "w", rate, 2, subtype, format=song.fmt.upper()) as out:
        for start in range(0, len(audio), WRITE_FRAMES):
            out.write(audio[start : start + WRITE_FRAMES])
    partial.replace(target)


def bar_seconds(song: Song) -> float:
    metre = METRES[song.metre]
    return 60.0 / song.bpm * metre.steps / metre.beat


def bars(song: Song) -> int:
    """Bars before the final tonic bar (an excerpt has none): whole cycles, about 20 s."""
    cycle = len(song.progression)
    return max(1, round(TARGET_SECONDS / bar_seconds(song) / cycle)) * cycle


def song_midi(song: Song) -> bytes:
    """The song as a format-0 Standard MIDI File, with its tempo and time signature."""
    style, metre = style_of(song.style), METRES[song.metre]
    rng = random.Random(f"{song.name}-{CORPUS_VERSION}")
    scale = [PITCH[song.tonic] + step for step in SCALES[song.scale]]
    cycle = len(song.progression)
    numerals = [song.progression[b % cycle] for b in range(bars(song))]
    if not song.excerpt:
        numerals.append("I" if song.scale == "major" else "i")  # a last bar on the tonic
    quarter_bpm = song.bpm * metre.beat / 4  # a dotted quarter is 1.5 quarters
    clocks = 24 * metre.beat // 4  # MIDI clocks a metronome click (24 a quarter)
    events = [(0, bytes([0xC0 | channel, program])) for channel, program in
              enumerate(style.programs)]  # fmt: skip
    events += [(0, b"\xff\x51\x03" + round(60e6 / quarter_bpm).to_bytes(3, "big"))]
    events += [(0, bytes([0xFF, 0x58, 4, metre.numerator, int(math.log2(metre.denominator)),
                          clocks, 8]))]  # fmt: skip
    writer = _Writer(song, style, metre, rng)
    for bar, numeral in enumerate(numerals):
        last = not song.excerpt and bar == len(numerals) - 1
        following = numerals[bar + 1] if bar + 1 < len(numerals) else numeral
        writer.bar(bar, numeral, following, scale, last)
    return _smf(events + writer.events)


def chord(numeral: str, scale: list[int]) -> list[int]:
    """Root, third and fifth (pitch classes as MIDI notes) of a roman numeral in the scale."""
    degree = NUMERALS.index(numeral.lower())
    root = scale[degree]
    return [root, root + (4 if numeral.isupper() else 3), root + 7]


class _Writer:
    """Note events of one song, bar by bar, with a little human timing and dynamics."""

    def __init__(self, song: Song, style: Style, metre: Metre, rng: random.Random):
        self.song, self.style, self.metre, self.rng = song, style, metre, rng
        self.events: list[tuple[int, bytes]] = []
        self.pitch = 72 + (PITCH[song.tonic] - 72) % 12  # the melody starts near C5

    def tick(self, step: float) -> int:
        """The tick of a sixteenth step; with swing the second eighth of a beat comes 2:1."""
        if not self.style.swing:
            return round(step * STEP)
        beat, inside = divmod(step, 4)
        swung = inside * 4 / 3 if inside <= 2 else 8 / 3 + (inside - 2) * 2 / 3
        return round((beat * 4 + swung) * STEP)

    def note(self, channel: int, pitch: int, start: float, length: float, velocity: int):
        loose = channel != 9  # the drums stay on the grid, players drift a few ms
        jitter = self.rng.randint(-6, 6) if loose else 0
        on = max(0, self.tick(start) + jitter)
        off = max(on + 20, self.tick(start + length) - 10 + jitter)
        velocity = max(1, min(127, velocity + self.rng.randint(-6, 6)))
        self.events += [(on, bytes([0x90 | channel, pitch, velocity])),
                        (off, bytes([0x80 | channel, pitch, 0]))]  # fmt: skip

    def bar(self, bar: int, numeral: str, following: str, scale: list[int], last: bool):
        start = bar * self.metre.steps
        tones = chord(numeral, scale)
        self.drums(bar, start, last)
        self.bass(tones, chord(following, scale), scale, start, last)
        self.comp(tones, start, last)
        self.melody(tones, numeral, scale, start, last)

    def drums(self, bar: int, start: int, last: bool):
        style = self.style
        if not style.drums:
            return
        if style.crash and (last or bar % 4 == 0):
            self.note(9, CRASH, start, 4, 100)
        if last:
            self.note(9, KICK if KICK in style.drums else next(iter(style.drums)), start, 1, 112)
            return
        for drum, (steps, velocity) in style.drums.items():
            for step in steps:
                accent = 8 if step % self.metre.beat == 0 else 0
                self.note(9, drum, start + step, 1, velocity + accent)

    def bass(
        self, tones: list[int], following: list[int], scale: list[int], start: int, last: bool
    ):
        low = self.style.bass_low
        root = low + (tones[0] - low) % 12
        if last:
            self.note(0, root, start, self.metre.steps, 100)
            return
        steps, length = self.style.bass
        if not self.style.walk:
            for step in steps:
                self.note(0, root, start + step, length, 96)
            return
        # root, then chord tones, then the scale's step next to the next bar's root
        target = low + (following[0] - low) % 12
        line = [root, root + (tones[1] - tones[0]), root + 7][: len(steps) - 1]
        notes = [p for p in range(low - 12, low + 24) if p % 12 in {s % 12 for s in scale}]
        index = notes.index(target)
        line.append(notes[index + 1] if target < line[-1] else notes[index - 1])
        for step, pitch in zip(steps, line, strict=True):
            self.note(0, pitch, start + step, length, 92)

    def comp(self, tones: list[int], start: int, last: bool):
        voicing = sorted(55 + (p - 55) % 12 for p in tones)  # close position from G3 up
        kind, steps, length = self.style.comp
        if last:
            for pitch in voicing:
                self.note(1, pitch, start, self.metre.steps, 72)
            return
        if kind == "hold":
            for pitch in voicing:
                self.note(1, pitch, start, self.metre.steps, 68)
            return
        ends = [*steps[1:], self.metre.steps]
        if kind == "block":
            for step, end in zip(steps, ends, strict=True):
                for pitch in voicing:
                    self.note(1, pitch, start + step, length or end - step, 70)
            return
        # arpeggio: root, fifth, third an octave up, fifth; each note rings `length`
        pattern = [voicing[0], voicing[2], voicing[1] + 12, voicing[2]]
        for i, step in enumerate(steps):
            velocity = 74 if step % self.metre.beat == 0 else 62
            self.note(1, pattern[i % len(pattern)], start + step, length, velocity)

    def melody(self, tones: list[int], numeral: str, scale: list[int], start: int, last: bool):
        """Chord tones on the beats, steps of the scale between, around C5."""
        if last:
            self.note(2, 72 + (scale[0] - 72) % 12, start, self.metre.steps, 88)
            return
        passing = list(scale)
        if self.song.scale == "minor" and numeral == "V":
            passing[6] += 1  # over the dominant the leading tone, as the chord has it
        chord_notes = [p for p in range(65, 86) if p % 12 in {t % 12 for t in tones}]
        scale_notes = [p for p in range(65, 86) if p % 12 in {s % 12 for s in passing}]
        beat = self.metre.beat
        for beat_start in range(0, self.metre.steps, beat):
            for offset, length in self._rhythm(beat, beat_start):
                if offset == 0:
                    pitch = min(chord_notes, key=lambda p: (abs(p - self.pitch), self.rng.random()))
                    if self.rng.random() < 0.4:
                        pitch = self.rng.choice(chord_notes)
                else:
                    near = [p for p in scale_notes if 0 < abs(p - self.pitch) <= 4]
                    pitch = self.rng.choice(near or scale_notes)
                self.pitch = pitch
                velocity = 86 if offset == 0 else 74
                self.note(2, pitch, start + beat_start + offset, length, velocity)

    def _rhythm(self, beat: int, beat_start: int) -> list[tuple[int, int]]:
        """(offset in the beat, length) of the melody's notes in one beat; [] for a rest."""
        kind, rng = self.style.melody, self.rng
        if kind == "sparse":  # a long note every other beat
            if (beat_start // beat) % 2:
                return []
            return [(0, 2 * beat)]
        if kind == "eighths":
            return [(o, 2) for o in range(0, beat, 2)]
        if beat == 4:
            options = [((0, 4),), ((0, 2), (2, 2)), ((0, 3), (3, 1)), ((0, 2), (2, 1), (3, 1))]
        else:
            options = [((0, 6),), ((0, 4), (4, 2)), ((0, 2), (2, 2), (4, 2))]
        return list(rng.choice(options))
