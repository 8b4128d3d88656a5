"""`tunesmith status`: per dataset and stage, fresh, skipped (its last build did nothing: no
base model, every run refused; and why), stale (and why) or missing; running or waiting while
a build is at work. Fresh and skipped are decided in `pipelines/freshness.py`, which the folder
sensor asks too.
"""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import psutil

from pipelines.definitions import ASSETS, defs
from pipelines.freshness import State, stage_state
from pipelines.instance import LIVE, PID_TAG, open_instance, reap_dead_runs
from pipelines.operations import _select
from resources.storage import StorageResource

STAGES = [a.key for a in ASSETS]  # in dependency order


def status(names: list[str]) -> int:
    """Per dataset and stage: fresh, skipped or stale (with the cause), or missing."""
    selected = _select(names)  # before the instance: a wrong folder creates nothing
    instance = open_instance()
    reap_dead_runs(instance)
    graph = defs.resolve_asset_graph()
    storage = StorageResource()
    for key, folder in selected.items():
        print(f"== {key} ({folder})")
        live = _live_run(instance, key)
        if live is not None:
            pid = live.tags.get(PID_TAG, "?")
            print(f"  a build is running: run {live.run_id[:8]} (pid {pid})")
        steps = _steps(instance, live) if live is not None else {}
        state: State = {}
        for asset_key in STAGES:
            stage = asset_key.to_user_string()
            if live is not None and steps.get(stage) != "done":
                word = "running" if steps.get(stage) == "started" else "waiting"
                cause = _progress(storage.dataset_out(key), live) if stage == "adapters" else ""
                state[asset_key] = word, cause
                print(f"  {stage:<10} {word:<8} {cause if word == 'running' else ''}".rstrip())
                continue
            word, cause = stage_state(instance, graph, storage, asset_key, key, folder, state)
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
