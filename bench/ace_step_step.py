"""Our ACE-Step LoRA training step against a bare loop, in one run, on one machine.

The bare loop is what a user writes by hand from diffusers' ACE-Step 1.5 pieces: the pipeline
loaded, each song's conditioning computed once by its condition encoder, PEFT LoRA added to
the DiT with `add_adapter` on every attention and MLP projection, the factors cast to fp32,
AdamW, and per step a random crop, a level drawn as ACE-Step 1.5's `sample_t_r` draws it, CFG
dropout onto the null condition, the flow-matching MSE against ε − x0, backward, global-norm
clipping at 1.0 and the AdamW step. Ours is `AceStepTrainer.step()` (tunesmith's trainer of the
one loop) with the same settings and AdamW: its window draw, the weights (flow_snr), the crop's
context, the loss and backward, clipping, the optimizer and the schedule; validation, samples
and files are left out. Both train LoRA rank 64 (alpha 128) on the same 44 layers of
tunesmith's tiny ACE-Step 1.5 with its DiT widened (`bench/muon_step.py`'s `DIT`), on crops of
`CROP` frames from `SONGS` songs stored as the `encoded` stage stores them, each in its own
process, loaded from the same folder in the published layout.

Ours runs in the run loop (`tunesmith.train.loop`: the finiteness check, progress line, event
record and memory cap of every step).

Printed: steps per second of each and the time ratio (ours / bare, goal ≤ 1.02), from one
process that builds both and alternates their steps (`bench/steps.py`: the median step after
`--warmup` steps, this thread's CPU time on a CPU with one torch thread), so that the load of
this shared machine (its thread CPU time drifts by a third between runs) falls on both alike;
the ratio of the memory each training adds over its loaded model (peak RSS on the CPU, peak
allocated on CUDA; goal ≤ 1.0), from a process of its own for each. `--profile`: each phase of
a step, both sides (`bench/steps.py`).

    .venv/bin/python bench/ace_step_step.py [--steps 20] [--warmup 3] [--device cpu]
                                            [--dtype float32] [--threads 1] [--profile]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from bench.muon_step import DIT, PROJECTIONS  # noqa: E402
from bench.sdxl_step import MALLOC, PeakMemory, clock, page_in  # noqa: E402

RANK, SONGS, FRAMES, CROP, WARMUP = 64, 8, 600, 256, 3
LINEAGE = {
    "tunesmith.version": "bench",
    "tunesmith.base_model_fingerprint": "bench",
    "tunesmith.run_key": "bench",
}


def make_model(folder: Path) -> int:
    """The tiny ACE-Step 1.5 with the wider DiT, saved to `folder`; its DiT's parameter count."""
    from diffusers import AceStepTransformer1DModel

    from tunesmith.families.ace_step.tiny import HIDDEN, TINY_ACE_STEP_CONFIG, build_tiny_ace_step

    pipe = build_tiny_ace_step(0)
    torch.manual_seed(0)
    config = {**TINY_ACE_STEP_CONFIG["transformer"], **DIT, "encoder_hidden_size": HIDDEN}
    pipe.transformer = AceStepTransformer1DModel(**config).eval()
    pipe.register_modules(transformer=pipe.transformer)
    pipe.save_pretrained(folder, safe_serialization=True)
    return sum(p.numel() for p in pipe.transformer.parameters())


def songs(folder: Path, work: Path):
    """`SONGS` random songs as the `encoded` stage's rows (latents, caption and lyrics states)."""
    import pandas as pd

    from tunesmith.families.ace_step.tiny import LATENT_DIM, TEXT_DIM
    from tunesmith.store.tensors import write_safetensors

    g, rows = torch.Generator().manual_seed(1), []
    for i in range(SONGS):
        paths = {k: work / f"{k}{i}.safetensors" for k in ("latents", "caption", "lyrics")}
        latents = torch.randn(FRAMES, LATENT_DIM, generator=g)
        write_safetensors(paths["latents"], {"latents": latents})
        for key, length in (("caption", 60), ("lyrics", 120)):
            states = torch.randn(length, TEXT_DIM, generator=g)
            write_safetensors(paths[key], {"hidden_states": states})
        rows.append(
            {
                "path": f"song{i}.wav",
                "latents": str(paths["latents"]),
                "caption_states": str(paths["caption"]),
                "lyrics_states": str(paths["lyrics"]),
                "trigger": "",
                "tag_position": "prepend",
            }
        )
    return pd.DataFrame(rows)


def run_config():
    from tunesmith.train.config import resolve_run

    raw = {
        "name": "bench",
        "family": "ace-step",
        "base_model": "bench",
        "adapter": {"rank": RANK},
        "train": {"optimizer": "adamw", "accumulation": 1, "crop_frames": CROP, "epochs": 100},
        # The validation's renders lie outside the timed steps: one short demo, not the
        # family's two of 30 s at 32 steps, which took three quarters of the bench's time.
        "demos": [{"prompt": "", "duration": 2.0, "steps": 2}],
    }
    return resolve_run(raw, Path("tunesmith.toml"), 0)


def ours(folder: Path, work: Path, device: str, dtype: str):
    """Our trainer (`AceStepTrainer`), ready for the run loop."""
    from tunesmith.backends.placement import Placement
    from tunesmith.families.ace_step.trainer import AceStepTrainer

    placement = Placement("torch", device, dtype, "bench")
    trainer = AceStepTrainer(
        run_config(), folder, songs(folder, work), work / "run", placement, LINEAGE
    )
    page_in(trainer.transformer)
    return trainer


