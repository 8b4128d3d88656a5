"""Fit the analysis's two choices, and their review probabilities, on development songs only.

analysis.meter scores (metre, factor) hypotheses for the tempo's level and the time
signature with a small fitted model (analysis.meter.LevelModel, fit_level below), analysis.key
weighs the 24 keys with a weighted sum. This script measures what both are made from on the
development songs and fits them by maximum likelihood of the right answer (a softmax over
each song's candidates, a little L2 shrinkage): the key's weights by Newton steps with
backtracking, printed as analysis.key should hold them, the level model by L-BFGS, saved to
analysis.meter's file with `--write`. The songs:

- the "dev" half of tests/analysis/corpus60.py (32, source "corpus60") and its former test
  half (32, "corpus60_test": scored once, development data since the second corpus),
- corpus60's DEV_EXTRA songs (192 more of the same generator with other seeds),
- both halves of tests/analysis/corpus96.py (48 "corpus96" and 48 "corpus96_test": 18 other
  arrangements; the test half was scored once, then became development data when the third
  corpus was drawn),
- tests/analysis/corpus48.py (48, "corpus48": the third corpus, held out and scored twice,
  development data since the fourth was drawn),
- tests/analysis/corpus56.py and corpus52.py (56 "corpus56" and 52 "corpus52": the fourth
  and fifth corpora, 27 more arrangements, each held out and scored, development data since
  the sixth was drawn),
- tests/analysis/corpus64.py (64, "corpus64": the sixth corpus, 16 more arrangements, held
  out and scored once, development data since the seventh was drawn),
- tests/analysis/corpus72.py (72, "corpus72": the seventh corpus, 18 more arrangements, held
  out and scored once, development data since the eighth was drawn),
- tests/analysis/corpus80.py, corpus88.py, corpus104.py, corpus112.py, corpus120.py,
  corpus128.py, corpus136.py, corpus144.py, corpus152.py, corpus160.py, corpus168.py,
  corpus176.py and corpus184.py (80 "corpus80", 88 "corpus88", 104 "corpus104", 112
  "corpus112", 120 "corpus120", 128 "corpus128", 136 "corpus136", 144 "corpus144", 152
  "corpus152", 160 "corpus160", 168 "corpus168", 176 "corpus176" and 184 "corpus184": the
  eighth to twentieth corpora, 438 more arrangements, each held out and scored once,
  development data since the next was drawn),
- tests/analysis/corpus192.py (192, "corpus192": the twenty-first corpus, 48 more
  arrangements, held out and scored once with the analysis that ships; development data since,
  so the next change must be scored on a corpus written before it is chosen),
- 480 songs in random arrangements, one each (tests/analysis/random_styles.py, "random"),
- 160 songs whose pulses are even, the chords alone grouping them, one arrangement each
  (tests/analysis/even_pulses.py, "even"), and
- the "tuning" half of tests/analysis/corpus.py (11, another generator, all 4/4), and 48
  more songs of that generator (its EXTRA_SONGS, "corpus22_extra": six a groove, sixteenth
  hats among them; 11 songs were too few to show the generator to the level model, which read
  its sixteenth-hat grooves at double).

Never tests/analysis/corpus200.py, the twenty-second corpus (held out).

The level model, network and key weights that ship were fitted before the nineteenth to
twenty-first corpora and the even-pulse songs joined (2,575 songs): the fits since read a unit
case of tests/analysis/test_meter.py wrong and were not kept (docs/conventions/labels.md).

The level model's learned beats (analysis.meter's `act_` values) come from
analysis.activation's network, which tests/analysis/fit_activation.py trains on the same
songs' known beats: one network a fold gives the clips of that fold their activations, so the
level model is fitted and scored on activations of music their network has not heard; with
`--write` a network trained on every development song is saved beside the level model.

It also reports, from 4-fold cross-validation over these songs (each fold fitted on the other
three; a fold holds whole corpora, `table_folds`), how often each choice is right
(per source and in all) and, at candidate review probabilities, how many wrong and right
values would be listed for review; a field's REVIEW_PROBABILITY is set from that table (the
rule is printed with it).

Each whole song's out-of-fold reading (its hypotheses with every member's score, its keys'
probabilities) is saved to data/cache/fit_analysis/<CACHE_VERSION>/out_of_fold.npz
(OutOfFold), so the review can be studied without a refit (tests/analysis/study_review.py).

Run from the repository root (renders what is missing, then caches the measured values in
data/cache/fit_analysis/):

    .venv/bin/python -m tests.analysis.fit_analysis [--workers N] [--drop FEATURE ...]

`--drop` leaves analysis.meter features out of the fit, to see what each is worth (the
activation is trained all the same);
`--leave-out SOURCE ...` leaves those songs out altogether; `--validate SOURCE` fits the
level on every other source and scores that one (whole and as excerpts): whether what is
learnt carries over to arrangements the fit has not met.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from tests.analysis import corpus as corpus22
from tests.analysis import (
    corpus48,
    corpus52,
    corpus56,
    corpus60,
    corpus64,
    corpus72,
    corpus80,
    corpus88,
    corpus96,
    corpus104,
    corpus112,
    corpus120,
    corpus128,
    corpus136,
    corpus144,
    corpus152,
    corpus160,
    corpus168,
    corpus176,
    corpus184,
    corpus192,
    corpus200,
    even_pulses,
    fit_activation,
    random_styles,
)
from tunesmith.dataset.workers import pool_size, run_all

MODULE = "tests.analysis.fit_analysis"
CACHE = Path(__file__).resolve().parents[2] / "data" / "cache" / "fit_analysis"
CACHE_VERSION = "5"  # bump when what measure() stores changes
L2 = 0.1  # the key's conditional logit
# The level model (analysis.meter.LevelModel), chosen by 4-fold cross-validation on the
# development songs (999 of them then) among 0 (a conditional logit), 4, 8, 16 and 32 hidden
# units, shrinkage 0.0003 to 0.01, one member or five; ten members since 1,567 songs (the
# mean of more random starts: the same tempi, a few more time signatures out of fold); 32
# units since 1,687 (against 8 and 16: as many tempi, more time signatures and 4 s excerpts,
# fewer right values listed for review); 64 since 1,815 (against 32: a few more tempi, time
# signatures and excerpts, as many right values listed).
LEVEL_HIDDEN = 64
LEVEL_MEMBERS = 10
LEVEL_SHRINKAGE = 0.001
LEVEL_ITERATIONS = 300
FOLDS = 4
TEMPO_TOLERANCE = 0.04
SOURCES = (
    "corpus60",
    "corpus60_test",
    "corpus96",
    "corpus96_test",
    "corpus48",
    "corpus56",
    "corpus52",
    "corpus64",
    "corpus72",
    "corpus80",
    "corpus88",
    "corpus104",
    "corpus112",
    "corpus120",
    "corpus128",
    "corpus136",
    "corpus144",
    "corpus152",
    "corpus160",
    "corpus168",
    "corpus176",
    "corpus184",
    "corpus192",
    "dev_extra",
    "random",
    "even",
    "corpus22",
    "corpus22_extra",
)
# The level and metre are also fitted on an excerpt of each song this long (seconds, from a
# third of the way in): a short clip cannot measure the longer lags of its slower readings,
# and the weights must know what that looks like.
EXCERPTS = (4.0, 8.0)


@dataclass(frozen=True)
class DevSong:
    source: str  # one of SOURCES
    name: str
    path: str
    bpm: float
    metre: str
    tonic: str
    scale: str
    seconds: float = 0.0  # an excerpt this long (EXCERPTS), 0: the whole song


def excerpts(songs: list[DevSong]) -> list[DevSong]:
    """Every song of `songs` cut to each length of EXCERPTS, length by length."""
    return [replace(song, seconds=length) for length in EXCERPTS for song in songs]


def dev_songs() -> list[DevSong]:
    """The development songs of the module docstring, rendering them where missing."""

    def of(source: str, folder: Path, table) -> list[DevSong]:
        # the 22-song corpus's generator names no metre: all its songs are 4/4
        return [
            DevSong(
                source,
                s.name,
                str(folder / s.filename),
                s.bpm,
                getattr(s, "metre", "4/4"),
                s.tonic,
                s.scale,
            )
            for s in table
        ]

    first = corpus60.make_corpus()
    songs = of("corpus60", first, [s for s in corpus60.SONGS if s.half == "dev"])
    songs += of("dev_extra", corpus60.make_corpus(extra=True), corpus60.DEV_EXTRA)
    songs += of("corpus60_test", first, [s for s in corpus60.SONGS if s.half == "test"])
    folder = corpus96.make_corpus96()
    songs += of("corpus96", folder, [s for s in corpus96.SONGS96 if s.half == "dev"])
    songs += of("corpus96_test", folder, [s for s in corpus96.SONGS96 if s.half != "dev"])
    for source, table, make in (
        ("corpus48", corpus48.SONGS48, corpus48.make_corpus48),
        ("corpus56", corpus56.SONGS56, corpus56.make_corpus56),
        ("corpus52", corpus52.SONGS52, corpus52.make_corpus52),
        ("corpus64", corpus64.SONGS64, corpus64.make_corpus64),
        ("corpus72", corpus72.SONGS72, corpus72.make_corpus72),
        ("corpus80", corpus80.SONGS80, corpus80.make_corpus80),
        ("corpus88", corpus88.SONGS88, corpus88.make_corpus88),
        ("corpus104", corpus104.SONGS104, corpus104.make_corpus104),
        ("corpus112", corpus112.SONGS112, corpus112.make_corpus112),
        ("corpus120", corpus120.SONGS120, corpus120.make_corpus120),
        ("corpus128", corpus128.SONGS128, corpus128.make_corpus128),
        ("corpus136", corpus136.SONGS136, corpus136.make_corpus136),
        ("corpus144", corpus144.SONGS144, corpus144.make_corpus144),
        ("corpus152", corpus152.SONGS152, corpus152.make_corpus152),
        ("corpus160", corpus160.SONGS160, corpus160.make_corpus160),
        ("corpus168", corpus168.SONGS168, corpus168.make_corpus168),
        ("corpus176", corpus176.SONGS176, corpus176.make_corpus176),
        ("corpus184", corpus184.SONGS184, corpus184.make_corpus184),
        ("corpus192", corpus192.SONGS192, corpus192.make_corpus192),
    ):
        songs += of(source, make(), table)
    songs += of("random", random_styles.make_random_songs(), random_styles.RANDOM_SONGS)
    songs += of("even", even_pulses.make_even_songs(), even_pulses.EVEN_SONGS)
    tuning = [s for s in corpus22.SONGS if s.half == "tuning"]
    songs += of("corpus22", corpus22.make_corpus(), tuning)
    extra = corpus22.EXTRA_SONGS
    songs += of("corpus22_extra", corpus22.make_corpus(songs=extra), extra)
    held_out = {s.name for s in corpus200.SONGS200}
    assert not any(s.name in held_out for s in songs)
    return songs


# Sources drawn from one table of arrangements, by one generator: one table, one fold. Every
# other source (each later corpus, the random arrangements) is a table of its own.
TABLES = {
    "corpus60_test": "corpus60",
    "dev_extra": "corpus60",
    "corpus96_test": "corpus96",
    "corpus22_extra": "corpus22",
}


def table_of(song: DevSong) -> str:
    return TABLES.get(song.source, song.source)


def table_folds(songs: list[DevSong]) -> list[set[int]]:
    """FOLDS sets of indices into `songs`, each holding whole tables of arrangements (a
    corpus, with the sources drawn from the same table: TABLES): a song and its excerpts,
    and every song of its corpus, are in one fold. Each held-out corpus is a table no fit has
    met, and the songs of one table share its makers' habits (instruments, voicings, how
    the parts sit), which folds of whole arrangements still let a fit learn across: scored
    that way, the analysis read 86.9% of the development songs' tempi and 72.5% of the
    seventeenth corpus's. Fitted on folds of whole tables, the level model weighs the
    learned activations as they sound on a table the network has not heard, as on held-out
    music, and the review probabilities are set from doubts of that kind. The largest
    tables are placed first, each in the fold with the fewest songs so far (ties: the first
    fold), so the folds are alike in size and the same every run."""
    members: dict[str, list[int]] = {}
    for i, song in enumerate(songs):
        members.setdefault(table_of(song), []).append(i)
    folds: list[set[int]] = [set() for _ in range(FOLDS)]
    for name in sorted(members, key=lambda t: (-len(members[t]), t)):
        min(folds, key=len).update(members[name])
    return folds


def measure(song: DevSong) -> dict[str, np.ndarray]:
    """What the two choices are made from, as analyze_audio computes it (cached)."""
    cut = f"@{song.seconds:g}s" if song.seconds else ""
    cached = CACHE / CACHE_VERSION / song.source / f"{song.name}{cut}.npz"
    if cached.is_file():
        with np.load(cached, allow_pickle=False) as stored:
            return dict(stored)
    import essentia

    essentia.log.infoActive = False
    import essentia.standard as es

    from tunesmith.analysis import audio, chroma, key, meter, tempo

    samples, rate, _ = audio._decode(Path(song.path))
    mono = audio.analysis_mono(audio.downmix(samples), rate)
    if song.seconds:
        start = len(mono) // 3
        mono = mono[start : start + int(song.seconds * audio.ANALYSIS_SAMPLE_RATE)]
    full_onset, low_onset = meter.onset_strength(mono)
    found = chroma.chroma(mono)
    tracked = tempo.track(mono)
    full, low = (meter.autocorrelation(c) for c in (full_onset, low_onset))
    name, scale, _ = es.KeyExtractor(profileType=key.KEY_PROFILE)(mono)
    values = {
        "tracker": np.array([tracked.bpm, tracked.confidence]),
        "ticks": tracked.ticks,
        "full_acf": full[: len(full) // 2 + 2],  # meter._at reads lags under half the length
        "low_acf": low[: len(low) // 2 + 2],
        "acf_length": np.array([len(full)]),
        "chroma_full": found.full,
        "chroma_bass": found.bass,
        "chroma_low": found.low,
        "extractor": np.array([f"{key._ENHARMONIC.get(name, name)} {scale}"]),
        "sounding": np.array(key.sounding(mono)),
        "full_onset": full_onset,
        "low_onset": low_onset,
    }
    cached.parent.mkdir(parents=True, exist_ok=True)
    partial = cached.with_name(f".{cached.stem}.part.npz")
    np.savez(partial, **values)
    partial.replace(cached)
    return values


def _acf(values: dict, name: str) -> np.ndarray:
    """The stored half of an autocorrelation, padded back to its length (meter._at checks
    the lag against half the length)."""
    stored = values[name]
    return np.concatenate([stored, np.zeros(int(values["acf_length"][0]) - len(stored))])


def tempo_candidates(values: dict, song: DevSong, beats: np.ndarray):
    """analysis.meter's hypotheses for one song, and which is right (metre and tempo); `beats`:
    its activations (tests/analysis/fit_activation.py)."""
    from tunesmith.analysis import meter
    from tunesmith.analysis.chroma import Chroma

    bpm = float(values["tracker"][0])
    if bpm <= 0:
        return [], []
    onsets = meter.Onsets(
        values["full_onset"], values["low_onset"], _acf(values, "full_acf"), _acf(values, "low_acf")
    )
    found = meter.hypotheses(
        bpm,
        values["ticks"],
        onsets,
        Chroma(values["chroma_full"], values["chroma_bass"], values["chroma_low"]),
        beats,
    )
    right = [h.metre == song.metre and _tempo_right(h.bpm, song.bpm) for h in found]
    return found, right


def key_candidates(values: dict, song: DevSong, bar_seconds: float):
    from tunesmith.analysis import key
    from tunesmith.analysis.chroma import PITCH_CLASSES, Chroma

    tonic, scale = str(values["extractor"][0]).split()
    rows = key.evidence(
        tuple(float(v) for v in values["sounding"]),
        Chroma(values["chroma_full"], values["chroma_bass"], values["chroma_low"]),
        values["ticks"],
        bar_seconds,
        (tonic, scale),
    )
    right = [(PITCH_CLASSES[t], s) == (song.tonic, song.scale) for t, s in key.KEYS]
    return rows, right


def _tempo_right(found: float, truth: float) -> bool:
    return abs(found - truth) <= TEMPO_TOLERANCE * truth


# The conditional logit: each song a matrix of candidates x features and the right one(s).
Problem = list[tuple[np.ndarray, np.ndarray]]


def fit(problem: Problem, dimension: int) -> np.ndarray:
    """Weights maximising the mean log-probability of the right candidates, minus L2/2 |w|^2."""
    problem = [(x, y) for x, y in problem if y.sum() > 0]
    w = np.zeros(dimension)
    current = _objective(w, problem)
    for _ in range(200):
        gradient, hessian = -L2 * w, L2 * np.eye(dimension)
        for x, y in problem:
            p = _softmax(x @ w)
            gradient += x.T @ (y / y.sum() - p)
            hessian += x.T @ (np.diag(p) - np.outer(p, p)) @ x
        step, scale = np.linalg.solve(hessian, gradient), 1.0
        while scale > 1e-6:
            trial = w + scale * step
            value = _objective(trial, problem)
            if value >= current:
                break
            scale /= 2
        if value - current < 1e-10:
            return trial
        w, current = trial, value
    return w


def _objective(w: np.ndarray, problem: Problem) -> float:
    total = -0.5 * L2 * float(w @ w)
    for x, y in problem:
        z = x @ w
        top = z.max()
        total += float(y @ (z - top)) / y.sum() - math.log(np.exp(z - top).sum())
    return total


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max())
    return e / e.sum()


def tempo_matrix(found) -> np.ndarray:
    """Rows: each hypothesis's inputs to the level model (analysis.meter.INPUTS)."""
    return np.array([h.inputs() for h in found])


