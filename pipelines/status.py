"""`tunesmith status`: per dataset and stage, fresh, stale (and why) or missing.

A stage is fresh when Dagster's record says so (its code version, and the data version of
what it read, are the current ones) and what its last build wrote is still there: every
file its table names exists, and its cached entries have their recorded sizes.
"""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pandas as pd
import psutil

from pipelines.definitions import ASSETS, defs
from pipelines.instance import LIVE, PID_TAG, open_instance, reap_dead_runs
from pipelines.operations import _select
from resources.storage import StorageResource
from tunesmith.dataset.manifest import fast_fingerprint
from tunesmith.report import edited_outputs, output_files
from tunesmith.store import Store

STAGES = [a.key for a in ASSETS]  # in dependency order


def status(names: list[str]) -> int:
    """Per dataset and stage: fresh, stale (with the cause) or missing."""
    selected = _select(names)  # before the instance: a wrong folder creates nothing
    instance = open_instance()
    reap_dead_runs(instance)
    graph = defs.resolve_asset_graph()
    storage = StorageResource()
    store = storage.store()
    for key, folder in selected.items():
        print(f"== {key} ({folder})")
        live = _live_run(instance, key)
        if live is not None:
            pid = live.tags.get(PID_TAG, "?")
            print(f"  a build is running: run {live.run_id[:8]} (pid {pid})")
        steps = _steps(instance, live) if live is not None else {}
        state: dict[dg.AssetKey, tuple[str, str]] = {}
        for asset_key in STAGES:
            stage = asset_key.to_user_string()
            if live is not None and steps.get(stage) != "done":
                word = "running" if steps.get(stage) == "started" else "waiting"
                cause = _progress(storage.dataset_out(key), live) if stage == "adapters" else ""
                state[asset_key] = word, cause
                print(f"  {stage:<10} {word:<8} {cause if word == 'running' else ''}".rstrip())
                continue
            record = _latest(instance, asset_key, key)
            word, cause = _stage_status(instance, graph, asset_key, key, folder, record, state)
            if word == "fresh":
                cause = _lost_output(storage.dataset_out(key), stage) or _damaged(store, key, stage)
                word = "stale" if cause else word
            state[asset_key] = word, cause
            print(f"  {stage:<10} {word:<8} {cause}")
    return 0


def _live_run(instance: dg.DagsterInstance, partition: str) -> dg.DagsterRun | None:
    """The unfinished run building `partition` (dead ones were reaped before), if any."""
    records = instance.get_run_records(
        dg.RunsFilter(statuses=LIVE, tags={"dagster/partition": partition}), limit=1
    )
    return records[0].dagster_run if records else None


def _steps(instance: dg.DagsterInstance, run: dg.DagsterRun) -> dict[str, str]:
    """Stage → "started" or "done", for the stages `run` has reached."""
    kinds = {dg.DagsterEventType.STEP_START, dg.DagsterEventType.STEP_SUCCESS}
    found = {}
    for entry in instance.all_logs(run.run_id, of_type=kinds):
        event = entry.dagster_event
        done = event.event_type == dg.DagsterEventType.STEP_SUCCESS
        found[event.step_key] = "done" if done else found.get(event.step_key, "started")
    return found


def _progress(out: Path, run: dg.DagsterRun) -> str:
    """Each training run's newest step of its total, from the `events.jsonl` the training
    process writes (a run folder the running build has touched), e.g. `clips-lora: step 12 of
    400, loss 0.4213`."""
    since = _started(run)
    said = []
    for events in sorted((out / "adapters").glob("*/events.jsonl")):
        if since and events.stat().st_mtime < since:
            continue
        total = step = loss = None
        for line in _tail(events).splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue  # the line being written
            if event.get("event") == "step":
                step, total, loss = event["step"], event.get("of"), event.get("loss")
        if total:
            name = events.parent.name.rsplit("-", 1)[0]
            shown = f", loss {loss:.4f}" if isinstance(loss, float) else ""
            said.append(f"{name}: step {step} of {total}{shown}")
    return "; ".join(said)


def _tail(path: Path, size: int = 16384) -> str:
    """The last `size` bytes of a file (a long run's record is megabytes), whole lines only."""
    with open(path, "rb") as f:
        start = max(0, f.seek(0, 2) - size)
        f.seek(start)
        text = f.read().decode("utf-8", "replace")
    return text.split("\n", 1)[-1] if start else text  # a line cut at the start goes


def _started(run: dg.DagsterRun) -> float | None:
    try:
        return psutil.Process(int(run.tags[PID_TAG])).create_time()
    except (psutil.Error, ValueError, KeyError):
        return None


def _lost_output(out: Path, stage: str) -> str:
    """The first file the stage's last build wrote that is gone, as a cause; "" if none."""
    table = out / f"{stage}.parquet"
    if not table.exists():
        return f"its table {table} is missing"
    paths = output_files(pd.read_parquet(table))
    for path in paths:
        if not Path(path).exists():
            return f"{path} is missing (the next build writes it again)"
    edited = edited_outputs(out, stage, paths)
    if edited:
        more = f" and {len(edited) - 1} more" if len(edited) > 1 else ""
        return f"{edited[0]}{more} edited by hand: rebuilt next time"
    return ""


def _damaged(store: Store, dataset: str, stage: str) -> str:
    roots = store.roots / dataset / f"{stage}.json"
    keys = json.loads(roots.read_text(encoding="utf-8")) if roots.exists() else []
    damaged = store.damaged(keys)
    if not damaged:
        return ""
    return f"{len(damaged)} cached entries damaged, first {damaged[0]} (the next build redoes them)"


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
