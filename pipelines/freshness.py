"""Whether a dataset's stages are fresh: the one decision `tunesmith status` prints and the
folder sensor acts on.

A stage is fresh when Dagster's record says so (its code version, and the data version of
what it read, are the current ones) and what its last build wrote is still there: every
file its table names exists, and its cached entries have their recorded sizes. The
definitions are passed in as their asset graph, so the sensor, which they hold, can ask too.

A fresh stage whose last build did nothing (no item or run cached or computed) and skipped
something, or that did nothing below a skipped stage, is `skipped`: no base model, every run
refused, every file unreadable. The cause says why (the first skip, or the skipped stage's). A
stage that did some work and skipped some stays fresh; its cause says how many it skipped.
Skipped counts as current for the folder sensor and for the stages below it: building the same
folder again would skip the same way. What it lacked appearing is a change: a base model the
encoded stage recorded missing (`missing_base_models`) that is whole now makes it stale, and
the stages below it with it; `tunesmith run` then does the work. The sensor watches the
dataset folders only, so a base model put in place starts no build by itself.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import dagster as dg
import pandas as pd

from resources.storage import StorageResource
from tunesmith.dataset.manifest import fast_fingerprint
from tunesmith.render.ratings import folders_fingerprint
from tunesmith.report import REPORT_NAME, edited_outputs, output_files
from tunesmith.store import Store
from tunesmith.train.config import ConfigError, read_plan
from tunesmith.train.preflight import base_model_problem

State = dict[dg.AssetKey, tuple[str, str]]  # stage → (fresh, skipped, stale or missing; why)
CURRENT = ("fresh", "skipped")  # its last build is of things as they are


def current(instance, graph, storage: StorageResource, partition: str, folder: Path) -> bool:
    """Is every stage of the dataset fresh or skipped: its last build is of the folder as it is
    now?"""
    state: State = {}
    for asset_key in graph.toposorted_asset_keys:
        state[asset_key] = stage_state(
            instance, graph, storage, asset_key, partition, folder, state
        )
        if state[asset_key][0] not in CURRENT:
            return False  # the first stale stage decides; the rest are not read
    return bool(state)


def stage_state(
    instance, graph, storage: StorageResource, asset_key, partition: str, folder: Path, state: State
) -> tuple[str, str]:
    """One stage's word and cause; `state` holds the stages above it (dependency order)."""
    record = latest(instance, asset_key, partition)
    word, cause = _recorded(instance, graph, asset_key, partition, folder, record, state)
    if word == "fresh":
        stage, out = asset_key.to_user_string(), storage.dataset_out(partition)
        cause = (
            _lost_output(out, stage)
            or _damaged(storage.store(), partition, stage)
            or _base_model_there(record, out, storage.roots().models)
            or _ratings_handed_back(record, out, stage)
        )
        word = "stale" if cause else word
    if word == "fresh":
        parents = sorted(graph.get(asset_key).parent_keys)
        word, cause = _skipped(record, [state[p] for p in parents if p in state])
    return word, cause


def latest(instance, asset_key: dg.AssetKey, partition: str, upto: int | None = None):
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


def _recorded(instance, graph, asset_key, partition, folder, mat, state) -> tuple[str, str]:
    """What Dagster's record says of the stage."""
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
        if state.get(parent, ("fresh",))[0] not in CURRENT:
            return "stale", f"upstream {name} is {state[parent][0]}"
        now = latest(instance, parent, partition)
        if now is None or not _read(instance, mat, parent, name, partition, _version(now)):
            return "stale", f"{name} has a new data version"
    return "fresh", ""


def _read(instance, mat, parent, name: str, partition: str, version: str | None) -> bool:
    """Did the stage's build read `version` of the parent's partition?

    The event pointer names the upstream materialization Dagster took as the input: the
    newest of the asset, any partition, at the step's start. The partition's version at or
    before it is what was read. On a server that pointer can lag: each process updates the
    asset's newest-materialization row after storing its event, so two datasets built at once
    can leave it on the other dataset's older event, before this partition's. Dagster's
    input_data_version tag is read from the partition's own events at the step's start (for
    one partition, the SHA-256 of its version), so it stands when the pointer finds nothing
    or something older."""
    pointer = mat.tags.get(f"dagster/input_event_pointer/{name}")
    consumed = latest(instance, parent, partition, upto=int(pointer)) if pointer else None
    if consumed is not None and _version(consumed) == version:
        return True
    tag = mat.tags.get(f"dagster/input_data_version/{name}")
    return version is not None and tag == hashlib.sha256(version.encode()).hexdigest()


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


