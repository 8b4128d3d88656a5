"""Our SDXL LoRA training step against a bare loop, in one run, on one machine.

The bare loop is what a user writes by hand from diffusers' train_text_to_image_lora_sdxl: the
UNet alone, PEFT LoRA added with `unet.add_adapter` on `to_q`, `to_k`, `to_v`, `to_out.0`, the
factors cast to fp32, AdamW, a posterior draw, `DDPMScheduler.add_noise` and the ε-prediction
MSE, its batches already stacked on the device. Ours is the step of tunesmith's SDXL run loop
(`tunesmith.families.sdxl.trainer`): the pass order's next pictures, `train_step` (the draws,
`SdxlLora.backward` with its stacking, posterior draw, loss and gradients, the AdamW step), the
finiteness check and the memory cap; validation, samples, logging and checkpoints are left out.
Both train rank-16 factors on the same layers, batch and size, each in its own process, loaded
from the same folder in the published layout: tunesmith's tiny SDXL with its UNet widened
(`UNET`) so that convolutions and attention, not only Python, make up a step.

Not measured: the `encoded` stage (both sides start from a posterior and text embeddings),
gradient clipping (the diffusers script's default, which neither side does), writing adapters.

Printed: steps per second of each (one over the median step after `WARMUP` steps, timed by
`clock`, so that other processes on a shared machine move it little; the best of `--rounds`
interleaved runs, `ROUNDS` by default), the time ratio (ours / bare, goal ≤ 1.05) and the ratio
of the memory each training adds over its loaded model (peak RSS on the CPU, or peak allocated
above what was allocated before the first step on CUDA; goal ≤ 1.10). tests/test_bench.py runs
one round, which checks that the benchmark runs and measures nothing worth reading.

    .venv/bin/python bench/sdxl_step.py [--steps 20] [--rounds 3] [--device cpu]
                                        [--dtype float32] [--threads 1]

One torch thread by default: on a CPU shared with other busy processes, torch's worker threads
wait on each other (two threads on two busy cores made a step twenty times slower here, and
the run took over 15 minutes); `--threads 0` keeps torch's own count.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

BATCH, SIZE, RANK, PICTURES, WARMUP, ROUNDS = 2, 128, 16, 8, 3, 3
LATENT = SIZE // 8  # the VAE halves three times
# Over TINY_SDXL_CONFIG["unet"]; real [320, 640, 1280], heads [5, 10, 20], layers [1, 2, 10].
UNET = dict(
    block_out_channels=[64, 128, 128],
    norm_num_groups=32,
    attention_head_dim=[2, 4, 4],
    transformer_layers_per_block=[1, 1, 2],
)
# glibc's malloc moves its mmap threshold as a process frees large blocks, so what each side
# freed while loading decided whether every step's tensors came from the heap or from fresh,
# zeroed pages: either side ran up to 30 % faster for it (ratios 1.13 to 1.30 here, while a
# profile of both steps showed the same work). Both children get the same fixed thresholds.
MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(2**30), "MALLOC_TRIM_THRESHOLD_": str(2**30)}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def make_model(folder: Path) -> int:
    """Write the tiny SDXL with the wider UNet to `folder`; returns the UNet's parameter count."""
    from diffusers import UNet2DConditionModel

    from tunesmith.families.sdxl.tiny import TINY_SDXL_CONFIG, build_tiny_sdxl

    pipe = build_tiny_sdxl(0)
    torch.manual_seed(0)
    pipe.unet = UNet2DConditionModel(**{**TINY_SDXL_CONFIG["unet"], **UNET}).eval()
    pipe.register_modules(unet=pipe.unet)
    pipe.save_pretrained(folder, safe_serialization=True)
    return sum(p.numel() for p in pipe.unet.parameters())


