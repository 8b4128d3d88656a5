"""The Stable Audio 3 `encoded` stage on two processes encodes the batches one process encodes,
dealt in turn, and writes the same store entries, outputs (latents, sidecars, details) and
table, byte for byte. A clip too short to encode is skipped alike; the model is loaded in the
worker processes only; a rebuild finds everything cached and sends the processes nothing."""

from __future__ import annotations

import shutil
from contextlib import nullcontext
from pathlib import Path

import pytest
import torch

from tests.conftest import no_pool_tasks, refuse_model, tree_bytes, write_clip
from tunesmith import encoding
from tunesmith.backends.placement import Placement
from tunesmith.dataset.labels import build_labels
from tunesmith.dataset.manifest import build_manifest
from tunesmith.families.stable_audio_3 import FAMILY, model
from tunesmith.families.stable_audio_3 import encoded as stage
from tunesmith.family import EncodeRequest
from tunesmith.store import Store

pytestmark = pytest.mark.slow
CPU = Placement("torch", "cpu", "float32", "test")


def here(workers):
    """A `pool` whose tasks run in this process, in turn (so they can be watched)."""
    return nullcontext(lambda function, tasks: [function(task) for task in tasks])


def test_two_workers_write_what_one_writes(tiny_sa3, tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", str(torch.get_num_threads()))  # workers as this one
    # batches of two: 1 s alone, 1.5 s twice, 2 s twice and once: four, dealt to both processes
    monkeypatch.setattr("tunesmith.backends.batches.MAX_ITEMS", 2)
    folder = tmp_path / "songs"
    for i, seconds in enumerate([2.0, 1.5, 2.0, 1.0, 2.0, 1.5]):
        write_clip(folder / f"clip{i}.wav", seconds=seconds, bpm=90 + 10 * i, freq=110.0 * (i + 1))
    write_clip(folder / "blip.wav", seconds=0.05)  # shorter than one latent frame
    shutil.copy(folder / "clip0.wav", folder / "copy.wav")  # the same bytes: one entry
    manifest, _ = build_manifest(folder, tmp_path / "hashes.json")

    def build(name: str, workers: int):
        store = Store(tmp_path / f"store-{name}")
        labels = build_labels(folder, manifest, store).frame
        return FAMILY.encode(
            EncodeRequest(
                folder,
                labels,
                [],
                [tiny_sa3],
                tmp_path / f"out-{name}",
                store,
                CPU,
                tmp_path / "fp.json",
                workers,
            )
        )

    batches = []  # the clips of each batch the VAE encodes in this process
    original = stage.Clips.encode
    monkeypatch.setattr(
        stage.Clips,
        "encode",
        lambda self, model, part: (
            batches.append([c.item["path"] for c in part]) or original(self, model, part)
        ),
    )
    one = build("one", 1)
    assert len(batches) == 4 and sum(map(len, batches)) == 6
    once, batches[:] = list(batches), []
    monkeypatch.setattr("tunesmith.dataset.workers._KEPT", {})  # what a process keeps, dropped
    decoded = []  # each clip a process decodes
    original_decode = stage.media_audio.for_model
    with monkeypatch.context() as m:
        m.setattr(encoding, "pool", here)
        m.setattr(
            stage.media_audio,
            "for_model",
            lambda path, *a: decoded.append(path.name) or original_decode(path, *a),
        )
        build("here", 2)
    # The batches planned from the headers (1 s; 1.5 s twice; 2 s twice and once; blip alone,
    # which fails to decode) are encoded as one process encodes them, and each clip is decoded
    # once, by the process that encodes it (before, every process decoded every clip).
    assert sorted(batches) == sorted(once)
    assert sorted(decoded) == sorted(["blip.wav", *[p for b in once for p in b]])

    monkeypatch.setattr(model, "load_pipeline", refuse_model)  # loaded in the processes only
    two = build("two", 2)
    assert (one.result.computed, one.result.cached) == (6, 1)
    assert [(s.path, s.reason) for s in one.result.skipped] == [
        (s.path, s.reason) for s in two.result.skipped
    ]
    assert [s.path for s in one.result.skipped] == ["blip.wav"]
    assert "shorter than one latent frame" in one.result.skipped[0].reason
    assert (two.result.computed, two.result.cached) == (6, 1)
    assert one.keys == two.keys and one.result.data_version == two.result.data_version
    columns = [c for c in one.frame.columns if c not in ("latents", "sidecar")]
    assert one.frame[columns].equals(two.frame[columns])
    for column in ("latents", "sidecar"):  # the same places under each output folder
        for a, b in zip(one.frame[column], two.frame[column], strict=True):
            assert Path(a).relative_to(tmp_path / "out-one") == Path(b).relative_to(
                tmp_path / "out-two"
            )
    outputs = tree_bytes(tmp_path / "out-one")
    assert len(outputs) == 2 * 7 + 1 and outputs == tree_bytes(tmp_path / "out-two")
    for key in one.keys:  # latents and value.json, the prompts' text.safetensors, details
        entry = tree_bytes(Store(tmp_path / "store-one").path(key))
        assert entry and entry == tree_bytes(Store(tmp_path / "store-two").path(key)), key

    monkeypatch.setattr(encoding, "pool", lambda workers: nullcontext(no_pool_tasks))
    (folder / "blip.wav").unlink()  # else a process tries it again
    manifest, _ = build_manifest(folder, tmp_path / "hashes.json")
    again = build("two", 2)
    assert (again.result.computed, again.result.cached) == (0, 7)
