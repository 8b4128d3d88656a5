"""What `tunesmith run` shows while it works: on a terminal, `rich`'s live progress with the
stage and the training run's step of its total (the plain lines of a build without a terminal
are checked on the fault tests' reference build). The build's first line says where its
record, reports and training logs are."""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time

import pytest

from tests.faults.test_faults import TOML, World
from tunesmith import progress

pytestmark = pytest.mark.slow
LONGER = TOML.replace("steps = 40", "steps = 400").replace("_every = 20", "_every = 200")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture
def world(tmp_path, tiny_sa3) -> World:
    models = tmp_path / "models"
    models.mkdir()
    (models / "tiny-stable-audio-3").symlink_to(tiny_sa3)
    (tmp_path / "world").mkdir()
    made = World(tmp_path / "world", models)
    (made.dataset / "tunesmith.toml").write_text(LONGER)
    return made


def test_a_build_on_a_terminal_shows_the_stage_and_the_training_step_live(world):
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    build = subprocess.Popen(
        [sys.executable, "-m", "pipelines.cli", "run", "clips"],
        env={**world.env, "TERM": "xterm-256color"},
        stdin=follower,
        stdout=follower,
        stderr=follower,
        start_new_session=True,
    )
    os.close(follower)
    seen, steps_while_training = b"", set()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed: the build is over
                break
            if not chunk:
                break
            seen += chunk
            if build.poll() is None:  # read while the build still runs
                text = ANSI.sub("", chunk.decode("utf-8", "replace"))
                steps_while_training |= set(re.findall(r"step (\d+) of 400", text))
        elif build.poll() is not None:
            break
    assert build.wait(30) == 0
    os.close(leader)
    text = ANSI.sub("", seen.decode("utf-8", "replace"))
    assert text.lstrip().startswith("building clips: runs recorded in "), text[:400]
    assert "train.log" in text.splitlines()[0]
    for stage in ("manifest", "labels", "encoded", "adapters", "renders"):
        assert re.search(rf"^\s+{stage}\s*$", text, re.M), (stage, text)
    assert "training clips-lora" in text
    # several steps were drawn while the run trained, not only its end
    assert len({s for s in steps_while_training if int(s) < 400}) >= 2, steps_while_training


def test_the_display_reads_training_steps_as_the_process_appends_them(tmp_path):
    events = tmp_path / "events.jsonl"
    events.write_text(json.dumps({"event": "step", "step": 1, "loss": 9.0, "of": 5}) + "\n")
    out = io.StringIO()
    display = progress.Display(out)
    progress.show(display)
    try:
        with progress.training("r", events, 5):  # an earlier run's lines are not this run's
            with open(events, "a") as f:
                for step in (1, 2):
                    f.write(json.dumps({"event": "step", "step": step, "loss": 0.5, "of": 4}))
                    f.write("\n")
                f.write(json.dumps({"event": "validation", "step": 2, "loss": 0.25}) + "\n")
                f.write('{"event": "step", "step": 3')  # half written: not read yet
    finally:
        progress.show(None)
    lines = out.getvalue().splitlines()
    assert lines[0] == "  training r: 5 steps"
    assert lines[1].startswith("  training r: step 2 of 4, loss 0.5000, validation 0.2500, ")
    assert lines[1].endswith(" left") and len(lines) == 2
