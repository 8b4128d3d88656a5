"""Analysis time per song of the labels stage's estimators, as ratios to plain Essentia.

Three analyses of each song, timed in the same process on the same files, each from the
file on disk (decoding included):

- plain Essentia: MonoLoader at 44.1 kHz, RhythmExtractor2013 ("multifeature") and
  KeyExtractor with default settings (`plain_essentia` of tests/analysis/corpus.py);
- tunesmith: `tunesmith.analysis.audio.analyze_audio`, what the labels stage calls (decode,
  loudness, tempo with its octave chosen, key with its relative told apart);
- madmom: MonoLoader at 44.1 kHz, then `analysis.madmom_estimator`'s tempo, key and meter.

The songs are the 22 of tests/analysis/corpus.py (22-33 s, rendered with fluidsynth) when
fluidsynth and its soundfont are installed, else four 30 s songs synthesised here (drums,
bass and chords from sine waves). Everything runs on one core (OMP_NUM_THREADS=1, one
onnxruntime thread a network); models are loaded and every estimator is run once on the
first song before the clock starts, and those load times are printed apart. Each row also
says what each estimator found against the truth (tempo within 4%, as MIREX scores it).
Absolute times on a shared machine are noise; the ratios are what to compare.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # before numpy is imported (in main): one core for every estimator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SR = 44100


@dataclass(frozen=True)
class Truth:
    name: str
    path: Path
    bpm: float
    key: str  # "A minor"
    beats_per_bar: int


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--songs", type=int, default=0, help="only the first N songs (0: all)")
    parser.add_argument("--synthetic", action="store_true", help="synthesised songs only")
    args = parser.parse_args()

    import essentia
    import soundfile as sf

    essentia.log.infoActive = False
    import essentia.standard as es

    from tests.analysis.corpus import SOUNDFONT, make_corpus, plain_essentia
    from tunesmith.analysis import madmom_estimator as mm
    from tunesmith.analysis.audio import analyze_audio

    if "torch" in sys.modules:  # nothing here should import it; if something does, one core
        sys.modules["torch"].set_num_threads(1)

    with tempfile.TemporaryDirectory() as tmp:
        if not args.synthetic and shutil.which("fluidsynth") and SOUNDFONT.is_file():
            songs, source = corpus_songs(make_corpus()), "tests/analysis/corpus.py"
        else:
            songs, source = synthetic_songs(Path(tmp)), "synthesised here"
        if args.songs:
            songs = songs[: args.songs]

        def madmom(path: Path) -> dict:
            signal = es.MonoLoader(filename=str(path), sampleRate=SR)()
            return mm.estimate_all(signal)

        estimators = {
            "essentia": lambda p: plain_essentia(str(p)),
            "tunesmith": analyze_audio,
            "madmom": madmom,
        }
        print(f"{len(songs)} songs ({source}); one core; onnxruntime threads {mm.THREADS}")
        for name, run in estimators.items():  # load models, warm caches
            start = time.perf_counter()
            run(songs[0].path)
            print(f"first call (load + one song) {name}: {time.perf_counter() - start:.2f} s")

        header = (
            f"{'song':<14}{'dur':>6}{'ess s':>7}{'ts s':>7}{'mm s':>7}{'ts/ess':>8}{'mm/ess':>8}"
        )
        print(f"\n{header}  truth -> essentia | tunesmith | madmom")
        rows, hits = [], {name: [0, 0, 0] for name in estimators}  # tempo, key, meter right
        for song in songs:
            seconds, found = {}, {}
            for name, run in estimators.items():
                start = time.perf_counter()
                found[name] = run(song.path)
                seconds[name] = time.perf_counter() - start
            said = describe(found)
            for name, (bpm, key, bars) in said.items():
                hits[name][0] += abs(bpm - song.bpm) <= 0.04 * song.bpm
                hits[name][1] += key == song.key
                hits[name][2] += bars == song.beats_per_bar
            duration = sf.info(str(song.path)).duration
            rows.append(seconds | {"duration": duration})
            ess = seconds["essentia"]
            print(
                f"{song.name:<14}{duration:>6.1f}{ess:>7.2f}{seconds['tunesmith']:>7.2f}"
                f"{seconds['madmom']:>7.2f}{seconds['tunesmith'] / ess:>8.2f}"
                f"{seconds['madmom'] / ess:>8.2f}  {song.bpm:g} {song.key} "
                f"{song.beats_per_bar}/4 -> " + " | ".join(fmt(*said[n]) for n in estimators)
            )

    total = {name: sum(r[name] for r in rows) for name in estimators}
    audio = sum(r["duration"] for r in rows)
    print(f"\ntotal: {audio:.0f} s of audio")
    for name in estimators:
        ratios = [r[name] / r["essentia"] for r in rows]
        tempo, key, meter = hits[name]
        right = f"tempo {tempo}/{len(rows)}, key {key}/{len(rows)}"
        right += f", beats a bar {meter}/{len(rows)}" if name == "madmom" else ""
        print(
            f"{name:<10} {total[name]:7.2f} s  {total[name] / audio * 1000:6.1f} ms a second "
            f"of audio  ratio to essentia: total {total[name] / total['essentia']:.2f}, "
            f"median {statistics.median(ratios):.2f}  ({right})"
        )


def describe(found: dict) -> dict[str, tuple[float, str, int]]:
    """(bpm, "tonic mode", beats per bar or 0) from each estimator's answer."""
    bpm, key, scale = found["essentia"]
    ts = found["tunesmith"]
    mm = found["madmom"]
    return {
        "essentia": (bpm, f"{key} {scale}", 0),
        "tunesmith": (ts["bpm"], f"{ts['key']} {ts['scale']}", 0),
        "madmom": (
            mm["tempo"].bpm,
            f"{mm['key'].tonic} {mm['key'].mode}",
            mm["meter"].beats_per_bar,
        ),
    }


