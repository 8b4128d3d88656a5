"""The labels stage end to end on small datasets: files changed during a build, the review
table, the worker pool, ignored files, pictures Pillow reads and underfit's subfolders."""

from __future__ import annotations

import io
import json
from pathlib import Path

import dagster as dg
import numpy as np
import pandas as pd
import pytest
import soundfile as sf
from PIL import Image

from pipelines.cli import main as tunesmith
from pipelines.definitions import ASSETS, resources
from tests.conftest import write_clip, write_image
from tunesmith.dataset.analyse import analysis_key
from tunesmith.dataset.labels import build_labels
from tunesmith.dataset.manifest import build_manifest
from tunesmith.examples.loops import LOOPS, render_loop
from tunesmith.store import Store


def stored_values(store: Path) -> str:
    """Every value in the store, as one text to search."""
    return "\n".join(p.read_text() for p in (store / "objects").rglob("value.json"))


@pytest.mark.slow
def test_a_caption_changed_during_the_build_is_not_stored_under_its_old_hash(
    storage, instance
) -> None:
    folder = Path(storage.datasets_root) / "mix"
    write_clip(folder / "a.wav")
    (folder / "a.txt").write_text("a bright loop")
    write_clip(folder / "b.wav", bpm=90)
    instance.add_dynamic_partitions("datasets", ["mix"])

    def build(stage: str):
        return dg.materialize(
            ASSETS,
            selection=[stage],
            instance=instance,
            resources=resources(storage),
            partition_key="mix",
        )

    assert build("manifest").success
    with (folder / "a.txt").open("a") as f:
        f.write(", edited after the manifest")
    build("labels")
    report = json.loads((Path(storage.out_root) / "mix" / "report.json").read_text())
    (skipped,) = report["stages"]["labels"]["skipped"]
    assert skipped == {
        "path": "a.wav",
        "reason": "a.txt: changed during the build; it is rebuilt next time",
    }
    assert "edited after the manifest" not in stored_values(Path(storage.store_root))
    table = pd.read_parquet(Path(storage.out_root) / "mix" / "labels.parquet")
    assert list(table["path"]) == ["b.wav"]
    # the next build hashes the new caption and labels the item with it
    build("manifest"), build("labels")
    table = pd.read_parquet(Path(storage.out_root) / "mix" / "labels.parquet").set_index("path")
    assert table.loc["a.wav", "caption"] == "a bright loop, edited after the manifest"


def test_audio_changed_during_the_build_is_not_analysed_under_its_old_hash(tmp_path) -> None:
    folder = tmp_path / "set"
    write_clip(folder / "a.wav", bpm=120)
    manifest, _ = build_manifest(folder, tmp_path / "hashes.json")
    write_clip(folder / "a.wav", bpm=90)  # new content after the manifest
    store = Store(tmp_path / "store")
    labels = build_labels(folder, manifest, store)
    (skipped,) = labels.result.skipped
    assert skipped.reason == "a.wav: changed during the build; it is rebuilt next time"
    assert not store.has(analysis_key(manifest.files[0])) and labels.frame.empty


