"""The example dataset `loops`: drum-and-chord loops synthesised with a known tempo and key.

Every clip is made from code with a fixed seed, so a rerun writes the same bytes and the
analysis tests can check BPM and key against the truth. (Across machines a rare sample may
differ: numpy's SIMD sin/exp can differ in the last bit and flip a 16-bit rounding.)

A clip is stereo 44.1 kHz 16-bit: kick, snare and hats on the beat grid, a one-chord-a-bar
progression (I-IV-V-I in major, i-iv-V-i in minor with the leading tone of harmonic minor)
and a bass line on the chord roots.

The labels are a deliberate mix of the conventions users bring (see LoopSpec.labels), so the
label precedence rules (JSON sidecar > .txt sidecar > embedded tags > file name) have
something to work on.

Not handled: swing, tempo changes, modulation, realistic instruments. `tunesmith.toml` and
`dataset.json` are not written.
"""

from __future__ import annotations

import io
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import mutagen.flac
import mutagen.id3
import mutagen.wave
import numpy as np
import soundfile as sf

from tunesmith.store.atomic import json_bytes, write_if_changed

SAMPLE_RATE = 44100
SEED = 20261130  # mixed with the crc32 of the stem: reordering LOOPS changes no clip
PEAK = 10 ** (-1.0 / 20)  # every clip is peak-normalised to -1 dBFS
ARTIST = "tunesmith examples"

# Key names are spelled as tunesmith.analysis.audio reports them (sharps for C# and F#,
# flats for Eb, Ab, Bb); the enharmonic spellings are accepted here too.
_SEMITONE = {
    "C": 0,
    "C#": 1,
    "Db": 1,
    "D": 2,
    "D#": 3,
    "Eb": 3,
    "E": 4,
    "F": 5,
    "F#": 6,
    "Gb": 6,
    "G": 7,
    "G#": 8,
    "Ab": 8,
    "A": 9,
    "A#": 10,
    "Bb": 10,
    "B": 11,
}
# Triads (semitones above the tonic) of the four bars. Minor borrows V from harmonic minor:
# its major third is the leading tone, the strongest single cue for a minor key.
_PROGRESSION = {
    "major": ((0, 4, 7), (5, 9, 12), (7, 11, 14), (0, 4, 7)),
    "minor": ((0, 3, 7), (5, 8, 12), (7, 11, 14), (0, 3, 7)),
}

Labels = Literal["txt", "json", "json+txt", "id3", "flac"]


@dataclass(frozen=True)
class LoopSpec:
    """One clip of the dataset and the truth the analysis must recover."""

    stem: str
    bpm: float
    key: str  # tonic, e.g. "A", "F#", "Bb"
    scale: Literal["major", "minor"]
    seconds: float
    genre: str
    mood: str  # first word of the caption
    # How the item is labelled: "txt" <stem>.txt caption (kohya/diffusers); "json" <stem>.json
    # flat tags (underfit); "json+txt" both, with different content (JSON wins downstream);
    # "id3" ID3 chunk inside the .wav; "flac" a .flac with Vorbis comments. Only "flac" is
    # not a .wav.
    labels: Labels
    four_on_the_floor: bool = False  # kick on every beat, open hats on the off-beats

    @property
    def filename(self) -> str:
        return f"{self.stem}.flac" if self.labels == "flac" else f"{self.stem}.wav"

    @property
    def title(self) -> str:
        return self.stem.replace("_", " ").title()

    @property
    def caption(self) -> str:
        return f"{self.mood} {self.genre} loop in {self.key} {self.scale}, {self.bpm:g} bpm"


