"""Automation fires downstream only on a real upstream data-version change."""

from pathlib import Path

import dagster as dg
import pytest

from assets.labels import labels
from assets.manifest import manifest
from pipelines.definitions import ASSETS, resources
from tests.conftest import write_clip

pytestmark = pytest.mark.slow


def test_labels_are_requested_only_when_the_manifest_version_changes(storage, instance):
    folder = Path(storage.datasets_root) / "drums"
    write_clip(folder / "a.wav")
    instance.add_dynamic_partitions("datasets", ["drums"])
    run = dict(instance=instance, resources=resources(storage), partition_key="drums")
    dg.materialize(ASSETS, **run)
    graph = dg.Definitions(assets=ASSETS, resources=resources(storage))
    evaluation = dg.evaluate_automation_conditions(defs=graph, instance=instance)
    assert evaluation.get_num_requested(labels.key) == 0

    # the manifest rebuilt from unchanged files: same data version, nothing requested
    dg.materialize(ASSETS, selection=[manifest], **run)
    evaluation = dg.evaluate_automation_conditions(
        defs=graph, instance=instance, cursor=evaluation.cursor
    )
    assert evaluation.get_num_requested(labels.key) == 0

    # a new file: new manifest version, labels requested for that partition
    write_clip(folder / "b.wav", bpm=90)
    dg.materialize(ASSETS, selection=[manifest], **run)
    evaluation = dg.evaluate_automation_conditions(
        defs=graph, instance=instance, cursor=evaluation.cursor
    )
    assert evaluation.get_requested_partitions(labels.key) == {"drums"}


def test_the_automation_sensor_is_declared_and_on_by_default():
    from pipelines.definitions import defs

    sensor = defs.get_sensor_def("default_automation_condition_sensor")
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    assert {
        k.to_user_string() for k in sensor.asset_selection.resolve(defs.resolve_asset_graph())
    } == {a.key.to_user_string() for a in ASSETS}


def test_a_caption_edit_requests_exactly_the_stages_downstream_one_at_a_time(storage, instance):
    """Each evaluation requests the stages whose upstream data version changed, no others."""
    from assets.encoded import encoded

    folder = Path(storage.datasets_root) / "drums"
    write_clip(folder / "a.wav")
    (folder / "a.txt").write_text("a drum loop")
    instance.add_dynamic_partitions("datasets", ["drums"])
    run = dict(instance=instance, resources=resources(storage), partition_key="drums")
    dg.materialize(ASSETS, **run)
    graph = dg.Definitions(assets=ASSETS, resources=resources(storage))
    cursor = dg.evaluate_automation_conditions(defs=graph, instance=instance).cursor

    def requested(selection):
        nonlocal cursor
        dg.materialize(ASSETS, selection=selection, **run)
        evaluation = dg.evaluate_automation_conditions(defs=graph, instance=instance, cursor=cursor)
        cursor = evaluation.cursor
        return {a.key.to_user_string() for a in ASSETS if evaluation.get_num_requested(a.key)}

    (folder / "a.txt").write_text("a heavier drum loop")
    assert requested([manifest]) == {"labels"}
    assert requested([labels]) == {"encoded"}  # the caption is in the label record
    assert requested([encoded]) == set()  # no run trains here: encoded's version is unchanged