def test_a_written_bpm_the_audio_contradicts_is_listed_for_review(
    storage, instance, monkeypatch, capsys
) -> None:
    folder = Path(storage.datasets_root) / "tagged"
    folder.mkdir()
    spec = LOOPS[0]  # 92 BPM
    sf.write(folder / "loop.wav", render_loop(spec), 44100, subtype="PCM_16")
    (folder / "loop.json").write_text(json.dumps({"prompt": "a loop", "bpm": "184"}))
    write_clip(folder / "plain.wav")
    instance.add_dynamic_partitions("datasets", ["tagged"])
    result = dg.materialize(
        ASSETS,
        instance=instance,
        resources=resources(storage),
        partition_key="tagged",
        selection=["manifest", "labels"],
    )
    report = json.loads((Path(storage.out_root) / "tagged" / "report.json").read_text())
    flags = [f for f in report["stages"]["labels"]["review"] if f["path"] == "loop.wav"]
    assert [(f["field"], f["value"], f["source"]) for f in flags] == [("bpm", 184.0, "json")]
    assert abs(flags[0]["analysis"] - spec.bpm) < 0.02 * spec.bpm
    assert "(an octave apart)" in flags[0]["reason"]
    (labels,) = [
        e
        for e in result.get_asset_materialization_events()
        if e.asset_key.to_user_string() == "labels"
    ]
    table = labels.materialization.metadata["review"].value
    assert "| loop.wav | bpm | 184 | json |" in table

    for name, root in (("DATASETS", storage.datasets_root), ("OUT", storage.out_root)):
        monkeypatch.setenv(f"TUNESMITH_{name}", root)
    monkeypatch.setenv("DAGSTER_HOME", str(Path(storage.out_root).parent / "home"))
    assert tunesmith(["status", "tagged", "--review"]) == 0
    printed = capsys.readouterr().out
    line = next(line for line in printed.splitlines() if "loop.wav" in line and "bpm" in line)
    assert line.split()[:4] == ["loop.wav", "bpm", "184", "json"]


@pytest.mark.slow
def test_two_workers_give_the_same_table_in_the_same_order(tmp_path) -> None:
    folder = tmp_path / "set"
    for i, bpm in enumerate((96, 120, 140)):
        write_clip(folder / f"clip{i}.wav", bpm=bpm, freq=220 + 40 * i)
    write_image(folder / "pic.png")
    tables, manifests = {}, {}
    for workers in (1, 2):
        manifests[workers], _ = build_manifest(
            folder, tmp_path / f"hashes{workers}.json", workers, pool_min_bytes=0
        )
        store = Store(tmp_path / f"store{workers}")
        labels = build_labels(folder, manifests[workers], store, workers, pool_min_bytes=0)
        assert labels.result.extra["analysed"] == 4
        tables[workers] = labels.frame
    assert manifests[1].files == manifests[2].files
    assert tables[1].equals(tables[2])
    assert list(tables[2]["path"]) == ["clip0.wav", "clip1.wav", "clip2.wav", "pic.png"]


def test_files_neither_media_nor_sidecar_are_listed_once_as_ignored(tmp_path) -> None:
    folder = tmp_path / "set"
    write_clip(folder / "a.wav")
    (folder / "a.txt").write_text("a loop")
    (folder / "notes.pdf").write_bytes(b"%PDF-1.4")
    (folder / "README").write_text("about this set")
    (folder / "orphan.json").write_text("{}")
    manifest, _ = build_manifest(folder, tmp_path / "hashes.json")
    labels = build_labels(folder, manifest, Store(tmp_path / "store"))
    assert labels.result.extra["ignored"] == [
        {"path": "README", "reason": "not media or a sidecar (no extension)"},
        {"path": "notes.pdf", "reason": "not media or a sidecar (.pdf)"},
        {"path": "orphan.json", "reason": "a sidecar with no media file of its name"},
    ]


def _picture(path: Path, fmt: str, **save) -> None:
    frames = [Image.new("RGB", (40, 30), c) for c in ((200, 0, 0), (0, 200, 0))]
    buffer = io.BytesIO()
    frames[0].save(buffer, format=fmt, **save)
    if fmt == "GIF":
        buffer = io.BytesIO()
        frames[0].save(buffer, format="GIF", save_all=True, append_images=frames[1:])
    path.write_bytes(buffer.getvalue())


def test_gif_tiff_and_avif_pictures_are_read_first_frame(tmp_path) -> None:
    folder = tmp_path / "set"
    folder.mkdir()
    for name, fmt in (("anim.gif", "GIF"), ("scan.tiff", "TIFF"), ("photo.avif", "AVIF")):
        _picture(folder / name, fmt)
    manifest, _ = build_manifest(folder, tmp_path / "hashes.json")
    labels = build_labels(folder, manifest, Store(tmp_path / "store"))
    assert not labels.result.skipped
    table = labels.frame.set_index("path")
    assert sorted(table.index) == ["anim.gif", "photo.avif", "scan.tiff"]
    assert (table["width"] == 40).all() and (table["height"] == 30).all()


