"""Our Stable Audio 3 training step against a bare loop, in one run, on one machine.

The bare loop is what a user would write by hand: the diffusers DiT, PEFT LoRA on the same
layers, AdamW, the rectified-flow loss, conditioning computed once. Ours is tunesmith's
`TorchTrainer` driven by the run loop (`tunesmith.train.loop.train`): random crops, prompt
templates, timestep sampler and shift, CFG dropout, masked loss, the norms it logs, its
progress line, the loop's event record and memory cap. Both train a `lora` adapter
(tunesmith's `lora` is PEFT's layer) of the same rank on the same targets, batch and crop, on
a "tiny but not trivial" DiT (embed 256, depth 6).

Printed: steps per second of each and the time ratio (ours / bare, goal ≤ 1.02), from one
process that builds both and alternates their steps (`bench/steps.py`: the median step after
`--warmup` steps, this thread's CPU time on a CPU with one torch thread), so that the load of
this shared machine falls on both alike; the ratio of the memory each training adds over its
loaded model (peak RSS on the CPU, peak allocated on CUDA; goal ≤ 1.0), from a process of its
own for each. `--profile`: each phase of a step, both sides (`bench/steps.py`).

    .venv/bin/python bench/train_step.py [--steps 30] [--warmup 3] [--device cpu]
                                         [--dtype float32] [--threads 1] [--profile]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from bench.sdxl_step import MALLOC, PeakMemory, clock, page_in  # noqa: E402

BATCH, CROP, RANK = 2, 256, 16
DIT = dict(embed_dim=256, depth=6, num_heads=4)


def make_model(folder: Path) -> None:
    from diffusers import StableAudio3DiTModel

    from tunesmith.families.stable_audio_3.tiny import TINY_SA3_CONFIG, build_tiny_stable_audio_3

    pipe = build_tiny_stable_audio_3(0)
    torch.manual_seed(0)
    pipe.transformer = StableAudio3DiTModel(**{**TINY_SA3_CONFIG["transformer"], **DIT})
    pipe.register_modules(transformer=pipe.transformer)
    pipe.save_pretrained(folder, safe_serialization=True)


class PeakRSS:
    """Peak resident memory of this process while the block runs, above its start."""

    def __enter__(self):
        import psutil

        self.process, self.start = psutil.Process(), psutil.Process().memory_info().rss
        self.peak, self.running = self.start, True
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()
        return self

    def _watch(self):
        while self.running:
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(0.002)

    def __exit__(self, *exc):
        self.running = False
        self.thread.join()
        self.added = self.peak - self.start


def items(n: int = 6):
    from tunesmith.families.stable_audio_3.data import Item

    g = torch.Generator().manual_seed(1)
    return [
        Item(
            f"s{i}.wav",
            torch.randn(16, 400, generator=g),
            torch.ones(400, dtype=torch.bool),
            400 * 4096 / 44100,
            (f"Title: s{i}", "Genre: house"),
        )
        for i in range(n)
    ]


def ours(folder: Path, work: Path, device: str, dtype: str):
    """Our trainer (`TorchTrainer`), ready for the run loop."""
    from tunesmith.backends.placement import Placement
    from tunesmith.families.stable_audio_3.config import Sa3Adapter as AdapterConfig
    from tunesmith.families.stable_audio_3.config import Sa3Train as TrainConfig
    from tunesmith.families.stable_audio_3.trainer import TorchTrainer
    from tunesmith.train.config import RunConfig

    run = RunConfig(
        "bench",
        "stable-audio-3",
        str(folder),
        "zq",
        AdapterConfig(type="lora", rank=RANK),
        TrainConfig(steps=10**6, batch_size=BATCH, latent_crop_length=CROP, lr=1e-4),
    )
    placement = Placement("torch", device, dtype, "bench")
    trainer = TorchTrainer(run, folder, items(), work, placement, {})
    page_in(trainer.objective.pipe.transformer)
    return trainer


def bare(folder: Path, device: str, dtype: str):
    """The bare loop's step, ready to run: (step function, adapted layers)."""
    from peft import LoraConfig, inject_adapter_in_model

    from tunesmith.families.stable_audio_3.model import conditioning, encode_prompts, load_pipeline

    pipe = load_pipeline(folder, getattr(torch, dtype), device)
    dit = pipe.transformer
    targets = [
        n
        for n, m in dit.named_modules()
        if ".transformer_blocks." in f".{n}" and isinstance(m, torch.nn.Linear | torch.nn.Conv1d)
    ]
    dit.requires_grad_(False)
    inject_adapter_in_model(LoraConfig(r=RANK, lora_alpha=RANK, target_modules=targets), dit)
    params = [p for p in dit.parameters() if p.requires_grad]
    for p in params:
        p.data = p.data.float()  # diffusers' cast_training_params
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    embeds, mask = encode_prompts(pipe, ["zq, Title: s0, Genre: house"] * BATCH)
    seconds = torch.full((BATCH,), 400 * 4096 / 44100)
    with torch.no_grad():
        context, context_mask, global_states = conditioning(pipe, embeds, mask, seconds)
    local = torch.cat([torch.ones(BATCH, 1, CROP), torch.zeros(BATCH, 16, CROP)], 1).to(device)
    local = local.to(dit.dtype)
    data = torch.randn(BATCH, 16, CROP, device=device)
    page_in(dit)

    step = rf_step(dit, optimizer, data, context, global_states, context_mask, local)
    return step, len(targets)


