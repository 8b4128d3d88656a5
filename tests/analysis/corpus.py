"""A test corpus of songs rendered from MIDI through a General MIDI soundfont, with the truth.

Twenty-two short songs: drums, bass, chords and a melody on sampled instruments (Debian's
`fluidsynth` with the FluidR3 GM soundfont from `fluid-soundfont-gm`), tempi from 68 to
174 BPM, eleven major and eleven minor keys around the circle of fifths, saved as WAV, FLAC
and MP3. Each song is written the way its style is usually notated: the quarter note is
the beat, a hip-hop groove at 84 BPM has eighth-note hats, drum and bass at 174 BPM has its
snare on beats 2 and 4. The truth a musician would give (tempo, key) is what the MIDI file
says.

The corpus is split into two halves of eleven (`Song.half`): "tuning", the songs the
analysis was looked at and adjusted on, and "held-out", which was scored only once the
analysis was settled. Six songs play sixteenth-note hi-hats (three a half), the case where
counting every onset would put a moderate tempo at double speed.

Nothing here is committed as audio: `make_corpus(folder)` renders what is missing into a
cache folder (git-ignored `data/cache/corpus` by default) and reuses it while the songs,
the renderer and the soundfont are unchanged. Rendering every song takes a few seconds.

The MIDI files are written by a small Standard MIDI File writer below, since nothing in the
project needs a MIDI package otherwise and format 0 is a few dozen lines.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import struct
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import soundfile as sf

from tunesmith.analysis.chroma import PITCH_CLASSES

CORPUS_VERSION = 1  # bump when a song or the rendering changes
SOUNDFONT = Path("/usr/share/sounds/sf2/FluidR3_GM.sf2")
DEFAULT_CACHE = Path(__file__).resolve().parents[2] / "data" / "cache" / "corpus"
SAMPLE_RATE = 44100
PPQ = 480  # ticks per quarter note
PEAK = 10 ** (-1.0 / 20)  # every song is peak-normalised to -1 dBFS

PITCH = {"C": 0, "C#": 1, "Db": 1, "D": 2, "Eb": 3, "E": 4, "F": 5, "F#": 6, "Gb": 6,
         "G": 7, "Ab": 8, "A": 9, "Bb": 10, "B": 11}  # fmt: skip
SCALES = {"major": (0, 2, 4, 5, 7, 9, 11), "minor": (0, 2, 3, 5, 7, 8, 10)}
NUMERALS = ("i", "ii", "iii", "iv", "v", "vi", "vii")

# General MIDI percussion notes (channel 10)
KICK, STICK, SNARE, CLAP, HAT, OPEN_HAT, CRASH, RIDE = 36, 37, 38, 39, 42, 46, 49, 51

# Grooves: per drum, the 16th-note steps of one 4/4 bar it plays on, and a velocity.
GROOVES: dict[str, dict[int, tuple[tuple[int, ...], int]]] = {
    "ballad": {KICK: ((0, 10), 100), SNARE: ((4, 12), 92), HAT: (tuple(range(0, 16, 2)), 60)},
    "hiphop": {KICK: ((0, 7, 10), 110), SNARE: ((4, 12), 105), HAT: (tuple(range(0, 16, 2)), 70)},
    "pop": {KICK: ((0, 8, 10), 100), SNARE: ((4, 12), 100), HAT: (tuple(range(0, 16, 2)), 68)},
    "house": {
        KICK: ((0, 4, 8, 12), 112),
        CLAP: ((4, 12), 95),
        HAT: (tuple(range(1, 16, 2)), 50),
        OPEN_HAT: ((2, 6, 10, 14), 75),
    },
    "rock": {KICK: ((0, 8, 10), 112), SNARE: ((4, 12), 112), RIDE: (tuple(range(0, 16, 2)), 75)},
    "punk": {KICK: ((0, 8), 115), SNARE: ((4, 12), 115), HAT: (tuple(range(0, 16, 2)), 80)},
    "dnb": {KICK: ((0, 10), 115), SNARE: ((4, 12), 112), HAT: (tuple(range(0, 16, 2)), 65)},
    "sixteenths": {KICK: ((0, 7, 10), 110), SNARE: ((4, 12), 105), HAT: (tuple(range(16)), 70)},
}
# Bass: the 16th-note steps a bar's root is played on, and each note's length in steps.
BASS_RHYTHM = {
    "ballad": ((0, 8), 8), "hiphop": ((0, 7, 10), 3), "pop": (tuple(range(0, 16, 2)), 2),
    "house": ((2, 6, 10, 14), 2), "rock": (tuple(range(0, 16, 2)), 2),
    "punk": (tuple(range(0, 16, 2)), 2), "dnb": ((0, 10), 6),
    "sixteenths": (tuple(range(0, 16, 2)), 2),
}  # fmt: skip
# Chords: "hold" sustains the bar; "comp" strikes the chord on these steps.
CHORD_RHYTHM = {"ballad": (0, 8), "hiphop": (0, 6, 10), "pop": (0, 4, 8, 12), "house": (0,),
                "rock": (0, 4, 8, 12), "punk": (0, 4, 8, 12), "dnb": (0,),
                "sixteenths": (0, 4, 8, 12)}  # fmt: skip


@dataclass(frozen=True)
class Song:
    """One song of the corpus and its truth."""

    name: str
    bpm: int
    tonic: str  # spelled as tunesmith reports keys: C C# D Eb E F F# G Ab A Bb B
    scale: Literal["major", "minor"]
    groove: str
    progression: tuple[str, ...]  # roman numerals, upper case major, lower case minor
    programs: tuple[int, int, int]  # GM programs (0-based) of bass, chords, melody
    fmt: Literal["wav", "flac", "mp3"]
    half: Literal["tuning", "held-out", "extra"]

    @property
    def filename(self) -> str:
        return f"{self.name}.{self.fmt}"

    @property
    def keyscale(self) -> str:
        return f"{self.tonic} {self.scale}"


# Bass 32-39, keys 0-7, organ 16-23, guitars 24-31, strings 48-55, brass 56-63, reeds 64-71,
# pipes 72-79, synth leads 80-87, pads 88-95 (the General MIDI program families).
SONGS: tuple[Song, ...] = (
    Song("rain_ballad", 68, "Eb", "major", "ballad", ("I", "vi", "IV", "V"), (35, 0, 48), "wav",
         "tuning"),
    Song("moss", 76, "G", "major", "ballad", ("I", "IV", "I", "V"), (32, 24, 73), "mp3",
         "tuning"),
    Song("late_bus", 84, "B", "minor", "hiphop", ("i", "VI", "III", "VII"), (38, 4, 73), "mp3",
         "tuning"),
    Song("paper_kites", 100, "A", "major", "pop", ("I", "V", "vi", "IV"), (33, 25, 65), "flac",
         "tuning"),
    Song("glass_floor", 124, "F", "minor", "house", ("i", "VII", "VI", "VII"), (38, 89, 81),
         "wav", "tuning"),
    Song("high_road", 136, "D", "major", "rock", ("I", "IV", "V", "I"), (34, 29, 56), "mp3",
         "tuning"),
    Song("ember", 152, "C#", "minor", "punk", ("i", "iv", "v", "i"), (34, 30, 80), "flac",
         "tuning"),
    Song("cold_circuit", 174, "G", "minor", "dnb", ("i", "VI", "iv", "V"), (38, 90, 81), "wav",
         "tuning"),
    Song("porch", 84, "F#", "major", "sixteenths", ("I", "IV", "V", "I"), (33, 4, 81), "mp3",
         "tuning"),
    Song("tin_roof", 96, "C", "major", "sixteenths", ("I", "V", "vi", "IV"), (33, 0, 65), "wav",
         "tuning"),
    Song("swerve", 110, "D", "minor", "sixteenths", ("i", "VI", "III", "VII"), (33, 4, 81),
         "flac", "tuning"),
    Song("slow_tide", 72, "C", "minor", "ballad", ("i", "iv", "VII", "III"), (35, 48, 68),
         "flac", "held-out"),
    Song("corner_light", 90, "F", "major", "hiphop", ("I", "iii", "IV", "V"), (33, 4, 11), "wav",
         "held-out"),
    Song("night_swim", 96, "F#", "minor", "hiphop", ("i", "iv", "i", "V"), (38, 5, 66), "flac",
         "held-out"),
    Song("long_shadow", 108, "E", "minor", "pop", ("i", "VI", "III", "VII"), (34, 27, 0), "mp3",
         "held-out"),
    Song("sky_rail", 118, "Ab", "major", "pop", ("I", "vi", "ii", "V"), (33, 0, 71), "wav",
         "held-out"),
    Song("neon_market", 128, "Bb", "major", "house", ("I", "V", "vi", "IV"), (38, 89, 80),
         "flac", "held-out"),
    Song("dust_devil", 144, "A", "minor", "rock", ("i", "VII", "VI", "V"), (34, 29, 81), "wav",
         "held-out"),
    Song("spark_plug", 160, "E", "major", "punk", ("I", "IV", "V", "IV"), (34, 30, 80), "mp3",
         "held-out"),
    Song("low_sun", 78, "Bb", "minor", "sixteenths", ("i", "iv", "VII", "III"), (32, 5, 71),
         "mp3", "held-out"),
    Song("gravel", 100, "B", "major", "sixteenths", ("I", "IV", "vi", "V"), (33, 27, 56),
         "flac", "held-out"),
    Song("static_bloom", 140, "Ab", "minor", "house", ("i", "VI", "VII", "i"), (38, 91, 82),
         "wav", "held-out"),
)  # fmt: skip


# Each groove's tempi, as the table above writes them (a hip-hop groove at 80-100 with eighth
# hats, drum and bass at 160-180 with its snare on 2 and 4, sixteenth hats at 72-112).
TEMPI = {"ballad": (62, 80), "hiphop": (80, 100), "pop": (96, 124), "house": (118, 132),
         "rock": (120, 150), "punk": (145, 185), "dnb": (160, 180),
         "sixteenths": (72, 112)}  # fmt: skip
EXTRA_COUNT = 6  # songs a groove
EXTRA_CACHE = DEFAULT_CACHE.with_name("corpus_extra")


def extra_songs(count: int = EXTRA_COUNT, seed: str = "corpus22-extra-1") -> tuple[Song, ...]:
    """More songs of the same generator, `count` a groove, development data only (half
    "extra"): a tempo in the groove's range, any key, a progression and instruments of the
    tuning half's songs (that progression's mode), drawn from `seed`."""
    rng = random.Random(seed)
    tuning = [s for s in SONGS if s.half == "tuning"]
    songs = []
    for groove, (low, high) in TEMPI.items():
        for i in range(count):
            scale = rng.choice(("major", "minor"))
            progression = rng.choice(sorted({s.progression for s in tuning if s.scale == scale}))
            programs = tuple(rng.choice(sorted({s.programs[k] for s in tuning})) for k in range(3))
            songs.append(
                Song(
                    name=f"extra_{groove}_{i}",
                    bpm=rng.randint(low, high),
                    tonic=rng.choice(PITCH_CLASSES),  # spelled as tunesmith reports keys
                    scale=scale,
                    groove=groove,
                    progression=progression,
                    programs=programs,  # type: ignore[arg-type]
                    fmt=rng.choice(("wav", "flac", "mp3")),
                    half="extra",
                )
            )
    return tuple(songs)


EXTRA_SONGS = extra_songs()


def make_corpus(folder: Path | None = None, songs: tuple[Song, ...] = SONGS) -> Path:
    """Render every song of `songs` that is missing into `folder`; return the folder.

    `folder/truth.json` lists each song with its truth. Raises RuntimeError naming the
    Debian packages when fluidsynth or the soundfont is missing.
    """
    folder = Path(folder or (DEFAULT_CACHE if songs == SONGS else EXTRA_CACHE))
    fluidsynth = shutil.which("fluidsynth")
    if fluidsynth is None or not SOUNDFONT.is_file():
        raise RuntimeError(
            f"the test corpus needs fluidsynth and {SOUNDFONT} "
            "(apt-get install fluidsynth fluid-soundfont-gm)"
        )
    stamp = _stamp(fluidsynth)
    truth_path = folder / "truth.json"
    truth = {"stamp": stamp, "songs": [asdict(s) | {"filename": s.filename} for s in songs]}
    truth = json.loads(json.dumps(truth))  # as read back: tuples are lists
    if _read_json(truth_path) == truth and all((folder / s.filename).is_file() for s in songs):
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    for song in songs:
        _render(song, folder / song.filename, fluidsynth)
    truth_path.write_text(json.dumps(truth, indent=1) + "\n", encoding="utf-8")
    return folder


def _stamp(fluidsynth: str) -> str:
    """What the rendered bytes depend on besides the songs: renderer and soundfont."""
    version = subprocess.run(
        [fluidsynth, "--version"], capture_output=True, text=True, check=True
    ).stdout.splitlines()[0]
    font = SOUNDFONT.resolve().stat()
    parts = [CORPUS_VERSION, version, str(SOUNDFONT.resolve()), font.st_size, SAMPLE_RATE]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _render(song: Song, target: Path, fluidsynth: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        midi, wav = Path(tmp) / "song.mid", Path(tmp) / "song.wav"
        midi.write_bytes(song_midi(song))
        subprocess.run(
            [fluidsynth, "-ni", "-q", "-g", "0.5", "-r", str(SAMPLE_RATE), "-F", str(wav),
             str(SOUNDFONT), str(midi)],
            check=True, capture_output=True,
        )  # fmt: skip
        audio, rate = sf.read(wav, dtype="float64", always_2d=True)
    audio = audio[: _last_sound(audio)]
    audio = (audio * PEAK / max(np.abs(audio).max(), 1e-9)).astype(np.float32)
    partial = target.with_name(f".{target.name}.part")
    if song.fmt == "mp3":
        sf.write(partial, audio, rate, format="MP3", subtype="MPEG_LAYER_III")
    else:
        sf.write(partial, audio, rate, format=song.fmt.upper(), subtype="PCM_16")
    partial.replace(target)


def _last_sound(audio: np.ndarray) -> int:
    """One sample past the last one above -60 dBFS (fluidsynth renders a silent tail)."""
    loud = np.nonzero(np.abs(audio).max(axis=1) > 1e-3)[0]
    return int(loud[-1]) + 1 if len(loud) else len(audio)


def song_midi(song: Song) -> bytes:
    """The song as a format-0 Standard MIDI File."""
    rng = random.Random(f"{song.name}-{CORPUS_VERSION}")
    scale = [PITCH[song.tonic] + step for step in SCALES[song.scale]]
    cycle = len(song.progression)
    bars = max(2, round(24 * song.bpm / 240 / cycle)) * cycle  # about 24 s, whole cycles
    chords = [_chord(song.progression[b % cycle], scale) for b in range(bars)]
    chords.append(_chord(song.progression[0], scale))  # a last bar on the tonic
    events = _programs(song.programs)
    events += [(0, b"\xff\x51\x03" + round(60e6 / song.bpm).to_bytes(3, "big"))]
    events += [(0, b"\xff\x58\x04\x04\x02\x18\x08")]  # 4/4
    for bar, chord in enumerate(chords):
        start, last = bar * 4 * PPQ, bar == len(chords) - 1
        events += _drums(song.groove, start, last, bar)
        events += _bass(song.groove, chord, start, last)
        events += _comp(song.groove, chord, start, last)
        events += _melody(chord, scale, start, last, rng)
    return _smf(events)


def _chord(numeral: str, scale: list[int]) -> list[int]:
    """Root, third and fifth (MIDI notes) of a roman numeral in the song's scale."""
    degree = NUMERALS.index(numeral.lower())
    root = scale[degree]
    third = 4 if numeral.isupper() else 3
    return [root, root + third, root + 7]


