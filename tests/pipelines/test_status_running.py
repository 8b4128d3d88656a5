"""`tunesmith status` during a build: the stages done are fresh, the one at work is running
(training with its step of the total and its loss), the rest are waiting; once the build is
gone, its run is closed and nothing is said to be running."""

from __future__ import annotations

import os
import re
import signal
import time

import pytest

from pipelines.status import STAGES
from tests.faults.test_faults import TOML, World

pytestmark = pytest.mark.slow
LONG = TOML.replace("steps = 40", "steps = 100000")


def test_status_during_a_build_says_which_stage_runs_and_the_training_step(tmp_path, tiny_sa3):
    models = tmp_path / "models"
    models.mkdir()
    (models / "tiny-stable-audio-3").symlink_to(tiny_sa3)
    (tmp_path / "world").mkdir()
    world = World(tmp_path / "world", models)
    (world.dataset / "tunesmith.toml").write_text(LONG)
    build = world.start()
    try:
        deadline = time.monotonic() + 240
        while world.steps_done() < 2:
            assert build.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        status = world.status()
    finally:
        os.killpg(build.pid, signal.SIGKILL)
        build.wait(30)
    names = [stage.to_user_string() for stage in STAGES]
    lines = {
        line.split()[0]: line
        for line in status.splitlines()
        if line.split() and line.split()[0] in names
    }
    assert "  a build is running: run " in status, status
    for stage in ("manifest", "labels", "encoded"):
        assert " fresh " in lines[stage], status
    assert re.search(r"running +clips-lora: step \d+ of 100000, loss \d", lines["adapters"]), status
    assert lines["renders"].split() == ["renders", "waiting"], status
    after = world.status()
    assert "ended without finishing" in after and "running" not in after, after
