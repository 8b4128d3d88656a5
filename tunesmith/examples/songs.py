"""The example dataset `songs`: short synthesised songs for ACE-Step, sung and instrumental.

Each clip is a `loops` backing (drums, chords and bass at a known tempo and key, from
`tunesmith.examples.loops.render_loop`); a sung clip adds a voice line that sings its lyrics,
one note a word on the beat grid, each note a vowel made by additive synthesis with the two
formants of the word's first vowel. Every clip is made from code with no randomness beyond the
backing's fixed seed, so a rerun writes the same bytes.

Files, as ACE-Step users lay a dataset out (ACE-Step 1.5's dataset builder, Side-Step):

    <stem>.wav          stereo 44.1 kHz 16-bit (ACE-Step resamples to 48 kHz)
    <stem>.txt          the caption
    <stem>.lyrics.txt   the sung text with [Verse] / [Chorus] tags, UTF-8; only sung clips
                        have one (no lyrics means `[Instrumental]`)

Not handled: Side-Step's `dataset.json` is not written (`tunesmith.examples` writes the
`tunesmith.toml`); consonants,
pitch glides and anything a listener would call singing.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import soundfile as sf

from tunesmith.examples.loops import PEAK, SAMPLE_RATE, LoopSpec, render_loop
from tunesmith.store.atomic import write_if_changed

LANGUAGE = "en"  # the language every sung clip is in (a dataset declares it, never detects it)
VOICE_LEVEL = 0.5  # the voice's peak against the backing's -1 dBFS
_NOTES = ("C", "C#", "D", "Eb", "E", "F", "F#", "G", "Ab", "A", "Bb", "B")
_SCALES = {"major": (0, 2, 4, 5, 7, 9, 11), "minor": (0, 2, 3, 5, 7, 8, 10)}
# The melody walks these scale degrees (0 = tonic), one a word, starting again each line.
_MELODY = (0, 2, 4, 2, 1, 0, 4, 5)
# (F1, F2) in Hz of the sung vowels, adult voice (Peterson & Barney's averages, rounded).
_FORMANTS = {
    "a": (730, 1090),
    "e": (530, 1840),
    "i": (270, 2290),
    "o": (570, 840),
    "u": (300, 870),
}
_FORMANT_WIDTH = 150.0  # Hz: wide enough that a high note's sparse harmonics still find them
_SOURCE_TILT = 0.3  # the voice source's harmonic k at SOURCE_TILT / k, under the formants


@dataclass(frozen=True)
class SongSpec:
    """One clip of the dataset."""

    stem: str
    bpm: float
    key: str  # tonic, spelled as in _NOTES
    scale: Literal["major", "minor"]
    seconds: float
    genre: str
    caption: str
    lyrics: str | None = None  # None: an instrumental
    four_on_the_floor: bool = False

    @property
    def backing(self) -> LoopSpec:
        return LoopSpec(
            self.stem,
            self.bpm,
            self.key,
            self.scale,
            self.seconds,
            self.genre,
            "",
            "txt",
            self.four_on_the_floor,
        )


SONGS: tuple[SongSpec, ...] = (
    SongSpec(
        "night_bus",
        112.0,
        "Bb",
        "major",
        10.0,
        "synth pop",
        "bright synth pop song with a female voice, punchy drums and warm pads",
        "[Verse]\nlast bus home through the city light\nwindows hum and the road runs on\n"
        "[Chorus]\nride on ride on\n",
    ),
    SongSpec(
        "dusty_keys",
        92.0,
        "A",
        "minor",
        10.0,
        "lo-fi hip hop",
        "warm lo-fi hip hop instrumental with dusty keys and a lazy beat",
    ),
    SongSpec(
        "paper_moon",
        128.0,
        "G",
        "major",
        9.0,
        "indie pop",
        "sunny indie pop song with a light voice over bouncy chords",
        "[Verse]\npaper moon above the old hotel\nwe keep the time we do not tell\n"
        "[Chorus]\nhold on hold on\n",
    ),
    SongSpec(
        "warehouse",
        124.0,
        "C#",
        "minor",
        9.0,
        "house",
        "deep house instrumental, four on the floor kick and off-beat hats",
        None,
        True,
    ),
)


def make_songs(folder: Path) -> list[Path]:
    """Write every clip of SONGS with its caption and lyrics into `folder`; return the audio
    paths in order. Idempotent (a second run writes the same bytes); each file is written
    under a temporary name and renamed, so an interrupted run leaves no half-written file."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for spec in SONGS:
        path = folder / f"{spec.stem}.wav"
        buffer = io.BytesIO()
        sf.write(buffer, render_song(spec), SAMPLE_RATE, subtype="PCM_16", format="WAV")
        write_if_changed(path, buffer.getvalue())
        write_if_changed(folder / f"{spec.stem}.txt", f"{spec.caption}\n".encode())
        lyrics = folder / f"{spec.stem}.lyrics.txt"
        if spec.lyrics is not None:
            write_if_changed(lyrics, spec.lyrics.encode())
        else:
            lyrics.unlink(missing_ok=True)  # an instrumental has none, even after an edit
        paths.append(path)
    return paths