class PeakMemory:
    """What the block adds at its peak over what was in use when it began: resident memory of
    this process on the CPU (sampled), allocated tensor memory on CUDA."""

    def __init__(self, device: str) -> None:
        self.cuda = device == "cuda"

    def __enter__(self):
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.start = torch.cuda.memory_allocated()
            return self
        import psutil

        self.process = psutil.Process()
        self.start = self.peak = self.process.memory_info().rss
        self.running = True
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()
        return self

    def _watch(self):
        while self.running:
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(0.002)

    def __exit__(self, *exc):
        if self.cuda:
            torch.cuda.synchronize()
            self.added = torch.cuda.max_memory_allocated() - self.start
            return
        self.running = False
        self.thread.join()
        self.added = self.peak - self.start


def clock(device: str):
    """The step timer: this thread's CPU time where all of a step runs on it (the CPU with one
    torch thread, autograd included), so time the OS gives other processes is not counted;
    wall time otherwise."""
    if device == "cpu" and torch.get_num_threads() == 1:
        return time.thread_time
    return time.perf_counter


def page_in(model: torch.nn.Module) -> None:
    """Read every weight once. diffusers may leave weights mapped from the .safetensors file;
    their pages would then enter the RSS at the first step and count as training memory."""
    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            tensor.sum()


def pictures(folder: Path):
    """`PICTURES` random `Picture`s shaped as the `encoded` stage stores them for this model."""
    from tunesmith.families.sdxl.objective import Picture, time_ids

    unet = json.loads((folder / "unet" / "config.json").read_text())
    encoder_2 = json.loads((folder / "text_encoder_2" / "config.json").read_text())
    g = torch.Generator().manual_seed(1)
    ids = time_ids((SIZE, SIZE), (0, 0), (SIZE, SIZE))
    return [
        Picture(
            torch.randn(4, LATENT, LATENT, generator=g),
            torch.randn(4, LATENT, LATENT, generator=g) * 0.1 - 6,  # a VAE's: small σ
            torch.randn(77, unet["cross_attention_dim"], generator=g),
            torch.randn(encoder_2["projection_dim"], generator=g),
            ids,
            f"p{i}.png",
        )
        for i in range(PICTURES)
    ]


def ours(folder: Path, steps: int, device: str, dtype: torch.dtype) -> dict:
    from tunesmith.families.sdxl.model import load_pipeline
    from tunesmith.families.sdxl.objective import SdxlLora
    from tunesmith.families.sdxl.trainer import ORDER, train_step
    from tunesmith.train.memory import MemoryCap
    from tunesmith.train.order import Order

    pipe = load_pipeline(folder, dtype, device)
    lora = SdxlLora(pipe.unet, pipe.scheduler, pipe.vae.config.scaling_factor, RANK)
    optimizer = torch.optim.AdamW(lora.parameters(), lr=1e-4)
    page_in(pipe.unet)
    train, g = pictures(folder), torch.Generator().manual_seed(0)
    order, cap = Order(len(train), BATCH, 2, ORDER), MemoryCap(None, device)
    now, seconds = clock(device), []
    with PeakMemory(device) as memory:
        for step in range(WARMUP + steps):  # the run loop's step (run.py), validation aside
            start = now()
            loss, _ = train_step(lora, optimizer, [train[i] for i in order.next()], g)
            if not math.isfinite(loss) or cap.passed():
                raise RuntimeError(f"step {step}: the loss is {loss} or the cap was passed")
            if device == "cuda":
                torch.cuda.synchronize()
            if step >= WARMUP:  # the first step also checks every B's gradient
                seconds.append(now() - start)
    return {
        "steps_per_second": 1 / statistics.median(seconds),
        "memory": memory.added,
        "targets": len(lora.named_factors()),
    }


