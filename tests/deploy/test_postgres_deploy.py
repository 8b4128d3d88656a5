"""A team's Dagster on a real PostgreSQL server (deploy/dagster.yaml, deploy/start.sh).

One temporary cluster serves the module. `tunesmith run loops` and `tunesmith run beats`
run at once on it, with the pool "gpu" closed until both wait on it, then opened to one
slot; then deploy/start.sh starts the daemon and webserver, is stopped and started again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from pipelines.status import STAGES
from tests.conftest import write_clip
from tests.deploy.postgres_server import free_port, postgres_server, unavailable_reason

pytest.importorskip("dagster_postgres", reason="dagster-postgres is in the `deploy` extra")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason())),
]

REPO = Path(__file__).resolve().parents[2]
GPU_STAGES = ("encoded", "adapters", "renders")
DATASETS = {"loops": 120.0, "beats": 90.0}  # different audio: nothing shared in the store
BLOCKED = "Step blocked by limit for pool gpu"
RUNS_QUERY = "{ runsOrError { ... on Runs { results { runId status } } } }"


@dataclass(frozen=True)
class Site:
    root: Path
    home: Path
    env: dict[str, str]


def write_dataset(folder: Path, bpm: float) -> None:
    """Two short clips and a two-step run with one short demo: every stage, in seconds."""
    write_clip(folder / "a.wav", seconds=3.0, bpm=bpm)
    (folder / "a.txt").write_text(f"a loop at {bpm:.0f} bpm")
    write_clip(folder / "b.wav", seconds=2.0, bpm=bpm, freq=330.0)
    (folder / "tunesmith.toml").write_text(
        '[[runs]]\nname = "short"\nfamily = "stable-audio-3"\n'
        'base_model = "tiny-stable-audio-3"\n'
        "[runs.train]\nsteps = 2\neval_every = 1\nlatent_crop_length = 32\n"
        '[[runs.demos]]\nprompt = "a loop"\nduration = 1.0\nsteps = 2\n'
    )


@pytest.fixture(scope="module")
def pg():
    with postgres_server() as server:
        yield server


@pytest.fixture(scope="module")
def site(tmp_path_factory, pg) -> Site:
    from tunesmith.examples import TINY_SA3
    from tunesmith.families.stable_audio_3.tiny import make_tiny_stable_audio_3

    root = tmp_path_factory.mktemp("team")
    make_tiny_stable_audio_3(root / "models" / TINY_SA3, seed=0)
    for name, bpm in DATASETS.items():
        write_dataset(root / "datasets" / name, bpm)
    home = root / "home"
    home.mkdir()
    # deploy/dagster.yaml as shipped, but with the run queue paused: the sensor's runs stay
    # queued (the command line runs in process, without the queue), so the daemon does not
    # start builds that would only compete with these tests for two CPU cores.
    template = (REPO / "deploy" / "dagster.yaml").read_text()
    assert "max_concurrent_runs: 4" in template
    (home / "dagster.yaml").write_text(
        template.replace("max_concurrent_runs: 4", "max_concurrent_runs: 0")
    )
    env = {
        **os.environ,
        **pg.env(),
        "DAGSTER_HOME": str(home),
        "TUNESMITH_DATASETS": str(root / "datasets"),
        "TUNESMITH_OUT": str(root / "out"),
        "TUNESMITH_STORE": str(root / "store"),
        "TUNESMITH_MODELS": str(root / "models"),
        "TUNESMITH_VENV": sys.prefix,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "OMP_NUM_THREADS": "1",
    }
    return Site(root, home, env)


def open_instance(site: Site) -> dg.DagsterInstance:
    """A new instance object on the site's dagster.yaml, as a restarted process builds one."""
    with pytest.MonkeyPatch.context() as mp:
        for key in ("DAGSTER_HOME", *[k for k in site.env if k.startswith("DAGSTER_PG_")]):
            mp.setenv(key, site.env[key])
        return dg.DagsterInstance.from_config(str(site.home))


