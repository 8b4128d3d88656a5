"""Gradient checkpointing on the tiny planner, float32: one step's adapter gradients with it
equal those without, the decoder layers are really recomputed in the backward, on PyTorch
(transformers' own) and on MLX (mlx-lm's `grad_checkpoint`), and the trainers turn it on for
`train.gradient_checkpointing = true` only."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.families.ace_step_planner.conftest import LABELS, nonzero_b
from tunesmith.backends.placement import Placement
from tunesmith.families.ace_step_planner.model import load_planner
from tunesmith.families.ace_step_planner.torch_lm import TorchPlannerLora
from tunesmith.train.config import resolve_run

TOLERANCE = 1e-6  # max abs difference over max abs, per parameter


def _relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(a).max())


def _torch_step(folder: Path, example, checkpointing: bool) -> tuple[dict, int]:
    """(the adapter's gradients after one loss and backward, forwards of layer 0's first
    norm: the recomputation stops once it has what the backward needs, so a later module may
    not finish a second time)."""
    lora = TorchPlannerLora(load_planner(folder), checkpointing=checkpointing)
    nonzero_b(lora.parameters())  # a fresh B is zero: A would get no gradient
    calls = []
    norm = lora.planner.model.model.layers[0].input_layernorm
    norm.register_forward_hook(lambda *_: calls.append(1))
    lora.loss([example]).backward()
    grads = {n: p.grad.numpy().copy() for n, p in lora.parameters().items()}
    return grads, len(calls)


def test_torch_checkpointing_recomputes_the_layers_and_keeps_the_gradients(tiny_planner, examples):
    plain, forwards = _torch_step(tiny_planner, examples[2], checkpointing=False)
    checkpointed, recomputed = _torch_step(tiny_planner, examples[2], checkpointing=True)
    assert (forwards, recomputed) == (1, 2)  # the layer runs again in the backward
    assert plain.keys() == checkpointed.keys() and len(plain) == 28
    worst = max(_relative(plain[n], checkpointed[n]) for n in plain)
    print(f"worst relative gradient difference {worst:.1e}")
    assert worst <= TOLERANCE


def test_checkpointing_turns_off_again(planner, examples):
    lora = TorchPlannerLora(planner, checkpointing=True)
    assert planner.model.is_activation_checkpointing
    lora.set_checkpointing(False)
    assert not planner.model.is_activation_checkpointing
    assert not any(layer.training for layer in planner.model.modules())
    calls = []
    planner.model.model.layers[0].input_layernorm.register_forward_hook(lambda *_: calls.append(1))
    lora.loss([examples[0]]).backward()
    assert len(calls) == 1


def _mlx_step(folder: Path, example, checkpointing: bool) -> tuple[dict, int, str]:
    """(gradients, calls of layer 0's MLP during one loss and gradient, the block's class)."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    from tunesmith.families.ace_step_planner.mlx_lm_backend import MlxPlannerLora

    lora = MlxPlannerLora(folder, checkpointing=checkpointing)
    b = sorted(n for n in lora.parameters() if n.endswith(".lora_b"))
    values = [
        (n, mx.random.normal(lora.parameters()[n].shape, key=mx.random.key(i)) * 0.05)
        for i, n in enumerate(b)
    ]
    lora.model.load_weights(values, strict=False)
    mlp = type(lora.model.layers[0].mlp)
    original, calls = mlp.__call__, []

    def counted(self, x):
        calls.append(1)
        return original(self, x)

    mlp.__call__ = counted
    try:
        _, grads = lora.loss_and_grad([example])
    finally:
        mlp.__call__ = original
    flat = {n: np.array(g) for n, g in tree_flatten(grads)}
    return flat, len(calls), type(lora.model.layers[0]).__name__


def test_mlx_checkpointing_recomputes_the_blocks_of_its_model_only(tiny_planner, examples):
    plain, forwards, block = _mlx_step(tiny_planner, examples[2], checkpointing=False)
    checkpointed, recomputed, made = _mlx_step(tiny_planner, examples[2], checkpointing=True)
    # two layers: each once, then each once more in the backward
    assert (forwards, recomputed) == (2, 4)
    assert (block, made) == ("TransformerBlock", "CheckpointedTransformerBlock")
    worst = max(_relative(plain[n], checkpointed[n]) for n in plain)
    assert len(plain) == 28 and worst <= TOLERANCE
    again, forwards_after, block_after = _mlx_step(tiny_planner, examples[2], False)
    assert (forwards_after, block_after) == (2, "TransformerBlock")  # mlx-lm's class untouched


def _items(folder: Path, codebook: int):
    """Three songs as the encoded stage's rows (the columns a planner trainer reads)."""
    import pandas as pd

    from tunesmith.store.tensors import write_safetensors

    generator, rows = torch.Generator().manual_seed(0), []
    for i in range(3):
        codes = torch.randint(0, codebook, (20 + 5 * i,), generator=generator)
        latents = write_safetensors(folder / f"song{i}.safetensors", {"audio_codes": codes})
        rows.append(
            {
                "path": f"song{i}.wav",
                "latents": str(latents),
                "codes": len(codes),
                "planner_labels": json.dumps(LABELS),
                "trigger": "",
                "tag_position": "prepend",
            }
        )
    return pd.DataFrame(rows)


@pytest.mark.parametrize("backend", ["torch", "mlx"])
@pytest.mark.parametrize("asked", [True, False, "auto"])
def test_the_trainers_checkpoint_when_the_run_says_true(backend, asked, tiny_planner, tmp_path):
    from tunesmith import family as families

    raw = {
        "name": "plan",
        "family": "ace-step-planner",
        "adapter": {"planner": str(tiny_planner)},
        "train": {"gradient_checkpointing": asked, "holdout": 1},
    }
    run = resolve_run(raw, Path("tunesmith.toml"), 0)
    codebook = load_planner(tiny_planner).vocab.codebook_size
    placement = Placement(backend, "cpu", "float32", "tests")
    make = families.get("ace-step-planner").trainer(backend)
    metadata = {"tunesmith.base_model_fingerprint": "fp"}
    trainer = make(run, tmp_path, _items(tmp_path, codebook), tmp_path / "run", placement, metadata)
    if backend == "torch":
        on = trainer.lora.planner.model.is_activation_checkpointing
    else:
        on = type(trainer.lora.model.layers[0]).__name__.startswith("Checkpointed")
    assert on == (asked is True)
    assert ("gradient checkpointing on" in trainer.start_note) == (asked is True)
