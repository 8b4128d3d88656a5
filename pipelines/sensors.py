"""Rebuild a dataset when its folder changes.

The cursor maps each dataset to a cheap fingerprint of its files (paths, sizes, mtimes;
no content is read). A new folder becomes a partition; a changed one gets a run whose
run key is `<dataset>:<fingerprint>`, so one state of a folder is built once, even if the
cursor is reset. tunesmith never writes into dataset folders, so its own outputs cannot
retrigger this sensor.
"""

import json

import dagster as dg

from assets.common import datasets
from pipelines.instance import reap_dead_runs
from pipelines.jobs import build_dataset
from resources.storage import StorageResource
from tunesmith.dataset.folders import dataset_folders, renamed
from tunesmith.dataset.manifest import fast_fingerprint
from tunesmith.train.preflight import preflight


@dg.sensor(
    job=build_dataset,
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Watches the datasets root: adds a partition per new folder and builds "
    "each folder whose files changed.",
)
def dataset_folder_sensor(
    context: dg.SensorEvaluationContext, storage: StorageResource
) -> dg.SensorResult:
    # A command-line build killed mid-run holds the gpu pool until someone closes its run.
    reap_dead_runs(context.instance, say=context.log.warning)
    folders = dataset_folders(storage.roots().datasets)
    for name, key in renamed(folders).items():
        context.log.info(f"dataset folder {name!r} is partition {key!r}")
    previous = json.loads(context.cursor or "{}")
    current = {key: fast_fingerprint(folder) for key, folder in folders.items()}
    known = set(context.instance.get_dynamic_partitions(datasets.name))
    new = sorted(set(current) - known)
    for key in new:  # said when the dataset is registered, not after its first stages ran
        found = preflight(folders[key], storage.roots().models)
        for line in [*found.problems, *found.warnings]:
            context.log.warning(f"dataset {key}: {line}")
    changed = sorted(k for k, fp in current.items() if previous.get(k) != fp)
    return dg.SensorResult(
        run_requests=[dg.RunRequest(partition_key=k, run_key=f"{k}:{current[k]}") for k in changed],
        dynamic_partitions_requests=[datasets.build_add_request(new)] if new else [],
        cursor=json.dumps(current, sort_keys=True),
        skip_reason=None if changed else "no dataset folder changed",
    )