def fit_level(problem: Problem, seed: int = 0):
    """analysis.meter's level model fitted on `problem` (each song's hypotheses x INPUTS and
    the right ones): LEVEL_MEMBERS networks of LEVEL_HIDDEN tanh units, each from its own
    random start, each maximising the mean log-probability of the right hypotheses (the
    softmax of its scores over a song's hypotheses) minus LEVEL_SHRINKAGE times its squared
    weights, by L-BFGS. torch's optimiser and autograd, not hand-written: the fit is run here,
    never by the analysis, which reads the saved arrays with numpy alone."""
    import torch

    from tunesmith.analysis import meter

    problem = [(x, y) for x, y in problem if y.sum() > 0]
    # every song's hypotheses in one padded block: songs x hypotheses x INPUTS
    most = max(len(x) for x, _ in problem)
    x = torch.zeros(len(problem), most, problem[0][0].shape[1], dtype=torch.float64)
    y = torch.zeros(len(problem), most, dtype=torch.float64)
    present = torch.zeros(len(problem), most, dtype=torch.bool)
    for i, (xi, yi) in enumerate(problem):
        x[i, : len(xi)], y[i, : len(yi)], present[i, : len(xi)] = (
            torch.from_numpy(xi),
            torch.from_numpy(yi / yi.sum()),
            True,
        )
    members = []
    for member in range(LEVEL_MEMBERS):
        generator = torch.Generator().manual_seed(seed * LEVEL_MEMBERS + member)
        members.append(_fit_member(x, y, present, generator))
    return meter.LevelModel(*(np.stack(parts) for parts in zip(*members, strict=True)))


