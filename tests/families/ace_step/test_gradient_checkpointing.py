"""`train.gradient_checkpointing = true` in the ACE-Step trainer: the DiT recomputes every block
in the backward pass, and one step's adapter gradients are those of a step without it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tunesmith.backends.placement import Placement
from tunesmith.families.ace_step.trainer import AceStepTrainer
from tunesmith.train.config import resolve_run

PLACEMENT = Placement("torch", "cpu", "float32", "tests")
LINEAGE = {
    "tunesmith.version": "t",
    "tunesmith.base_model_fingerprint": "f",
    "tunesmith.run_key": "k",
}


def trainer(ace_encoded, tmp_path: Path, adapter: dict, checkpointing: bool) -> AceStepTrainer:
    """A trainer whose factors are drawn at random, the same for both (so every factor, A and
    B, w1 and w2, has a gradient at the first step)."""
    encoded, _, models = ace_encoded
    train = {"optimizer": "adamw", "crop_frames": 24, "accumulation": 2}
    if adapter["type"] == "lokr":
        train["lr"] = 2e-3 * 2 / 4  # HOT-Step's lr scaled with the accumulation
    train["gradient_checkpointing"] = checkpointing
    raw = {"name": "unit", "family": "ace-step", "base_model": "tiny", "adapter": adapter}
    run = resolve_run({**raw, "train": train}, Path("tunesmith.toml"), 0)
    rows = encoded.frame[encoded.frame["run"] == "unit"]
    ours = AceStepTrainer(
        run, models / "tiny", rows, tmp_path / str(checkpointing), PLACEMENT, LINEAGE
    )
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for p in ours.params:
            p.copy_(0.3 * torch.randn(p.shape, generator=g))
    return ours


def counted(blocks) -> list[int]:
    """[the forward calls of `blocks` from now on], counted as they begin: a recomputation stops
    once it has what the backward needs (torch's checkpoint early stop), so it never ends."""
    calls = [0]

    def hook(*_) -> None:
        calls[0] += 1

    for block in blocks:
        block.register_forward_pre_hook(hook)
    return calls


@pytest.mark.parametrize(
    "adapter", [{"type": "lora", "rank": 4}, {"type": "lokr", "rank": 8, "factor": 4}]
)
def test_checkpointing_recomputes_each_block_and_keeps_the_gradients(
    ace_encoded, tmp_path, adapter
):
    steps, grads = {}, {}
    for on in (False, True):
        ours = trainer(ace_encoded, tmp_path, adapter, on)
        assert ours.transformer.is_gradient_checkpointing is on
        calls = counted(ours.transformer.layers)
        ours.step()
        steps[on] = calls[0]
        grads[on] = torch.cat([p.grad.flatten() for p in ours.params])
    blocks, crops = len(ours.transformer.layers), 2
    assert steps[False] == blocks * crops
    assert steps[True] == 2 * blocks * crops  # each block once more, in the backward
    assert grads[False].abs().max() > 0
    difference = (grads[True] - grads[False]).abs().max() / grads[False].abs().max()
    assert difference <= 1e-6