def wait_for(what: str, check, timeout: float, procs: dict[Path, subprocess.Popen] | None = None):
    """Poll `check()` until it returns something truthy; fail naming `what` (and the output of
    any process, given as log file → process, that died meanwhile)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        for log, proc in (procs or {}).items():
            if proc.poll() is not None:
                pytest.fail(f"waiting for {what}: a process exited\n{log.read_text()}")
        time.sleep(0.5)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")


def blocked_at(instance: dg.DagsterInstance, run_id: str, step: str) -> float | None:
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
        if entry.step_key == step and entry.user_message.startswith(BLOCKED):
            return entry.timestamp
    return None


@pytest.fixture(scope="module")
def two_runs(site: Site) -> dict[str, dg.DagsterRun]:
    """Both datasets built at once by the command line; returns dataset → its run."""
    instance = open_instance(site)
    storage = instance.event_log_storage
    storage.set_concurrency_slots("gpu", 0)  # closed: both runs must queue for the pool
    cmd = [sys.executable, "-m", "pipelines.cli", "run"]
    logs = {name: site.root / f"run-{name}.log" for name in DATASETS}
    files = {name: logs[name].open("w") for name in DATASETS}
    procs = {
        name: subprocess.Popen(
            [*cmd, name], env=site.env, stdout=files[name], stderr=subprocess.STDOUT
        )
        for name in DATASETS
    }
    try:

        def both_waiting():
            runs = instance.get_runs(dg.RunsFilter(job_name="build_dataset"))
            waiting = [r for r in runs if blocked_at(instance, r.run_id, "encoded")]
            return len(waiting) == len(DATASETS)

        by_log = {logs[name]: proc for name, proc in procs.items()}
        wait_for("both runs to wait on the pool gpu", both_waiting, 240, by_log)
        storage.set_concurrency_slots("gpu", 1)
        for proc in procs.values():
            proc.wait(timeout=480)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for file in files.values():
            file.close()
    for name, proc in procs.items():
        output = logs[name].read_text()
        assert proc.returncode == 0, f"tunesmith run {name}:\n{output}"
        print(output)
    runs = instance.get_runs(dg.RunsFilter(job_name="build_dataset"))
    instance.dispose()
    return {run.tags["dagster/partition"]: run for run in runs}


def test_the_command_line_on_postgres_materializes_every_stage(site, pg, two_runs):
    instance = open_instance(site)
    from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage

    assert isinstance(instance.run_storage, PostgresRunStorage)
    assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
    assert set(two_runs) == set(DATASETS)
    for dataset, run in two_runs.items():
        assert run.status == dg.DagsterRunStatus.SUCCESS
        for stage in STAGES:
            records = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=stage, asset_partitions=[dataset]), limit=1
            ).records
            assert records and records[0].run_id == run.run_id, (dataset, stage)
        report = json.loads((site.root / "out" / dataset / "report.json").read_text())
        assert report["stages"]["adapters"]["computed"] == 1
    # The history is in the server's tables, not in a SQLite file beside dagster.yaml.
    with pg.connect() as conn, conn.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM runs WHERE pipeline_name = 'build_dataset'")
        assert cursor.fetchone()[0] == len(DATASETS)
    assert not list(site.home.rglob("*.db"))
    instance.dispose()


def test_two_runs_never_hold_the_gpu_pool_at_once(site, two_runs):
    """Every GPU step's time on the pool, from its run's event log: between its STEP_START
    (after the slot is claimed) and its success (before the slot is freed)."""
    instance = open_instance(site)
    spans = []
    for dataset, run in two_runs.items():
        # Both runs waited on the closed pool at the same time: they really competed.
        assert blocked_at(instance, run.run_id, "encoded") is not None
        starts, ends = {}, {}
        for entry in instance.all_logs(run.run_id):
            kind = entry.dagster_event_type
            if entry.step_key in GPU_STAGES and kind == dg.DagsterEventType.STEP_START:
                starts[entry.step_key] = entry.timestamp
            if entry.step_key in GPU_STAGES and kind == dg.DagsterEventType.STEP_SUCCESS:
                ends[entry.step_key] = entry.timestamp
        assert set(starts) == set(ends) == set(GPU_STAGES), dataset
        spans += [(starts[s], ends[s], dataset, s) for s in GPU_STAGES]
    spans.sort()
    print("\n".join(f"{a:.2f}-{b:.2f} {d} {s}" for a, b, d, s in spans))
    for (_, end, *first), (start, _, *second) in zip(spans, spans[1:], strict=False):
        assert end <= start, f"{first} and {second} held the pool gpu at once"
    assert {d for *_, d, _ in spans} == set(DATASETS)
    # Every slot was given back, and the pool still has the one slot the test gave it.
    info = instance.event_log_storage.get_concurrency_info("gpu")
    assert info.slot_count == 1 and info.active_slot_count == 0 and info.pending_step_count == 0
    instance.dispose()


class TeamServer:
    """deploy/start.sh in its own process group, its output in a file."""

    def __init__(self, site: Site, *args: str, env: dict[str, str] | None = None):
        self.port = free_port()
        self.log = site.root / f"start-{self.port}.log"
        self.file = self.log.open("w")
        self.proc = subprocess.Popen(
            ["bash", str(REPO / "deploy" / "start.sh"), "--port", str(self.port), *args],
            env=env or site.env,
            stdout=self.file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def output(self) -> str:
        return self.log.read_text()

    def graphql(self, query: str) -> dict:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/graphql",
            data=json.dumps({"query": query}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())["data"]

    def runs(self) -> dict[str, str]:
        """Run id → status, as the webserver lists them."""
        results = self.graphql(RUNS_QUERY)["runsOrError"]["results"]
        return {r["runId"]: r["status"] for r in results}

    def ready(self) -> bool:
        if self.proc.poll() is not None:
            pytest.fail(f"deploy/start.sh exited with {self.proc.returncode}:\n{self.output()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/server_info", timeout=5):
                return True
        except OSError:
            return False

    def stop(self) -> None:
        """SIGTERM to the script: it must stop the daemon and the webserver (and their code
        servers) and exit 0."""
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=90)
        wait_for("every process of deploy/start.sh to end", lambda: not _group_alive(self), 60)
        assert code == 0, self.output()

    def kill(self) -> None:
        """Whatever is left after a failure: the whole process group."""
        if _group_alive(self):
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.file.close()


def _group_alive(server: TeamServer) -> bool:
    try:
        os.killpg(server.proc.pid, 0)
        return True
    except ProcessLookupError:
        return False


def sensor_state(instance: dg.DagsterInstance):
    """The stored state of dataset_folder_sensor (None before the daemon first saw it)."""
    from dagster._core.scheduler.instigation import InstigatorType

    states = instance.all_instigator_state(instigator_type=InstigatorType.SENSOR)
    return next((s for s in states if s.instigator_name == "dataset_folder_sensor"), None)


def sensor_ticks(instance: dg.DagsterInstance) -> list:
    """Its ticks, newest first."""
    state = sensor_state(instance)
    if state is None:
        return []
    return list(instance.get_ticks(state.instigator_origin_id, state.selector_id, limit=10))


def _why_requested(site: Site, instance: dg.DagsterInstance, run_ids: list[str]) -> str:
    """For a failure: the partitions the tick requested, and what `tunesmith status` says of
    each command-line build now (the sensor adopts a build only when every stage is current)."""
    said = []
    for run_id in run_ids:
        partition = instance.get_run_by_id(run_id).tags.get("dagster/partition")
        status = subprocess.run(
            [sys.executable, "-m", "pipelines.cli", "status", str(partition)],
            env=site.env,
            capture_output=True,
            text=True,
        )
        said.append(f"requested {partition}:\n{status.stdout}{status.stderr}")
    return "\n".join(said)


def test_a_restart_of_daemon_and_webserver_keeps_history_cursor_and_partitions(site, two_runs):
    """deploy/start.sh twice. The first daemon's sensor finds a new folder: a partition, a
    cursor and a queued run (the queue is paused). All of it survives the restart: the new
    webserver lists every run, and the new daemon's next tick reads the stored cursor and
    finds nothing changed."""
    from dagster._core.scheduler.instigation import TickStatus

    write_clip(site.root / "datasets" / "drums" / "kick.wav", seconds=2.0, bpm=100.0)
    instance = open_instance(site)
    first = TeamServer(site, "--gpus", "2", "--migrate")
    try:
        tick = wait_for(
            "the first sensor tick",
            lambda: next((t for t in sensor_ticks(instance) if t.status != TickStatus.STARTED), 0),
            180,
        )
        wait_for("the first webserver", first.ready, 120)
        before = first.runs()
        first.stop()
    finally:
        first.kill()
    assert tick.status == TickStatus.SUCCESS, tick
    cursor = json.loads(tick.cursor)
    assert set(cursor) == {"loops", "beats", "drums"}
    assert instance.event_log_storage.get_concurrency_info("gpu").slot_count == 2  # --gpus 2
    assert {two_runs[d].run_id for d in DATASETS} <= set(before)
    assert set(tick.run_ids) <= {r for r, status in before.items() if status == "QUEUED"}
    # drums only: loops and beats are new to the cursor too, but the command line built them as
    # they are, and the sensor's first tick adopts such builds instead of queuing them again
    assert len(tick.run_ids) == 1, _why_requested(site, instance, tick.run_ids)
    instance.dispose()

    # Between the two starts: a new instance object, as the restarted processes build one.
    instance = open_instance(site)
    assert set(instance.get_dynamic_partitions("datasets")) == {"loops", "beats", "drums"}
    assert json.loads(sensor_state(instance).instigator_data.cursor) == cursor

    second = TeamServer(site, env={**site.env, "TUNESMITH_GPU_SLOTS": "1"})
    try:
        wait_for("the second webserver", second.ready, 120)
        after = second.runs()
        # the sensor's minimum interval (30 s) counts from the first daemon's tick
        later = wait_for(
            "the sensor's first tick after the restart",
            lambda: next(
                (
                    t
                    for t in sensor_ticks(instance)
                    if t.timestamp > tick.timestamp and t.status != TickStatus.STARTED
                ),
                0,
            ),
            180,
        )
        second.stop()
    finally:
        second.kill()
    assert after == before
    assert later.status == TickStatus.SKIPPED and later.skip_reason == "no dataset folder changed"
    assert json.loads(sensor_state(instance).instigator_data.cursor) == cursor
    assert instance.event_log_storage.get_concurrency_info("gpu").slot_count == 1
    instance.dispose()
