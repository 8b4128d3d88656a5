"""Score a tempo, key and time-signature estimator on the halves of the 64-song corpus.

An estimator is a module-level function (workers import it by name) that takes the path of
an audio file and returns an `Estimate`, or a plain tuple in the same order:
(bpm, key, scale, timesignature, tempo_confidence, key_confidence, timesignature_confidence),
the last four optional; None where it has no answer. `measure` runs it on every song of
tests/analysis/corpus60.py, `score` counts per half, `table` prints:

- tempo: within 4% of the truth's beat tempo (MIREX's accuracy 1; in 6/8 and 12/8 the
  dotted quarter, the BPM these songs are tagged with);
- tempo, any level: within 4% of the truth times 1, 2, 1/2, 3 or 1/3 (MIREX's accuracy 2),
  so an answer at the eighth note of a 6/8 song, or at double time, counts here only;
- key: tonic and mode both right (enharmonic spellings are the same key);
- time signature: ACE-Step 1.5's value ("2", "3", "4", "6"); an answer written as a
  fraction counts by its numerator, 12/8 as "4" (see corpus60's docstring); None is wrong;
- seconds a song: the CPU time of the estimator's call in its process (`time.process_time`,
  Essentia's import left out), i.e. seconds on one core whatever else the machine runs.

Two estimators come with it: `plain_essentia`, the baseline (RhythmExtractor2013 "multifeature"
for the tempo and KeyExtractor with its default profile for the key, on MonoLoader's 44.1 kHz
mono mix; no time signature), and `tunesmith_labels`, what the labels stage writes for a file
nobody labelled: `tunesmith.analysis.audio.analyze_audio`'s bpm, key and time signature (the
analysis `dataset.analyse.analyse_file` runs), each with its confidence.

Run it from the repository root:

    .venv/bin/python -m tests.analysis.measure [module:function ...] [--workers N] [--songs]
        [--dev-extra | --corpus96 dev|test|all | --corpus48 | --corpus56 | --corpus52 | --corpus64
        | --corpus72 | --corpus80 | --corpus88 | --corpus104 | --corpus112 | --corpus120
        | --corpus128 | --corpus136 | --corpus144 | --corpus152 | --corpus160
        | --corpus168 | --corpus176 | --corpus184 | --corpus192 | --corpus200 | --random]

With no estimator named it scores both of the above; `--songs` also prints every song's row;
`--dev-extra` scores corpus60's DEV_EXTRA songs (development data) instead of the corpus,
`--corpus96 dev|test|all` the second corpus's (tests/analysis/corpus96.py), `--corpus48`
the third (tests/analysis/corpus48.py, development data since the fourth was drawn),
`--corpus56` the fourth and `--corpus52` the fifth (tests/analysis/corpus56.py and
corpus52.py, development data since the sixth was scored), `--corpus64` the sixth
(tests/analysis/corpus64.py, development data since the seventh was scored), `--corpus72`
the seventh (tests/analysis/corpus72.py) and `--corpus80` the eighth (tests/analysis/corpus80.py),
development data since each was scored, `--corpus88` the ninth and `--corpus104` the tenth
(tests/analysis/corpus88.py and corpus104.py, each held out and scored once, development data
since the eleventh was drawn), `--corpus112` the eleventh (tests/analysis/corpus112.py, held
out and scored once, development data since the twelfth was scored), `--corpus120` the
twelfth (tests/analysis/corpus120.py, held out and scored once, development data since the
thirteenth was scored), `--corpus128` the thirteenth (tests/analysis/corpus128.py, held out
and scored once, development data since the fourteenth was scored), `--corpus136` the
fourteenth (tests/analysis/corpus136.py, held out and scored once, development data since the
fifteenth was scored), `--corpus144` the fifteenth (tests/analysis/corpus144.py, held out and
scored once, development data since the sixteenth was scored), `--corpus152` the sixteenth
(tests/analysis/corpus152.py, held out and scored once, development data since the seventeenth
was written), `--corpus160` the seventeenth (tests/analysis/corpus160.py, held out and scored
once, development data since the eighteenth was written), `--corpus168` the eighteenth
(tests/analysis/corpus168.py, held out and scored once, development data since the nineteenth
was written), `--corpus176` the nineteenth (tests/analysis/corpus176.py, held out and scored
once, development data since the twentieth was written), `--corpus184` the twentieth
(tests/analysis/corpus184.py, held out and scored once, development data since),
`--corpus192` the twenty-first (tests/analysis/corpus192.py, held out and scored once with the
analysis that ships, development data since), `--corpus200` the twenty-second
(tests/analysis/corpus200.py, held out), `--random` the randomly arranged development songs
(tests/analysis/random_styles.py).
"""

