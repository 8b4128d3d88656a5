"""The SDXL `encoded` stage on two processes writes the same store entries, byte for byte, and
the same table as on one (the batches one process forms, dealt out whole), captions included;
the stage's own process loads no model; a rebuild finds them all cached and starts no process."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import pytest

from tests.conftest import no_pool_tasks, refuse_model
from tunesmith.backends.placement import Placement
from tunesmith.dataset.labels import build_labels
from tunesmith.dataset.manifest import build_manifest
from tunesmith.examples.rings import make_rings
from tunesmith.families.sdxl import FAMILY, model
from tunesmith.family import EncodeRequest
from tunesmith.store import Store
from tunesmith.train.config import resolve_run

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
    raw = {"family": "sdxl", "base_model": str(tiny_sdxl), "train": {"size": 64}}
    runs = [resolve_run(raw, Path("tunesmith.toml"), 0)]

    def build(workers: int, out: Path):
        store = Store(tmp_path / f"store{workers}")
        labels = build_labels(folder, manifest, store).frame
        return FAMILY.encode(
            EncodeRequest(
                folder, labels, runs, [tiny_sdxl], out, store, CPU, tmp_path / "fp.json", workers
            )
        )

    one = build(1, tmp_path / "out1")
    monkeypatch.setattr(model, "load_pipeline", refuse_model)  # loaded in the processes only
    two = build(2, tmp_path / "out2")
    assert two.result.computed == one.result.computed == 5
    assert two.result.extra["captions_computed"] == one.result.extra["captions_computed"] == 4
    assert one.keys == two.keys
    columns = [c for c in one.frame.columns if c not in ("posterior", "text")]
    assert one.frame[columns].equals(two.frame[columns])
    for a, b in zip(one.frame.to_dict("records"), two.frame.to_dict("records"), strict=True):
        for column in ("posterior", "text"):
            with open(a[column], "rb") as x, open(b[column], "rb") as y:
                assert x.read() == y.read(), (a["path"], column)

    monkeypatch.setattr("tunesmith.encoding.pool", lambda workers: nullcontext(no_pool_tasks))
    again = build(2, tmp_path / "out2")
    assert again.result.computed == 0 and again.result.cached == 5
