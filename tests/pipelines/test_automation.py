"""Automation fires downstream only on a real upstream data-version change."""

from pathlib import Path

import dagster as dg

from assets.labels import labels
from assets.manifest import manifest
from pipelines.definitions import ASSETS, resources
from tests.conftest import write_clip


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
