"""kohya's SDXL options on two gloo ranks: accumulation (the first micro-batch under DDP's
`no_sync`, the sum at the last), min-SNR, noise offset and the EMA train what one process
trains, to 1e-5 relative (the batch's sums are taken per rank, then over the ranks)."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from pipelines import train_child
from tests.train.test_distributed import (  # noqa: F401  (one_thread: a fixture)
    assert_close,
    extras,
    losses,
    one_process,
    one_thread,
    raw_run,
)
from tests.train.test_distributed import sdxl_items as sdxl_items  # noqa: F401

pytestmark = pytest.mark.slow

OPTIONS = {
    "steps": 4,
    "eval_every": 4,
    "checkpoint_every": 4,
    "gradient_accumulation_steps": 2,
    "min_snr_gamma": 5.0,
    "noise_offset": 0.05,
    "ema_decay": 0.5,
}


def test_two_ranks_accumulate_and_average_what_one_process_does(tiny_sdxl, sdxl_items, tmp_path):
    single = one_process(
        raw_run("sdxl", tiny_sdxl, **OPTIONS), tiny_sdxl, sdxl_items, tmp_path / "one"
    )
    lines: list[str] = []
    two = extras(
        raw_run("sdxl", tiny_sdxl, devices=2, **OPTIONS), tiny_sdxl, sdxl_items, tmp_path / "two"
    )
    train_child.launch(two, 0, lines.append)
    result = json.loads((tmp_path / "two" / "result.json").read_text())
    assert result["world_size"] == 2 and result["steps"] == 4
    for step, (a, b) in enumerate(
        zip(losses(tmp_path / "two"), losses(tmp_path / "one"), strict=True)
    ):
        assert_close([a], [b], f"the loss of step {step + 1}")
    assert_close([result["best_loss"]], [single.best_loss], "the EMA's validation loss")
    ours, theirs = load_file(result["last_path"]), load_file(single.last_path)
    assert ours.keys() == theirs.keys()
    whole = [torch.cat([x[k].flatten().double() for k in sorted(x)]) for x in (ours, theirs)]
    assert_close(*whole, "the adapter (the EMA)")  # as tests/train/test_distributed.py
