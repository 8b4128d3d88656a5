"""The MLX training step against the PyTorch one, in one run, on this machine.

Both are the project's own steps on the same model, adapter and inputs: the torch path
(`stable_audio_3.train.Objective`: loss, backward, AdamW, as the loop runs it) and the MLX
path (`mlx_train.MLXObjective.step`: the compiled value_and_grad + AdamW). The model is a
"tiny but not trivial" DiT (embed 256, depth 6), float32, dora-rows rank 16 on every block
Linear, batch 2, crop 256. Each device is the best its library has here: torch cuda, mps or
cpu; MLX's gpu (Metal on Apple Silicon, CUDA where MLX was built for it) or cpu.

Printed: steps per second of each and the ratio MLX / torch (above 1: MLX is faster). On
Linux MLX runs on the CPU with a reference BLAS, so the ratio here says little; the speed
goal belongs to Apple Silicon, where this script runs unchanged.

    .venv/bin/python bench/mlx_step.py [--steps 20]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mlx.core as mx  # noqa: E402
import torch  # noqa: E402
from train_step import BATCH, CROP, DIT, RANK, make_model  # noqa: E402  (same model, batch)

WARMUP = 3


def devices() -> tuple[str, str]:
    """(torch device, MLX placement device): the best each library has on this machine."""
    if torch.cuda.is_available():
        torch_device = "cuda"
    elif torch.backends.mps.is_available():
        torch_device = "mps"
    else:
        torch_device = "cpu"
    if mx.metal.is_available():
        mlx_device = "metal"
    elif mx.cuda.is_available():
        mlx_device = "cuda"
    else:
        mlx_device = "cpu"
    return torch_device, mlx_device


def draws(steps: int):
    from tunesmith.families.stable_audio_3.data import Batch

    generator = torch.Generator().manual_seed(1)
    latents = torch.randn(BATCH, 16, CROP, generator=generator)
    batch = Batch(
        latents,
        torch.ones(BATCH, CROP, dtype=torch.bool),
        torch.full((BATCH,), 30.0),
        [()] * BATCH,
        ["a"] * BATCH,
    )
    prompts = ["zq, Title: s0, Genre: house"] * BATCH
    for _ in range(steps):
        t = torch.rand(BATCH, generator=generator, dtype=torch.float64)
        noise = torch.randn(latents.shape, generator=generator)
        drop = torch.rand(BATCH, generator=generator, dtype=torch.float64) < 0.1
        yield batch, prompts, t, noise, drop


def timed(step_fn, steps: int) -> float:
    """Steps per second over `steps`, after WARMUP steps (compile, prompt cache)."""
    elapsed = 0.0
    for i, inputs in enumerate(draws(steps + WARMUP)):
        start = time.perf_counter()
        step_fn(inputs)
        if i >= WARMUP:
            elapsed += time.perf_counter() - start
    return steps / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()

    from tunesmith.backends.placement import Placement
    from tunesmith.families.stable_audio_3.config import Sa3Adapter as AdapterConfig
    from tunesmith.families.stable_audio_3.config import Sa3Train as TrainConfig
    from tunesmith.families.stable_audio_3.mlx.trainer import MLXObjective
    from tunesmith.families.stable_audio_3.trainer import Objective
    from tunesmith.train.config import RunConfig

    torch_device, mlx_device = devices()
    run = RunConfig(
        "bench",
        "stable-audio-3",
        "",
        "zq",
        AdapterConfig(type="dora-rows", rank=RANK),
        TrainConfig(batch_size=BATCH, latent_crop_length=CROP, lr=1e-4),
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "dit"
        make_model(folder)
        ours = Objective(folder, run, Placement("torch", torch_device, "float32", "bench"))
        params = ours.parameters()
        optimizer = torch.optim.AdamW(params, lr=run.train.lr)

        def torch_step(inputs):
            loss = ours.loss(*inputs).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            loss.item()  # waits for the device, as the loop's logging does

        torch_rate = timed(torch_step, args.steps)
        mlx_side = MLXObjective(folder, run, Placement("mlx", mlx_device, "float32", "bench"))
        mlx_rate = timed(lambda inputs: mlx_side.step(*inputs), args.steps)

    print(
        f"model: SA3 DiT embed {DIT['embed_dim']} depth {DIT['depth']}, dora-rows r{RANK} on "
        f"{len(ours.targets)} layers, batch {BATCH}, crop {CROP}, float32, {args.steps} steps"
    )
    print(f"torch {torch.__version__} on {torch_device}: {torch_rate:.2f} steps/s")
    print(f"mlx {mx.__version__} on {mlx_device} ({mx.default_device()}): {mlx_rate:.2f} steps/s")
    print(f"ratio mlx/torch: {mlx_rate / torch_rate:.2f}x")


if __name__ == "__main__":
    main()
