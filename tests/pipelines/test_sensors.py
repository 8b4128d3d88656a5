"""The folder sensor registers and builds changed folders, and adopts what the command line
built; the nightly schedule requests every dataset."""

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg

from pipelines.definitions import ASSETS, defs, resources
from pipelines.instance import launcher_tags
from pipelines.schedules import nightly_rebuild
from pipelines.sensors import dataset_folder_sensor
from tests.conftest import materialize, write_clip


def tick(instance, storage, cursor=None):
    """One evaluation, as the daemon makes it: with the definitions' repository."""
    context = dg.build_sensor_context(
        instance=instance, cursor=cursor, resources={"storage": storage}, definitions=defs
    )
    return dataset_folder_sensor(context)


def apply_partitions(instance, result):
    for request in result.dynamic_partitions_requests:
        instance.add_dynamic_partitions(request.partitions_def_name, request.partition_keys)


def test_sensor_adds_partitions_and_requests_one_run_per_changed_dataset(storage, instance):
    root = Path(storage.datasets_root)
    write_clip(root / "drums" / "a.wav")
    write_clip(root / "bass" / "b.wav")
    first = tick(instance, storage)
    assert first.dynamic_partitions_requests[0].partition_keys == ["bass", "drums"]
    cursor = json.loads(first.cursor)
    assert {r.partition_key: r.run_key for r in first.run_requests} == {
        "bass": f"bass:{cursor['bass']}",
        "drums": f"drums:{cursor['drums']}",
    }
    apply_partitions(instance, first)

    quiet = tick(instance, storage, first.cursor)
    assert quiet.run_requests == [] and quiet.dynamic_partitions_requests == []

    # one changed file: one run, for that dataset only, under a new run key
    clip = root / "drums" / "a.wav"
    os.utime(clip, ns=(clip.stat().st_atime_ns, clip.stat().st_mtime_ns + 10**9))
    changed = tick(instance, storage, first.cursor)
    assert [r.partition_key for r in changed.run_requests] == ["drums"]
    assert changed.run_requests[0].run_key != first.run_requests[1].run_key


def test_sensor_writes_nothing_that_retriggers_it(storage, instance):
    root = Path(storage.datasets_root)
    write_clip(root / "drums" / "a.wav")
    first = tick(instance, storage)
    apply_partitions(instance, first)
    dg.materialize(
        ASSETS,
        instance=instance,
        resources=resources(storage),
        partition_key="drums",
        selection=["manifest", "labels"],  # the stages that run without a base model
    )
    assert tick(instance, storage, first.cursor).run_requests == []


def test_sensor_maps_a_folder_name_that_is_not_a_valid_partition_key(storage, instance):
    write_clip(Path(storage.datasets_root) / "my...set\ttabs" / "a.wav")
    result = tick(instance, storage)
    (key,) = result.dynamic_partitions_requests[0].partition_keys
    assert "..." not in key and "\t" not in key
    assert key.startswith("my.set_tabs-")


def test_a_first_tick_adopts_the_datasets_built_as_they_are_and_requests_the_rest(
    storage, instance
):
    root = Path(storage.datasets_root)
    for name in ("drums", "bass", "keys"):
        write_clip(root / name / "a.wav")
    materialize(instance, storage, "drums")  # as `tunesmith run` leaves it: every stage built
    materialize(instance, storage, "bass")
    clip = root / "bass" / "a.wav"  # changed since its build
    os.utime(clip, ns=(clip.stat().st_atime_ns, clip.stat().st_mtime_ns + 10**9))

    first = tick(instance, storage)
    assert sorted(r.partition_key for r in first.run_requests) == ["bass", "keys"]
    assert set(json.loads(first.cursor)) == {"bass", "drums", "keys"}
    apply_partitions(instance, first)
    assert tick(instance, storage, first.cursor).run_requests == []


def _report(instance, run, event: dg.DagsterEventType) -> None:
    instance.report_dagster_event(dg.DagsterEvent(event.value, run.job_name), run_id=run.run_id)


def test_a_dataset_with_a_run_not_finished_waits_for_it_then_is_adopted(storage, instance):
    root = Path(storage.datasets_root)
    write_clip(root / "drums" / "a.wav")
    instance.add_dynamic_partitions("datasets", ["drums"])
    # A build of the command line at work: STARTED, tagged with its (live) process.
    run = instance.create_run_for_job(
        defs.resolve_job_def("build_dataset"),
        tags={"dagster/partition": "drums", **launcher_tags()},
    )
    _report(instance, run, dg.DagsterEventType.RUN_START)
    assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.STARTED

    waiting = tick(instance, storage)
    assert waiting.run_requests == [] and json.loads(waiting.cursor) == {}
    again = tick(instance, storage, json.dumps({"drums": "an earlier state"}))
    assert again.run_requests == [] and json.loads(again.cursor) == {"drums": "an earlier state"}

    materialize(instance, storage, "drums")  # the build's stages, then its end
    _report(instance, run, dg.DagsterEventType.RUN_SUCCESS)
    assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.SUCCESS
    after = tick(instance, storage, waiting.cursor)
    assert after.run_requests == [] and set(json.loads(after.cursor)) == {"drums"}


def test_nightly_schedule_requests_every_dataset_once_a_day(instance):
    instance.add_dynamic_partitions("datasets", ["bass", "drums"])
    context = dg.build_schedule_context(
        instance=instance, scheduled_execution_time=datetime(2026, 11, 30, 3, tzinfo=UTC)
    )
    requests = nightly_rebuild(context)
    assert [(r.partition_key, r.run_key) for r in requests] == [
        ("bass", "bass:2026-11-30"),
        ("drums", "drums:2026-11-30"),
    ]
