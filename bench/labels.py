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
tests/analysis/test_corpus56.py).

    .venv/bin/python bench/labels.py [--all | --dev-extra] [--workers N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
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


if __name__ == "__main__":
    main()
