"""Gradient checkpointing in the SDXL trainer (tiny model, float32): with
`train.gradient_checkpointing = true` every transformer block of the UNet runs again in the
backward pass, and one step's adapter gradients are those of a step without it; "auto" and
false train without (the fit resolves "auto" before a trainer is built)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tunesmith.backends.placement import Placement
from tunesmith.dataset.labels import build_labels
from tunesmith.dataset.manifest import build_manifest
from tunesmith.examples.rings import make_rings
from tunesmith.families.sdxl import FAMILY
from tunesmith.families.sdxl.trainer import SdxlTrainer
from tunesmith.family import EncodeRequest
from tunesmith.store import Store
from tunesmith.train.config import resolve_run

SIZE = 64
CPU = Placement("torch", "cpu", "float32", "test")
LINEAGE = {"tunesmith.base_model_fingerprint": "fp", "tunesmith.training_config": "{}"}


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """The tiny UNet's ops are far too small to share out: one thread is much faster here."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def run_config(tiny_sdxl, **train):
    raw = {
        "name": "rings",
        "family": "sdxl",
        "base_model": str(tiny_sdxl),
        "train": {"size": SIZE, "batch_size": 2, **train},
    }
    return resolve_run(raw, Path("tunesmith.toml"), 0)


@pytest.fixture(scope="module")
def encoded(tiny_sdxl, tmp_path_factory):
    """Four rings encoded by the `encoded` stage's engine: three to train on, one held out."""
    root = tmp_path_factory.mktemp("rings")
    folder, store = root / "rings", Store(root / "store")
    make_rings(folder, count=4)
    manifest, _ = build_manifest(folder, root / "hashes.json")
    labels = build_labels(folder, manifest, store).frame
    runs = [run_config(tiny_sdxl)]
    request = EncodeRequest(
        folder, labels, runs, [tiny_sdxl], root / "out", store, CPU, root / "fp.json"
    )
    return FAMILY.encode(request).frame.sort_values("path")


def one_step(tiny_sdxl, encoded, run_dir, checkpointing):
    """One trainer step from B drawn at random (so every factor's gradient is not zero):
    (the UNet, its transformer blocks' forward calls, the factors' gradients)."""
    from diffusers.models.attention import BasicTransformerBlock

    run = run_config(tiny_sdxl, gradient_checkpointing=checkpointing)
    trainer = SdxlTrainer(run, tiny_sdxl, encoded, run_dir, CPU, LINEAGE)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for b in trainer.lora.b_parameters():
            b.copy_(torch.randn(b.shape, generator=g) * 0.05)
    unet = trainer.pipe.unet
    blocks = [m for m in unet.modules() if isinstance(m, BasicTransformerBlock)]
    calls = []
    for block in blocks:  # a pre-hook: torch stops a recomputation once it has what backward
        block.register_forward_pre_hook(lambda *_: calls.append(1))  # needs, before forward hooks
    trainer.step()
    gradients = torch.cat([p.grad.flatten() for p in trainer.lora.parameters()])
    return unet, len(calls) / len(blocks), gradients


def test_checkpointing_recomputes_the_blocks_and_keeps_the_gradients(tiny_sdxl, encoded, tmp_path):
    off_unet, off_calls, off = one_step(tiny_sdxl, encoded, tmp_path / "off", False)
    on_unet, on_calls, on = one_step(tiny_sdxl, encoded, tmp_path / "on", True)
    assert not off_unet.is_gradient_checkpointing and on_unet.is_gradient_checkpointing
    assert (off_calls, on_calls) == (1, 2)  # each block once more, in the backward pass
    assert off.abs().max() > 0 and (off == 0).float().mean() < 0.01
    assert (on - off).abs().max() / off.abs().max() <= 1e-6


def test_auto_trains_without_checkpointing_in_the_trainer(tiny_sdxl, encoded, tmp_path):
    unet, calls, _ = one_step(tiny_sdxl, encoded, tmp_path, "auto")
    assert not unet.is_gradient_checkpointing and calls == 1
