"""SDXL at full size: the estimate against a training step's peak, and our step against a bare
diffusers + PEFT loop's (`bench/real_size.py` prints the rows).

The model: stabilityai/stable-diffusion-xl-base-1.0's architecture (`full_size.CONFIGS`: the
2.57 B UNet, the VAE, both text encoders; 6.9 GB in bfloat16), written as a base-model folder
with random bfloat16 weights. The run: the family's defaults, LoRA of rank 16 on the UNet's
560 attention projections, batch 1, 1024² pictures (128² latents); one row with gradient
checkpointing on, one with it off. Each side trains at the dtype tunesmith's placement picks
for the device (bfloat16 on CUDA, float32 on the CPU). With `reduced` the tiny model's widths
with bench/sdxl_step.py's wider UNet, at its 128² pictures: the same code in seconds.

Each side runs in a child process of its own: bench/sdxl_step.py's `ours` or `bare` on the
folder, at this row's shapes (its module constants set to them) and `WARMUP` + 1 steps, the
last one timed:

    ours   the estimate first, as the fit makes it (`FAMILY.memory(...).estimate`, its
           runtime a fresh training process's, measured once a machine and read from the
           user's cache, `footprint.machine_runtime_bytes`; 0 on CUDA, where the peak counted
           is CUDA's),
           then tunesmith's step: the pipeline as the trainer loads it, `SdxlLora`, the run
           loop's `train_step`. The run has no demos: neither side renders, so the estimate
           is of the steps alone (a render's decode, which sets a checkpointed run's peak in
           training, is traced by `Family.memory` but not measured here)
    bare   the UNet alone, PEFT's LoRA on the same layers, the factors in float32, AdamW and
           the ε-prediction loss, as diffusers' train_text_to_image_lora_sdxl

With checkpointing, both load their UNet through `UNet2DConditionModel.from_pretrained` with
diffusers' `enable_gradient_checkpointing()` then called on it, what `SdxlLora` does for
`train.gradient_checkpointing = true`.

Peak: the child's whole memory at its highest while its steps run (bench/sdxl_step.py's
`PeakMemory`: the resident set sampled on the CPU, `torch.cuda.max_memory_allocated()` on CUDA);
loading is left out, as diffusers reads weights through memory maps whose pages count as
resident while they are copied. The process's own lifetime peak (ru_maxrss on the CPU) is in
each row too, as `process_peak_gb`.

A row whose estimate is over this machine's memory (available RAM on the CPU, the GPU's on
CUDA) is skipped: the estimate is made from the configs alone before any weights are written.

    .venv/bin/python bench/full_size/sdxl.py [--reduced]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

BATCH, RANK, SIZE = 1, 16, 1024
GB = 1e9


def device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def dtype_name() -> str:
    """tunesmith's placement: bfloat16 on CUDA (every GPU that runs SDXL full size has it),
    float32 on the CPU, where half precision is slow."""
    return "bfloat16" if device() == "cuda" else "float32"


def warmup(reduced: bool) -> int:
    """Steps before the timed one: one where a step takes seconds (the first sets up kernels
    and allocations); none for the full model on the CPU, whose one step takes minutes."""
    return 0 if device() == "cpu" and not reduced else 1


def configs(reduced: bool) -> dict[str, dict]:
    from bench import sdxl_step
    from tunesmith.families.sdxl import full_size

    return full_size.reduced(**sdxl_step.UNET) if reduced else full_size.CONFIGS


def picture_size(reduced: bool) -> int:
    from bench import sdxl_step

    return sdxl_step.SIZE if reduced else SIZE


def run_config(folder: Path, size: int, checkpointing: bool):
    from tunesmith.train.config import resolve_run

    train = {"size": size, "batch_size": BATCH, "gradient_checkpointing": checkpointing}
    raw = {"name": "bench", "family": "sdxl", "base_model": str(folder), "train": train}
    run = resolve_run(raw, Path("tunesmith.toml"), 0)
    assert run.adapter.rank == RANK  # the family's default
    return replace(run, demos=())  # neither side renders


def estimate(model_configs: dict, size: int, checkpointing: bool):
    """The run's `Footprint` on a model of `model_configs`, as the fit makes it: its runtime
    a fresh training process's on the CPU (`machine_runtime_bytes`), 0 on CUDA."""
    from tunesmith.families.sdxl.memory import memory_of
    from tunesmith.train.footprint import machine_runtime_bytes

    run = run_config(Path("model"), size, checkpointing)
    runtime = 0 if device() == "cuda" else machine_runtime_bytes()
    dtype = getattr(torch, dtype_name())
    return memory_of(model_configs, run, dtype).estimate(run, runtime=runtime)


def available() -> int:
    import psutil

    if device() == "cuda":
        return torch.cuda.get_device_properties(0).total_memory
    return psutil.virtual_memory().available


