"""The auditions stage end to end (real Dagster, a tiny Stable Audio 3 and a tiny CLAP): the
page plots the run's measures and each pair's; choices handed back with `tunesmith ratings`
re-run the auditions stage alone, and are counted once however often they come back."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from pipelines.cli import main
from pipelines.definitions import defs
from pipelines.freshness import stage_state
from tests.conftest import build_in_a_process, data_version, materialize
from tests.quality.test_quality_stage import AUDIO_TOML, _songs
from tests.render.test_ratings import export
from tunesmith.quality.tiny import make_tiny_clap
from tunesmith.render.pair_measures import PAIRS_FILE
from tunesmith.render.ratings import FOLDER
from tunesmith.report import BUILT_WITH_SKIPS

pytestmark = pytest.mark.slow
STAGES = ("manifest", "labels", "encoded", "adapters", "renders", "auditions")


def article(text: str, pid: str) -> str:
    """The page's article of one prompt."""
    return text.split(f'data-prompt-id="{pid}"', 1)[1].split("</article>", 1)[0]


def versions(instance) -> dict[str, str | None]:
    return {stage: data_version(instance, stage, "songs") for stage in STAGES}


def said(instance, storage) -> dict[str, tuple[str, str]]:
    """The stages of `songs` that `tunesmith status` does not call fresh: stage → (word, why)."""
    graph, folder = defs.resolve_asset_graph(), Path(storage.datasets_root) / "songs"
    state: dict = {}
    for key in graph.toposorted_asset_keys:
        state[key] = stage_state(instance, graph, storage, key, "songs", folder, state)
    return {k.to_user_string(): v for k, v in state.items() if v[0] != "fresh"}


def test_measures_on_the_page_and_ratings_handed_back(storage, instance, tiny_sa3, tmp_path,
                                                      monkeypatch):  # fmt: skip
    for name in ("datasets", "out", "store", "models"):  # the command's roots: the build's
        monkeypatch.setenv(f"TUNESMITH_{name.upper()}", getattr(storage, f"{name}_root"))
    make_tiny_clap(Path(storage.models_root) / "tiny-clap")
    _songs(
        Path(storage.datasets_root) / "songs", AUDIO_TOML.format(clap="tiny-clap", base=tiny_sa3)
    )

    first = materialize(instance, storage, "songs")
    out = Path(storage.out_root) / "songs"
    report = json.loads((out / "report.json").read_text())
    (run,) = report["stages"]["adapters"]["runs"]
    run_dir, best = Path(run["run_dir"]), int(run["best_step"])
    (page,) = map(Path, report["auditions"])
    text = page.read_text()

    # the run's measures per step, the kept step ringed, beside the loss curve
    assert re.findall(r'<figure class="plot" data-measure="(\w+)"', text) == [
        "prompt", "style", "frechet"
    ]  # fmt: skip
    assert text.count('<circle class="best"') == 4  # the loss curve's and each measure's
    quality = json.loads((run_dir / "quality.json").read_text())
    kept = next(row for row in quality["steps"] if row["step"] == best)
    assert f"kept · step {best} · {kept['prompt']:.4g}" in text
    # each pair's own renders measured, once, and said on the page
    pairs = json.loads((run_dir / PAIRS_FILE).read_text())["pairs"]
    assert sorted(pairs) == ["demo0", "demo1"]
    for pid, measured in pairs.items():
        assert sorted(measured) == ["prompt", "style"]
        for values in measured.values():
            assert all(-1 <= values[side] <= 1 for side in ("base", "adapter"))
            assert values["base"] != values["adapter"]  # the adapter changed the render
        better = "adapter" if measured["prompt"]["adapter"] > measured["prompt"]["base"] else "base"
        assert re.search(rf'data-measure="prompt" data-prefers="{better}"', article(text, pid))
    metadata = first["auditions"]
    assert "measured_quality_curves" in metadata and metadata["ratings_choices"] == 0
    assert "None handed back yet." in text

    # a listener's blind choices on this page, handed back with the command
    fingerprint = re.search(r'data-fingerprint="(\w+)"', text)[1]
    assert f'data-step="{best}" data-run-folder="{run_dir.name}"' in text
    picks = export({"demo0": "A", "demo1": "same"}, run="measured", dataset="songs",
                   fingerprint=fingerprint, step=best, run_folder=run_dir.name)  # fmt: skip
    exported = tmp_path / "audition-measured.json"
    exported.write_text(json.dumps(picks))
    assert said(instance, storage) == {}  # every stage fresh
    assert main(["ratings", "songs", str(exported)]) == 0
    # `tunesmith status` says the auditions stage is stale, and why; nothing else
    assert said(instance, storage) == {
        "auditions": ("stale", "blind choices were handed back since (ratings/ in a run's folder)")
    }
    before = versions(instance)
    second = materialize(instance, storage, "songs")
    computed = {stage: second[stage]["computed"] for stage in STAGES}
    assert computed == {**dict.fromkeys(STAGES, 0), "auditions": 1}
    assert said(instance, storage) == {}
    after = versions(instance)
    assert {s for s in STAGES if after[s] != before[s]} == {"auditions"}
    tallied = json.loads((out / "report.json").read_text())["stages"]["auditions"]["ratings"]
    (checkpoint,) = tallied["measured"]["checkpoints"]
    assert (checkpoint["step"], checkpoint["adapter"], checkpoint["same"]) == (best, 1, 1)
    assert checkpoint["choices"] == 2 and checkpoint["adapter_share"] == 0.5
    assert second["auditions"][f"measured_choices_step_{best}"] == 2
    assert "| 1 | 0 | 1 | 2 | 50% | 1 |" in second["auditions"]["measured_ratings"]
    assert f"<tr class=best><td>{best}</td><td>1</td><td>0</td><td>1</td><td>2</td>" in (
        page.read_text()
    )

    # the same file again, by the command and by hand under another name: nothing changes
    assert main(["ratings", "songs", str(exported)]) == 0
    shutil.copy(exported, run_dir / FOLDER / "audition-measured.json")
    third = materialize(instance, storage, "songs")
    assert third["auditions"]["computed"] == 0 and versions(instance) == after

    # a file of another run is reported and skipped; the choices stay as they were
    other = {**picks, "run": "someone-elses"}
    (run_dir / FOLDER / "wrong.json").write_text(json.dumps(other))
    fourth = materialize(instance, storage, "songs")
    assert fourth["auditions"]["skipped"] == 1
    (skipped,) = fourth["auditions"]["skipped_list"]
    assert skipped["path"].endswith("wrong.json") and "run 'someone-elses'" in skipped["reason"]
    assert fourth["auditions"]["ratings_choices"] == 2

    # A build that changes nothing, in the process `tunesmith run` starts, reads the pairs'
    # measures and the ratings back, loads no model library, and exits as a build with a skip
    # (wrong.json still is). The first such build remembers the adapter files' checks; files
    # of the last two seconds are never remembered.
    time.sleep(2.1)
    for build in ("remembers", "light"):
        heavy = build_in_a_process(storage, "songs", tmp_path / build, BUILT_WITH_SKIPS)
    assert heavy == [], heavy
