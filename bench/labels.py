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
tests/analysis/test_corpus192.py).

`--long SECONDS` times one long song instead (the first development song repeated to that
length, as FLAC: real songs are minutes long, the corpus's half a minute), each analysis in a
fresh process, with the process's peak memory (`ru_maxrss` after the call: the imports, the
same for both, and the analysis). `--quick` times 4 songs and a 30 s song (what the suite runs).

`--pool N` times the labels stage's own pool instead: what it maps over a dataset's files
(`tunesmith.dataset.analyse.analyse_file`: format check, analysis, embedded tags, the file
hashed again) on one process and on N (0: one a core), by wall time from the start of the
pool to its last result, its processes' start-up included, in the order 1, N, N, 1 so that
a machine that slows or speeds up during the run falls on both alike.

    .venv/bin/python bench/labels.py [--all | --dev-extra | --quick] [--workers N]
        [--pool N | --long SECONDS]
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
    group.add_argument("--quick", action="store_true", help="4 songs, then a 30 s song")
    parser.add_argument("--workers", type=int, default=1, help="processes (0: one a core)")
    parser.add_argument("--pool", type=int, help="time the stage's pool: 1 process against N")
    parser.add_argument("--long", type=float, help="time one song this many seconds long")
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
    if args.quick:
        songs, which = songs[:4], "4 dev songs of tests/analysis/corpus60.py"
    if args.pool is not None:
        pool_speed(songs, which, args.pool)
        return
    if args.long is not None:
        long_song(songs[0], args.long)
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
    if args.quick:
        long_song(songs[0], 30.0)


# One analysis of one file in a fresh process: its CPU seconds and the process's peak resident
# memory, as JSON on the last line.
_ONE_CALL = """
import json, resource, sys, time
import essentia
essentia.log.infoActive = False
import essentia.standard
from tests.analysis import measure
estimator = getattr(measure, sys.argv[1])
start = time.process_time()
estimator(sys.argv[2])
seconds = time.process_time() - start
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": seconds, "peak_mb": after / 1024}))
"""


def long_song(song, seconds: float) -> None:
    """Plain Essentia and the analysis on `song` repeated to `seconds`, each in its own
    process, alternated twice; the CPU time of each call and the peak memory of its process."""
    import json
    import subprocess
    import tempfile

    import numpy as np
    import soundfile as sf

    from tests.analysis import measure

    source = measure.render([song]) / song.filename
    samples, rate = sf.read(source, dtype="float32", always_2d=True)
    repeats = int(np.ceil(seconds * rate / len(samples)))
    looped = np.concatenate([samples] * repeats)[: int(seconds * rate)]
    root = Path(__file__).resolve().parents[1]
    found: dict[str, list[dict]] = {"plain_essentia": [], "tunesmith_labels": []}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "long.flac"
        sf.write(path, looped, rate)
        for _ in range(2):
            for name in found:
                done = subprocess.run(
                    [sys.executable, "-c", _ONE_CALL, name, str(path)],
                    capture_output=True,
                    text=True,
                    cwd=root,
                    env={**os.environ, "PYTHONPATH": str(root)},
                    check=True,
                )
                found[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"one song of {seconds:g} s ({song.name} repeated), each call in its own process:")
    print(f"{'':16} {'CPU s':>12} {'peak memory, MB':>18}")
    for name, label in (("plain_essentia", "plain Essentia"), ("tunesmith_labels", "tunesmith")):
        cpu = " ".join(f"{r['seconds']:.2f}" for r in found[name])
        memory = " ".join(f"{r['peak_mb']:.0f}" for r in found[name])
        print(f"{label:16} {cpu:>12} {memory:>18}")
    plain = min(r["seconds"] for r in found["plain_essentia"])
    ours = min(r["seconds"] for r in found["tunesmith_labels"])
    plain_mb = max(r["peak_mb"] for r in found["plain_essentia"])
    ours_mb = max(r["peak_mb"] for r in found["tunesmith_labels"])
    print(
        f"tunesmith / plain Essentia: {ours / plain:.2f} (CPU, the faster of two), "
        f"{ours_mb / plain_mb:.2f} (peak memory, the larger of two)"
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