from __future__ import annotations

import argparse
import importlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from tests.analysis.corpus60 import (
    DEFAULT_CACHE,
    DEV_EXTRA,
    EXTRA_CACHE,
    SAMPLE_RATE,
    SONGS,
    Song,
    make_corpus,
)
from tunesmith.dataset.workers import run_all

MODULE = "tests.analysis.measure"
HALVES = ("dev", "test", "held_out")
LATER_CORPORA = (  # the corpora written after the second: module, its songs, --flag's help
    ("corpus48", "SONGS48", "the third corpus"),
    ("corpus56", "SONGS56", "the fourth corpus"),
    ("corpus52", "SONGS52", "the fifth corpus"),
    ("corpus64", "SONGS64", "the sixth corpus (development data since the seventh was scored)"),
    ("corpus72", "SONGS72", "the seventh corpus (development data since it was scored)"),
    ("corpus80", "SONGS80", "the eighth corpus (development data since it was scored)"),
    ("corpus88", "SONGS88", "the ninth corpus (development data since it was scored)"),
    ("corpus104", "SONGS104", "the tenth corpus (development data since it was scored)"),
    ("corpus112", "SONGS112", "the eleventh corpus (development data since it was scored)"),
    ("corpus120", "SONGS120", "the twelfth corpus (development data since it was scored)"),
    ("corpus128", "SONGS128", "the thirteenth corpus (development data since it was scored)"),
    ("corpus136", "SONGS136", "the fourteenth corpus (development data since it was scored)"),
    ("corpus144", "SONGS144", "the fifteenth corpus (development data since it was scored)"),
    ("corpus152", "SONGS152", "the sixteenth corpus (development data since it was scored)"),
    ("corpus160", "SONGS160", "the seventeenth corpus (development data since it was scored)"),
    ("corpus168", "SONGS168", "the eighteenth corpus (development data since it was scored)"),
    ("corpus176", "SONGS176", "the nineteenth corpus (development data since it was scored)"),
    ("corpus184", "SONGS184", "the twentieth corpus (development data since it was scored)"),
    ("corpus192", "SONGS192", "the twenty-first corpus (development data since it was scored)"),
    ("corpus200", "SONGS200", "the twenty-second corpus (held out)"),
)
TEMPO_TOLERANCE = 0.04  # MIREX
TEMPO_LEVELS = (1.0, 2.0, 0.5, 3.0, 1.0 / 3.0)  # MIREX's accuracy 2
_SPELLING = {"Db": "C#", "D#": "Eb", "Gb": "F#", "G#": "Ab", "A#": "Bb", "Cb": "B", "E#": "F",
             "Fb": "E", "B#": "C"}  # fmt: skip


class Estimate(NamedTuple):
    """What an estimator says of one file; None where it says nothing."""

    bpm: float | None
    key: str | None  # tonic: "C", "F#", "Bb", ... (enharmonics are equal)
    scale: str | None  # "major" or "minor"
    timesignature: str | None = None  # "4", "3", "6", or a fraction like "6/8"
    tempo_confidence: float | None = None
    key_confidence: float | None = None
    timesignature_confidence: float | None = None


Estimator = Callable[[str], Estimate | tuple]


