"""The SDXL `encoded` stage on two processes writes the same store entries, byte for byte, and
the same table as on one (each process forms the batches one process forms); a rebuild finds
them all cached and starts no process."""

from __future__ import annotations

import pytest

from tunesmith.backends.placement import Placement
from tunesmith.dataset.labels import build_labels
from tunesmith.dataset.manifest import build_manifest
from tunesmith.examples.rings import make_rings
from tunesmith.families.sdxl import encoded as stage
from tunesmith.store import Store

pytestmark = pytest.mark.slow
CPU = Placement("torch", "cpu", "float32", "test")


def test_two_workers_write_what_one_writes(tiny_sdxl, tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the workers' thread count, as this process's
    # batches of two: five pictures make three batches, dealt to both processes
    monkeypatch.setattr("tunesmith.backends.batches.MAX_ITEMS", 2)
    folder = tmp_path / "rings"
    make_rings(folder, count=5)
    (folder / "rings_00.txt").write_text("the same caption")  # two pictures share a caption
    (folder / "rings_01.txt").write_text("the same caption")
    manifest, _ = build_manifest(folder, tmp_path / "hashes.json")
    built = {}
    for workers in (1, 2):
        store = Store(tmp_path / f"store{workers}")
        labels = build_labels(folder, manifest, store).frame
        out = tmp_path / f"out{workers}"
        built[workers] = stage.build_encoded(folder, labels, [tiny_sdxl], out, store, CPU,
                                             tmp_path / "fp.json", 64, workers)  # fmt: skip
    one, two = built[1], built[2]
    assert [len(s) for s in stage._shares(list(range(5)), 2, 2)] == [3, 2]
    assert two.result.computed == one.result.computed == 5
    assert two.result.extra["captions_computed"] == one.result.extra["captions_computed"] == 4
    assert one.keys == two.keys
    columns = [c for c in one.frame.columns if c not in ("posterior", "text")]
    assert one.frame[columns].equals(two.frame[columns])
    for a, b in zip(one.frame.to_dict("records"), two.frame.to_dict("records"), strict=True):
        for column in ("posterior", "text"):
            with open(a[column], "rb") as x, open(b[column], "rb") as y:
                assert x.read() == y.read(), (a["path"], column)

    store = Store(tmp_path / "store2")
    labels = build_labels(folder, manifest, store).frame
    again = stage.build_encoded(folder, labels, [tiny_sdxl], tmp_path / "out2", store, CPU,
                                tmp_path / "fp.json", 64, workers=2)  # fmt: skip
    assert again.result.computed == 0 and again.result.cached == 5