def render_song(spec: SongSpec) -> np.ndarray:
    """The clip as float32 samples [n, 2] at SAMPLE_RATE, peak at -1 dBFS."""
    mix = render_loop(spec.backing).astype(np.float64)
    if spec.lyrics is not None:
        voice = render_voice(spec)
        mix += (VOICE_LEVEL * PEAK / np.abs(voice).max()) * voice[:, None]
    return (mix * (PEAK / np.abs(mix).max())).astype(np.float32)


def render_voice(spec: SongSpec) -> np.ndarray:
    """The sung line alone, mono float64 [n]: one note a word, a beat long, from the second
    bar, a beat's rest between lines; silence where nothing is sung."""
    out = np.zeros(round(spec.seconds * SAMPLE_RATE))
    beat = 60.0 / spec.bpm
    start = 4 * beat  # the backing's first bar plays alone
    tonic = _NOTES.index(spec.key)
    for line in sung_lines(spec.lyrics or ""):
        for i, word in enumerate(line.split()):
            degree = _MELODY[i % len(_MELODY)]
            midi = 60 + tonic + _SCALES[spec.scale][degree]  # octave 4: a voice's range
            i0 = round(start * SAMPLE_RATE)
            if i0 >= len(out):
                return out
            note = _vowel(midi, 0.9 * beat, _vowel_of(word))[: len(out) - i0]
            out[i0 : i0 + len(note)] += note
            start += beat
        start += beat
    return out


def sung_lines(lyrics: str) -> list[str]:
    """The lines that are sung: every non-empty line that is not a [section] tag."""
    lines = (line.strip() for line in lyrics.splitlines())
    return [line for line in lines if line and not (line.startswith("[") and line.endswith("]"))]


def _vowel_of(word: str) -> str:
    return next((c for c in word.lower() if c in _FORMANTS), "a")


def _vowel(midi: int, seconds: float, vowel: str) -> np.ndarray:
    """A sung vowel: harmonics of f0 (with a 5 Hz vibrato), a falling source spectrum lifted
    by the vowel's two formant peaks."""
    t = np.arange(round(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    f0 = 440.0 * 2 ** ((midi - 69) / 12)
    phase = 2 * np.pi * np.cumsum(f0 * (1 + 0.006 * np.sin(2 * np.pi * 5 * t))) / SAMPLE_RATE
    f1, f2 = _FORMANTS[vowel]
    wave = np.zeros_like(t)
    for k in range(1, int(4000 / f0) + 1):  # harmonics up to 4 kHz
        weight = _peak(k * f0, f1) + 0.5 * _peak(k * f0, f2) + _SOURCE_TILT / k
        wave += weight * np.sin(k * phase)
    envelope = np.minimum(1.0, t / 0.03) * np.minimum(1.0, (seconds - t) / 0.06)
    return wave * envelope


def _peak(frequency: float, centre: float) -> float:
    return float(np.exp(-0.5 * ((frequency - centre) / _FORMANT_WIDTH) ** 2))