@dataclass(frozen=True)
class Result:
    """One estimator's answer on one song, and the CPU seconds it took."""

    song: Song
    estimate: Estimate
    seconds: float

    @property
    def tempo_right(self) -> bool:
        return tempo_within(self.estimate.bpm, self.song.bpm)

    @property
    def tempo_any_level(self) -> bool:
        return any(tempo_within(self.estimate.bpm, self.song.bpm * f) for f in TEMPO_LEVELS)

    @property
    def key_right(self) -> bool:
        found = (tonic(self.estimate.key), (self.estimate.scale or "").strip().lower())
        return found == (tonic(self.song.tonic), self.song.scale)

    @property
    def timesignature_right(self) -> bool:
        return ace_timesignature(self.estimate.timesignature) == self.song.timesignature


@dataclass(frozen=True)
class Score:
    """Counts of right answers on one half (or on all songs: half "all")."""

    estimator: str
    half: str
    songs: int
    tempo: int
    tempo_any_level: int
    key: int
    timesignature: int
    seconds: float  # mean CPU seconds a song

    def percent(self, count: int) -> float:
        return 100.0 * count / self.songs if self.songs else 0.0


def tempo_within(found: float | None, truth: float) -> bool:
    return (
        found is not None and math.isfinite(found) and abs(found - truth) <= TEMPO_TOLERANCE * truth
    )


def tonic(name: str | None) -> str:
    """A tonic in tunesmith's spelling (C C# D Eb E F F# G Ab A Bb B); "" for none."""
    name = (name or "").strip().replace("♯", "#").replace("♭", "b")
    name = name[:1].upper() + name[1:]
    return _SPELLING.get(name, name)


def ace_timesignature(value: str | None) -> str | None:
    """ACE-Step's value of a time signature: beats a bar as it writes them, 12/8 as "4"."""
    if value is None or not str(value).strip():
        return None
    numerator = str(value).strip().split("/")[0].strip()
    return "4" if numerator == "12" else numerator


def measure(
    estimator: Estimator,
    folder: Path | None = None,
    workers: int = 1,
    songs: Sequence[Song] = SONGS,
) -> list[Result]:
    """Run `estimator` on every song (rendering the corpus first where needed), in order.

    `songs`: some of one corpus: SONGS, DEV_EXTRA, SONGS96 or SONGS48, each rendered into
    its own folder. `workers`: processes, as `tunesmith.dataset.workers.run_all` (0: one a
    core); the seconds are CPU seconds of each call in its own process, so they do not
    depend on it.
    """
    folder = render(songs, folder)
    tasks = [(estimator, str(folder / song.filename)) for song in songs]
    answers = run_all(_timed, tasks, workers)
    return [
        Result(song, estimate, seconds)
        for song, (estimate, seconds) in zip(songs, answers, strict=True)
    ]


def render(songs: Sequence[Song], folder: Path | None = None) -> Path:
    """Render `songs` where missing into their corpus's folder (or `folder`); return it."""
    from tests.analysis import corpus96, random_styles

    corpora = [(SONGS, DEFAULT_CACHE), (DEV_EXTRA, EXTRA_CACHE)]
    corpora += [
        (corpus96.SONGS96, corpus96.CACHE),
        (random_styles.RANDOM_SONGS, random_styles.CACHE),
    ]
    for module, table, _ in LATER_CORPORA:
        corpus = importlib.import_module(f"tests.analysis.{module}")
        corpora.append((getattr(corpus, table), corpus.CACHE))
    for corpus, default in corpora:
        if all(song in corpus for song in songs):
            return make_corpus(folder or default, songs=tuple(songs))
    raise ValueError(
        "measure songs of one corpus at a time: SONGS, DEV_EXTRA, SONGS96, RANDOM_SONGS or "
        + ", ".join(table for _, table, _ in LATER_CORPORA)
    )


def _timed(task: tuple[Estimator, str]) -> tuple[Estimate, float]:
    estimator, path = task
    import essentia

    essentia.log.infoActive = False  # its import prints an INFO line about SVMs
    import essentia.standard  # noqa: F401  imported before the clock starts

    start = time.process_time()
    answer = estimator(path)
    seconds = time.process_time() - start
    return Estimate(*answer), seconds


