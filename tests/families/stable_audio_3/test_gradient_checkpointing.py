"""Gradient checkpointing (`train.gradient_checkpointing = true`) on the tiny Stable Audio 3, in
float32: the same adapter gradients as without it, and the blocks really recomputed.

Both trainers: torch (diffusers' `enable_gradient_checkpointing` on the DiT) and MLX
(`mx.checkpoint` around each DiT block). The adapters' B is moved off zero and the dora
magnitude off ‖W‖ first, so that every gradient path carries signal.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tunesmith.adapters import mlx_lora, torch_lora
from tunesmith.backends.placement import Placement
from tunesmith.families.stable_audio_3.config import Sa3Adapter, Sa3Train
from tunesmith.families.stable_audio_3.data import Batch
from tunesmith.families.stable_audio_3.mlx import model as mlx_model
from tunesmith.families.stable_audio_3.mlx import trainer as mlx_train
from tunesmith.families.stable_audio_3.trainer import Objective
from tunesmith.train.config import RunConfig

TORCH_CPU = Placement("torch", "cpu", "float32", "test")
MLX_CPU = Placement("mlx", "cpu", "float32", "test")
MAX_RELATIVE = 1e-6  # max |with − without| / max |without| over every adapter gradient
FRAMES = 32


def run_config(folder, adapter_type: str, checkpointing) -> RunConfig:
    return RunConfig(
        name="ckpt",
        family="stable-audio-3",
        base_model=str(folder),
        trigger="zq",
        adapter=Sa3Adapter(type=adapter_type, rank=4),
        train=Sa3Train(seed=3, gradient_checkpointing=checkpointing),
    )


def awake(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The adapter state with B off zero and m off ‖W‖ (the same numbers every call)."""
    generator = torch.Generator().manual_seed(7)
    moved = {}
    for key, value in state.items():
        if key.endswith("lora_B"):
            value = 0.05 * torch.randn(value.shape, generator=generator)
        elif key.endswith("magnitude"):
            value = value * (1 + 0.1 * torch.rand(value.shape, generator=generator))
        moved[key] = value
    return moved


def inputs(channels: int):
    """(batch, prompts, t, noise, drop): two crops, the second part padding, one dropped."""
    generator = torch.Generator().manual_seed(0)
    mask = torch.ones(2, FRAMES, dtype=torch.bool)
    mask[1, 20:] = False
    batch = Batch(
        latents=torch.randn(2, channels, FRAMES, generator=generator),
        mask=mask,
        seconds_total=torch.tensor([10.0, 47.5]),
        pieces=[(), ()],
        paths=["a", "b"],
    )
    t = torch.rand(2, generator=generator, dtype=torch.float64)
    noise = torch.randn(2, channels, FRAMES, generator=generator)
    return (
        batch,
        ["zq, Genre: house", "a slow ambient piece"],
        t,
        noise,
        torch.tensor([False, True]),
    )


def relative(with_: np.ndarray, without: np.ndarray) -> float:
    return float(np.abs(with_ - without).max() / np.abs(without).max())


def torch_step(folder, adapter_type: str, checkpointing) -> tuple[np.ndarray, int, bool]:
    """(every adapter gradient, flattened; block forwards begun, a recomputation included;
    the DiT's checkpointing flag)."""
    objective = Objective(folder, run_config(folder, adapter_type, checkpointing), TORCH_CPU)
    torch_lora.load_adapter_state(
        objective.modules, awake(torch_lora.adapter_state(objective.modules))
    )
    dit = objective.pipe.transformer
    forwards = []
    for block in dit.transformer_blocks:
        block.register_forward_pre_hook(lambda *_: forwards.append(1))
    objective.loss(*inputs(dit.config.io_channels)).mean().backward()
    grads = np.concatenate([p.grad.numpy().ravel() for p in objective.parameters()])
    return grads, len(forwards), dit.gradient_checkpointing


@pytest.mark.parametrize("adapter_type", ["lora", "dora-rows"])
def test_torch_checkpointing_recomputes_the_blocks_and_keeps_the_gradients(tiny_sa3, adapter_type):
    without, plain_forwards, plain_flag = torch_step(tiny_sa3, adapter_type, False)
    with_, forwards, flag = torch_step(tiny_sa3, adapter_type, True)
    depth = plain_forwards
    assert (plain_flag, flag) == (False, True)
    assert forwards == 2 * depth  # each block once forward, once again in the backward
    assert np.abs(without).max() > 0
    assert relative(with_, without) <= MAX_RELATIVE
    # "auto" reaching a trainer reads as off (the fit resolves it before).
    assert torch_step(tiny_sa3, adapter_type, "auto")[1:] == (depth, False)


def mlx_objective(folder, adapter_type: str, checkpointing) -> mlx_train.MLXObjective:
    objective = mlx_train.MLXObjective(
        folder, run_config(folder, adapter_type, checkpointing), MLX_CPU
    )
    mlx_lora.load_adapter_state(objective.modules, awake(mlx_lora.adapter_state(objective.modules)))
    return objective


def mlx_gradients(objective, monkeypatch) -> tuple[np.ndarray, int]:
    """(every adapter gradient, flattened; DiT block calls Python made)."""
    calls = []
    original = mlx_model.DiTBlock.__call__

    def counted(block, *args):
        calls.append(1)
        return original(block, *args)

    monkeypatch.setattr(mlx_model.DiTBlock, "__call__", counted)
    channels = objective.modules.transformer.io_channels
    _, grads = mlx_train.loss_and_grads(objective.modules, *objective.inputs(*inputs(channels)))
    monkeypatch.setattr(mlx_model.DiTBlock, "__call__", original)
    state = mlx_lora.state_from_tree(objective.modules, grads)
    flat = np.concatenate([np.array(state[k]).ravel() for k in sorted(state)])
    return flat, len(calls)


@pytest.mark.parametrize("adapter_type", ["lora", "dora-rows"])
def test_mlx_checkpointing_recomputes_the_blocks_and_keeps_the_gradients(
    tiny_sa3, adapter_type, monkeypatch
):
    plain = mlx_objective(tiny_sa3, adapter_type, False)
    checkpointed = mlx_objective(tiny_sa3, adapter_type, True)
    assert checkpointed.modules.transformer.gradient_checkpointing
    without, depth = mlx_gradients(plain, monkeypatch)
    with_, calls = mlx_gradients(checkpointed, monkeypatch)
    assert depth == len(plain.modules.transformer.transformer_blocks)
    assert calls == 2 * depth  # mx.checkpoint runs each block again in the backward
    assert np.abs(without).max() > 0
    assert relative(with_, without) <= MAX_RELATIVE

    # The compiled step of the trainer takes the same step with it.
    channels = plain.modules.transformer.io_channels
    losses = [o.step(*inputs(channels))[0] for o in (plain, checkpointed)]
    assert losses[0] == pytest.approx(losses[1], rel=MAX_RELATIVE)
    after = [
        np.concatenate([np.array(p).ravel() for p in o.parameters()]) for o in (plain, checkpointed)
    ]
    assert relative(after[1], after[0]) <= MAX_RELATIVE
