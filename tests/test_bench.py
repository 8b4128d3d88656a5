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
    "train_step.py": ["--steps", "2", "--rounds", "1"],
    "sdxl_step.py": ["--steps", "2", "--rounds", "1"],
    "muon_step.py": ["--quick"],
    "lokr_step.py": ["--quick"],
    "ace_step_step.py": ["--steps", "2"],
    "planner_step.py": ["--steps", "1", "--warmup", "1"],
    "ddp_scaling.py": ["--quick"],
    "encode_batch.py": ["--quick"],
    "render.py": ["--quick"],
    "scale.py": ["--quick"],
}


def test_every_benchmark_make_bench_runs_is_covered():
    makefile = (BENCH.parent / "Makefile").read_text()
    listed = {
        line.split("bench/")[1].split()[0]
        for line in makefile.splitlines()
        if "python bench/" in line
    }
    assert listed == set(SHORT)


@pytest.mark.parametrize("script", sorted(SHORT))
def test_the_benchmark_runs_to_the_end(script):
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *SHORT[script]],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert done.stdout.strip(), "the benchmark printed nothing"