def score(results: Sequence[Result], half: str = "all", estimator: str = "") -> Score:
    """Right answers among `results` on the songs of `half` (one of HALVES, or "all")."""
    chosen = [r for r in results if half == "all" or r.song.half == half]
    return Score(
        estimator=estimator,
        half=half,
        songs=len(chosen),
        tempo=sum(r.tempo_right for r in chosen),
        tempo_any_level=sum(r.tempo_any_level for r in chosen),
        key=sum(r.key_right for r in chosen),
        timesignature=sum(r.timesignature_right for r in chosen),
        seconds=sum(r.seconds for r in chosen) / len(chosen) if chosen else 0.0,
    )


def scores(results: dict[str, Sequence[Result]]) -> list[Score]:
    """Every estimator's score on each half it has songs of, and on all its songs."""
    return [
        score(found, half, name)
        for name, found in results.items()
        for half in (*HALVES, "all")
        if half == "all" or any(r.song.half == half for r in found)
    ]


def table(rows: Sequence[Score]) -> str:
    """The scores as a text table: counts and percentages, CPU seconds a song."""
    head = (
        f"{'estimator':18} {'half':8} {'songs':>5}  {'tempo':>11}  {'tempo, any':>11}  "
        f"{'key':>11}  {'time sig.':>11}  {'s/song':>6}"
    )
    lines = [head, "-" * len(head)]
    for row in rows:
        cells = [
            f"{count:3d} {row.percent(count):5.1f}%"
            for count in (row.tempo, row.tempo_any_level, row.key, row.timesignature)
        ]
        lines.append(
            f"{row.estimator:18} {row.half:8} {row.songs:5d}  "
            + "  ".join(cells)
            + f"  {row.seconds:6.2f}"
        )
    return "\n".join(lines)


def song_table(results: dict[str, Sequence[Result]]) -> str:
    """Every song's truth and each estimator's bpm, key and time signature (* where wrong)."""
    names = list(results)
    lines = [
        f"{'song':15} {'half':4} {'metre':5} {'style':13} {'bpm':>4} {'key':9} "
        + " ".join(f"{name[:24]:>24}" for name in names)
    ]
    for i, song in enumerate(SONGS if not names else [r.song for r in results[names[0]]]):
        cells = []
        for name in names:
            r = results[name][i]
            e = r.estimate
            bpm = f"{e.bpm:5.1f}" if e.bpm is not None else "    -"
            key = f"{e.key or '-'} {(e.scale or '-')[:3]}"
            cells.append(
                f"{bpm}{' ' if r.tempo_right else '*'} {key:7}{' ' if r.key_right else '*'} "
                f"{e.timesignature or '-':>4}{' ' if r.timesignature_right else '*'}"
            )
        lines.append(
            f"{song.name:15} {song.half[:4]:4} {song.metre:5} {song.style:13} {song.bpm:4d} "
            f"{song.keyscale:9} " + " ".join(f"{c:>24}" for c in cells)
        )
    return "\n".join(lines)


def review_rates(results: list[Result], half: str) -> dict[str, tuple[int, int, int, int]]:
    """Per field, for the tempo and key together, and for all three: (wrong values listed,
    wrong values, right values listed, right values), a value being listed when its
    confidence is under the stage's floor."""
    from tunesmith.dataset.fields import CONFIDENCE_FLOOR  # the labels' own floor

    chosen = [r for r in results if r.song.half == half]
    rates = {}
    for name, right, confidence in (
        ("tempo", "tempo_right", "tempo_confidence"),
        ("key", "key_right", "key_confidence"),
        ("time signature", "timesignature_right", "timesignature_confidence"),
    ):
        pairs = [(getattr(r, right), getattr(r.estimate, confidence) or 0.0) for r in chosen]
        listed = [(ok, c < CONFIDENCE_FLOOR) for ok, c in pairs]
        rates[name] = (
            sum(flag for ok, flag in listed if not ok),
            sum(not ok for ok, _ in listed),
            sum(flag for ok, flag in listed if ok),
            sum(ok for ok, _ in listed),
        )
    rates["tempo and key"] = _sum(rates["tempo"], rates["key"])
    rates["all"] = _sum(rates["tempo and key"], rates["time signature"])
    return rates


