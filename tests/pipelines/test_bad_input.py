"""Bad input: a clear message naming the file, the item skipped, the rest goes through."""

import json
import os
from pathlib import Path

import pytest

from tests.conftest import materialize, write_clip, write_image
from tunesmith.dataset.folders import partition_key

LABELLED = ["manifest", "labels"]  # the stages these files reach (no base model here)


def make_bad_dataset(folder: Path) -> None:
    write_clip(folder / "good.wav")
    (folder / "good.txt").write_text("a good loop")
    write_image(folder / "good.png")
    write_image(folder / "blank_caption.png", colour=(10, 200, 30))
    (folder / "blank_caption.txt").write_text("  \n")  # empty: caption from the file name
    truncated = write_clip(folder / "truncated.wav").read_bytes()
    (folder / "truncated.wav").write_bytes(truncated[: len(truncated) // 2])
    (folder / "empty.wav").write_bytes(b"")
    (folder / "liar.wav").write_bytes(write_image(folder / "tmp.png").read_bytes())
    (folder / "tmp.png").unlink()
    (folder / "notimage.png").write_text("just some text, not pixels")
    write_clip(folder / "latin.wav", bpm=90)
    (folder / "latin.txt").write_bytes("caf\xe9 loop".encode("latin-1"))
    (folder / "dataset.json").write_text(
        json.dumps({"samples": [{"audio_path": "../../outside.wav", "caption": "escape"}]})
    )
    os.symlink("selfloop", folder / "selfloop")
    (folder / "sub").mkdir()
    os.symlink("..", folder / "sub" / "up")


def test_each_bad_item_is_skipped_with_a_message_naming_it(storage, instance):
    folder = Path(storage.datasets_root) / "bad"
    make_bad_dataset(folder)
    md = materialize(instance, storage, "bad", LABELLED)
    report = json.loads((Path(storage.out_root) / "bad" / "report.json").read_text())
    skipped = {
        stage: {s["path"]: s["reason"] for s in report["stages"][stage]["skipped"]}
        for stage in ("manifest", "labels")
    }
    assert "symlink loop" in skipped["manifest"]["selfloop"]
    assert "symlink loop" in skipped["manifest"]["sub/up"]
    labels = skipped["labels"]
    assert "truncated.wav" in labels["truncated.wav"]
    assert "empty file (0 bytes)" in labels["empty.wav"]
    assert "the extension says WAV, but the content is PNG" in labels["liar.wav"]
    assert "notimage.png" in labels["notimage.png"]
    assert "outside the dataset folder" in labels["dataset.json"]
    # the good items went through, and a caption that is not UTF-8 costs only the caption
    assert "latin.wav" not in labels
    assert md["labels"]["items"] == 8 and md["labels"]["skipped"] == 5
    table = Path(storage.out_root) / "bad" / "labels.parquet"
    import pandas as pd

    labelled = pd.read_parquet(table).set_index("path")
    assert sorted(labelled.index) == ["blank_caption.png", "good.png", "good.wav", "latin.wav"]
    assert labelled.loc["blank_caption.png", "caption_source"] == "filename"
    assert labelled.loc["latin.wav", "caption_source"] == "filename"
    blank, latin = report["stages"]["labels"]["warnings"]
    assert blank.startswith("blank_caption.txt: the caption file is empty; caption taken from")
    assert latin.startswith("latin.txt: not UTF-8 (byte 0xe9 at offset 3)")
    # the skipped items and the warnings are listed in the run's metadata too
    assert "liar.wav" in md["labels"]["skipped_items"] and "latin.txt" in md["labels"]["warnings"]


def test_nothing_is_left_half_written(storage, instance):
    make_bad_dataset(Path(storage.datasets_root) / "bad")
    materialize(instance, storage, "bad", LABELLED)
    for root in (storage.out_root, storage.store_root):
        assert not [p for p in Path(root).rglob(".tmp-*")]


@pytest.mark.slow
def test_a_bad_file_is_not_decoded_again_until_it_changes(storage, instance):
    folder = Path(storage.datasets_root) / "bad"
    make_bad_dataset(folder)
    materialize(instance, storage, "bad", LABELLED)
    again = materialize(instance, storage, "bad", LABELLED)
    assert again["labels"]["analysed"] == 0 and again["labels"]["skipped"] == 5
    write_clip(folder / "truncated.wav", bpm=133)  # repaired (new content)
    repaired = materialize(instance, storage, "bad", LABELLED)
    assert repaired["labels"]["analysed"] == 1 and repaired["labels"]["skipped"] == 4


def test_a_folder_name_that_is_not_a_partition_key_still_builds(storage, instance):
    name = "loops...v2\tfinal"
    write_clip(Path(storage.datasets_root) / name / "a.wav")
    key = partition_key(name)
    md = materialize(instance, storage, key, LABELLED)
    assert md["labels"]["computed"] == 1
    assert (Path(storage.out_root) / key / "report.json").exists()
