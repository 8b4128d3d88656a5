"""The ACE-Step family's memory estimate (`Family.memory`) on the tiny base model: it builds from
the folder's config.json files, checkpointing keeps less where a crop is long, and a longer
crop costs more."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from tunesmith.family import get
from tunesmith.train.config import resolve_run


def run_of(adapter: dict, crop: int, checkpointing: bool):
    raw = {"name": "r", "family": "ace-step", "base_model": "tiny", "adapter": adapter}
    train = {"crop_frames": crop, "gradient_checkpointing": checkpointing}
    return resolve_run({**raw, "train": train}, Path("tunesmith.toml"), 0)


@pytest.mark.parametrize("adapter", [{"type": "lora", "rank": 4}, {"type": "lokr", "factor": 4}])
def test_the_estimate_of_the_tiny_model(tiny_ace_step, adapter):
    run = run_of(adapter, 750, False)
    model = get("ace-step").memory(run, tiny_ace_step, torch.float32)
    assert set(model.parts) == {
        "vae",
        "text_encoder",
        "transformer",
        "condition_encoder",
        "audio_tokenizer",
        "audio_token_detokenizer",
    }
    trained = [p for part in model.parts.values() for p in part.parameters() if p.requires_grad]
    assert trained and all(p.dtype == torch.float32 for p in trained)
    plain = model.estimate(run)
    kept = model.estimate(replace(run, train=replace(run.train, gradient_checkpointing=True)))
    assert plain.weights == kept.weights > 0 and plain.adapter == kept.adapter > 0
    # 375 tokens a block: the blocks' activations are most of a step (crops far longer make
    # the tiny model's sliding-window mask, tokens², the most, which checkpointing keeps)
    assert kept.step < 0.8 * plain.step
    assert not plain.checkpointing and kept.checkpointing
    shorter = model.estimate(replace(run, train=replace(run.train, crop_frames=375)))
    assert shorter.step < plain.step
    assert model.knobs == (("crop_frames", (750, 600, 500, 375, 250)),)


def test_checkpointing_on_and_off_alternate_on_one_model(tiny_ace_step):
    """The fit estimates one model at several settings; each step says its own."""
    run = run_of({"type": "lora", "rank": 4}, 750, False)
    model = get("ace-step").memory(run, tiny_ace_step, torch.float32)
    on = replace(run, train=replace(run.train, gradient_checkpointing=True))
    first, second, again = model.estimate(run), model.estimate(on), model.estimate(run)
    assert first.step == again.step > second.step
