"""`make bench`'s training-step benchmarks run to the end (the others: tests/test_bench.py)."""

import pytest

from tests.test_bench import STEPS, run_to_the_end

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("script", STEPS)
def test_the_step_benchmark_runs_to_the_end(script):
    run_to_the_end(script)
