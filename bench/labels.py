"""Analysis time per song of the labels stage against plain Essentia, measured in one run.

Both analyses run on the same songs of tests/analysis/corpus60.py, each from the file on disk
(decoding included), timed as CPU seconds of the call in its own process
(`tests.analysis.measure`, Essentia's import left out), so one core's seconds whatever else
the machine runs:

- plain Essentia: MonoLoader at 44.1 kHz, RhythmExtractor2013 ("multifeature") and
  KeyExtractor with default settings (`measure.plain_essentia`);
- tunesmith: `tunesmith.analysis.audio.analyze_audio`, what the labels stage calls (decode,
  loudness, chromagram, tempo with its level and metre chosen, key), `measure.tunesmith_labels`.

By default the corpus's 32 development songs; `--all` times all 64, `--dev-extra` the 192
DEV_EXTRA songs. Only times are printed (no scores: the held-out corpus is scored by
tests/analysis/test_corpus80.py).

`--pool N` times the labels stage's own pool instead: what it maps over a dataset's files
(`tunesmith.dataset.analyse.analyse_file`: format check, analysis, embedded tags, the file
hashed again) on one process and on N (0: one a core), by wall time from the start of the
pool to its last result, its processes' start-up included, in the order 1, N, N, 1 so that
a machine that slows or speeds up during the run falls on both alike.

    .venv/bin/python bench/labels.py [--all | --dev-extra] [--workers N] [--pool N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # before numpy is imported: one core for each analysis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--all", action="store_true", help="all 64 songs of the corpus")
    group.add_argument("--dev-extra", action="store_true", help="the 192 DEV_EXTRA songs")
    parser.add_argument("--workers", type=int, default=1, help="processes (0: one a core)")
    parser.add_argument("--pool", type=int, help="time the stage's pool: 1 process against N")
    args = parser.parse_args()

    from tests.analysis import measure
    from tests.analysis.corpus60 import DEV_EXTRA, SONGS

    if args.dev_extra:
        songs, which = list(DEV_EXTRA), "the 192 DEV_EXTRA songs"
    elif args.all:
        songs, which = list(SONGS), "all 64 songs of tests/analysis/corpus60.py"
    else:
        songs = [s for s in SONGS if s.half == "dev"]
        which = "the 32 dev songs of tests/analysis/corpus60.py"
    if args.pool is not None:
        pool_speed(songs, which, args.pool)
        return
    times = {}
    estimators = {"plain Essentia": measure.plain_essentia, "tunesmith": measure.tunesmith_labels}
    for name, estimator in estimators.items():
        results = measure.measure(estimator, None, args.workers, songs)
        times[name] = [r.seconds for r in results]
    plain, ours = times["plain Essentia"], times["tunesmith"]
    print(f"CPU seconds a song, one core, {which}:")
    print(f"{'':16} {'mean':>6} {'median':>7} {'max':>6}")
    for name, values in times.items():
        print(
            f"{name:16} {statistics.mean(values):6.3f} {statistics.median(values):7.3f} "
            f"{max(values):6.3f}"
        )
    ratios = [o / p for o, p in zip(ours, plain, strict=True) if p > 0]
    print(
        f"tunesmith / plain Essentia: {statistics.mean(ours) / statistics.mean(plain):.2f} "
        f"(means), {statistics.median(ratios):.2f} (median of the songs' ratios)"
    )


def pool_speed(songs, which: str, workers: int) -> None:
    """Wall time of the labels stage's analysis on one process and on `workers`."""
    from tests.analysis import measure
    from tunesmith.dataset.analyse import analyse_file
    from tunesmith.dataset.workers import pool_size, run_all
    from tunesmith.store import sha256_file

    folder = measure.render(songs)
    paths = [folder / song.filename for song in songs]
    tasks = [(str(p), p.name, "audio", sha256_file(p)) for p in paths]
    size = pool_size(workers)
    walls: dict[int, list[float]] = {1: [], size: []}
    for count in (1, size, size, 1):
        start = time.perf_counter()
        records = run_all(analyse_file, tasks, count)
        walls[count].append(time.perf_counter() - start)
        failed = [
            r["error"] if r else "changed during the run" for r in records if not r or "error" in r
        ]
        if failed:
            raise SystemExit(f"the analysis failed: {failed[:3]}")
    one, many = sum(walls[1]), sum(walls[size])
    print(f"the labels stage's analysis of {which}, wall seconds (two rounds each, 1 N N 1):")
    print(f"one process:     {' '.join(f'{w:.1f}' for w in walls[1])}")
    print(f"{size} processes:     {' '.join(f'{w:.1f}' for w in walls[size])}")
    print(f"speed-up ({size} processes / one): {one / many:.2f}  (goal ≥ 1.7 with 2)")


if __name__ == "__main__":
    main()
