"""Side-Step's dataset.json both ways: read from a dataset, exported from the labels table."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import write_clip
from tunesmith.dataset.labels import build_labels, side_step_dataset
from tunesmith.dataset.manifest import build_manifest
from tunesmith.dataset.side_step import METADATA_KEYS, SAMPLE_KEYS
from tunesmith.store import Store

LABEL_FIELDS = [
    "caption",
    "lyrics",
    "keyscale",
    "key",
    "scale",
    "timesignature",
    "language",
    "is_instrumental",
    "custom_tag",
    "tags",
    "tag_position",
    "genre_ratio",
]


def labels_of(folder: Path, store: Path, name: str = "set"):
    manifest, _ = build_manifest(folder, store / "hashes.json")
    labels = build_labels(folder, manifest, Store(store))
    return labels, side_step_dataset(labels, folder, name)


def side_step_file(folder: Path) -> dict:
    """A dataset.json as Side-Step's builder writes it: every field, in its order."""
    root = folder.resolve()
    song = {
        "id": "1f3a9c2e",
        "audio_path": str(root / "rise.wav"),
        "filename": "rise.wav",
        "caption": "Anthemic rock with big drums",
        "genre": "rock, anthem",
        "lyrics": "[Verse 1]\nRising up from the ashes tonight\n[Chorus]\nWe're on fire",
        "raw_lyrics": "",
        "formatted_lyrics": "[Verse 1]\nRising up...",
        "bpm": 140,
        "keyscale": "E minor",
        "timesignature": "4",
        "duration": 4,
        "language": "en",
        "is_instrumental": False,
        "custom_tag": "myartist",
        "labeled": True,
        "prompt_override": None,
        "repeat": 2,
    }
    pad = {
        "id": "77aa01bc",
        "audio_path": str(root / "sub" / "pad.wav"),
        "filename": "pad.wav",
        "caption": "Ambient pad",
        "genre": "",
        "lyrics": "[Instrumental]",
        "raw_lyrics": "",
        "formatted_lyrics": "",
        "bpm": 70,
        "keyscale": "C major",
        "timesignature": "",
        "duration": 4,
        "language": "unknown",
        "is_instrumental": True,
        "custom_tag": "",
        "labeled": True,
        "prompt_override": "genre",
        "repeat": 1,
        "made_by": "another tool",
    }
    metadata = {
        "name": "my_set",
        "custom_tag": "myartist",
        "tag_position": "append",
        "created_at": "2026-03-01T10:00:00",
        "num_samples": 2,
        "all_instrumental": False,
        "genre_ratio": 30,
    }
    return {"metadata": metadata, "samples": [song, pad]}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    folder = tmp_path / "set"
    write_clip(folder / "rise.wav", bpm=140)
    write_clip(folder / "sub" / "pad.wav", bpm=70, freq=330)
    return folder


def test_a_file_side_step_wrote_comes_back_field_for_field(folder: Path, tmp_path: Path) -> None:
    written = side_step_file(folder)
    (folder / "dataset.json").write_text(json.dumps(written, indent=2))
    labels, exported = labels_of(folder, tmp_path / "store")
    # as written, but an empty time signature is the 4/4 the runs train with
    written["samples"][1]["timesignature"] = "4"
    assert exported == written
    assert list(exported["metadata"]) == list(METADATA_KEYS)
    assert list(exported["samples"][0]) == list(SAMPLE_KEYS)
    assert list(exported["samples"][1]) == [*SAMPLE_KEYS, "made_by"]
    row = labels.frame.set_index("path").loc["rise.wav"]
    assert row["lyrics"].startswith("[Verse 1]\nRising up") and not row["is_instrumental"]
    assert (row["bpm"], row["key"], row["scale"], row["language"]) == (140, "E", "minor", "en")
    pad = labels.frame.set_index("path").loc["sub/pad.wav"]
    assert (pad["lyrics"], pad["is_instrumental"], pad["timesignature"]) == ("", True, "4")
    assert json.loads(pad["fields"])["timesignature"]["source"] == "analysis"
    dataset_level = (pad["custom_tag"], pad["tag_position"], pad["genre_ratio"])
    assert dataset_level == ("myartist", "append", 30)


