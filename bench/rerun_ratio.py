"""A no-change re-run of every stage against the first run, on the `loops` example.

Both runs go through the same job in one process (imports already warm), into fresh
temporary roots and a temporary Dagster instance. Prints two ratios: the whole run as
Dagster executes it, and the stages' own seconds from report.json (the run minus
Dagster's per-run bookkeeping: run records, event log writes, IO manager). The goal is
< 0.05. Absolute times on a shared machine are noise; the ratios are what to compare.
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
        root = Path(tmp)
        for name in ("datasets", "out", "store", "models"):
            os.environ[f"TUNESMITH_{name.upper()}"] = str(root / name)
        import dagster as dg

        from pipelines.definitions import defs
        from tunesmith.examples import make_examples
        from tunesmith.report import read_report

        make_examples(root / "datasets", root / "models")
        if quick:
            toml = root / "datasets" / "loops" / "tunesmith.toml"
            text = (
                toml.read_text()
                .replace("steps = 200", "steps = 4")
                .replace("steps = 25", "steps = 2")
            )
            toml.write_text(text)
        job = defs.resolve_job_def("build_dataset")
        quiet = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
        with dg.instance_for_test() as instance:
            instance.add_dynamic_partitions("datasets", ["loops"])
            times, stage_times = [], []
            for _ in range(3):  # first run, then two no-change re-runs
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


if __name__ == "__main__":
    main()
