"""The Dagster instance the command line builds with: made once, cleared of dead runs.

Three things keep a killed build from stopping the next one:

- The instance's SQLite storage is created under a file lock: two first builds started at
  once would otherwise both run Dagster's schema migrations and leave two alembic heads.
- Every run the command line starts carries its process id and host as tags. A run still
  STARTED whose process is gone (killed, out of memory) is marked failed and the pool slots
  it held are freed, with a line saying so, before anything else runs. The UI's runs are
  watched by the daemon's run monitoring (enabled in the dagster.yaml written here).
- `watch_pool` prints, while a step of this process waits on the `gpu` pool, which run holds
  it — instead of a silent wait.

The dagster.yaml written here also keeps the UI quiet: no telemetry, and no "Join the Dagster
community" dialog over the first page.
"""

from __future__ import annotations

import fcntl
import os
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import psutil
import yaml

from resources.compute import GPU_POOL
from tunesmith.config import Roots

PID_TAG, HOST_TAG = "tunesmith/pid", "tunesmith/host"
LIVE = [
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]

DAGSTER_YAML = """\
# Written by tunesmith when it creates a Dagster home.
concurrency:
  pools:
    default_limit: 1          # pool "gpu": one accelerator step at a time
run_monitoring:
  enabled: true               # the daemon fails runs whose worker died and frees their slots
  free_slots_after_run_end_seconds: 300
python_logs:
  managed_python_loggers:
    - tunesmith               # store warnings (an evicted entry) appear in the run's log
telemetry:
  enabled: false              # nothing about this machine's runs leaves it
"""
# Telemetry off does not hide the UI's "Join the Dagster community" dialog (an email form and
# a newsletter box over the first page, shown on 127.0.0.1 and localhost until dismissed in
# that browser): the webserver asks the instance's `nux` setting. A home an earlier tunesmith
# wrote gets this added when it is next opened.
NUX_OFF = """\
nux:
  enabled: false              # no "Join the Dagster community" dialog in the UI
"""
DAGSTER_YAML += NUX_OFF


def dagster_home() -> Path:
    """DAGSTER_HOME (the variable, the project file, or `data/dagster_home`), made persistent:
    without it Dagster throws the run history away."""
    home = Roots.from_env().dagster_home
    home.mkdir(parents=True, exist_ok=True)
    os.environ["DAGSTER_HOME"] = str(home)
    return home


@contextmanager
def _locked(home: Path) -> Iterator[None]:
    with open(home / ".tunesmith.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def open_instance() -> dg.DagsterInstance:
    """The instance in DAGSTER_HOME, its storage created by one process at a time."""
    home = dagster_home()
    with _locked(home):
        _write_config(home / "dagster.yaml")
        instance = dg.DagsterInstance.get()
        # Touch every storage so each creates its schema now, inside the lock.
        instance.get_runs_count()
        instance.event_log_storage.get_pool_limits()
        instance.schedule_storage.all_instigator_state()
    return instance


def _write_config(config: Path) -> None:
    """DAGSTER_YAML in a new home; the `nux` setting added to one an earlier tunesmith wrote
    without it. A dagster.yaml of a person's own (no tunesmith header) is left as it is."""
    if not config.exists():
        config.write_text(DAGSTER_YAML)
        return
    text = config.read_text()
    if text.startswith(DAGSTER_YAML.splitlines()[0]) and "nux" not in (yaml.safe_load(text) or {}):
        config.write_text(text.rstrip("\n") + "\n" + NUX_OFF)


def launcher_tags() -> dict[str, str]:
    """Tags that let a later build tell whether this run's process is still alive."""
    return {PID_TAG: str(os.getpid()), HOST_TAG: socket.gethostname()}


def _alive(pid: int, since: float | None) -> bool:
    """Is `pid` the process that started a run at `since` (not a reused pid)?"""
    try:
        process = psutil.Process(pid)
        started = process.create_time()
        if process.status() == psutil.STATUS_ZOMBIE:
            return False  # killed, and not yet reaped by a parent that may never wait for it
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return psutil.pid_exists(pid)
    return since is None or started <= since + 1.0


def dead_runs(instance: dg.DagsterInstance) -> list[dg.DagsterRun]:
    """Runs of this host that are not finished and whose process is gone."""
    host, dead = socket.gethostname(), []
    for record in instance.get_run_records(dg.RunsFilter(statuses=LIVE)):
        run = record.dagster_run
        pid = run.tags.get(PID_TAG)
        if pid is None or run.tags.get(HOST_TAG) != host:
            continue  # not started by this command on this machine: the daemon watches it
        since = record.create_timestamp.timestamp() if record.create_timestamp else None
        if not _alive(int(pid), since):
            dead.append(run)
    return dead


def reap_dead_runs(instance: dg.DagsterInstance, say: Callable[[str], None] = print) -> int:
    """Mark the runs of dead processes failed and free their pool slots; one line each."""
    runs = dead_runs(instance)
    for run in runs:
        dataset = run.tags.get("dagster/partition", "?")
        message = (
            f"run {run.run_id[:8]} (dataset {dataset}, pid {run.tags[PID_TAG]}) ended without "
            "finishing (its process is gone): marked failed, its pool slots freed"
        )
        instance.report_run_failed(run, message=message)
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        say(message)
    return len(runs)


@contextmanager
def watch_pool(
    instance: dg.DagsterInstance, say: Callable[[str], None] = print, every: float = 2.0
) -> Iterator[None]:
    """While the block runs, say which run holds the gpu pool whenever a step of a run of this
    process waits for it (once per holder)."""
    stop, told = threading.Event(), set()
    pid = str(os.getpid())

    def watch() -> None:
        while not stop.wait(every):
            info = instance.event_log_storage.get_concurrency_info(GPU_POOL)
            waiting = {s.run_id for s in info.pending_steps if s.assigned_timestamp is None}
            holders = {s.run_id: s.step_key for s in info.claimed_slots}
            for run_id in waiting:
                run = instance.get_run_by_id(run_id)
                if run is None or run.tags.get(PID_TAG) != pid:
                    continue
                for holder, step in holders.items():
                    if (run_id, holder) in told or holder == run_id:
                        continue
                    told.add((run_id, holder))
                    other = instance.get_run_by_id(holder)
                    tags = other.tags if other else {}
                    say(
                        f"  waiting for the {GPU_POOL} pool: held by run {holder[:8]} (dataset "
                        f"{tags.get('dagster/partition', '?')}, step {step}, pid "
                        f"{tags.get(PID_TAG, '?')})"
                    )

    thread = threading.Thread(target=watch, name="tunesmith-pool-watch", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(every + 1)
