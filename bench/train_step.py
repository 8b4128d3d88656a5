"""Our Stable Audio 3 training step against a bare loop, in one run, on one machine.

The bare loop is what a user would write by hand: the diffusers DiT, PEFT LoRA on the same
layers, AdamW, the rectified-flow loss, conditioning computed once. Ours is tunesmith's
loop (`tunesmith.train.loop.train`): random crops, prompt templates, timestep sampler and
shift, CFG dropout, masked loss, the norms it logs. Both train a `lora` adapter (tunesmith's
`lora` is PEFT's layer) of the same rank on the same targets, batch and crop, on a
"tiny but not trivial" DiT (embed 256, depth 6), each in its own process.

Printed: steps per second of each, the time ratio (ours / bare, goal ≤ 1.05) and the ratio
of the memory each training adds over its loaded model (peak RSS on the CPU, or
torch.cuda.max_memory_allocated on CUDA; goal ≤ 1.10).

    .venv/bin/python bench/train_step.py [--steps 60] [--rounds 2] [--device cpu]
                                         [--dtype float32]

Each side runs in `--rounds` interleaved processes, the best of them counted; tests/test_bench.py
runs one round, which checks that the benchmark runs and measures nothing worth reading.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

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


def ours(folder: Path, steps: int, device: str, dtype: str) -> dict:
    from tunesmith.backends.placement import Placement
    from tunesmith.families.stable_audio_3.config import Sa3Adapter as AdapterConfig
    from tunesmith.families.stable_audio_3.config import Sa3Train as TrainConfig
    from tunesmith.families.stable_audio_3.trainer import TorchTrainer
    from tunesmith.train.config import RunConfig
    from tunesmith.train.loop import train

    run = RunConfig(
        "bench",
        "stable-audio-3",
        str(folder),
        "zq",
        AdapterConfig(type="lora", rank=RANK),
        TrainConfig(
            steps=steps,
            batch_size=BATCH,
            latent_crop_length=CROP,
            lr=1e-4,
            eval_every=10**6,
            checkpoint_every=10**6,
        ),
    )
    placement = Placement("torch", device, dtype, "bench")
    with tempfile.TemporaryDirectory() as tmp, open("/dev/null", "w") as sink:
        trainer = TorchTrainer(run, folder, items(), Path(tmp), placement, {})
        with PeakRSS() as memory:
            result = train(trainer, Path(tmp), log=lambda s: None, progress=sink)
    return {
        "steps_per_second": result.steps_per_second,
        "memory": _memory(memory, device),
        "targets": len(trainer.objective.targets),
    }


def bare(folder: Path, steps: int, device: str, dtype: str) -> dict:
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
    elapsed = 0.0
    with PeakRSS() as memory:
        for step in range(steps + 3):
            start = time.perf_counter()
            t = torch.rand(BATCH, device=device)
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
            if device == "cuda":
                torch.cuda.synchronize()
            if step >= 3:  # ours also warms up on its first batches (prompt cache)
                elapsed += time.perf_counter() - start
    return {
        "steps_per_second": steps / elapsed,
        "memory": _memory(memory, device),
        "targets": len(targets),
    }


def _memory(memory: PeakRSS, device: str) -> int:
    return torch.cuda.max_memory_allocated() if device == "cuda" else memory.added


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--rounds", type=int, default=2, help="processes of each side")
    parser.add_argument("--child", choices=["ours", "bare"])
    parser.add_argument("--model", type=Path)
    args = parser.parse_args()
    if args.child:
        torch.manual_seed(0)
        fn = ours if args.child == "ours" else bare
        print(json.dumps(fn(args.model, args.steps, args.device, args.dtype)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "model"
        make_model(folder)
        results = {}
        for name in ("bare", "ours") * args.rounds:  # interleaved: load drifts hit both
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    name,
                    "--model",
                    str(folder),
                    "--steps",
                    str(args.steps),
                    "--device",
                    args.device,
                    "--dtype",
                    args.dtype,
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            result = json.loads(out.stdout.strip().splitlines()[-1])
            best = results.get(name)
            if best is None or result["steps_per_second"] > best["steps_per_second"]:
                results[name] = result
    b, o = results["bare"], results["ours"]
    print(
        f"device {args.device}, {args.dtype}, DiT {DIT}, batch {BATCH}, crop {CROP}, "
        f"lora rank {RANK}, "
        f"{o['targets']} adapted layers (bare: {b['targets']})"
    )
    print(
        f"bare diffusers + PEFT loop: {b['steps_per_second']:.2f} steps/s, "
        f"+{b['memory'] / 2**20:.1f} MiB"
    )
    print(
        f"tunesmith loop:             {o['steps_per_second']:.2f} steps/s, "
        f"+{o['memory'] / 2**20:.1f} MiB"
    )
    ratio = b["steps_per_second"] / o["steps_per_second"]
    print(f"time ratio (ours/bare): {ratio:.3f}  (goal ≤ 1.05)")
    print(f"memory ratio (ours/bare): {o['memory'] / max(b['memory'], 1):.3f}  (goal ≤ 1.10)")


if __name__ == "__main__":
    main()