def save_level(model, path: Path, description: str) -> None:
    """`model` (analysis.meter.LevelModel) as analysis.meter reads it: float32 tensors, the
    inputs' names in order in the metadata, written atomically."""
    import torch

    from tunesmith.analysis import meter
    from tunesmith.store.tensors import write_safetensors

    arrays = {
        "hidden.weight": model.hidden_weight,
        "hidden.bias": model.hidden_bias,
        "out.weight": model.out_weight,
    }
    tensors = {name: torch.from_numpy(a.astype(np.float32)) for name, a in arrays.items()}
    write_safetensors(path, tensors, {"inputs": json.dumps(meter.INPUTS), "fitted": description})


def _fit_member(x, y, present, generator) -> list[np.ndarray]:
    """One network of fit_level from a random start: (hidden weight, hidden bias, output
    weight)."""
    import torch

    inputs = x.shape[2]
    hidden_w = torch.randn(LEVEL_HIDDEN, inputs, generator=generator, dtype=torch.float64)
    hidden_w = (hidden_w / math.sqrt(inputs)).requires_grad_()
    hidden_b = torch.zeros(LEVEL_HIDDEN, dtype=torch.float64, requires_grad=True)
    out_w = torch.randn(LEVEL_HIDDEN, generator=generator, dtype=torch.float64)
    out_w = (out_w / math.sqrt(LEVEL_HIDDEN)).requires_grad_()
    optimiser = torch.optim.LBFGS(
        [hidden_w, hidden_b, out_w], max_iter=LEVEL_ITERATIONS, line_search_fn="strong_wolfe"
    )

    def loss():
        optimiser.zero_grad()
        z = (torch.tanh(x @ hidden_w.T + hidden_b) @ out_w).masked_fill(~present, -math.inf)
        log_p = torch.where(present, z - z.logsumexp(dim=1, keepdim=True), 0.0)
        value = -(y * log_p).sum() / len(x)
        value = value + LEVEL_SHRINKAGE * ((hidden_w**2).sum() + (out_w**2).sum())
        value.backward()
        return value

    optimiser.step(loss)
    return [t.detach().numpy() for t in (hidden_w, hidden_b, out_w)]


