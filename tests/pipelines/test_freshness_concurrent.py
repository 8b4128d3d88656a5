"""Two datasets built at once on one Dagster server: a stage is still fresh afterwards.

Dagster keeps, per asset, a row naming its latest materialization (of any partition). On a
server each process upserts that row after storing its event, so when two runs materialize
`labels` at once the row can end on the older of the two. A stage that starts next records
that older event as the one it read. The test reproduces the interleaving on SQLite, where it
cannot happen by itself, by storing the other dataset's row again right after this dataset's
labels: then `encoded` of this dataset must not be called stale.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from pipelines.definitions import defs
from pipelines.freshness import stage_state
from tests.conftest import materialize, write_clip

LABELS = dg.AssetKey("labels")


def _dataset(storage, name: str, bpm: float) -> Path:
    folder = Path(storage.datasets_root) / name
    write_clip(folder / "a.wav", seconds=1.0, bpm=bpm)
    (folder / "a.txt").write_text(f"a loop at {bpm:.0f} bpm")
    return folder


def _labels_record(instance, partition: str):
    return instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=LABELS, asset_partitions=[partition]), limit=1
    ).records[0]


def test_a_lagging_latest_materialization_row_leaves_the_stage_fresh(
    storage, instance, monkeypatch
):
    _dataset(storage, "loops", 120.0)
    beats = _dataset(storage, "beats", 90.0)
    stages = ["manifest", "labels", "encoded"]
    materialize(instance, storage, "loops", stages[:2])
    loops_labels = _labels_record(instance, "loops")

    event_storage = instance.event_log_storage
    store = event_storage._store_asset_event  # noqa: SLF001 - the step the race reorders

    def the_other_upsert_lands_last(conn, event, event_id):
        store(conn, event, event_id)
        materialized = event.dagster_event.is_step_materialization
        if materialized and event.dagster_event.asset_key == LABELS:
            store(conn, loops_labels.event_log_entry, loops_labels.storage_id)

    monkeypatch.setattr(event_storage, "_store_asset_event", the_other_upsert_lands_last)
    materialize(instance, storage, "beats", stages)
    monkeypatch.undo()

    encoded = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("encoded"), asset_partitions=["beats"]),
        limit=1,
    ).records[0]
    pointer = int(encoded.asset_materialization.tags["dagster/input_event_pointer/labels"])
    assert pointer == loops_labels.storage_id < _labels_record(instance, "beats").storage_id

    graph, state = defs.resolve_asset_graph(), {}
    for key in graph.toposorted_asset_keys:
        state[key] = stage_state(instance, graph, storage, key, "beats", beats, state)
        if key.to_user_string() in stages:
            assert state[key][0] in ("fresh", "skipped"), (key, state[key])

    # A real new labels materialization (a caption changed) still makes encoded stale.
    (beats / "a.txt").write_text("a loop at 90 bpm, with a new caption")
    materialize(instance, storage, "beats", stages[:2])
    state = {}
    for key in graph.toposorted_asset_keys:
        state[key] = stage_state(instance, graph, storage, key, "beats", beats, state)
    assert state[dg.AssetKey("encoded")] == ("stale", "labels has a new data version")
