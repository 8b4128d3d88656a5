"""`tunesmith status` on a dataset whose run has no base model: the stages that skipped all
their work say `skipped` and why, not fresh; the folder sensor counts them as built; once the
base model is there they are stale. A stage that did part of its work stays fresh and says
how many it skipped."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.definitions import defs
from pipelines.freshness import current
from pipelines.instance import open_instance
from pipelines.status import STAGES, status
from tests.conftest import make_storage, materialize, write_clip
from tests.faults.test_faults import TOML

SKIPPING = ("encoded", "adapters", "renders", "auditions")


def world(tmp_path: Path, monkeypatch, toml: str):
    """Roots under `tmp_path` (no base model in the models root), `tunesmith status` pointed
    at them, and the dataset `clips` with `toml`."""
    storage = make_storage(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    for name, root in [
        ("DATASETS", storage.datasets_root),
        ("OUT", storage.out_root),
        ("STORE", storage.store_root),
        ("MODELS", storage.models_root),
    ]:
        monkeypatch.setenv(f"TUNESMITH_{name}", root)
    clips = Path(storage.datasets_root) / "clips"
    for i, bpm in enumerate([90, 150]):
        write_clip(clips / f"clip{i}.wav", seconds=1.0, bpm=bpm)
        (clips / f"clip{i}.txt").write_text(f"clipz, a loop at {bpm} bpm")
    (clips / "tunesmith.toml").write_text(toml)
    return storage, clips


def said(capsys) -> dict[str, list[str]]:
    """`tunesmith status clips`, each stage's line as its words."""
    status(["clips"])
    names = {stage.to_user_string() for stage in STAGES}
    lines = [line.split() for line in capsys.readouterr().out.splitlines()]
    return {words[0]: words for words in lines if words and words[0] in names}


@pytest.mark.slow  # two builds and a tiny base model: about 8 s here
def test_stages_without_a_base_model_are_skipped_until_it_is_there(tmp_path, monkeypatch, capsys):
    storage, clips = world(tmp_path, monkeypatch, TOML)
    models = Path(storage.models_root)
    instance = open_instance()
    graph = defs.resolve_asset_graph()
    try:
        materialize(instance, storage, "clips")
        lines = said(capsys)
        assert lines["manifest"] == ["manifest", "fresh"], lines
        assert lines["labels"] == ["labels", "fresh"], lines
        why = f"no base model tiny-stable-audio-3 in {models} (runs: clips-lora)".split()
        for stage in SKIPPING:  # below encoded, each takes the cause from the stage above
            assert lines[stage] == [stage, "skipped", *why], lines
        # Building the folder again would skip the same way: the sensor adopts the build.
        assert current(instance, graph, storage, "clips", clips)

        from tunesmith.families.stable_audio_3.tiny import make_tiny_stable_audio_3

        make_tiny_stable_audio_3(models / "tiny-stable-audio-3", seed=0)
        lines = said(capsys)
        there = f"base model {models / 'tiny-stable-audio-3'} is there now (runs: clips-lora)"
        assert " ".join(lines["encoded"]).startswith(f"encoded stale {there}"), lines
        for stage in SKIPPING[1:]:
            assert lines[stage][:2] == [stage, "stale"], lines
        assert lines["adapters"][2:] == "upstream encoded is stale".split(), lines
        assert not current(instance, graph, storage, "clips", clips)

        # Encoding with the base model: encoded is fresh with nothing skipped, and the
        # stage below it has something new to train on.
        materialize(instance, storage, "clips", ["manifest", "labels", "encoded"])
        lines = said(capsys)
        assert lines["encoded"] == ["encoded", "fresh"], lines
        assert lines["adapters"] == "adapters stale encoded has a new data version".split(), lines
    finally:
        instance.dispose()


def test_a_stage_that_did_part_of_its_work_is_fresh_and_says_what_it_skipped(
    tmp_path, monkeypatch, capsys, tiny_sa3
):
    gone = TOML.replace('"clips-lora"', '"gone-lora"').replace('"tiny-stable-audio-3"', '"gone"')
    storage, _ = world(tmp_path, monkeypatch, TOML + gone)
    models = Path(storage.models_root)
    (models / "tiny-stable-audio-3").symlink_to(tiny_sa3)
    instance = open_instance()
    try:
        materialize(instance, storage, "clips", ["manifest", "labels", "encoded"])
        lines = said(capsys)
        why = f"1 skipped: no base model gone in {models} (runs: gone-lora)"
        assert lines["encoded"] == ["encoded", "fresh", *why.split()], lines
        assert lines["adapters"] == ["adapters", "missing", "never", "materialized"], lines
    finally:
        instance.dispose()