def key_matrix(rows) -> np.ndarray:
    from tunesmith.analysis import key

    return np.array([[r[k] for k in key.FEATURES] for r in rows])


def review_table(pairs: list[tuple[bool, float]], name: str) -> str:
    """Wrong and right values under each candidate review probability."""
    wrong = [p for ok, p in pairs if not ok]
    right = [p for ok, p in pairs if ok]
    lines = [f"{name}: {len(right)}/{len(pairs)} right out of fold"]
    for level in (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.97, 0.99):
        caught = sum(p < level for p in wrong)
        listed = sum(p < level for p in right)
        lines.append(
            f"  under {level:.2f}: {caught}/{len(wrong)} wrong ({_pct(caught, len(wrong))}), "
            f"{listed}/{len(right)} right ({_pct(listed, len(right))})"
        )
    return "\n".join(lines)


def _pct(n: int, d: int) -> str:
    return f"{100 * n / d:.0f}%" if d else "-"


def main(argv=None) -> None:
    global LEVEL_HIDDEN, LEVEL_SHRINKAGE  # --hidden, --shrinkage: for choosing them
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=0, help="processes, 0: one a core")
    parser.add_argument(
        "--drop", nargs="*", default=[], help="analysis.meter features left out (an ablation)"
    )
    parser.add_argument(
        "--leave-out", nargs="*", default=[], choices=SOURCES, help="sources not used at all"
    )
    parser.add_argument(
        "--validate",
        choices=SOURCES,
        help="fit the level on every other source and score this one (whole and excerpts)",
    )
    parser.add_argument(
        "--write", action="store_true", help="save the level model to analysis.meter's file"
    )
    parser.add_argument("--hidden", type=int, help=f"the level model's units ({LEVEL_HIDDEN})")
    parser.add_argument(
        "--shrinkage", type=float, help=f"the level model's shrinkage ({LEVEL_SHRINKAGE})"
    )
    args = parser.parse_args(argv)
    LEVEL_HIDDEN = args.hidden or LEVEL_HIDDEN
    LEVEL_SHRINKAGE = args.shrinkage if args.shrinkage is not None else LEVEL_SHRINKAGE
    from tunesmith.analysis import key, meter

    songs = [s for s in dev_songs() if s.source not in args.leave_out]
    whole = len(songs)
    songs += excerpts(songs)  # after the whole songs: index i is an excerpt of song i % whole
    measured = run_all(_measure_task, songs, args.workers)
    width = len(meter.INPUTS)
    # the learned beats: each clip's from the network of its fold (fit_activation)
    bands = run_all(_bands_task, songs[:whole], args.workers) * (1 + len(EXCERPTS))
    # what follows (the networks' training, the fits) runs in this process alone: torch gets
    # the workers' cores (the measurements above run one thread a worker)
    import torch

    torch.set_num_threads(pool_size(args.workers))
    xs = [fit_activation.inputs(v, b, s) for v, b, s in zip(measured, bands, songs, strict=True)]
    folds = table_folds(songs)
    beats, (beat_f, downbeat_f, metre_right, tempo_near) = fit_activation.out_of_fold(
        xs, songs, whole, folds
    )

    tempo_problem, tempo_found = [], []
    for song, values, clip_beats in zip(songs, measured, beats, strict=True):
        found, right = tempo_candidates(values, song, clip_beats)
        tempo_found.append(found)
        if found:
            x = tempo_matrix(found)
            x[:, [meter.INPUTS.index(name) for name in args.drop]] = 0.0
            tempo_problem.append((x, np.array(right, dtype=float)))
        else:
            tempo_problem.append((np.zeros((0, width)), np.zeros(0)))
    if args.validate:
        print(validation(songs, tempo_problem, tempo_found, args.validate))
        return
    model = fit_level(tempo_problem)

    # out-of-fold: tempo, time signature and (with the fold's tempo) key; a song's excerpts
    # are in its fold. The figures and the review levels are the whole songs'.
    tempo_pairs, metre_pairs, key_pairs, sources = [], [], [], []
    cut_pairs: dict[float, list[bool]] = {length: [] for length in EXCERPTS}
    fold_model = {}
    record = OutOfFold()
    for k, held in enumerate(folds):
        train = [tempo_problem[i] for i in range(len(songs)) if i not in held]
        fold_model[k] = fit_level(train)
        for i in sorted(held):
            if not tempo_found[i]:
                if songs[i].seconds:
                    cut_pairs[songs[i].seconds].append(False)
                continue
            p = _softmax(fold_model[k].log_odds(tempo_problem[i][0]))
            if songs[i].seconds:
                cut_pairs[songs[i].seconds].append(_tempo_pair(tempo_found[i], p, songs[i])[0])
                continue
            sources.append(songs[i].source)
            tempo_pairs.append(_tempo_pair(tempo_found[i], p, songs[i]))
            metre_pairs.append(_metre_pair(tempo_found[i], p, songs[i]))
            record.add_tempo(i, k, fold_model[k], tempo_problem[i][0], tempo_found[i], songs[i])
    songs_and_excerpts = songs
    songs, measured = songs[:whole], measured[:whole]
    folds = [sorted(i for i in f if i < whole) for f in folds]

    def bars(level: meter.LevelModel) -> list[float]:
        out = []
        for i in range(len(songs)):
            if not tempo_found[i]:
                out.append(0.0)
                continue
            p = _softmax(level.log_odds(tempo_problem[i][0]))
            best, _, _ = meter.decision(tempo_found[i], p)
            out.append(meter.METRES[best.metre].beats * 60.0 / best.bpm)
        return out

    key_rows = [
        key_candidates(v, s, b)[0] for v, s, b in zip(measured, songs, bars(model), strict=True)
    ]
    key_right = [key_candidates(v, s, 0.0)[1] for v, s in zip(measured, songs, strict=True)]
    key_problem = [
        (key_matrix(r), np.array(y, dtype=float)) for r, y in zip(key_rows, key_right, strict=True)
    ]
    kw = fit(key_problem, len(key.FEATURES))
    for k, held in enumerate(folds):
        fold_bars = bars(fold_model[k])
        fold_rows = {i: key_candidates(measured[i], songs[i], fold_bars[i])[0] for i in held}
        train = [key_problem[i] for i in range(len(songs)) if i not in held]
        fold_w = fit(train, len(kw))
        for i in held:
            p = _softmax(key_matrix(fold_rows[i]) @ fold_w)
            key_pairs.append((bool(key_right[i][int(np.argmax(p))]), float(p.max())))
            record.add_key(i, p, key_right[i], measured[i])
    record.save(CACHE / CACHE_VERSION / "out_of_fold.npz", songs, measured)

    counts = ", ".join(f"{sum(s.source == src for s in songs)} {src}" for src in SOURCES)
    print(f"{len(songs)} development songs (and {len(EXCERPTS)} excerpts of each): {counts}")
    print("\nanalysis.key")
    print(
        "WEIGHTS = {"
        + ", ".join(f'"{k}": {v:.3f}' for k, v in zip(key.FEATURES, kw, strict=True))
        + "}"
    )
    print(
        f"\nanalysis.activation, out of fold: beat F-measure {beat_f:.3f}, "
        f"downbeat {downbeat_f:.3f} (a peak within 70 ms); the likeliest metre right on "
        f"{metre_right:.1%} of the songs, the likeliest tempo within a bin on {tempo_near:.1%}"
    )
    print(f"\n{FOLDS}-fold cross-validation (probability of the value chosen):")
    for source in SOURCES:
        chosen = [i for i, s in enumerate(sources) if s == source]
        print(
            f"  {source}: tempo {sum(tempo_pairs[i][0] for i in chosen)}/{len(chosen)}, "
            f"time signature {sum(metre_pairs[i][0] for i in chosen)}/{len(chosen)}"
        )
    for length, right in cut_pairs.items():
        print(f"  {length:g} s excerpts: tempo {sum(right)}/{len(right)}")
    print(review_table(tempo_pairs, "tempo"))
    print(review_table(metre_pairs, "time signature"))
    print(review_table(key_pairs, "key"))
    tempo_level, key_level, caught, listed = joint_levels(tempo_pairs, key_pairs)
    print(
        "\nREVIEW_PROBABILITY: for the tempo and the key together, the pair of levels (LEVELS) "
        "that lists the fewest right values while catching at least 80% of the wrong "
        f"ones: tempo {tempo_level:.2f}, key {key_level:.2f} (catches {caught}, lists {listed}); "
        "for the time signature, the lowest level under which 80% of its wrong values fall: "
        f"{review_level(metre_pairs):.2f}"
    )
    if args.write:
        from tunesmith.analysis import activation

        save_level(model, meter.MODEL_FILE, f"tests/analysis/fit_analysis.py on {counts}")
        network = fit_activation.fitted(xs, songs_and_excerpts, list(range(whole)), seed=FOLDS)
        fit_activation.save_network(network, activation.NETWORK_FILE)
        print(f"\nwrote {meter.MODEL_FILE} and {activation.NETWORK_FILE}")
    try:
        shipped = meter.level_model()
    except (FileNotFoundError, ValueError) as error:
        print(f"no level model for these inputs ({error}): run with --write")
        return
    chooses = all(
        int(np.argmax(shipped.log_odds(x))) == int(np.argmax(model.log_odds(x)))
        for x, _ in tempo_problem
        if len(x)
    )
    holds = np.allclose([key.WEIGHTS[k] for k in key.FEATURES], kw, atol=5e-3)
    print(
        f"the shipped level model {'chooses as' if chooses else 'chooses OTHERWISE than'} this "
        f"fit on every song and excerpt; analysis.key holds {'these' if holds else 'OTHER'} weights"
    )


