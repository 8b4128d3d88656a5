"""`tunesmith ui` serves Dagster's GraphQL on the port asked for and stops on SIGTERM or SIGINT,
also when started in the background (where a shell leaves SIGINT ignored). Over a dataset the
command line built, in headless Chromium: no community dialog on the first page, the adapters
asset's page shows its tables of losses and its adapter file without a click, and the folder
sensor's first tick in the UI's daemon adopts the build instead of requesting it again."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pandas as pd
import psutil
import pytest

from pipelines.operations import UI_GRACE_SECONDS
from tests.conftest import write_clip

pytestmark = pytest.mark.slow
CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
TOML = """\
[[runs]]
name = "clips-lora"
family = "stable-audio-3"
base_model = "tiny-stable-audio-3"
trigger = "clipz"
[runs.adapter]
type = "lora"
rank = 4
[runs.train]
steps = 4
eval_every = 2
checkpoint_every = 4
latent_crop_length = 64
[[runs.demos]]
prompt = "{trigger}, a short clip"
seed = 1
duration = 1.0
steps = 2
"""
ASKED = (
    "return performance.getEntriesByType('resource')"
    ".some(e => e.name.includes('op=ShouldShowNux') && e.responseEnd > 0)"
)
SENSOR = (
    '{ sensorOrError(sensorSelector: {repositoryLocationName: "pipelines.definitions", '
    'repositoryName: "__repository__", sensorName: "dataset_folder_sensor"}) '
    "{ ... on Sensor { sensorState { ticks(limit: 100) { status skipReason runIds } } } } }"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _graphql(port: int, query: str = "{ version }") -> dict | None:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            return json.loads(response.read())
    except OSError:
        return None


def _wait_for_ui(ui: subprocess.Popen, port: int) -> dict:
    deadline = time.monotonic() + 180
    while (answer := _graphql(port)) is None:
        assert ui.poll() is None, "the UI exited before answering"
        assert time.monotonic() < deadline, "the UI never answered on its port"
        time.sleep(1)
    return answer


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
        answer = _wait_for_ui(ui, port)
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


# --- over a command-line build, in a real headless Chromium --------------------------------


@pytest.fixture(scope="module")
def built(tmp_path_factory, tiny_sa3) -> dict:
    """A dataset of three clips built by `tunesmith run` (a tiny Stable Audio 3, four steps),
    then `tunesmith ui` started over its Dagster home."""
    root = tmp_path_factory.mktemp("ui")
    (root / "models").mkdir()
    (root / "models" / "tiny-stable-audio-3").symlink_to(tiny_sa3)
    clips = root / "datasets" / "clips"
    for i, freq in enumerate([220.0, 330.0, 440.0]):
        write_clip(clips / f"clip{i}.wav", seconds=3.0, freq=freq)
        (clips / f"clip{i}.txt").write_text("clipz, a loop")
    (clips / "tunesmith.toml").write_text(TOML)
    env = {
        **os.environ,
        "DAGSTER_HOME": str(root / "home"),
        "TUNESMITH_DATASETS": str(root / "datasets"),
        "TUNESMITH_OUT": str(root / "out"),
        "TUNESMITH_STORE": str(root / "store"),
        "TUNESMITH_MODELS": str(root / "models"),
    }
    command = [sys.executable, "-m", "pipelines.cli"]
    done = subprocess.run(
        [*command, "run", "clips"], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    port, log = _free_port(), open(root / "ui.log", "w")
    ui = subprocess.Popen(
        [*command, "ui", "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        _wait_for_ui(ui, port)
        yield {
            "port": port,
            "adapters": pd.read_parquet(root / "out" / "clips" / "adapters.parquet"),
        }
    finally:
        ui.send_signal(signal.SIGTERM)
        try:
            ui.wait(UI_GRACE_SECONDS + 10)
        except subprocess.TimeoutExpired:
            ui.kill()
        log.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.skip("needs Debian's chromium and chromium-driver (.ci/run installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--window-size=1400,1000",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",  # a first visit
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    yield driver
    driver.quit()


def _wait(driver, condition, timeout: float = 60.0):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(condition)


def test_the_first_page_shows_no_community_dialog(built, browser):
    from selenium.webdriver.common.by import By

    port = built["port"]
    assert _graphql(port, "{ shouldShowNux }")["data"] == {"shouldShowNux": False}
    browser.get(f"http://127.0.0.1:{port}/")
    # The page asks the server whether to show its dialog, and opens it a second after.
    _wait(browser, lambda d: d.execute_script(ASKED))
    time.sleep(2)
    assert browser.find_elements(By.CSS_SELECTOR, "[role=dialog]") == []
    body = browser.find_element(By.TAG_NAME, "body").text
    assert "Join the Dagster community" not in body and "newsletter" not in body


def test_the_adapters_page_shows_the_losses_and_the_adapter_file_without_a_click(built, browser):
    from selenium.webdriver.common.by import By

    (run,) = built["adapters"].to_dict("records")
    browser.get(f"http://127.0.0.1:{built['port']}/assets/adapters")
    rows = "//tr[td[normalize-space()='{}']]"
    losses = _wait(
        browser,
        lambda d: d.find_elements(By.XPATH, rows.format("validation_losses") + "//tbody/tr"),
    )
    assert [_cells(row) for row in losses] == [
        [run["run"], str(point["step"]), f"{point['loss']:.6g}"]
        for point in json.loads(run["history"])
    ]
    assert all(row.is_displayed() for row in losses)
    (summary,) = browser.find_elements(By.XPATH, rows.format("runs") + "//tbody/tr")
    assert summary.is_displayed()
    assert _cells(summary)[:4] == [
        run["run"],
        f"{run['base_loss']:.6g}",
        f"{run['best_loss']:.6g}",
        str(run["best_step"]),
    ]
    path = browser.find_element(By.XPATH, rows.format(f"adapter {run['run']}") + "//a")
    assert path.is_displayed() and path.text == run["best_path"]
    assert browser.find_elements(By.CSS_SELECTOR, "[role=dialog]") == []


def _cells(row) -> list[str]:
    """A table row's cells as shown (a narrow column wraps "clips-lora" after its hyphen)."""
    from selenium.webdriver.common.by import By

    return [td.text.replace("\n", "") for td in row.find_elements(By.TAG_NAME, "td")]


def test_the_sensors_first_tick_adopts_the_command_lines_build(built):
    deadline = time.monotonic() + 120
    while not (
        ticks := _graphql(built["port"], SENSOR)["data"]["sensorOrError"]["sensorState"]["ticks"]
    ):
        assert time.monotonic() < deadline, "the folder sensor never ticked"
        time.sleep(1)
    first = ticks[-1]  # newest first
    assert first["status"] == "SKIPPED" and first["runIds"] == [], first
    assert first["skipReason"] == "already built as they are: clips", first
