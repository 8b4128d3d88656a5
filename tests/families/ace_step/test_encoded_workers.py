"""The ACE-Step `encoded` stage on two processes writes the same store entries (latents and
audio codes, caption and lyrics states), published files and table, byte for byte, as on one,
with the same counts: the copies of one file go to one process, a clip too short to encode is
skipped alike. The model is loaded in the worker processes only; a rebuild finds everything
cached and sends the processes nothing."""

from __future__ import annotations

import shutil
from contextlib import nullcontext
from pathlib import Path

import pytest
import torch

from tests.conftest import no_pool_tasks, refuse_model, tree_bytes, write_clip
from tests.families.ace_step.conftest import RUN_TOML, write_dataset
from tunesmith import encoding
from tunesmith.backends.placement import Placement
from tunesmith.dataset.labels import build_labels
from tunesmith.dataset.manifest import build_manifest
from tunesmith.families.ace_step import FAMILY, model
from tunesmith.family import EncodeRequest
from tunesmith.store import Store
from tunesmith.train.config import load_runs

pytestmark = pytest.mark.slow
CPU = Placement("torch", "cpu", "float32", "tests")
# a second run with its own trigger: its own captions, the same lyrics
SECOND_RUN = RUN_TOML.split("[[runs]]")[1].replace('"unit"', '"other"\ntrigger = "wvb"')
STORE_PATHS = ("latents", "caption_states", "lyrics_states")


def test_two_workers_write_what_one_writes(tiny_ace_step, tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", str(torch.get_num_threads()))  # workers as this one
    models = tmp_path / "models"
    shutil.copytree(tiny_ace_step, models / "tiny")
    folder = write_dataset(tmp_path / "clips", count=4)
    (folder / "tunesmith.toml").write_text(RUN_TOML + "[[runs]]" + SECOND_RUN)
    write_clip(folder / "blip.wav", seconds=0.02)  # shorter than one latent frame
    shutil.copy(folder / "clip1.wav", folder / "copy.wav")  # the same bytes: one entry
    runs = load_runs(folder, "audio")
    assert [r.name for r in runs] == ["unit", "other"]

    def build(name: str, workers: int):
        manifest, _ = build_manifest(folder, tmp_path / "hashes.json")
        store = Store(tmp_path / f"store-{name}")
        labels = build_labels(folder, manifest, store).frame
        request = EncodeRequest(
            folder,
            labels,
            runs,
            [models / "tiny"],
            tmp_path / f"out-{name}",
            store,
            CPU,
            tmp_path / "fp.json",
            workers,
        )
        return FAMILY.encode(request)

    one = build("one", 1)
    monkeypatch.setattr(model, "load_pipeline", refuse_model)  # loaded in the processes only
    two = build("two", 2)
    for built in (one, two):
        result = built.result
        assert (result.computed, result.cached) == (4, 1)
        assert [(s.path, s.reason) for s in result.skipped] == [
            (s.path, s.reason) for s in one.result.skipped
        ]
        # a caption per item and run (five, two runs); lyrics: two sung and [Instrumental]
        assert (result.extra["texts_computed"], result.extra["texts_cached"]) == (13, 0)
    assert [s.path for s in one.result.skipped] == ["blip.wav"]
    assert "shorter than one latent frame" in one.result.skipped[0].reason
    assert one.keys == two.keys and one.result.data_version == two.result.data_version
    columns = [c for c in one.frame.columns if c not in STORE_PATHS]
    assert len(one.frame) == 10 and one.frame[columns].equals(two.frame[columns])
    for column in STORE_PATHS:  # the same entries' files
        for a, b in zip(one.frame[column], two.frame[column], strict=True):
            assert Path(a).relative_to(tmp_path / "store-one") == Path(b).relative_to(
                tmp_path / "store-two"
            )
    outputs = tree_bytes(tmp_path / "out-one")
    assert len(outputs) == 2 * 5 and outputs == tree_bytes(tmp_path / "out-two")
    for key in one.keys:  # item.safetensors, item.json, value.json; text.safetensors
        entry = tree_bytes(Store(tmp_path / "store-one").path(key))
        assert entry and entry == tree_bytes(Store(tmp_path / "store-two").path(key)), key

    monkeypatch.setattr(encoding, "pool", lambda workers: nullcontext(no_pool_tasks))
    (folder / "blip.wav").unlink()  # else a process tries it again
    again = build("two", 2).result
    assert (again.computed, again.cached, again.extra["texts_computed"]) == (0, 5, 0)
    assert again.data_version == two.result.data_version
