"""Our SDXL LoRA training step against a bare loop, in one run, on one machine.

The bare loop is what a user writes by hand from diffusers' train_text_to_image_lora_sdxl: the
UNet alone, PEFT LoRA added with `unet.add_adapter` on `to_q`, `to_k`, `to_v`, `to_out.0`, the
factors cast to fp32, AdamW, a posterior draw, `DDPMScheduler.add_noise` and the ε-prediction
MSE, its batches already stacked on the device. Ours is tunesmith's SDXL run: `SdxlTrainer`
(the pass order's next pictures, the draws, `SdxlLora.backward` with its stacking, posterior
draw, loss and gradients, the AdamW step) driven by the run loop (`tunesmith.train.loop`: the
finiteness check, progress line, event record and memory cap of every step); validation,
samples and checkpoints fall outside the timed steps. Both train rank-16 factors on the same
layers, batch and size, on the same seven pictures (ours holds out the eighth), loaded from
the same folder in the published layout: tunesmith's tiny SDXL with its UNet widened (`UNET`)
so that convolutions and attention, not only Python, make up a step.

Not measured: the `encoded` stage (both sides start from a posterior and text embeddings),
gradient clipping (the diffusers script's default, which neither side does), writing adapters.

Also printed: our step with aspect-ratio buckets (the pictures are square: one bucket, whose
batches the bucket order draws), kohya's min-SNR weighting (γ 5) and an EMA of the adapter
(decay 0.999) on against our step without them, both SdxlTrainer steps alternated in the same
process after the bare comparison (`OPTIONS`; the median of each, timed as below).

Printed: steps per second of each and the time ratio (ours / bare, goal ≤ 1.02), from one
process that builds both and alternates their steps (`bench/steps.py`: the median step after
`--warmup` steps, this thread's CPU time on a CPU with one torch thread), so that the load of
this shared machine falls on both alike; the ratio of the memory each training adds over its
loaded model (peak RSS on the CPU, or peak allocated above what was allocated before the first
step on CUDA; goal ≤ 1.0), from a process of its own for each. `--profile`: each phase of a
step, both sides (`bench/steps.py`).

    .venv/bin/python bench/sdxl_step.py [--steps 20] [--warmup 3] [--device cpu]
                                        [--dtype float32] [--threads 1] [--profile]

One torch thread by default: on a CPU shared with other busy processes, torch's worker threads
wait on each other (two threads on two busy cores made a step twenty times slower here, and
the run took over 15 minutes); `--threads 0` keeps torch's own count.
"""

from __future__ import annotations

import argparse
import json
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

BATCH, SIZE, RANK, PICTURES, WARMUP = 2, 128, 16, 8, 3
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


def encoded(folder: Path, work: Path):
    """`pictures(folder)` stored as the `encoded` stage's frame (posterior and text files)."""
    import pandas as pd

    from tunesmith.store.tensors import write_safetensors

    rows = []
    for i, p in enumerate(pictures(folder)):
        posterior, text = work / f"posterior{i}.safetensors", work / f"text{i}.safetensors"
        write_safetensors(posterior, {"mean": p.mean, "logvar": p.logvar})
        write_safetensors(text, {"prompt_embeds": p.prompt_embeds, "pooled": p.pooled})
        rows.append(
            {
                "path": p.name,
                "posterior": str(posterior),
                "text": str(text),
                "original_height": SIZE,
                "original_width": SIZE,
                "crop_top": 0,
                "crop_left": 0,
                "size": SIZE,
            }
        )
    return pd.DataFrame(rows)


# buckets, kohya's usual min-SNR γ and a common EMA decay: the options whose cost the bench
# measures (buckets at the bench's small size: the smallest bucket side under it)
OPTIONS = {
    "buckets": True,
    "min_bucket_reso": 64,
    "bucket_reso_steps": 32,
    "min_snr_gamma": 5.0,
    "ema_decay": 0.999,
}


def ours(folder: Path, work: Path, device: str, dtype: str, **train):
    """Our trainer (`SdxlTrainer`, AdamW at a constant lr; `train`: more of its settings),
    ready for the run loop."""
    from tunesmith.backends.placement import Placement
    from tunesmith.families.sdxl.trainer import SdxlTrainer
    from tunesmith.train.config import resolve_run

    raw = {
        "name": "bench",
        "family": "sdxl",
        "base_model": str(folder),
        "adapter": {"rank": RANK},
        "train": {
            "size": SIZE,
            "batch_size": BATCH,
            "lr": 1e-4,
            "holdout": 1,
            "steps": 1,
            **train,
        },
        # The validation's renders lie outside the timed steps: one of 2 steps is enough.
        "demos": [{"prompt": "a ring", "steps": 2}],
    }
    run = resolve_run(raw, Path("tunesmith.toml"), 0)
    placement = Placement("torch", device, dtype, "bench")
    trainer = SdxlTrainer(run, folder, encoded(folder, work), work / "run", placement, LINEAGE)
    page_in(trainer.pipe.unet)
    return trainer


