"""The build's plan: the manifest stage resolves tunesmith.toml once (a run in an older form is
read with a note the build prints), and the later stages read the plan, not the file."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from pipelines.build import skipped_items, summary
from pipelines.definitions import ASSETS, resources
from tests.conftest import write_clip
from tunesmith.train.config import read_plan

pytestmark = pytest.mark.slow

OLDER_FORM = """\
[[runs]]
name = "plan"
family = "ace-step"
base_model = "no-such-model"
[runs.adapter]
target = "planner"
[runs.train]
crop_frames = 128
"""


def build(instance, storage, stages: list[str]) -> dg.ExecuteInProcessResult:
    if not instance.has_dynamic_partition("datasets", "songs"):
        instance.add_dynamic_partitions("datasets", ["songs"])
    result = dg.materialize(
        ASSETS,
        instance=instance,
        resources=resources(storage),
        partition_key="songs",
        selection=stages,
    )
    assert result.success
    return result


def test_a_planner_run_in_the_older_form_is_planned_once_with_a_note(storage, instance):
    folder = Path(storage.datasets_root) / "songs"
    write_clip(folder / "clip0.wav", seconds=1.0)
    (folder / "tunesmith.toml").write_text(OLDER_FORM)
    lines = summary(build(instance, storage, ["manifest"]))
    note = next(line.strip() for line in lines if "read as family" in line)
    assert 'run plan: family = "ace-step" with adapter.target = "planner"' in note
    assert "train.crop_frames: left out" in note
    out = Path(storage.out_root) / "songs"
    (run,) = read_plan(out).runs
    assert (run.name, run.family) == ("plan", "ace-step-planner")
    # The later stages take the runs from the plan: an edit of the file after the manifest
    # stage reaches them with the next build's plan, not in the middle of this one.
    (folder / "tunesmith.toml").write_text(OLDER_FORM.replace('"plan"', '"renamed"'))
    result = build(instance, storage, ["labels", "encoded"])
    (encoded,) = [
        e
        for e in result.get_asset_materialization_events()
        if e.asset_key.to_user_string() == "encoded"
    ]
    skipped = encoded.materialization.metadata["skipped_list"].value
    assert any("Run(s) plan are not trained" in s["reason"] for s in skipped), skipped


def test_the_build_counts_each_skipped_thing_once_and_the_ones_no_list_names() -> None:
    """`tunesmith run`'s last line: a file two stages skip is one file; a stage whose list was
    cut short still counts the rest."""

    def stage(name: str, skipped: int, listed: list[str]) -> dg.AssetsDefinition:
        @dg.asset(name=name)
        def _stage() -> dg.MaterializeResult:
            rows = [{"path": p, "reason": "bad"} for p in listed]
            return dg.MaterializeResult(metadata={"skipped": skipped, "skipped_list": rows})

        return _stage

    assets = [stage("x", 1, ["a.wav"]), stage("y", 1, ["a.wav"]), stage("z", 3, ["b.wav"])]
    result = dg.materialize(assets)
    assert skipped_items(result) == (4, ["a.wav", "b.wav"])
