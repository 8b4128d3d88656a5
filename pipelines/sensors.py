"""Rebuild a dataset when its folder changes.

The cursor maps each dataset to a cheap fingerprint of its files (paths, sizes, mtimes;
no content is read). A new folder becomes a partition; a changed one gets a run whose
run key is `<dataset>:<fingerprint>`, so one state of a folder is built once, even if the
cursor is reset. tunesmith never writes into dataset folders, so its own outputs cannot
retrigger this sensor.

The command line builds too (`tunesmith run`, on the same instance), so a folder whose
fingerprint the cursor lacks is first asked two things. Is a run of that dataset unfinished
(queued, or running in the UI or a command's process)? Then nothing is requested and its
cursor entry is left as it was, for the next tick to decide once the run is over. Is its last
build of the folder as it is now, every stage fresh as `tunesmith status` decides
(`pipelines/freshness.py`)? Then the build is adopted: the cursor takes the fingerprint and
nothing is requested. A sensor first started over a history of command-line builds thus
requests none of them again, and takes no `gpu` pool slot from the next build.
"""

import json

import dagster as dg

from assets.common import datasets
from pipelines.freshness import current
from pipelines.instance import LIVE, reap_dead_runs
from pipelines.jobs import build_dataset
from resources.storage import StorageResource
from tunesmith.dataset.folders import dataset_folders, renamed
from tunesmith.dataset.manifest import fast_fingerprint
from tunesmith.train.preflight import preflight

UNFINISHED = [dg.DagsterRunStatus.QUEUED, *LIVE]  # waiting for the daemon, or at work


@dg.sensor(
    job=build_dataset,
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Watches the datasets root: adds a partition per new folder and builds "
    "each folder whose files changed since its last build.",
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
    seen = {key: fast_fingerprint(folder) for key, folder in folders.items()}
    known = set(context.instance.get_dynamic_partitions(datasets.name))
    new = sorted(set(seen) - known)
    for key in new:  # said when the dataset is registered, not after its first stages ran
        found = preflight(folders[key], storage.roots().models)
        for line in [*found.problems, *found.warnings]:
            context.log.warning(f"dataset {key}: {line}")
    changed = sorted(k for k, fp in seen.items() if previous.get(k) != fp)
    building = _unfinished(context.instance) & set(changed)
    # The definitions' asset graph says what fresh is (code versions, lineage); a sensor
    # evaluated without its repository adopts nothing.
    graph = context.repository_def.asset_graph if context.repository_def else None
    adopted, requested = [], []
    for key in (k for k in changed if k not in building):
        built = key in known and graph is not None
        if built and current(context.instance, graph, storage, key, folders[key]):
            adopted.append(key)
        else:
            requested.append(key)
    for key in sorted(building):
        context.log.info(f"dataset {key}: a run of it is not finished; decided after it ends")
    for key in adopted:
        context.log.info(f"dataset {key}: its last build is of the folder as it is; not rebuilt")
    cursor = {k: fp for k, fp in seen.items() if k not in building}
    cursor |= {k: previous[k] for k in building if k in previous}
    return dg.SensorResult(
        run_requests=[dg.RunRequest(partition_key=k, run_key=f"{k}:{seen[k]}") for k in requested],
        dynamic_partitions_requests=[datasets.build_add_request(new)] if new else [],
        cursor=json.dumps(cursor, sort_keys=True),
        skip_reason=None if requested else _skip_reason(changed, building, adopted),
    )


def _unfinished(instance: dg.DagsterInstance) -> set[str]:
    """The datasets a run not yet finished builds, whoever launched it."""
    return {
        partition
        for record in instance.get_run_records(dg.RunsFilter(statuses=UNFINISHED))
        if (partition := record.dagster_run.tags.get("dagster/partition"))
    }


def _skip_reason(changed: list[str], building: set[str], adopted: list[str]) -> str:
    if not changed:
        return "no dataset folder changed"
    said = []
    if adopted:
        said.append(f"already built as they are: {', '.join(adopted)}")
    if building:
        said.append(f"a run not finished: {', '.join(sorted(building))}")
    return "; ".join(said)