class OutOfFold:
    """Each whole song's out-of-fold reading, kept for studying the review without a refit:
    its hypotheses (the level model's inputs, every member's score, tempo, metre, which are
    right) and its keys' probabilities, saved in one .npz (ragged rows flattened, with each
    song's offset)."""

    def __init__(self) -> None:
        self.tempo: dict[int, dict[str, np.ndarray]] = {}
        self.key: dict[int, tuple[np.ndarray, np.ndarray, int]] = {}

    def add_tempo(self, i: int, fold: int, model, x: np.ndarray, found, song: DevSong) -> None:
        from tunesmith.analysis import meter

        self.tempo[i] = {
            "fold": np.array([fold]),
            "x": x,
            "scores": model.member_scores(x),  # hypotheses x members
            "bpm": np.array([h.bpm for h in found]),
            "factor": np.array([float(h.factor) for h in found]),
            "metre": np.array([h.metre for h in found]),
            "tempo_right": np.array([_tempo_right(h.bpm, song.bpm) for h in found]),
            "signature_right": np.array(
                [
                    meter.METRES[h.metre].timesignature == meter.METRES[song.metre].timesignature
                    for h in found
                ]
            ),
        }

    def add_key(self, i: int, p: np.ndarray, right, values: dict) -> None:
        from tunesmith.analysis import key
        from tunesmith.analysis.chroma import PITCH_CLASSES

        tonic, scale = str(values["extractor"][0]).split()
        extractor = key.KEYS.index((PITCH_CLASSES.index(tonic), scale))
        self.key[i] = (p, np.array(right, dtype=bool), extractor)

    def save(self, path: Path, songs: list[DevSong], measured: list[dict]) -> None:
        order = sorted(self.tempo)
        arrays: dict[str, np.ndarray] = {
            "song": np.array(order),
            "source": np.array([songs[i].source for i in order]),
            "name": np.array([songs[i].name for i in order]),
            "truth_bpm": np.array([songs[i].bpm for i in order]),
            "truth_metre": np.array([songs[i].metre for i in order]),
            "tracker": np.array([measured[i]["tracker"] for i in order]),
            "offsets": np.cumsum([0] + [len(self.tempo[i]["bpm"]) for i in order]),
        }
        for name in self.tempo[order[0]]:
            arrays[name] = np.concatenate([self.tempo[i][name] for i in order])
        keyed = sorted(self.key)
        arrays["key_song"] = np.array(keyed)
        arrays["key_p"] = np.array([self.key[i][0] for i in keyed])
        arrays["key_right"] = np.array([self.key[i][1] for i in keyed])
        arrays["key_extractor"] = np.array([self.key[i][2] for i in keyed])
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.stem}.part.npz")
        np.savez(partial, **arrays)
        partial.replace(path)
        print(f"\nwrote {path}")