def _sum(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, int, int, int]:
    return tuple(x + y for x, y in zip(a, b, strict=True))  # type: ignore[return-value]


def review_line(results: list[Result], half: str) -> str:
    return "; ".join(
        f"{name}: catches {caught}/{wrong} wrong, lists {listed}/{right} right"
        for name, (caught, wrong, listed, right) in review_rates(results, half).items()
    )


def plain_essentia(path: str) -> Estimate:
    """The baseline: Essentia with default settings, no time signature."""
    import essentia.standard as es

    mono = es.MonoLoader(filename=path, sampleRate=SAMPLE_RATE)()
    bpm, _, beat_confidence, _, _ = es.RhythmExtractor2013(method="multifeature")(mono)
    key, scale, strength = es.KeyExtractor()(mono)
    return Estimate(
        float(bpm), key, scale, None, float(beat_confidence) / 5.32, float(strength), None
    )


def tunesmith_labels(path: str) -> Estimate:
    """What the labels stage writes for an unlabelled file: `analyze_audio`'s bpm, key and
    time signature, each with its confidence."""
    from tunesmith.analysis.audio import analyze_audio

    found = analyze_audio(Path(path))
    return Estimate(
        found["bpm"] or None,
        found["key"],
        found["scale"],
        found["timesignature"] or None,
        found["tempo_confidence"],
        found["key_confidence"],
        found["timesignature_confidence"],
    )


def load(spec: str) -> Estimator:
    """An estimator named "module:function", e.g. "tests.analysis.measure:plain_essentia"."""
    module, _, name = spec.partition(":")
    if not name:
        raise ValueError(f"{spec!r}: expected module:function")
    return getattr(importlib.import_module(module), name)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("estimators", nargs="*", help="module:function (default: both built in)")
    parser.add_argument("--workers", type=int, default=0, help="processes, 0: one a core")
    parser.add_argument("--folder", type=Path, default=None, help="the corpus cache folder")
    parser.add_argument("--songs", action="store_true", help="print every song's row too")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--dev-extra", action="store_true", help="the DEV_EXTRA songs instead")
    which.add_argument("--corpus96", choices=("dev", "test", "all"), help="corpus96's songs")
    for module, _, name in LATER_CORPORA:
        which.add_argument(f"--{module}", action="store_true", help=name)
    which.add_argument("--random", action="store_true", help="the randomly arranged songs")
    args = parser.parse_args(argv)
    specs = args.estimators or [f"{MODULE}:plain_essentia", f"{MODULE}:tunesmith_labels"]
    songs = DEV_EXTRA if args.dev_extra else SONGS
    if args.corpus96:
        from tests.analysis.corpus96 import SONGS96

        songs = tuple(s for s in SONGS96 if args.corpus96 in ("all", s.half))
    for module, name, _ in LATER_CORPORA:
        if getattr(args, module):
            songs = getattr(importlib.import_module(f"tests.analysis.{module}"), name)
    if args.random:
        from tests.analysis.random_styles import RANDOM_SONGS

        songs = RANDOM_SONGS
    results = {
        spec.rpartition(":")[2]: measure(load(spec), args.folder, args.workers, songs)
        for spec in specs
    }
    if args.songs:
        print(song_table(results), end="\n\n")
    print(table(scores(results)))
    if "tunesmith_labels" in results:
        for half in sorted({s.half for s in songs}):
            print(f"review list, {half}: " + review_line(results["tunesmith_labels"], half))


if __name__ == "__main__":
    # run as the module's importable name, so that workers find what they are sent by it
    importlib.import_module(MODULE).main()