def bare(folder: Path, device: str, dtype: torch.dtype):
    """The bare loop's step, ready to run: (step function, adapted layers)."""
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
    data = pictures(folder)[:-1]  # as ours: the last picture held out

    def stack(key: str, kind: torch.dtype) -> torch.Tensor:
        return torch.stack([getattr(p, key) for p in data]).to(device, kind)

    mean, logvar = stack("mean", torch.float32), stack("logvar", torch.float32)
    embeds, pooled, ids = (stack(k, dtype) for k in ("prompt_embeds", "pooled", "time_ids"))

    def step() -> None:
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

    return step, sum(1 for module in unet.modules() if hasattr(module, "lora_A"))


def child(kind: str, folder: Path, work: Path, args) -> dict:
    """'paired': both steps alternated through the run loop (the time ratio, the profile);
    'ours' / 'bare': one (its memory)."""
    from bench.steps import paired, profile_table

    if kind == "paired":
        step, targets_b = bare(folder, args.device, DTYPES[args.dtype])
        trainer = ours(folder, work, args.device, args.dtype)
        bare_s, ours_s, profiles = paired(trainer, step, args.steps, args.warmup, args.profile)
        with_options = ours(folder, work / "options", args.device, args.dtype, **OPTIONS)
        off_s, on_s = alternated(trainer.step, with_options.step, args)
        return {
            "bare": 1 / bare_s,
            "ours": 1 / ours_s,
            "options": [1 / off_s, 1 / on_s],
            "targets": [targets_b, len(trainer.lora.named_factors())],
            "profile": profile_table(profiles, UNET_FILE, args.steps) if profiles else "",
        }
    if kind == "ours":
        trainer = ours(folder, work, args.device, args.dtype)
        step = trainer.step
    else:
        step, _ = bare(folder, args.device, DTYPES[args.dtype])
    with PeakMemory(args.device) as memory:
        for _ in range(args.warmup + args.steps):
            step()
    return {"memory": memory.added}


def alternated(first, second, args) -> tuple[float, float]:
    """The median seconds of `first` and of `second` (two trainers' steps), alternated
    `warmup + steps` times, the first `warmup` of each left out (`clock`, synchronised on
    CUDA)."""
    now, times = clock(args.device), ([], [])
    for index in range(args.warmup + args.steps):
        for step, kept in ((first, times[0]), (second, times[1])):
            start = now()
            step()
            if args.device == "cuda":
                torch.cuda.synchronize()
            if index >= args.warmup:
                kept.append(now() - start)
    return statistics.median(times[0]), statistics.median(times[1])


UNET_FILE = "diffusers/models/unets/unet_2d_condition.py"
LINEAGE = {
    "tunesmith.version": "bench",
    "tunesmith.base_model_fingerprint": "bench",
    "tunesmith.run_key": "bench",
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=WARMUP, help="untimed steps first")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch's CPU threads (0: torch's default)"
    )
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
        size = make_model(folder)
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
    threads = args.threads or torch.get_num_threads()
    timer = "thread CPU time" if clock(args.device) is time.thread_time else "wall time"
    print(
        f"device {args.device} (torch threads {threads}, {timer}), {args.dtype}, "
        f"UNet {UNET} ({size / 1e6:.1f} M parameters), batch {BATCH}, "
        f"{SIZE}² pictures ({LATENT}² latents), lora rank {RANK}, "
        f"{targets_o} adapted layers (bare: {targets_b})"
    )
    if paired["profile"]:
        print(paired["profile"])
    print(
        f"bare diffusers + PEFT loop: {paired['bare']:.2f} steps/s, "
        f"+{memory['bare'] / 2**20:.1f} MiB"
    )
    print(
        f"tunesmith SDXL run step:    {paired['ours']:.2f} steps/s, "
        f"+{memory['ours'] / 2**20:.1f} MiB"
    )
    ratio = paired["bare"] / paired["ours"]
    print(f"time ratio (ours/bare): {ratio:.3f}  (goal ≤ 1.02, steps alternated in one process)")
    print(f"memory ratio (ours/bare): {memory['ours'] / max(memory['bare'], 1):.3f}  (goal ≤ 1.0)")
    off, on = paired["options"]
    print(
        f"buckets + min-SNR (γ 5) + EMA (0.999) on/off: {on:.2f} / {off:.2f} steps/s, time ratio "
        f"{off / on:.3f}  (our steps alternated in one process)"
    )


if __name__ == "__main__":
    main()