def rows(work: Path, reduced: bool, checkpointing_modes=(True, False)) -> list[dict]:
    from tunesmith.families.sdxl import full_size

    model, size = configs(reduced), picture_size(reduced)
    model_name = "reduced" if reduced else "base 1.0"
    setting = f"{model_name}, {size}², batch {BATCH}, lora r{RANK}, {dtype_name()}"
    found, folder = [], work / "model"
    for checkpointing in checkpointing_modes:
        expected = estimate(model, size, checkpointing).total
        if expected > available():
            found.append(
                {
                    "family": "sdxl",
                    "setting": setting,
                    "checkpointing": checkpointing,
                    "skipped": f"estimated {expected / GB:.1f} GB, {available() / GB:.1f} GB "
                    f"available",
                }
            )
            continue
        if not folder.exists():
            full_size.write_base_model(folder, model)
        ours, bare = (_child(side, folder, checkpointing, reduced) for side in ("ours", "bare"))
        found.append(
            {
                "family": "sdxl",
                "setting": setting,
                "checkpointing": checkpointing,
                "estimate_gb": ours["estimate"] / GB,
                "peak_gb": ours["peak"] / GB,
                "ours_s": ours["seconds"],
                "bare_s": bare["seconds"],
                "process_peak_gb": ours["process_peak"] / GB,
            }
        )
    return found


def _child(side: str, folder: Path, checkpointing: bool, reduced: bool) -> dict:
    from bench.sdxl_step import MALLOC

    command = [sys.executable, __file__, "--child", side, "--model", str(folder)]
    command += ["--checkpointing"] * checkpointing + ["--reduced"] * reduced
    out = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **MALLOC})
    if out.returncode:
        raise RuntimeError(f"the {side} child failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def child(side: str, folder: Path, checkpointing: bool, reduced: bool) -> dict:
    """One side's step at this row's shapes: its seconds, its peak while stepping, its
    process's lifetime peak, and (ours) the estimate made before loading."""
    from bench import sdxl_step
    from tunesmith.families.sdxl import full_size

    if reduced:
        torch.set_num_threads(1)  # sdxl_step's default: tiny ops are fastest on one thread
    size = picture_size(reduced)
    sdxl_step.BATCH, sdxl_step.SIZE, sdxl_step.LATENT = BATCH, size, size // 8
    sdxl_step.WARMUP = warmup(reduced)
    result = {}
    if side == "ours":
        model = full_size.folder_configs(folder)
        result["estimate"] = estimate(model, size, checkpointing).total
    peaks: list[int] = []
    sdxl_step.PeakMemory = _recording(sdxl_step.PeakMemory, peaks)
    with _checkpointed_unets(checkpointing), tempfile.TemporaryDirectory() as work:
        measured = _measure(side, folder, Path(work))
    assert measured["targets"] == 560 or reduced, measured
    lifetime = (
        torch.cuda.max_memory_allocated()
        if device() == "cuda"
        else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    )
    return {
        **result,
        "seconds": 1 / measured["steps_per_second"],
        "peak": peaks[0],
        "process_peak": lifetime,
    }


def _measure(side: str, folder: Path, work: Path, steps: int = 1) -> dict:
    """One side's step (bench/sdxl_step.py's trainer or bare loop) after its warm-up steps,
    inside sdxl_step's `PeakMemory`: the median seconds a step and the adapted layers."""
    import statistics

    from bench import sdxl_step

    if side == "ours":
        trainer = sdxl_step.ours(folder, work, device(), dtype_name())
        step, targets = trainer.step, len(trainer.lora.named_factors())
    else:
        step, targets = sdxl_step.bare(folder, device(), getattr(torch, dtype_name()))
    now, seconds = sdxl_step.clock(device()), []
    with sdxl_step.PeakMemory(device()):
        for index in range(sdxl_step.WARMUP + steps):
            start = now()
            step()
            if device() == "cuda":
                torch.cuda.synchronize()
            if index >= sdxl_step.WARMUP:
                seconds.append(now() - start)
    return {"steps_per_second": 1 / statistics.median(seconds), "targets": targets}


def _recording(peak_memory: type, peaks: list[int]) -> type:
    """sdxl_step's `PeakMemory`, also recording the absolute peak of its block in `peaks`:
    the highest resident set on the CPU, CUDA's peak allocated (reset as the block begins)."""

    class Recording(peak_memory):
        def __exit__(self, *exc):
            super().__exit__(*exc)
            peaks.append(torch.cuda.max_memory_allocated() if self.cuda else self.peak)

    return Recording


@contextmanager
def _checkpointed_unets(on: bool) -> Iterator[None]:
    """With `on`, every UNet `UNet2DConditionModel.from_pretrained` loads (the pipeline's loader
    calls it too) has gradient checkpointing enabled, as `SdxlLora(checkpointing=True)` does."""
    from diffusers import UNet2DConditionModel

    if not on:
        yield
        return
    load = UNet2DConditionModel.from_pretrained

    def checkpointed(*args, **kwargs):
        unet = load(*args, **kwargs)
        unet.enable_gradient_checkpointing()
        return unet

    UNet2DConditionModel.from_pretrained = checkpointed
    try:
        yield
    finally:
        del UNet2DConditionModel.from_pretrained  # ModelMixin's own again


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reduced", action="store_true")
    parser.add_argument("--child", choices=["ours", "bare"])
    parser.add_argument("--model", type=Path)
    parser.add_argument("--checkpointing", action="store_true")
    args = parser.parse_args()
    if args.child:
        torch.manual_seed(0)
        print(json.dumps(child(args.child, args.model, args.checkpointing, args.reduced)))
        return
    with tempfile.TemporaryDirectory(prefix="tunesmith-sdxl-") as work:
        for row in rows(Path(work), args.reduced):
            print(json.dumps(row))


if __name__ == "__main__":
    main()