def bare(folder: Path, steps: int, device: str, dtype: torch.dtype) -> dict:
    import torch.nn.functional as F
    from diffusers import DDPMScheduler, UNet2DConditionModel
    from peft import LoraConfig

    unet = UNet2DConditionModel.from_pretrained(folder, subfolder="unet", use_safetensors=True)
    unet = unet.to(device, dtype)
    scheduler = DDPMScheduler.from_pretrained(folder, subfolder="scheduler")
    scaling_factor = json.loads((folder / "vae" / "config.json").read_text())["scaling_factor"]
    unet.requires_grad_(False)
    targets = ["to_q", "to_k", "to_v", "to_out.0"]
    unet.add_adapter(
        LoraConfig(r=RANK, lora_alpha=RANK, target_modules=targets, init_lora_weights=True)
    )
    params = [p for p in unet.parameters() if p.requires_grad]
    for p in params:
        p.data = p.data.float()  # diffusers' cast_training_params
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    unet.train()
    page_in(unet)
    data = pictures(folder)

    def stack(key: str, kind: torch.dtype) -> torch.Tensor:
        return torch.stack([getattr(p, key) for p in data]).to(device, kind)

    mean, logvar = stack("mean", torch.float32), stack("logvar", torch.float32)
    embeds, pooled, ids = (stack(k, dtype) for k in ("prompt_embeds", "pooled", "time_ids"))
    now, seconds = clock(device), []
    with PeakMemory(device) as memory:
        for step in range(WARMUP + steps):
            start = now()
            i = torch.randint(0, len(data), (BATCH,), device=device)
            m, lv = mean[i], logvar[i]
            x0 = (m + torch.exp(0.5 * lv) * torch.randn_like(m)) * scaling_factor
            t = torch.randint(0, scheduler.config.num_train_timesteps, (BATCH,), device=device)
            noise = torch.randn_like(x0)
            noisy = scheduler.add_noise(x0, noise, t)
            prediction = unet(
                noisy.to(dtype),
                t,
                embeds[i],
                added_cond_kwargs={"text_embeds": pooled[i], "time_ids": ids[i]},
                return_dict=False,
            )[0]
            loss = F.mse_loss(prediction.float(), noise.float(), reduction="mean")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if device == "cuda":
                torch.cuda.synchronize()
            if step >= WARMUP:
                seconds.append(now() - start)
    adapted = sum(1 for module in unet.modules() if hasattr(module, "lora_A"))
    return {
        "steps_per_second": 1 / statistics.median(seconds),
        "memory": memory.added,
        "targets": adapted,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="processes of each side")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch's CPU threads (0: torch's default)"
    )
    parser.add_argument("--child", choices=["ours", "bare"])
    parser.add_argument("--model", type=Path)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.child:
        torch.manual_seed(0)
        fn = ours if args.child == "ours" else bare
        print(json.dumps(fn(args.model, args.steps, args.device, DTYPES[args.dtype])))
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "model"
        size = make_model(folder)
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
                    "--threads",
                    str(args.threads),
                ],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, **MALLOC},
            )
            result = json.loads(out.stdout.strip().splitlines()[-1])
            best = results.get(name)
            if best is None or result["steps_per_second"] > best["steps_per_second"]:
                results[name] = result
    b, o = results["bare"], results["ours"]
    threads = args.threads or torch.get_num_threads()
    timer = "thread CPU time" if clock(args.device) is time.thread_time else "wall time"
    print(
        f"device {args.device} (torch threads {threads}, {timer}), {args.dtype}, "
        f"UNet {UNET} ({size / 1e6:.1f} M parameters), batch {BATCH}, "
        f"{SIZE}² pictures ({LATENT}² latents), lora rank {RANK}, "
        f"{o['targets']} adapted layers (bare: {b['targets']})"
    )
    print(
        f"bare diffusers + PEFT loop: {b['steps_per_second']:.2f} steps/s, "
        f"+{b['memory'] / 2**20:.1f} MiB"
    )
    print(
        f"tunesmith SDXL run step:    {o['steps_per_second']:.2f} steps/s, "
        f"+{o['memory'] / 2**20:.1f} MiB"
    )
    ratio = b["steps_per_second"] / o["steps_per_second"]
    print(f"time ratio (ours/bare): {ratio:.3f}  (goal ≤ 1.05)")
    print(f"memory ratio (ours/bare): {o['memory'] / max(b['memory'], 1):.3f}  (goal ≤ 1.10)")


if __name__ == "__main__":
    main()
