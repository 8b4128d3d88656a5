"""The tiny ACE-Step 1.5, made once per test session, and loaded as a user's checkpoint is."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_ace_step(tmp_path_factory) -> Path:
    """The tiny ACE-Step 1.5 checkpoint folder (read only)."""
    from tunesmith.families.ace_step.tiny import make_tiny_ace_step

    return make_tiny_ace_step(tmp_path_factory.mktemp("models") / "tiny-ace-step", seed=0)


@pytest.fixture(scope="session")
def ace_pipe(tiny_ace_step: Path):
    """The tiny ACE-Step 1.5 through `load_pipeline`, float32 on the CPU (do not modify)."""
    from tunesmith.families.ace_step.model import load_pipeline

    return load_pipeline(tiny_ace_step)