def _ratings_handed_back(mat, out: Path, stage: str) -> str:
    """Blind choices dropped into (or removed from) a run's ratings folder since the auditions
    stage counted them, as a cause; "" otherwise. The folders are not in the dataset folder,
    so nothing else would notice."""
    recorded = _value(mat, "ratings_files")
    if stage != "auditions" or recorded is None:
        return ""
    table = out / "adapters.parquet"  # the runs the auditions stage read
    run_dirs = pd.read_parquet(table, columns=["run_dir"])["run_dir"] if table.exists() else []
    if folders_fingerprint([Path(d) for d in run_dirs]) != recorded:
        return "blind choices were handed back since (ratings/ in a run's folder)"
    return ""


def _damaged(store: Store, dataset: str, stage: str) -> str:
    roots = store.roots / dataset / f"{stage}.json"
    keys = json.loads(roots.read_text(encoding="utf-8")) if roots.exists() else []
    damaged = store.damaged(keys)
    if not damaged:
        return ""
    return f"{len(damaged)} cached entries damaged, first {damaged[0]} (the next build redoes them)"


def _value(mat, name: str, default=None):
    entry = mat.metadata.get(name)
    return default if entry is None else entry.value


def _base_model_there(mat, out: Path, models: Path) -> str:
    """A base model the last build found missing (or not whole) that is whole now, as a cause;
    "" if none. Asked as the stage asks: the build's plan's run, under today's models root."""
    lacking = _value(mat, "missing_base_models", [])
    if not lacking:
        return ""
    try:
        runs = {run.name: run for run in read_plan(out).runs}
    except ConfigError as exc:
        return str(exc)
    for entry in lacking:
        users = [runs[name] for name in entry["runs"] if name in runs]
        if users and not base_model_problem(users[0], models):
            names = ", ".join(run.name for run in users)
            return f"base model {entry['base_model']} is there now (runs: {names}); build to use it"
    return ""


def _skipped(mat, parents: list[tuple[str, str]]) -> tuple[str, str]:
    """A fresh stage's word from its own counts: `skipped` when it did nothing and skipped
    something, or did nothing below a skipped stage (whose cause it takes: the first cause
    is the one to act on); fresh otherwise, saying how many it skipped."""
    count = int(_value(mat, "skipped", 0))
    done = int(_value(mat, "cached", 0)) + int(_value(mat, "computed", 0))
    if done:
        return "fresh", f"{count} skipped: {_why(mat, count)}" if count else ""
    for word, cause in parents:
        if word == "skipped":
            return "skipped", cause
    return ("skipped", _why(mat, count)) if count else ("fresh", "")


def _why(mat, count: int) -> str:
    """The first thing the stage skipped (a missing base model in a few words: `no base model
    NAME in ROOT`), and how many more there are."""
    lacking = _value(mat, "missing_base_models", [])
    said = [_lacking(entry) for entry in lacking]
    named = {f"base model {Path(entry['base_model']).name}" for entry in lacking}
    listed = _value(mat, "skipped_list", [])
    said += [f"{s['path']}: {s['reason']}" for s in listed if s["path"] not in named]
    if not said:
        return f"the list is in {REPORT_NAME}"
    more = count - 1
    return f"{said[0]} (and {more} more: the list is in {REPORT_NAME})" if more > 0 else said[0]


def _lacking(entry: dict) -> str:
    folder, runs = Path(entry["base_model"]), ", ".join(entry["runs"])
    if not folder.exists():
        return f"no base model {folder.name} in {folder.parent} (runs: {runs})"
    return f"base model {folder} is not whole (runs: {runs}; `tunesmith check` says what it lacks)"
