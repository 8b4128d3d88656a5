"""What measuring every checkpoint's renders costs: the adapters stage of the `loops` example
with its tiny CLAP measuring (`[metrics]`), against the same run with `enabled = false`.

Both datasets are built by the same job in one process (imports warm), into one temporary
root, alternated, each twice; the ratio is of the fastest adapters stage of each (seconds from
report.json). The measured side also embeds the dataset's items for the first time: what a
user's first build pays. The goal is at most 1.15. Absolute times on a shared machine are
noise; the ratio is what to compare.

`--quick` (what tests/test_bench.py runs) checks that the benchmark runs, it measures nothing
worth reading: three clips, a 4-step run with short demos, one build of each side.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a 4-step run: check, not measure")
    quick = parser.parse_args().quick
    with tempfile.TemporaryDirectory() as tmp:
        from bench.rerun_ratio import make_quick_loops, use_roots_under

        root = use_roots_under(Path(tmp))
        import dagster as dg

        from pipelines.definitions import defs
        from tunesmith.examples import TINY_CLAP
        from tunesmith.examples.loops import make_loops
        from tunesmith.quality.tiny import make_tiny_clap
        from tunesmith.report import read_report

        measured, plain = root / "datasets" / "measured", root / "datasets" / "plain"
        make_quick_loops(measured, root / "models")
        if not quick:  # every clip, the example's own 200-step run
            from tunesmith.examples import LOOPS_TOML

            make_loops(measured)
            (measured / "tunesmith.toml").write_text(LOOPS_TOML)
        make_tiny_clap(root / "models" / TINY_CLAP)
        shutil.copytree(measured, plain)
        toml = plain / "tunesmith.toml"
        toml.write_text(toml.read_text().replace("[metrics]\n", "[metrics]\nenabled = false\n"))

        job = defs.resolve_job_def("build_dataset")
        quiet = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
        seconds: dict[str, list[float]] = {"measured": [], "plain": []}
        with dg.instance_for_test() as instance:
            instance.add_dynamic_partitions("datasets", ["measured", "plain"])
            for _ in range(1 if quick else 2):
                for name in ("plain", "measured"):
                    shutil.rmtree(root / "out" / name, ignore_errors=True)  # train again
                    shutil.rmtree(root / "store" / "embeddings", ignore_errors=True)
                    result = job.execute_in_process(
                        instance=instance, partition_key=name, run_config=quiet
                    )
                    assert result.success
                    stage = read_report(root / "out" / name)["stages"]["adapters"]
                    assert stage["computed"] == 1
                    seconds[name].append(stage["seconds"])
            quality = read_report(root / "out" / "measured")["stages"]["adapters"]["runs"][0]
            assert quality["quality"]["steps"], "nothing was measured"
    with_metrics, without = min(seconds["measured"]), min(seconds["plain"])
    print(
        f"loops, adapters stage: with the measures {with_metrics:7.2f} s, without "
        f"{without:7.2f} s, ratio {with_metrics / without:.3f}  (goal <= 1.15)"
    )


if __name__ == "__main__":
    main()