LOOPS: tuple[LoopSpec, ...] = (
    LoopSpec("dusty_keys", 92.0, "A", "minor", 20.0, "lo-fi hip hop", "warm", "txt"),
    LoopSpec("corner_store", 100.0, "F", "major", 19.2, "boom bap", "dusty", "json"),
    LoopSpec("brass_tacks", 108.0, "E", "minor", 17.8, "funk", "tight", "id3"),
    LoopSpec("night_drive", 116.0, "Bb", "major", 16.6, "synth pop", "bright", "json+txt"),
    LoopSpec("warehouse", 124.0, "C#", "minor", 15.5, "house", "deep", "flac", True),
    LoopSpec("sunday_park", 132.0, "G", "major", 14.5, "indie pop", "sunny", "txt"),
    LoopSpec("acid_rain", 140.0, "F#", "minor", 13.7, "techno", "dark", "id3", True),
    LoopSpec("rush_hour", 148.0, "D", "major", 13.0, "breakbeat", "driving", "json"),
)


def make_loops(folder: Path) -> list[Path]:
    """Write every clip of LOOPS and its labels into `folder`; return the audio paths in order.

    Idempotent: a second run leaves every file untouched (bytes and modification time, so the
    manifest and the folder sensor see no change). Each file is written under a temporary name
    and renamed, so an interrupted run leaves no half-written file.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for spec in LOOPS:
        path = folder / spec.filename
        write_if_changed(path, _encode(render_loop(spec), spec))
        if spec.labels in ("json", "json+txt"):
            write_if_changed(folder / f"{spec.stem}.json", json_bytes(_json_tags(spec)))
        if spec.labels in ("txt", "json+txt"):
            write_if_changed(folder / f"{spec.stem}.txt", f"{spec.caption}\n".encode())
        paths.append(path)
    return paths


def render_loop(spec: LoopSpec) -> np.ndarray:
    """The clip as float32 samples [n, 2] at SAMPLE_RATE, peak at -1 dBFS."""
    rng = np.random.default_rng([SEED, zlib.crc32(spec.stem.encode())])
    n = round(spec.seconds * SAMPLE_RATE)
    out = np.zeros((n, 2))
    beat = 60.0 / spec.bpm
    tonic = _SEMITONE[spec.key]
    kick, snare = _kick(), _snare(rng)
    for bar in range(int(spec.seconds / (4 * beat)) + 1):
        t0 = bar * 4 * beat
        chord = _PROGRESSION[spec.scale][bar % 4]
        # Chord tones folded into C4..B4, roots into C2..B2: close voicings, audible bass.
        for i, step in enumerate(chord):
            midi = 60 + (tonic + step) % 12
            _add(out, t0, _tone(midi, 4 * beat, harmonics=4), 0.16, pan=(i - 1) * 0.4)
        root = 36 + (tonic + chord[0]) % 12
        for b, length, octave in ((0, 1.5, 0), (1.5, 0.5, 0), (2, 1.0, 0), (3, 0.5, 12)):
            _add(out, t0 + b * beat, _tone(root + octave, length * beat, harmonics=2), 0.4)
        kicks = (0, 1, 2, 3) if spec.four_on_the_floor else (0, 1.5, 2, 2.75)
        for b in kicks:
            _add(out, t0 + b * beat, kick, 0.9)
        for b in (1, 3):
            _add(out, t0 + b * beat, snare, 0.45)
        for eighth in range(8):
            offbeat = eighth % 2 == 1
            hat = _hat(rng, open_=spec.four_on_the_floor and offbeat)
            level = (0.16 if offbeat else 0.10) * rng.uniform(0.8, 1.0)
            _add(out, t0 + eighth * beat / 2, hat, level, pan=0.3)
    fade = np.linspace(1.0, 0.0, int(0.01 * SAMPLE_RATE))  # no click at the loop's cut
    out[-len(fade) :] *= fade[:, None]
    return (out * (PEAK / np.abs(out).max())).astype(np.float32)


def _add(out: np.ndarray, start: float, sound: np.ndarray, level: float, pan: float = 0.0) -> None:
    """Mix a mono sound into `out` at `start` seconds, equal-power panned (-1 left, +1 right)."""
    i = round(start * SAMPLE_RATE)
    if i >= len(out):
        return
    sound = sound[: len(out) - i] * level
    angle = (pan + 1) * np.pi / 4
    out[i : i + len(sound), 0] += sound * np.cos(angle)
    out[i : i + len(sound), 1] += sound * np.sin(angle)


def _tone(midi: int, seconds: float, harmonics: int) -> np.ndarray:
    """A soft additive tone: partial k at 1/k^2, quick attack, decay to a sustain, release."""
    t = np.arange(round(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    f0 = 440.0 * 2 ** ((midi - 69) / 12)
    wave = sum(np.sin(2 * np.pi * k * f0 * t) / k**2 for k in range(1, harmonics + 1))
    envelope = 0.6 + 0.4 * np.exp(-t / 0.15)
    envelope *= np.minimum(1.0, t / 0.005) * np.minimum(1.0, (seconds - t) / 0.03)
    return wave * envelope


def _kick() -> np.ndarray:
    t = np.arange(round(0.35 * SAMPLE_RATE)) / SAMPLE_RATE
    freq = 48 + 110 * np.exp(-t * 35)  # pitch drop from ~160 Hz to ~50 Hz
    phase = 2 * np.pi * np.cumsum(freq) / SAMPLE_RATE
    return np.sin(phase) * np.exp(-t * 9)


def _snare(rng: np.random.Generator) -> np.ndarray:
    t = np.arange(round(0.2 * SAMPLE_RATE)) / SAMPLE_RATE
    noise = np.diff(rng.standard_normal(len(t) + 1))  # first difference: tilts toward highs
    return 0.5 * noise * np.exp(-t * 22) + 0.6 * np.sin(2 * np.pi * 185 * t) * np.exp(-t * 30)


def _hat(rng: np.random.Generator, open_: bool) -> np.ndarray:
    t = np.arange(round((0.18 if open_ else 0.05) * SAMPLE_RATE)) / SAMPLE_RATE
    noise = np.diff(rng.standard_normal(len(t) + 2), n=2)  # second difference: mostly > 5 kHz
    return noise * np.exp(-t * (18 if open_ else 70))


def _json_tags(spec: LoopSpec) -> dict[str, str]:
    """underfit's sidecar: a flat object of lowercase tag names, every value a string."""
    tags = {"title": spec.title, "artist": ARTIST, "genre": spec.genre, "bpm": f"{spec.bpm:g}"}
    # For "json+txt" the prompt differs from the .txt caption, so a reader can tell who won.
    tags["prompt"] = f"{spec.genre}, {spec.key} {spec.scale}, {spec.mood}"
    return tags


