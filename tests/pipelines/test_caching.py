"""The caching contract: nothing unchanged is recomputed; a change recomputes what it touches."""

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import data_version, materialize, write_clip, write_image

pytestmark = pytest.mark.slow


def make_dataset(root: Path) -> Path:
    folder = root / "mix"
    write_clip(folder / "a.wav", bpm=120)
    (folder / "a.txt").write_text("a bright loop\n")
    write_clip(folder / "b.wav", bpm=100, freq=330)
    (folder / "b.json").write_text(json.dumps({"title": "Bee", "prompt": "a slow hum"}))
    write_image(folder / "pic.png")
    (folder / "pic.txt").write_text("a flat orange picture")
    return folder


def test_second_materialization_computes_nothing(storage, instance):
    folder = make_dataset(Path(storage.datasets_root))
    first = materialize(instance, storage, "mix")
    versions = {s: data_version(instance, s, "mix") for s in first if s != "checks"}
    assert first["manifest"]["computed"] == 6
    assert first["labels"]["computed"] == 3 and first["labels"]["analysed"] == 3
    second = materialize(instance, storage, "mix")
    for stage, metadata in second.items():
        if stage == "checks":
            continue
        assert metadata["computed"] == 0, stage
    assert second["labels"]["cached"] == 3 and second["labels"]["analysed"] == 0
    # same inputs, same data versions: nothing downstream becomes unsynced
    assert {s: data_version(instance, s, "mix") for s in versions} == versions
    assert folder.exists()


def test_editing_one_caption_relabels_one_item_and_analyses_nothing(storage, instance):
    folder = make_dataset(Path(storage.datasets_root))
    materialize(instance, storage, "mix")
    (folder / "a.txt").write_text("a darker loop\n")
    after = materialize(instance, storage, "mix")
    assert after["manifest"]["computed"] == 1  # only the edited file is hashed again
    assert after["labels"]["computed"] == 1
    assert after["labels"]["cached"] == 2
    assert after["labels"]["analysed"] == 0
    table = pd.read_parquet(Path(storage.out_root) / "mix" / "labels.parquet")
    assert table.set_index("path").loc["a.wav", "caption"] == "a darker loop"


def test_touching_a_file_keeps_every_data_version(storage, instance):
    folder = make_dataset(Path(storage.datasets_root))
    materialize(instance, storage, "mix")
    before = {stage: data_version(instance, stage, "mix") for stage in ("manifest", "labels")}
    (folder / "a.wav").touch()
    after_md = materialize(instance, storage, "mix")
    assert after_md["manifest"]["computed"] == 1  # new mtime: hashed again, same content
    after = {stage: data_version(instance, stage, "mix") for stage in ("manifest", "labels")}
    assert after == before


def test_adding_one_file_analyses_one_file(storage, instance):
    folder = make_dataset(Path(storage.datasets_root))
    materialize(instance, storage, "mix")
    write_clip(folder / "c.wav", bpm=140)
    after = materialize(instance, storage, "mix")
    assert after["labels"]["analysed"] == 1 and after["labels"]["computed"] == 1


def test_report_json_has_every_stage(storage, instance):
    make_dataset(Path(storage.datasets_root))
    materialize(instance, storage, "mix")
    report = json.loads((Path(storage.out_root) / "mix" / "report.json").read_text())
    for stage in ("manifest", "labels"):
        entry = report["stages"][stage]
        assert {"data_version", "items", "cached", "computed", "skipped", "seconds"} <= set(entry)
    assert report["stages"]["labels"]["items"] == 3
    side_step = json.loads((Path(storage.out_root) / "mix" / "dataset.json").read_text())
    assert {s["filename"] for s in side_step["samples"]} == {"a.wav", "b.wav"}
    folder = Path(storage.datasets_root).resolve() / "mix"
    # absolute, as Side-Step's builder writes them: the export does not live in the dataset
    assert {s["audio_path"] for s in side_step["samples"]} == {
        str(folder / "a.wav"),
        str(folder / "b.wav"),
    }