def test_underfits_json_and_txt_subfolders_are_read(tmp_path) -> None:
    folder = tmp_path / "set"
    write_clip(folder / "audio" / "take.wav")
    write_clip(folder / "audio" / "other.wav", bpm=100)
    (folder / "json").mkdir()
    (folder / "json" / "take.json").write_text(json.dumps({"prompt": "from json/", "title": "T"}))
    (folder / "txt").mkdir()
    (folder / "txt" / "other.txt").write_text("from txt/")
    manifest, _ = build_manifest(folder, tmp_path / "hashes.json")
    labels = build_labels(folder, manifest, Store(tmp_path / "store"))
    table = labels.frame.set_index("path")
    assert table.loc["audio/take.wav", ["caption", "caption_source"]].tolist() == [
        "from json/",
        "json",
    ]
    assert table.loc["audio/other.wav", ["caption", "caption_source"]].tolist() == [
        "from txt/",
        "txt",
    ]
    assert "ignored" not in labels.result.extra


def test_audio_with_six_channels_is_labelled(tmp_path) -> None:
    folder = tmp_path / "set"
    folder.mkdir()
    stereo = render_loop(LOOPS[1])
    six = np.concatenate([stereo, stereo, stereo * 0.5], axis=1)
    sf.write(folder / "surround.wav", six, 44100, subtype="PCM_16")
    manifest, _ = build_manifest(folder, tmp_path / "hashes.json")
    labels = build_labels(folder, manifest, Store(tmp_path / "store"))
    row = labels.frame.iloc[0]
    assert row["channels"] == 6 and abs(row["bpm"] - LOOPS[1].bpm) < 0.02 * LOOPS[1].bpm


def test_a_dataset_json_changed_during_the_build_costs_this_build_its_audio(tmp_path) -> None:
    folder = tmp_path / "set"
    write_clip(folder / "a.wav")
    write_image(folder / "p.png")
    (folder / "dataset.json").write_text(json.dumps([{"filename": "a.wav", "caption": "old"}]))
    manifest, _ = build_manifest(folder, tmp_path / "hashes.json")
    (folder / "dataset.json").write_text(json.dumps([{"filename": "a.wav", "caption": "new"}]))
    labels = build_labels(folder, manifest, Store(tmp_path / "store"))
    (skipped,) = labels.result.skipped
    assert (skipped.path, skipped.reason) == (
        "a.wav",
        "dataset.json: changed during the build; it is rebuilt next time",
    )
    assert list(labels.frame["path"]) == ["p.png"]


def test_two_media_files_of_one_name_are_both_built_with_a_warning(tmp_path) -> None:
    """song.wav beside song.flac is one song twice (trained on twice) whose sidecars describe
    both: built as two items, as the folder says, and the labels stage says so."""
    folder = tmp_path / "set"
    write_clip(folder / "song.wav")
    write_clip(folder / "song.flac")
    (folder / "song.txt").write_text("a bright loop")
    write_clip(folder / "take.wav")
    write_clip(folder / "take.aiff")
    write_clip(folder / "alone.wav")
    write_clip(folder / "other" / "alone.wav")  # another folder: other sidecars, no warning
    write_image(folder / "alone.png")  # a picture trains other runs than a song: no warning
    manifest, _ = build_manifest(folder, tmp_path / "hashes.json")
    labels = build_labels(folder, manifest, Store(tmp_path / "store"))
    assert len(labels.frame) == 7 and not labels.result.skipped
    assert labels.result.extra["warnings"] == [
        "song.flac: another media file has its name (song.wav): both are trained on, as two "
        "items, and its sidecars (song.txt) describe both; keep one, or rename one",
        "take.aiff: another media file has its name (take.wav): both are trained on, as two "
        "items; keep one, or rename one",
    ]