def test_read_export_read_gives_the_same_labels(folder: Path, tmp_path: Path) -> None:
    # Labels from every other convention, some values missing, a partial dataset.json.
    (folder / "rise.lyrics.txt").write_text("[verse]\nfirst line\n\n[chorus]\nsecond line\n")
    (folder / "rise.json").write_text(json.dumps({"prompt": "rock", "genre": "rock"}))
    (folder / "sub" / "pad.txt").write_text("a soft pad\n")
    samples = [{"filename": "pad.wav", "keyscale": "Bbm", "language": "unknown", "bpm": None}]
    (folder / "dataset.json").write_text(json.dumps({"samples": samples}))
    first, exported = labels_of(folder, tmp_path / "store1")

    again = tmp_path / "again"
    shutil.copytree(folder, again)
    (again / "dataset.json").write_text(json.dumps(exported))
    second, exported_again = labels_of(again, tmp_path / "store2", "set")

    one, two = (labels.frame.set_index("path") for labels in (first, second))
    assert one[LABEL_FIELDS].equals(two[LABEL_FIELDS])
    # Side-Step's bpm is a whole number: an analysed tempo comes back rounded
    assert (two["bpm"] == one["bpm"].round()).all()
    for a, b in zip(exported["samples"], exported_again["samples"], strict=True):
        assert {**a, "audio_path": ""} == {**b, "audio_path": ""}  # the folders differ
    assert exported["metadata"] == exported_again["metadata"]
    pad = exported["samples"][1]
    assert "is_instrumental" not in pad  # unknown: not written as a fact
    assert pad["timesignature"] == "4" and pad["keyscale"] == "Bbm"  # the 4/4 trained with


def test_a_sample_is_found_by_filename_when_its_path_is_from_another_machine(
    folder: Path, tmp_path: Path
) -> None:
    samples = [
        {"audio_path": "D:\\Music\\set\\rise.wav", "filename": "rise.wav", "caption": "moved"},
        {"audio_path": "../../elsewhere.wav", "caption": "escape"},
    ]
    (folder / "dataset.json").write_text(json.dumps({"samples": samples}))
    labels, _ = labels_of(folder, tmp_path / "store")
    row = labels.frame.set_index("path").loc["rise.wav"]
    assert (row["caption"], row["caption_source"]) == ("moved", "dataset.json")
    (skipped,) = labels.result.skipped
    assert skipped.path == "dataset.json" and "outside the dataset folder" in skipped.reason


def test_a_broken_dataset_json_is_reported_and_the_items_labelled(
    folder: Path, tmp_path: Path
) -> None:
    (folder / "dataset.json").write_text('{"samples": [')
    labels, _ = labels_of(folder, tmp_path / "store")
    assert sorted(labels.frame["path"]) == ["rise.wav", "sub/pad.wav"]
    (skipped,) = labels.result.skipped
    assert skipped.path == "dataset.json" and "not valid UTF-8 JSON" in skipped.reason


def test_the_export_conditions_side_step_as_the_runs_were_conditioned(folder: Path, tmp_path):
    """Side-Step writes a sample's metas with ACE-Step 1.5's rule (bpm, time signature and key
    as the sample has them, "N/A" for an empty one): from the exported samples that gives, line
    for line, the metas tunesmith trained each song with, an assumed 4/4 included."""
    from tunesmith.families.ace_step.text import Metas, metas_block

    labels, exported = labels_of(folder, tmp_path / "store")
    rows = labels.frame.set_index("path")
    for sample in exported["samples"]:
        row = rows.loc["sub/pad.wav" if sample["filename"] == "pad.wav" else sample["filename"]]
        side_step = Metas(
            bpm=sample.get("bpm"),
            keyscale=sample.get("keyscale") or None,
            timesignature=sample.get("timesignature") or None,
        )
        trained = Metas(
            bpm=row["bpm"],
            keyscale=row["keyscale"] or None,
            timesignature=row["timesignature"] or None,
        )
        assert metas_block(side_step) == metas_block(trained), sample["filename"]
        assert "- timesignature: 4\n" in metas_block(side_step)