def validation(songs, problem, found, source: str) -> str:
    """The level and metre fitted on every source but `source`, scored on `source`'s songs
    and their excerpts: does what is learnt on the rest carry over to its arrangements?"""
    held = [i for i, song in enumerate(songs) if song.source == source]
    model = fit_level([x for i, x in enumerate(problem) if songs[i].source != source])
    lines = [f"fitted without {source}, scored on it:"]
    for length in (0.0, *EXCERPTS):
        chosen = [i for i in held if songs[i].seconds == length]
        tempo = metre = 0
        pairs = []
        for i in chosen:
            if not found[i]:
                continue
            p = _softmax(model.log_odds(problem[i][0]))
            pair = _tempo_pair(found[i], p, songs[i])
            tempo += pair[0]
            metre += _metre_pair(found[i], p, songs[i])[0]
            pairs.append(pair)
        what = f"{length:g} s excerpts" if length else "whole songs"
        lines.append(f"  {what}: tempo {tempo}/{len(chosen)}, time signature {metre}/{len(chosen)}")
        if not length:
            lines.append(review_table(pairs, "  tempo"))
    return "\n".join(lines)


# the review levels weighed: 0.50 to 0.95 in steps of 0.05, then 0.97 and 0.99
LEVELS = tuple(round(0.5 + 0.05 * i, 2) for i in range(10)) + (0.97, 0.99)