def _programs(programs: tuple[int, int, int]) -> list[tuple[int, bytes]]:
    return [(0, bytes([0xC0 | channel, program])) for channel, program in enumerate(programs)]


def _note(channel: int, pitch: int, start: int, length: int, velocity: int):
    return [
        (start, bytes([0x90 | channel, pitch, velocity])),
        (start + length, bytes([0x80 | channel, pitch, 0])),
    ]


STEP = PPQ // 4  # one 16th note


def _drums(groove: str, start: int, last: bool, bar: int) -> list:
    events = []
    if last or bar % 4 == 0:
        events += _note(9, CRASH, start, STEP * 4, 100)
    if last:
        return events + _note(9, KICK, start, STEP, 115)
    for drum, (steps, velocity) in GROOVES[groove].items():
        for step in steps:
            accent = 8 if step % 4 == 0 else 0
            events += _note(9, drum, start + step * STEP, STEP, min(127, velocity + accent))
    return events


def _bass(groove: str, chord: list[int], start: int, last: bool) -> list:
    root = 36 + (chord[0] - 36) % 12  # C2..B2
    if last:
        return _note(0, root, start, 16 * STEP, 100)
    steps, length = BASS_RHYTHM[groove]
    return [e for s in steps for e in _note(0, root, start + s * STEP, length * STEP - 10, 96)]


