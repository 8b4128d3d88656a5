"""Stable Audio 3 medium at full size: the estimate against a training step's peak, and our
step against a bare diffusers + PEFT loop's (`bench/real_size.py` prints the rows).

The model: the medium (`full_size.MODELS["medium"]`: the 1.45 B DiT, the SAME-L VAE, T5Gemma's
encoder, the duration embedder; 5.2 GB in bfloat16), written as a base model folder with random
bfloat16 weights. The run: underfit's defaults, a `dora-rows` adapter of rank 16 on every
Linear of the DiT's blocks, batch 1, crops of 1300 latent frames (≈ 120 s); one row with
gradient checkpointing on, one with it off. With `reduced` the same architecture at a width of
128, depth 2 (and a small VAE and text encoder), crops of 256 frames, for `make test`.

Each side runs in a child process of its own, `STEPS` steps, the last one timed (at full size
one step: on a CPU one takes many minutes; its peak comes before AdamW's first update makes
the moments the estimate counts, 0.17 GB on the medium):

    ours   the estimate first (`FAMILY.memory(...).estimate`, its runtime the child's resident
           set before loading; 0 on CUDA, where the peak counted is CUDA's), then the torch
           trainer (`TorchTrainer`, its `step()` as the run loop calls it) on random latents
    bare   the pipeline loaded as ours loads it, PEFT's DoRA (`use_dora=True`, rank 16, alpha
           16) injected on the same layers, the factors in float32, diffusers' own
           `enable_gradient_checkpointing()` where the row has it, the prompt encoded once,
           rectified flow, AdamW (bench/train_step.py's bare loop, at these shapes)

Peak: on the CPU the child's resident set sampled while its steps run (`bench/train_step.py`'s
`PeakRSS`: its absolute peak, the process's whole memory then), on CUDA
`torch.cuda.max_memory_allocated()`. Two things make the resident set the training's memory:

- every weight is read once after loading (`bench/sdxl_step.py`'s `page_in`): diffusers leaves
  the weights mapped from the .safetensors files, whose pages enter the resident set only when
  read (a step reads the DiT's and a few rows of T5Gemma's embedding; a run's validation
  renders its demos through the VAE too), so read, every weight counts, as on a GPU and in the
  estimate. Mapped pages are the kernel's to take back when memory runs short: with other
  processes taking memory the resident set fell 0.4 GB under the weights during a step of the
  medium, and its peak read low; the rows are for an otherwise idle machine;
- glibc's malloc gets a fixed mmap threshold at its default of 128 KiB (`MALLOC`), so a
  tensor freed during the step goes back to the system. On the small model (crop 64 and 128,
  checkpointing on): with the threshold moving as glibc moves it, freed activations stayed in
  the heap, 0.6 GB over the live tensors after two steps; with bench/sdxl_step.py's
  thresholds of 1 GiB (all from the heap, never trimmed) the peak was 1.7 to 2.1 GB over the
  estimate; with this one it was 3.5 % over it (2.64 GB against 2.55).

A row whose estimate is over the memory this machine has available is skipped: the estimate
is made first, from the configs alone, before any weights are written. The medium with
checkpointing off (an estimated 27 GB: dora-rows keeps a float32 copy of every adapted weight
for the backward, 5.9 GB, beside the activations) does not fit a 24 GB machine.

    .venv/bin/python bench/full_size/stable_audio_3.py [--reduced]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

RANK, BATCH, ITEMS = 16, 1, 3
CROPS = {False: 1300, True: 256}  # reduced: a fifth of the crop, the same code at less cost
CROP, FRAMES = CROPS[False], CROPS[False] + 100  # the items' latent frames: a crop is drawn
MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(128 * 1024)}  # fixed: see the module docstring
STEPS = {False: 1, True: 2}  # full size: one step (minutes on a CPU); reduced: one to warm up
GB = 1e9


def use_crop(reduced: bool) -> None:
    """The rows' crop and the items' length, for the full size or the reduced form."""
    global CROP, FRAMES
    CROP, FRAMES = CROPS[reduced], CROPS[reduced] + 100


def reduced_model() -> dict[str, dict]:
    """The medium's architecture at a much smaller width and depth (the conditioning widths
    kept: 768, as the text encoder's and the duration embedder's outputs)."""
    from tunesmith.families.stable_audio_3 import full_size

    model = full_size.configs("medium")
    model["transformer"].update(embed_dim=128, depth=2, num_heads=2)
    model["vae"].update(encoder_channels=8, encoder_transformer_depths=[1], dim_heads=16)
    encoder = {**model["text_encoder"]["encoder"], "intermediate_size": 64, "num_hidden_layers": 1}
    encoder.update(vocab_size=512, num_attention_heads=1, num_key_value_heads=1, head_dim=64)
    model["text_encoder"].update(encoder=encoder, decoder=encoder, vocab_size=512)
    return model


def run_config(folder: Path, checkpointing: bool):
    from tunesmith.families.stable_audio_3.config import Sa3Adapter, Sa3Train
    from tunesmith.train.config import RunConfig

    train = Sa3Train(
        batch_size=BATCH, latent_crop_length=CROP, gradient_checkpointing=checkpointing
    )
    adapter = Sa3Adapter(type="dora-rows", rank=RANK)
    return RunConfig("bench", "stable-audio-3", str(folder), "zq", adapter, train)


def device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def estimate(folder: Path, checkpointing: bool) -> float:
    """The run's estimated peak in GB, `folder` holding at least the component configs."""
    from tunesmith.families.stable_audio_3 import FAMILY
    from tunesmith.train.footprint import process_bytes

    run = run_config(folder, checkpointing)
    model = FAMILY.memory(run, folder, torch.bfloat16)  # imports what the trainer imports
    runtime = 0 if device() == "cuda" else process_bytes()
    return model.estimate(run, runtime=runtime).total / GB