def fmt(bpm: float, key: str, bars: int) -> str:
    return f"{bpm:.1f} {key}" + (f" {bars}/4" if bars else "")


def corpus_songs(folder: Path) -> list[Truth]:
    from tests.analysis.corpus import SONGS

    # every groove of the corpus is notated in 4/4
    return [Truth(s.name, folder / s.filename, s.bpm, s.keyscale, 4) for s in SONGS]


# (name, bpm, tonic MIDI note, scale, beats per bar, chord roots as scale degrees)
SYNTHETIC = (
    ("synth_pop", 120, 60, "major", 4, (0, 4, 5, 3)),  # C: I V vi IV
    ("synth_waltz", 96, 57, "minor", 3, (0, 3, 4, 0)),  # A minor: i iv v i
    ("synth_fast", 150, 62, "major", 4, (0, 3, 4, 0)),  # D: I IV V I
    ("synth_slow", 78, 64, "minor", 4, (0, 5, 2, 6)),  # E minor: i VI III VII
)
NAMES = ("C", "C#", "D", "Eb", "E", "F", "F#", "G", "Ab", "A", "Bb", "B")
STEPS = {"major": (0, 2, 4, 5, 7, 9, 11), "minor": (0, 2, 3, 5, 7, 8, 10)}


def synthetic_songs(folder: Path, seconds: float = 30.0) -> list[Truth]:
    """Four songs of sine-wave drums, bass and chords, written as WAV into `folder`."""
    import soundfile as sf

    songs = []
    for name, bpm, tonic, scale, meter, degrees in SYNTHETIC:
        path = folder / f"{name}.wav"
        sf.write(path, synth_song(bpm, tonic, scale, meter, degrees, seconds), SR)
        songs.append(Truth(name, path, bpm, f"{NAMES[tonic % 12]} {scale}", meter))
    return songs


def synth_song(bpm, tonic, scale, meter, degrees, seconds):
    import numpy as np

    rng = np.random.default_rng(bpm)
    out = np.zeros(int(seconds * SR))
    beat = 60.0 / bpm

    def add(start: float, sound: np.ndarray) -> None:
        i = int(start * SR)
        sound = sound[: max(0, len(out) - i)]
        out[i : i + len(sound)] += sound

    def tone(midi: float, length: float, tau: float, harmonics: int = 4) -> np.ndarray:
        t = np.arange(int(length * SR)) / SR
        f = 440.0 * 2 ** ((midi - 69) / 12)
        wave = sum(np.sin(2 * np.pi * f * h * t) / h for h in range(1, harmonics + 1))
        return wave * np.minimum(1, t / 0.005) * np.exp(-t / tau)

    t = np.arange(int(0.2 * SR)) / SR
    kick = np.sin(2 * np.pi * np.cumsum(50 + 110 * np.exp(-t / 0.03)) / SR) * np.exp(-t / 0.08)
    noise = rng.standard_normal(int(0.15 * SR))
    snare = 0.5 * noise * np.exp(-np.arange(len(noise)) / SR / 0.04)
    hat = (
        0.15
        * np.diff(noise[: int(0.04 * SR)], prepend=0)
        * np.exp(-np.arange(int(0.04 * SR)) / SR / 0.01)
    )
    steps = STEPS[scale]
    for bar in range(int(seconds / (beat * meter)) + 1):
        start = bar * beat * meter
        degree = degrees[bar % len(degrees)]
        chord = [tonic + 12 * ((degree + k) // 7) + steps[(degree + k) % 7] for k in (0, 2, 4)]
        for note in chord:
            add(start, 0.12 * tone(note, beat * meter, 1.0))
        add(start, 0.35 * tone(chord[0] - 24, beat * meter, 0.6, harmonics=2))
        for b in range(meter):
            at = start + b * beat
            add(at, kick if b == 0 or (meter == 4 and b == 2) else snare)
            add(at, hat)
            add(at + beat / 2, hat)
    return (0.5 * out / np.abs(out).max()).astype(np.float32)


if __name__ == "__main__":
    main()