def _comp(groove: str, chord: list[int], start: int, last: bool) -> list:
    voicing = [55 + (p - 55) % 12 for p in chord]  # close position from G3 upwards
    steps = (0,) if last else CHORD_RHYTHM[groove]
    events = []
    for i, step in enumerate(steps):
        end = steps[i + 1] if i + 1 < len(steps) else 16
        for pitch in voicing:
            events += _note(1, pitch, start + step * STEP, (end - step) * STEP - 10, 72)
    return events


def _melody(chord: list[int], scale: list[int], start: int, last: bool, rng: random.Random):
    """A bar of melody around C5: chord tones on the beats, scale steps between them."""
    tones = sorted({72 + (p - 72) % 12 for p in chord})
    if last:
        return _note(2, 72 + (scale[0] - 72) % 12, start, 16 * STEP, 90)
    lengths = rng.choice([(4, 4, 4, 4), (4, 2, 2, 4, 4), (6, 2, 4, 4), (8, 4, 4), (2, 2, 4, 8)])
    notes = [72 + (p - 72) % 12 for p in scale]
    events, step = [], 0
    for length in lengths:
        on_beat = step % 4 == 0
        pitch = rng.choice(tones) if on_beat else rng.choice(notes)
        events += _note(2, pitch, start + step * STEP, length * STEP - 10, 84 if on_beat else 74)
        step += length
    return events