def rows(work: Path, reduced: bool, checkpointing_modes=(True, False)) -> list[dict]:
    import psutil

    from tunesmith.families.stable_audio_3 import full_size

    use_crop(reduced)
    model = reduced_model() if reduced else "medium"
    size = "reduced medium" if reduced else "medium"
    configs = full_size.write_configs(work / "configs", model)
    found, folder = [], work / "model"
    for checkpointing in checkpointing_modes:
        setting = f"{size}, dora-rows r{RANK}, batch {BATCH}, crop {CROP}"
        expected = estimate(configs, checkpointing)
        available = psutil.virtual_memory().available / GB
        if expected > available:
            found.append(
                {
                    "setting": setting,
                    "checkpointing": checkpointing,
                    "skipped": f"estimated {expected:.1f} GB, {available:.1f} GB available",
                }
            )
            continue
        if not folder.exists():
            full_size.write_base_model(folder, model)
        ours, bare = (_child(side, folder, checkpointing, reduced) for side in ("ours", "bare"))
        found.append(
            {
                "setting": setting,
                "checkpointing": checkpointing,
                "estimate_gb": ours["estimate_gb"],
                "peak_gb": ours["peak_gb"],
                "ours_s": ours["seconds"],
                "bare_s": bare["seconds"],
            }
        )
    return found


