"""`tunesmith ui` serves Dagster's GraphQL on the port asked for and stops on SIGTERM or SIGINT,
also when started in the background (where a shell leaves SIGINT ignored)."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import psutil
import pytest

from pipelines.operations import UI_GRACE_SECONDS

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _graphql(port: int) -> dict | None:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": "{ version }"}).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            return json.loads(response.read())
    except OSError:
        return None


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_the_ui_answers_on_its_port_and_stops_on_a_signal(tmp_path, signum):
    port = _free_port()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path / "home"),
        "TUNESMITH_DATASETS": str(tmp_path / "datasets"),
    }
    (tmp_path / "datasets").mkdir()
    ui = subprocess.Popen(
        [sys.executable, "-m", "pipelines.cli", "ui", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # as `cmd &` in a non-interactive shell starts it: SIGINT ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        deadline = time.monotonic() + 180
        while (answer := _graphql(port)) is None:
            assert ui.poll() is None, "the UI exited before answering"
            assert time.monotonic() < deadline, "the UI never answered on its port"
            time.sleep(1)
        assert answer["data"]["version"]
        tree = psutil.Process(ui.pid).children(recursive=True)
        started = time.monotonic()
        ui.send_signal(signum)
        assert ui.wait(UI_GRACE_SECONDS + 10) == 128 + signum
        # Within the grace, the kill after it, and the teardown (seconds on a loaded machine).
        assert time.monotonic() - started < UI_GRACE_SECONDS + 5
        alive = [p for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        assert alive == [], alive
    finally:
        if ui.poll() is None:
            ui.kill()