def _encode(audio: np.ndarray, spec: LoopSpec) -> bytes:
    """The clip's file bytes: 16-bit WAV or FLAC, with the embedded tags its labels ask for."""
    buffer = io.BytesIO()
    if spec.labels == "flac":
        sf.write(buffer, audio, SAMPLE_RATE, subtype="PCM_16", format="FLAC")
        buffer.seek(0)
        flac = mutagen.flac.FLAC(buffer)
        flac["title"], flac["artist"] = spec.title, ARTIST
        flac["genre"], flac["bpm"] = spec.genre, f"{spec.bpm:g}"
        buffer.seek(0)  # mutagen reads the file again from the current position
        flac.save(buffer)
    else:
        sf.write(buffer, audio, SAMPLE_RATE, subtype="PCM_16", format="WAV")
        if spec.labels == "id3":
            buffer.seek(0)
            wave = mutagen.wave.WAVE(buffer)
            wave.add_tags()
            wave.tags.add(mutagen.id3.TIT2(encoding=3, text=spec.title))
            wave.tags.add(mutagen.id3.TPE1(encoding=3, text=ARTIST))
            wave.tags.add(mutagen.id3.TCON(encoding=3, text=spec.genre))
            wave.tags.add(mutagen.id3.TBPM(encoding=3, text=f"{spec.bpm:g}"))
            buffer.seek(0)
            wave.save(buffer)
    return buffer.getvalue()