def rf_step(dit, optimizer, data, context, global_states, context_mask, local):
    """The bare loop's step: rectified flow (x_t = x0·(1 − t) + ε·t, target ε − x0, t uniform)
    through the DiT, the mean squared error, AdamW."""

    def step() -> None:
        t = torch.rand(data.shape[0], device=data.device)
        noise = torch.randn_like(data)
        noised = data * (1 - t)[:, None, None] + noise * t[:, None, None]
        prediction = dit(
            noised.to(dit.dtype),
            t.to(dit.dtype),
            context.to(dit.dtype),
            global_states.to(dit.dtype),
            context_mask,
            local,
        ).sample
        loss = ((prediction.float() - (noise - data)) ** 2).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


DIT_FILE = "diffusers/models/transformers/transformer_stable_audio3.py"


def child(kind: str, folder: Path, work: Path, args) -> dict:
    """'paired': both steps alternated through the run loop (the time ratio, the profile);
    'ours' / 'bare': one (its memory)."""
    from bench.steps import paired, profile_table

    if kind == "paired":
        step, targets_b = bare(folder, args.device, args.dtype)
        trainer = ours(folder, work, args.device, args.dtype)
        bare_s, ours_s, profiles = paired(trainer, step, args.steps, args.warmup, args.profile)
        table = profile_table(profiles, DIT_FILE, args.steps) if profiles else ""
        targets = [targets_b, len(trainer.objective.targets)]
        return {"bare": 1 / bare_s, "ours": 1 / ours_s, "targets": targets, "profile": table}
    if kind == "ours":
        step = ours(folder, work, args.device, args.dtype).step
    else:
        step, _ = bare(folder, args.device, args.dtype)
    with PeakMemory(args.device) as memory:
        for _ in range(args.warmup + args.steps):
            step()
    return {"memory": memory.added}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--threads", type=int, default=1, help="0: torch's default")
    parser.add_argument("--profile", action="store_true", help="each phase's time, both sides")
    parser.add_argument("--child", choices=["paired", "ours", "bare"])
    parser.add_argument("--model", type=Path)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.child:
        torch.manual_seed(0)
        with tempfile.TemporaryDirectory() as work:
            print(json.dumps(child(args.child, args.model, Path(work), args)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "model"
        make_model(folder)
        results = {}
        for name in ("paired", "bare", "ours"):
            command = [sys.executable, __file__, "--child", name, "--model", str(folder)]
            command += ["--steps", str(args.steps), "--warmup", str(args.warmup)]
            command += ["--device", args.device, "--dtype", args.dtype]
            command += ["--threads", str(args.threads)] + (["--profile"] if args.profile else [])
            out = subprocess.run(
                command, capture_output=True, text=True, check=True, env={**os.environ, **MALLOC}
            )
            results[name] = json.loads(out.stdout.strip().splitlines()[-1])
    paired, memory = results["paired"], {k: results[k]["memory"] for k in ("bare", "ours")}
    targets_b, targets_o = paired["targets"]
    timer = "thread CPU time" if clock(args.device) is time.thread_time else "wall time"
    print(
        f"device {args.device} (torch threads {args.threads or torch.get_num_threads()}, "
        f"{timer}), {args.dtype}, DiT {DIT}, batch {BATCH}, crop {CROP}, lora rank {RANK}, "
        f"{targets_o} adapted layers (bare: {targets_b})"
    )
    if paired["profile"]:
        print(paired["profile"])
    print(
        f"bare diffusers + PEFT loop: {paired['bare']:.2f} steps/s, "
        f"+{memory['bare'] / 2**20:.1f} MiB"
    )
    print(
        f"tunesmith loop:             {paired['ours']:.2f} steps/s, "
        f"+{memory['ours'] / 2**20:.1f} MiB"
    )
    ratio = paired["bare"] / paired["ours"]
    print(f"time ratio (ours/bare): {ratio:.3f}  (goal ≤ 1.02, steps alternated in one process)")
    print(f"memory ratio (ours/bare): {memory['ours'] / max(memory['bare'], 1):.3f}  (goal ≤ 1.0)")


if __name__ == "__main__":
    main()
