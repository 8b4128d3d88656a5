"""The pipeline path of a data-parallel run: `train.devices = 2` in a dataset's tunesmith.toml
trains through the `adapters` asset's training child on two gloo ranks, and the Dagster run's
log shows both ranks' first lines and rank 0's validation lines."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import dagster as dg
import pytest
from PIL import Image

from pipelines.definitions import ASSETS, resources

pytestmark = pytest.mark.slow
TOML = """\
[[runs]]
name = "two"
family = "sdxl"
base_model = "tiny-sdxl"
[runs.train]
size = 64
steps = 4
batch_size = 2
eval_every = 2
checkpoint_every = 2
devices = 2
[[runs.demos]]
prompt = "a disc"
seed = 7
steps = 1
"""


def test_two_ranks_through_the_adapters_asset(tiny_sdxl, storage, instance, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    shutil.copytree(tiny_sdxl, Path(storage.models_root) / "tiny-sdxl")
    folder = Path(storage.datasets_root) / "pics"
    folder.mkdir()
    for i, colour in enumerate([(200, 80, 40), (40, 160, 90), (30, 60, 200)]):
        buffer = io.BytesIO()
        Image.new("RGB", (64, 64), colour).save(buffer, format="PNG")
        (folder / f"pic{i}.png").write_bytes(buffer.getvalue())
        (folder / f"pic{i}.txt").write_text(f"a picture number {i}")
    (folder / "tunesmith.toml").write_text(TOML)
    instance.add_dynamic_partitions("datasets", ["pics"])
    result = dg.materialize(
        ASSETS, instance=instance, resources=resources(storage), partition_key="pics"
    )
    assert result.success
    messages = [e.user_message for e in instance.all_logs(result.run_id)]
    assert any("[rank 1] rank 1 of 2" in m for m in messages), messages
    assert any("rank 0 of 2" in m for m in messages)
    assert any("two: step 4 validation loss" in m for m in messages)
    assert any("done on 2 processes" in m for m in messages)
