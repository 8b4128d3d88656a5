"""The command line's Dagster instance: made once under a lock, cleared of dead runs."""

import multiprocessing as mp
import os
import subprocess
import sys
import time

import dagster as dg
import psutil
import pytest

from pipelines import dagster_fixes
from pipelines.instance import HOST_TAG, PID_TAG, launcher_tags, open_instance, reap_dead_runs
from resources.compute import GPU_POOL


def test_the_pool_wait_correction_applies_to_the_pinned_dagster():
    """Fails when a Dagster upgrade makes the correction inapplicable (remove it then)."""
    from dagster._core.execution.plan.instance_concurrency_context import (
        InstanceConcurrencyContext,
    )

    assert dagster_fixes.apply()
    waiting = InstanceConcurrencyContext.__new__(InstanceConcurrencyContext)
    waiting._pending_claims = {"adapters"}
    waiting._pending_timeouts = {"adapters": time.time() + 5.0}
    assert 4.0 < waiting.interval_to_next_pending_claim_check() <= 5.0  # it sleeps, not spins


def test_the_sqlite_storages_keep_one_engine_per_file_and_store_every_event(tmp_path):
    """A run's events, on the pinned Dagster with the correction, are all stored and read back
    by another instance on the same folder; the storages were handed kept engines."""
    from dagster._core.storage.event_log.sqlite import sqlite_event_log
    from sqlalchemy.pool import NullPool, QueuePool

    assert dagster_fixes.apply() and sqlite_event_log.create_engine is dagster_fixes.kept_engine
    url = f"sqlite:///{tmp_path / 'a.db'}"
    engine = dagster_fixes.kept_engine(url, poolclass=NullPool)
    assert dagster_fixes.kept_engine(url, poolclass=NullPool) is engine
    assert (
        dagster_fixes.kept_engine(f"sqlite:///{tmp_path / 'b.db'}", poolclass=NullPool)
        is not engine
    )
    assert dagster_fixes.kept_engine(url, poolclass=QueuePool) is not engine  # pooled: made anew

    @dg.op
    def one() -> int:
        return 1

    @dg.job
    def tiny():
        one()

    dagster_fixes._engines.clear()
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        result = tiny.execute_in_process(instance=instance)
        stored = instance.all_logs(result.run_id)
    assert result.success and any(
        str(tmp_path / "home") in key[0] for key in dagster_fixes._engines
    )
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as again:
        assert [e.dagster_event_type for e in again.all_logs(result.run_id)] == [
            e.dagster_event_type for e in stored
        ]
        assert again.get_run_by_id(result.run_id).status == dg.DagsterRunStatus.SUCCESS
    types = [e.dagster_event.event_type_value for e in stored if e.is_dagster_event]
    assert types == [e.event_type_value for e in result.all_events]


def _open(home, barrier):
    os.environ["DAGSTER_HOME"] = str(home)
    barrier.wait()
    open_instance().get_runs_count()


@pytest.mark.slow
def test_two_first_opens_at_once_leave_one_good_instance(tmp_path):
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_open, args=(tmp_path, barrier)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    check = subprocess.run(
        [
            sys.executable,
            "-c",
            "from pipelines.instance import open_instance as o; print(o().get_runs_count())",
        ],
        env={**os.environ, "DAGSTER_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0 and check.stdout.strip() == "0", check.stderr


@pytest.fixture
def instance():
    with dg.instance_for_test(
        overrides={"concurrency": {"pools": {"default_limit": 1}}}
    ) as instance:
        yield instance


def _dead_pid() -> int:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    return done.pid


def test_a_dead_builds_run_is_failed_and_its_pool_slot_freed(instance):
    @dg.op
    def noop():
        pass

    @dg.job
    def job():
        noop()

    run = instance.create_run_for_job(job, tags={**launcher_tags(), PID_TAG: str(_dead_pid())})
    instance.handle_run_event(
        run.run_id,
        dg.DagsterEvent(dg.DagsterEventType.RUN_START.value, job_name=job.name),
    )
    instance.event_log_storage.initialize_concurrency_limit_to_default(GPU_POOL)
    assert instance.event_log_storage.claim_concurrency_slot(
        GPU_POOL, run.run_id, "adapters"
    ).is_claimed
    live = instance.create_run_for_job(job, tags=launcher_tags())  # this process: alive
    said = []
    assert reap_dead_runs(instance, said.append) == 1
    assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.FAILURE
    assert instance.get_run_by_id(live.run_id).status != dg.DagsterRunStatus.FAILURE
    assert instance.event_log_storage.get_concurrency_info(GPU_POOL).claimed_slots == []
    assert "marked failed, its pool slots freed" in said[0] and run.run_id[:8] in said[0]
    assert run.tags[HOST_TAG] == live.tags[HOST_TAG]


def test_a_killed_build_not_yet_reaped_counts_as_dead():
    """A build killed with its `tunesmith run` is a zombie until something waits for it (in a
    container, PID 1 may never): its pid and start time are still there, and it is dead."""
    from pipelines.instance import _alive

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 30
        while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert not _alive(child.pid, None)
        assert _alive(os.getpid(), None)
    finally:
        child.wait()