def joint_levels(first: list[tuple[bool, float]], second: list[tuple[bool, float]]):
    """(level for `first`, level for `second`, "caught/wrong", "listed/right") of the pair
    that lists the fewest right values while catching 80% of the wrong ones of both."""
    wrong = sum(not ok for ok, _ in first) + sum(not ok for ok, _ in second)
    right = len(first) + len(second) - wrong
    best = None
    for a in LEVELS:
        for b in LEVELS:
            caught = sum(not ok and p < a for ok, p in first) + sum(
                not ok and p < b for ok, p in second
            )
            listed = sum(ok and p < a for ok, p in first) + sum(ok and p < b for ok, p in second)
            if caught >= 0.8 * wrong and (best is None or listed < best[3]):
                best = (a, b, caught, listed)
    if best is None:
        return LEVELS[-1], LEVELS[-1], "-", "-"
    a, b, caught, listed = best
    return a, b, f"{caught}/{wrong}", f"{listed}/{right}"


def review_level(pairs: list[tuple[bool, float]]) -> float:
    wrong = [p for ok, p in pairs if not ok]
    for level in LEVELS:
        if wrong and sum(p < level for p in wrong) >= 0.8 * len(wrong):
            return level
    return LEVELS[-1]


def _tempo_pair(found, p: np.ndarray, song: DevSong) -> tuple[bool, float]:
    """(right, probability) of the tempo the analysis chooses (analysis.meter.decision)."""
    from tunesmith.analysis import meter

    best, _, groups = meter.decision(found, p)
    return _tempo_right(best.bpm, song.bpm), groups[0].probability  # what analysis.tempo writes


def _metre_pair(found, p: np.ndarray, song: DevSong) -> tuple[bool, float]:
    """(right, probability) of the time signature the analysis chooses."""
    from tunesmith.analysis import meter

    _, signature, _ = meter.decision(found, p)
    same = sum(
        p[i] for i, h in enumerate(found) if meter.METRES[h.metre].timesignature == signature
    )
    return signature == meter.METRES[song.metre].timesignature, float(same)


def _measure_task(song: DevSong) -> dict[str, np.ndarray]:
    return measure(song)


def _bands_task(song: DevSong) -> dict[str, np.ndarray]:
    return fit_activation.measure_bands(song, EXCERPTS)


if __name__ == "__main__":
    # run as the module's importable name, so that workers find what they are sent by it
    importlib.import_module(MODULE).main()
