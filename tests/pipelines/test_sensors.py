import json
import os
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg

from pipelines.definitions import ASSETS, resources
from pipelines.schedules import nightly_rebuild
from pipelines.sensors import dataset_folder_sensor
from tests.conftest import write_clip


def tick(instance, storage, cursor=None):
    context = dg.build_sensor_context(
        instance=instance, cursor=cursor, resources={"storage": storage}
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
