"""A no-change re-run of every stage against the first run, on the `loops` example.

Both runs go through the same job in one process (imports already warm), into fresh
temporary roots and a temporary Dagster instance. Prints two ratios: the whole run as
Dagster executes it, and the stages' own seconds from report.json (the run minus
Dagster's per-run bookkeeping: run records, event log writes, IO manager). The goal is
< 0.05. Absolute times on a shared machine are noise; the ratios are what to compare.

`--quick` (what tests/test_bench.py runs) checks that the benchmark runs, it measures nothing
worth reading: only the loops dataset (three of its clips) and its model are made, the run
trains 4 steps and renders short demos, and one re-run follows the first run instead of two.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a 4-step run: check, not measure")
    quick = parser.parse_args().quick
    with tempfile.TemporaryDirectory() as tmp:
        root = use_roots_under(Path(tmp))
        import dagster as dg

        from pipelines.definitions import defs
        from tunesmith.examples import make_examples
        from tunesmith.report import read_report

        if quick:
            make_quick_loops(root / "datasets" / "loops", root / "models")
        else:
            make_examples(root / "datasets", root / "models")
        job = defs.resolve_job_def("build_dataset")
        quiet = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
        with dg.instance_for_test() as instance:
            instance.add_dynamic_partitions("datasets", ["loops"])
            times, stage_times = [], []
            runs = 2 if quick else 3  # first run, then no-change re-runs (--quick: one)
            for _ in range(runs):
                start = time.perf_counter()
                result = job.execute_in_process(
                    instance=instance, partition_key="loops", run_config=quiet
                )
                assert result.success
                times.append(time.perf_counter() - start)
                stages = read_report(root / "out" / "loops")["stages"]
                stage_times.append(sum(s["seconds"] for s in stages.values()))
                computed = sum(s["computed"] for s in stages.values())
            assert computed == 0, "the re-run computed something"
    for name, series in (("whole run", times), ("stages only", stage_times)):
        first, rerun = series[0], min(series[1:])
        print(
            f"loops, {name:<11}: first {first:7.3f} s, no-change re-run {rerun:7.3f} s, "
            f"ratio {rerun / first:.3f}  (goal < 0.05)"
        )


def use_roots_under(root: Path) -> Path:
    """Point this process's datasets, outputs, store and models roots under `root`."""
    for name in ("datasets", "out", "store", "models"):
        os.environ[f"TUNESMITH_{name.upper()}"] = str(root / name)
    return root


def make_quick_loops(folder: Path, models: Path) -> None:
    """What `--quick` builds: the loops dataset with three of its clips (a .txt caption, JSON
    tags, ID3 tags), a 4-step run and its demos 2 s long in 2 steps, and the tiny Stable Audio 3
    it trains on; the other examples and models are not made."""
    from tunesmith.examples import LOOPS_TOML, TINY_SA3
    from tunesmith.examples.loops import LOOPS, make_loops
    from tunesmith.families.stable_audio_3.tiny import make_tiny_stable_audio_3

    make_loops(folder)
    kept = {spec.stem for spec in LOOPS[:3]}
    for path in folder.iterdir():
        if path.stem not in kept:
            path.unlink()
    toml = (
        LOOPS_TOML.replace("steps = 200", "steps = 4")
        .replace("steps = 25", "steps = 2")
        .replace("duration = 8.0", "duration = 2.0")
    )
    (folder / "tunesmith.toml").write_text(toml)
    make_tiny_stable_audio_3(models / TINY_SA3)


if __name__ == "__main__":
    main()
