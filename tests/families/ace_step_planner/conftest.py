"""The tiny planner LM, made once per test session, and examples built from it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

# The tiny ACE-Step pipeline and its encoded dataset: the planner trains on their audio codes.
from tests.families.ace_step.conftest import ace_encoded, ace_pipe  # noqa: F401 (fixtures)

LABELS = {
    "caption": "warm lo-fi hip hop, dusty drums",
    "lyrics": "[Verse]\nwe ride the night\n[Chorus]\nlight the city",
    "bpm": 92.6,
    "keyscale": "A minor",
    "timesignature": "4/4",
    "language": "en",
    "genres": ["lo-fi", "hip hop"],
    "duration": 6.4,
}


# `tiny_planner`, the planner folder, is in tests/conftest.py (the songs example uses it too).


@pytest.fixture
def planner(tiny_planner: Path):
    """A fresh load of the tiny planner, float32 on the CPU (a test may wrap it)."""
    from tunesmith.families.ace_step_planner.model import load_planner

    return load_planner(tiny_planner)


@pytest.fixture(scope="session")
def examples(tiny_planner: Path):
    """Three training examples of different lengths (seeded codes)."""
    from tunesmith.families.ace_step_planner.data import build_example
    from tunesmith.families.ace_step_planner.model import load_planner

    planner = load_planner(tiny_planner)
    generator = torch.Generator().manual_seed(0)
    out = []
    for i in range(3):
        codes = torch.randint(0, planner.vocab.codebook_size, (16 + 6 * i,), generator=generator)
        labels = dict(LABELS, duration=len(codes) / 5)
        example = build_example(
            planner.tokenizer, planner.vocab, f"song{i}", labels, codes, planner.context, "zqx"
        )
        out.append(example)
    return out


def nonzero_b(parameters: dict, seed: int = 1, std: float = 0.05) -> None:
    """Give every LoRA B a seeded non-zero value, so the adapter changes the planner and its
    A factors get gradients (a fresh LoRA's B is zero)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in parameters.items():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=generator) * std)