def _smf(events: list[tuple[int, bytes]]) -> bytes:
    """Format 0, one track: note-offs before note-ons at the same tick, then by order."""
    ordered = sorted(enumerate(events), key=lambda e: (e[1][0], e[1][1][0] & 0xF0 != 0x80, e[0]))
    track, now = bytearray(), 0
    for _, (tick, message) in ordered:
        track += _vlq(tick - now) + message
        now = tick
    track += b"\x00\xff\x2f\x00"  # end of track
    header = b"MThd" + struct.pack(">IHHH", 6, 0, 1, PPQ)
    return header + b"MTrk" + struct.pack(">I", len(track)) + bytes(track)


def _vlq(value: int) -> bytes:
    """A MIDI variable-length quantity: 7 bits a byte, high bit set on all but the last."""
    out = [value & 0x7F]
    while value := value >> 7:
        out.append(0x80 | (value & 0x7F))
    return bytes(reversed(out))


def plain_essentia(path: str) -> tuple[float, str, str]:
    """What Essentia says with default settings: RhythmExtractor2013's bpm, KeyExtractor's
    key and scale, on MonoLoader's 44.1 kHz mono mix (run in a worker, hence a path)."""
    import essentia

    essentia.log.infoActive = False
    import essentia.standard as es

    mono = es.MonoLoader(filename=path, sampleRate=SAMPLE_RATE)()
    bpm = es.RhythmExtractor2013()(mono)[0]
    key, scale, _ = es.KeyExtractor()(mono)
    return float(bpm), key, scale


def tempo_right(found: float, song: Song) -> bool:
    """MIREX's tempo accuracy: within 4% of the truth (half or double is wrong)."""
    return abs(found - song.bpm) <= 0.04 * song.bpm
