"""`tunesmith run` and `tunesmith status`: the same job, assets and instance as the UI."""

from __future__ import annotations

import dagster as dg

from assets.common import datasets as datasets_partitions
from pipelines.definitions import ASSETS, defs
from resources.storage import StorageResource
from tunesmith.dataset.folders import dataset_folders, renamed
from tunesmith.dataset.manifest import fast_fingerprint
from tunesmith.report import read_report

STAGES = [a.key for a in ASSETS]  # in dependency order
# Dagster's console logger prints every engine event at DEBUG; the summary says enough.
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def _select(names: list[str]) -> dict[str, object]:
    folders = dataset_folders(StorageResource().roots().datasets)
    by_name = {path.name: key for key, path in folders.items()}
    if not names:
        return folders
    chosen = {}
    for name in names:
        key = name if name in folders else by_name.get(name)
        if key is None:
            raise SystemExit(f"no dataset {name!r}; known: {', '.join(sorted(folders)) or 'none'}")
        chosen[key] = folders[key]
    return chosen


def run(names: list[str]) -> int:
    folders = _select(names)
    if not folders:
        print(f"no datasets under {StorageResource().roots().datasets}")
        return 1
    for name, key in renamed(folders).items():
        print(f"dataset folder {name!r} is partition {key!r}")
    instance = dg.DagsterInstance.get()
    instance.add_dynamic_partitions(datasets_partitions.name, list(folders))
    job = defs.resolve_job_def("build_dataset")
    failed = []
    for key in folders:
        print(f"== {key}")
        result = job.execute_in_process(
            instance=instance, partition_key=key, raise_on_error=False, run_config=QUIET
        )
        if not result.success:
            failed.append(key)
        _summary(key)
    pages = [p for key in folders for p in read_report(StorageResource().dataset_out(key)).get(
        "auditions", []
    )]  # fmt: skip
    if pages:
        print("audition pages (open in a browser):")
        for page in pages:
            print(f"  {page}")
    if failed:
        print(f"failed: {', '.join(failed)} (see `tunesmith ui` for the run logs)")
    return 1 if failed else 0


def _summary(key: str) -> None:
    out = StorageResource().dataset_out(key)
    report = read_report(out)
    stages = report.get("stages", {})
    for stage in (k.to_user_string() for k in STAGES if k.to_user_string() in stages):
        entry = stages[stage]
        skipped = entry.get("skipped", [])
        print(
            f"  {stage:<10} items {entry['items']:>4}  computed {entry['computed']:>4}  "
            f"cached {entry['cached']:>4}  skipped {len(skipped):>3}  {entry['seconds']:>8.2f} s"
        )
        for s in skipped:
            print(f"      skipped {s['path']}: {s['reason']}")
        for run in entry.get("runs", []):
            print(
                f"      run {run['run']}: validation loss {run['base_loss']:.4f} (base) → "
                f"{run['best_loss']:.4f} (best, step {run['best_step']}); {run['best_path']}"
            )
    print(f"  report: {out / 'report.json'}")


def status(names: list[str]) -> int:
    """Per dataset and stage: fresh, stale (with the cause) or missing."""
    instance = dg.DagsterInstance.get()
    graph = defs.resolve_asset_graph()
    for key, folder in _select(names).items():
        print(f"== {key} ({folder})")
        state: dict[dg.AssetKey, tuple[str, str]] = {}
        for asset_key in STAGES:
            record = _latest(instance, asset_key, key)
            state[asset_key] = _stage_status(instance, graph, asset_key, key, folder, record, state)
            word, cause = state[asset_key]
            print(f"  {asset_key.to_user_string():<10} {word:<8} {cause}")
    return 0


def review(names: list[str]) -> int:
    """Per dataset, the review table its last labels build wrote to report.json."""
    from tunesmith.dataset.review import text

    for key, folder in _select(names).items():
        stage = read_report(StorageResource().dataset_out(key)).get("stages", {}).get("labels")
        print(f"== {key} ({folder})")
        if stage is None:
            print("  labels not built yet: run `tunesmith run` first")
            continue
        print("\n".join(f"  {line}" for line in text(stage.get("review", [])).splitlines()))
    return 0


def _latest(instance, asset_key: dg.AssetKey, partition: str, upto: int | None = None):
    """The newest materialization of one partition (at or before storage id `upto`)."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(
            asset_key=asset_key,
            asset_partitions=[partition],
            before_storage_id=upto + 1 if upto is not None else None,
        ),
        limit=1,
    ).records
    return records[0].asset_materialization if records else None


def _version(mat) -> str | None:
    return mat.tags.get("dagster/data_version")


def _stage_status(instance, graph, asset_key, partition, folder, mat, state) -> tuple[str, str]:
    if mat is None:
        return "missing", "never materialized"
    node = graph.get(asset_key)
    built_with = mat.tags.get("dagster/code_version")
    if node.code_version != built_with:
        return "stale", f"code changed ({built_with} → {node.code_version})"
    if not node.parent_keys:  # the manifest: compare the folder with what was scanned
        seen = mat.metadata.get("fingerprint")
        if seen is None or seen.value != fast_fingerprint(folder):
            return "stale", "files in the dataset folder changed since the last build"
        return "fresh", ""
    for parent in sorted(node.parent_keys):
        name = parent.to_user_string()
        if state.get(parent, ("fresh",))[0] != "fresh":
            return "stale", f"upstream {name} is {state[parent][0]}"
        # Dagster's input_data_version tag is a hash over upstream partitions; the event
        # pointer names the exact upstream materialization this one read.
        pointer = mat.tags.get(f"dagster/input_event_pointer/{name}")
        consumed = _latest(instance, parent, partition, upto=int(pointer)) if pointer else None
        current = _latest(instance, parent, partition)
        if consumed is None or current is None or _version(consumed) != _version(current):
            return "stale", f"{name} has a new data version"
    return "fresh", ""