def bare(folder: Path, work: Path, device: str, dtype: str):
    """The bare loop's step, ready to run: (step function, adapted layers)."""
    from diffusers import AceStepPipeline
    from peft import LoraConfig
    from safetensors.torch import load_file

    from tunesmith.families.ace_step.model import TextEncoding, conditioning

    pipe = AceStepPipeline.from_pretrained(folder, use_safetensors=True)
    pipe = pipe.to(device, getattr(torch, dtype))
    dit, rows = pipe.transformer, songs(folder, work).to_dict("records")
    data = []
    for row in rows:  # each song's conditioning, once
        text = [
            TextEncoding(load_file(row[k])["hidden_states"], 0, 0)
            for k in ("caption_states", "lyrics_states")
        ]
        text = [TextEncoding(t.hidden_states, t.hidden_states.shape[0], 0) for t in text]
        with torch.no_grad():
            states, _ = conditioning(pipe, *text)
        data.append((load_file(row["latents"])["latents"].to(device), states))
    silence, null = pipe.condition_encoder.silence_latent, pipe.condition_encoder.null_condition_emb
    dit.requires_grad_(False)
    targets = [
        n
        for n, m in dit.named_modules()
        if isinstance(m, torch.nn.Linear) and any(p in n for p in PROJECTIONS)
    ]
    dit.add_adapter(
        LoraConfig(r=RANK, lora_alpha=2 * RANK, target_modules=targets, init_lora_weights=True)
    )
    params = [p for p in dit.parameters() if p.requires_grad]
    for p in params:
        p.data = p.data.float()
    optimizer = torch.optim.AdamW(params, lr=5e-4)
    page_in(dit)

    def step() -> None:
        latents, states = data[int(torch.randint(0, SONGS, (1,)))]
        offset = int(torch.randint(0, FRAMES - CROP + 1, (1,)))
        x0 = latents[None, offset : offset + CROP]
        t = torch.sigmoid(torch.randn(2, 1) - 0.4).max(dim=0).values.to(device)
        if torch.rand(1) < 0.15:
            states = null.expand_as(states)
        noise = torch.randn_like(x0)
        source = silence[:, offset : offset + CROP]
        context = torch.cat([source, torch.ones_like(source)], dim=-1)
        kind = dit.dtype
        v = dit(
            hidden_states=(t * noise + (1 - t) * x0).to(kind),
            timestep=t.to(kind),
            timestep_r=t.to(kind),
            encoder_hidden_states=states.to(kind),
            context_latents=context.to(kind),
        ).sample
        loss = torch.nn.functional.mse_loss(v.float(), (noise - x0).float())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()

    return step, sum(1 for m in dit.modules() if hasattr(m, "lora_A"))


DIT_FILE = "diffusers/models/transformers/ace_step_transformer.py"


def child(kind: str, folder: Path, work: Path, args) -> dict:
    """'paired': both steps alternated through the run loop (the time ratio, the profile);
    'ours' / 'bare': one (its memory)."""
    from bench.steps import paired, profile_table

    if kind == "paired":
        step, targets_b = bare(folder, work / "bare", args.device, args.dtype)
        trainer = ours(folder, work / "ours", args.device, args.dtype)
        bare_s, ours_s, profiles = paired(trainer, step, args.steps, args.warmup, args.profile)
        table = profile_table(profiles, DIT_FILE, args.steps) if profiles else ""
        targets = [targets_b, len(trainer.targets)]
        return {"bare": 1 / bare_s, "ours": 1 / ours_s, "targets": targets, "profile": table}
    if kind == "ours":
        step = ours(folder, work, args.device, args.dtype).step
    else:
        step, _ = bare(folder, work, args.device, args.dtype)
    with PeakMemory(args.device) as memory:
        for _ in range(args.warmup + args.steps):
            step()
    return {"memory": memory.added}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=WARMUP, help="untimed steps first")
    parser.add_argument("--profile", action="store_true", help="each phase's time, both sides")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--threads", type=int, default=1, help="0: torch's default")
    parser.add_argument("--child", choices=["paired", "ours", "bare"])
    parser.add_argument("--model", type=Path)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.child:
        torch.manual_seed(0)
        with tempfile.TemporaryDirectory() as work:
            (Path(work) / "bare").mkdir()
            (Path(work) / "ours").mkdir()
            print(json.dumps(child(args.child, args.model, Path(work), args)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "model"
        size = make_model(folder)
        results = {}
        for name in ("paired", "bare", "ours"):
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
                    "--warmup",
                    str(args.warmup),
                    *(["--profile"] if args.profile else []),
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
            results[name] = json.loads(out.stdout.strip().splitlines()[-1])
    paired, memory = results["paired"], {k: results[k]["memory"] for k in ("bare", "ours")}
    timer = "thread CPU time" if clock(args.device) is time.thread_time else "wall time"
    targets_b, targets_o = paired["targets"]
    print(
        f"device {args.device} (torch threads {args.threads or torch.get_num_threads()}, "
        f"{timer}), {args.dtype}, DiT {DIT} ({size / 1e6:.1f} M parameters), crop {CROP} frames, "
        f"LoRA rank {RANK} on {targets_o} layers (bare: {targets_b}), AdamW"
    )
    if paired["profile"]:
        print(paired["profile"])
    print(
        f"bare diffusers + PEFT loop: {paired['bare']:.2f} steps/s, "
        f"+{memory['bare'] / 2**20:.1f} MiB"
    )
    print(
        f"tunesmith ACE-Step step:    {paired['ours']:.2f} steps/s, "
        f"+{memory['ours'] / 2**20:.1f} MiB"
    )
    print(
        f"time ratio (ours/bare): {paired['bare'] / paired['ours']:.3f}  (goal ≤ 1.02, "
        f"steps alternated in one process)"
    )
    print(f"memory ratio (ours/bare): {memory['ours'] / max(memory['bare'], 1):.3f}  (goal ≤ 1.0)")


if __name__ == "__main__":
    main()
