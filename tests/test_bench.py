"""`make bench` runs to the end: every benchmark, in its short form, finishes and prints its
ratios. (What they measure is read from `make bench` itself, never asserted here: absolute
times on a shared machine are noise.)"""

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
BENCH = Path(__file__).resolve().parent.parent / "bench"
# Each benchmark's cheapest form that still goes through all of its code: one process of each
# side (--rounds 1), the fewest steps, the quick forms' small datasets.
SHORT = {
    "rerun_ratio.py": ["--quick"],
    "muon_step.py": ["--quick"],
    "lokr_step.py": ["--quick"],
    "ddp_scaling.py": ["--quick"],
    "encode_batch.py": ["--quick"],
    "render.py": ["--quick"],
    "scale.py": ["--quick"],
    "quality_cost.py": ["--quick"],
    # the four families' step benches (train_step, sdxl_step, ace_step_step, planner_step) in
    # their reduced forms, and their table
    "steps.py": ["--short"],
    # every family's rows at a small width (make bench-real), checkpointed: the rows without
    # checkpointing run the same code with the flag off
    "real_size.py": ["--reduced", "--checkpointing", "on"],
    # 4 songs of the labels corpus, then one 30 s song in fresh processes
    "labels.py": ["--quick"],
}


def test_every_benchmark_make_bench_runs_is_covered():
    makefile = (BENCH.parent / "Makefile").read_text()
    listed = {
        line.split("bench/")[1].split()[0]
        for line in makefile.splitlines()
        if "python bench/" in line
    }
    assert listed == set(SHORT)


# The training-step benchmarks run from tests/test_bench_steps.py: a file of its own, so the
# two test processes (`make test`, one file per process at a time) share the half of the suite's
# time these take instead of one process running all of them.
STEPS = sorted(s for s in SHORT if s.endswith("_step.py") or s == "steps.py")


@pytest.mark.parametrize("script", sorted(set(SHORT) - set(STEPS)))
def test_the_benchmark_runs_to_the_end(script):
    run_to_the_end(script)


def run_to_the_end(script: str) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *SHORT[script]],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert done.stdout.strip(), "the benchmark printed nothing"