def _child(side: str, folder: Path, checkpointing: bool, reduced: bool) -> dict:
    command = [sys.executable, __file__, "--child", side, "--model", str(folder)]
    command += ["--checkpointing"] * checkpointing + ["--reduced"] * reduced
    out = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **MALLOC})
    if out.returncode:
        raise RuntimeError(f"the {side} child failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def items(channels: int):
    from tunesmith.families.stable_audio_3.data import Item

    g = torch.Generator().manual_seed(1)
    return [
        Item(
            f"s{i}.wav",
            torch.randn(channels, FRAMES, generator=g),
            torch.ones(FRAMES, dtype=torch.bool),
            FRAMES * 4096 / 44100,
            (f"Title: s{i}", "Genre: house"),
        )
        for i in range(ITEMS)
    ]


def ours(folder: Path, checkpointing: bool, steps: int) -> dict:
    from tunesmith.backends.placement import Placement
    from tunesmith.families.stable_audio_3.trainer import TorchTrainer

    expected = estimate(folder, checkpointing)  # before anything is loaded
    run = run_config(folder, checkpointing)
    run = replace(run, train=replace(run.train, steps=steps))
    placement = Placement("torch", device(), "bfloat16", "bench")
    channels = json.loads((folder / "transformer" / "config.json").read_text())["io_channels"]
    with tempfile.TemporaryDirectory() as tmp:
        trainer = TorchTrainer(run, folder, items(channels), Path(tmp), placement, {})
        _page_in(trainer.objective.pipe)
        measured = _timed(trainer.step, steps)
    return {"estimate_gb": expected, "peak_gb": measured["peak"], "seconds": measured["last"]}


def bare(folder: Path, checkpointing: bool, steps: int) -> dict:
    from peft import LoraConfig, inject_adapter_in_model

    from bench.train_step import rf_step
    from tunesmith.families.stable_audio_3.model import conditioning, encode_prompts, load_pipeline

    pipe = load_pipeline(folder, torch.bfloat16, device())
    _page_in(pipe)
    dit = pipe.transformer
    targets = [
        n
        for n, m in dit.named_modules()
        if ".transformer_blocks." in f".{n}" and isinstance(m, torch.nn.Linear | torch.nn.Conv1d)
    ]
    dit.requires_grad_(False)
    config = LoraConfig(r=RANK, lora_alpha=RANK, target_modules=targets, use_dora=True)
    inject_adapter_in_model(config, dit)
    params = [p for p in dit.parameters() if p.requires_grad]
    for p in params:
        p.data = p.data.float()  # diffusers' cast_training_params
    if checkpointing:
        dit.enable_gradient_checkpointing()
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    embeds, mask = encode_prompts(pipe, ["zq, Title: s0, Genre: house"] * BATCH)
    duration = torch.full((BATCH,), FRAMES * 4096 / 44100)
    with torch.no_grad():
        context, context_mask, global_states = conditioning(pipe, embeds, mask, duration)
    channels = dit.config.io_channels
    local = torch.cat([torch.ones(BATCH, 1, CROP), torch.zeros(BATCH, channels, CROP)], 1)
    local = local.to(device(), dit.dtype)
    data = torch.randn(BATCH, channels, CROP, device=device())

    step = rf_step(dit, optimizer, data, context, global_states, context_mask, local)
    measured = _timed(step, steps)
    return {"peak_gb": measured["peak"], "seconds": measured["last"]}


def _page_in(pipe) -> None:
    from bench.sdxl_step import page_in

    for part in (pipe.transformer, pipe.vae, pipe.text_encoder, pipe.duration_embedder):
        page_in(part)


def _timed(step, steps: int) -> dict:
    """`step()` `steps` times: the last one's seconds, and the peak while they ran (GB)."""
    from bench.train_step import PeakRSS

    cuda = device() == "cuda"
    with PeakRSS() as memory:
        for _ in range(steps):
            start = time.perf_counter()
            step()
            if cuda:
                torch.cuda.synchronize()
            last = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() if cuda else memory.peak
    return {"last": last, "peak": peak / GB}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reduced", action="store_true")
    parser.add_argument("--child", choices=["ours", "bare"])
    parser.add_argument("--model", type=Path)
    parser.add_argument("--checkpointing", action="store_true")
    args = parser.parse_args()
    if args.child:
        use_crop(args.reduced)
        torch.manual_seed(0)
        side = ours if args.child == "ours" else bare
        print(json.dumps(side(args.model, args.checkpointing, STEPS[args.reduced])))
        return
    with tempfile.TemporaryDirectory(prefix="tunesmith-sa3-") as work:
        for row in rows(Path(work), args.reduced):
            print(json.dumps(row))


if __name__ == "__main__":
    main()
