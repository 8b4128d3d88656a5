"""The memory estimate of a planner run on the tiny planner: it builds on `meta`, its step is
the trainer's own at the length of the run's longest song, rises with that length, and is
smaller with gradient checkpointing where the layers' activations outweigh the rest."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import torch

from tests.families.ace_step_planner.conftest import LABELS
from tunesmith.families.ace_step_planner import FAMILY
from tunesmith.families.ace_step_planner.data import build_example
from tunesmith.families.ace_step_planner.memory import longest_example
from tunesmith.families.ace_step_planner.model import load_planner
from tunesmith.families.ace_step_planner.torch_lm import TorchPlannerLora
from tunesmith.train.config import resolve_run
from tunesmith.train.footprint import ADAPTER_BYTES_PER_PARAMETER, traced_peak


def _run(planner: Path, checkpointing=False):
    raw = {
        "name": "plan",
        "family": "ace-step-planner",
        "adapter": {"planner": str(planner)},
        "train": {"gradient_checkpointing": checkpointing},
    }
    return resolve_run(raw, Path("tunesmith.toml"), 0)


def _items(*codes: int) -> pd.DataFrame:
    """Encoded rows of songs with these many codes (only the count and the labels are read)."""
    labels = json.dumps(LABELS)
    return pd.DataFrame(
        [{"path": f"s{i}.wav", "codes": n, "planner_labels": labels} for i, n in enumerate(codes)]
    )


def _step(model, run, checkpointing: bool) -> int:
    return model.estimate(
        replace(run, train=replace(run.train, gradient_checkpointing=checkpointing))
    ).step


def test_the_step_is_as_long_as_the_trainers_longest_example(tiny_planner):
    planner = load_planner(tiny_planner)
    codes = torch.zeros(300, dtype=torch.long)
    built = build_example(planner.tokenizer, planner.vocab, "s1", LABELS, codes, planner.context)
    assert longest_example(planner, _items(40, 300, 120)) == (
        len(built.input_ids),
        built.answer_tokens,
    )
    # no items: ACE-Step's longest song, cut at the planner's context as the trainer cuts it
    tokens, answer = longest_example(planner)
    assert tokens == planner.context and answer < tokens


def test_the_estimate_builds_rises_with_the_song_and_checkpointing_lowers_it(tiny_planner):
    run = _run(tiny_planner)
    short = FAMILY.memory(run, tiny_planner.parent, torch.float32, _items(50))
    long = FAMILY.memory(run, tiny_planner.parent, torch.float32, _items(50, 1500))
    assert short.knobs == ()  # nothing shortens a song: a run that does not fit is refused
    lora = short.parts["planner"]
    assert next(lora.parameters()).device.type == "meta"
    trained = sum(p.numel() for p in lora.parameters() if p.requires_grad)
    footprint = short.estimate(run)
    assert footprint.adapter == trained * ADAPTER_BYTES_PER_PARAMETER
    frozen = sum(p.numel() * 4 for p in lora.parameters() if not p.requires_grad)
    buffers = sum(b.numel() * b.element_size() for b in lora.buffers())  # rotary frequencies
    assert footprint.weights == frozen + buffers  # the float32 planner, its LM head tied
    assert _step(short, run, False) < _step(long, run, False)
    assert _step(short, run, True) < _step(long, run, True)
    # a long song's layer activations outweigh its logits: checkpointing keeps less
    assert _step(long, run, True) < _step(long, run, False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_estimate_builds_at_the_placements_dtype(tiny_planner, dtype):
    model = FAMILY.memory(_run(tiny_planner, True), tiny_planner.parent, dtype, _items(80))
    frozen = [p for p in model.parts["planner"].parameters() if not p.requires_grad]
    assert {p.dtype for p in frozen} == {dtype}
    assert model.estimate(_run(tiny_planner, True)).checkpointing


@pytest.mark.parametrize("checkpointing", [False, True])
def test_the_meta_step_holds_what_the_trainers_step_holds(tiny_planner, checkpointing):
    """The same tracer over the trainer's loss and backward on the CPU, float32, on a song of
    800 codes, against the estimate's step on `meta`."""
    run = _run(tiny_planner, checkpointing)
    model = FAMILY.memory(run, tiny_planner.parent, torch.float32, _items(800))
    planner = load_planner(tiny_planner)
    lora = TorchPlannerLora(planner, checkpointing=checkpointing)
    codes = torch.zeros(800, dtype=torch.long)
    example = build_example(planner.tokenizer, planner.vocab, "s", LABELS, codes, planner.context)
    real = traced_peak(lambda: lora.loss([example]).backward())
    assert model.estimate(run).step == pytest.approx(real, rel=0.01)
