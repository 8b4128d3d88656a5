"""The one Definitions object: `dagster dev` and `dagster asset materialize -m
pipelines.definitions` load this module (workspace.yaml names it)."""

from __future__ import annotations

import dagster as dg

from assets.adapters import adapters
from assets.auditions import auditions
from assets.encoded import encoded
from assets.labels import labels
from assets.manifest import manifest
from assets.renders import renders
from pipelines import dagster_fixes
from pipelines.jobs import build_dataset
from pipelines.schedules import nightly_rebuild
from pipelines.sensors import dataset_folder_sensor
from resources.compute import ComputeResource
from resources.storage import ParquetIOManager, StorageResource

dagster_fixes.apply()  # every process that loads these definitions runs their steps

ASSETS = [manifest, labels, encoded, adapters, renders, auditions]


def resources(storage: StorageResource | None = None) -> dict[str, object]:
    """The resources every run gets; tests pass a StorageResource of temporary roots."""
    storage = storage or StorageResource()
    return {
        "storage": storage,
        "compute": ComputeResource(),
        "parquet_io": ParquetIOManager(storage=storage),
    }


# The stages' automation conditions (assets/common.py) are evaluated by this sensor, on by
# default: Dagster's own default one is stopped on a fresh instance, which would leave them
# declared but never evaluated. It catches what the folder sensor cannot see: one stage
# materialized by hand in the UI, or a stage whose code version changed.
automation = dg.AutomationConditionSensorDefinition(
    "default_automation_condition_sensor",
    target=dg.AssetSelection.groups("tunesmith"),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=30,
)

defs = dg.Definitions(
    assets=ASSETS,
    jobs=[build_dataset],
    sensors=[dataset_folder_sensor, automation],
    schedules=[nightly_rebuild],
    resources=resources(),
)
