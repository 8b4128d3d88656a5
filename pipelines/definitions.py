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


defs = dg.Definitions(
    assets=ASSETS,
    jobs=[build_dataset],
    sensors=[dataset_folder_sensor],
    schedules=[nightly_rebuild],
    resources=resources(),
)
