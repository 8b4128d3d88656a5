"""Our planner LoRA training step against a bare loop, in one run, on one machine.

The bare loop is what a user writes by hand from transformers and PEFT: the planner loaded
with `AutoModelForCausalLM`, `get_peft_model` with a LoRA of rank 16 (alpha 32) on the seven
projections of every layer, the factors in fp32, AdamW, and per step one song's tokens with
the prompt's labels at -100, the model's own loss (`labels=`: the shifted cross-entropy over
the answer tokens), backward, global-norm clipping at 1.0 and the AdamW step. Ours is
`PlannerTrainer.step()` (tunesmith's trainer of the one loop) with the same settings, AdamW
and one song a step: the epoch order, the masked loss on the answer positions only, backward,
clipping, the optimizer and the schedule; validation, samples and files are left out. Both
train the same examples (`planner/data.py`'s prompt and answer, the same token ids and mask)
on the tiny planner LM widened (`WIDE`), saved in the published acestep-5Hz-lm layout.

Ours runs in the run loop (`tunesmith.train.loop`: the finiteness check, progress line, event
record and memory cap of every step).

Printed: steps per second of each and the time ratio (ours / bare, goal ≤ 1.02), from one
process that builds both and alternates their steps (`bench/steps.py`: the median step after
`--warmup` steps, this thread's CPU time on a CPU with one torch thread), so that the load of
this shared machine falls on both alike; the ratio of the memory each training adds over its
loaded model (peak RSS on the CPU, peak allocated on CUDA; goal ≤ 1.0), from a process of its
own for each. `--profile`: each phase of a step, both sides (`bench/steps.py`).

Then our step on MLX (mlx-lm's Qwen3 and LoRA layers, `MlxPlannerTrainer`)
against ours on torch, both by wall time (MLX's CPU backend computes on threads of its own),
the devices named: not a goal on a Linux CPU; on Apple Silicon the same script compares MLX's
GPU with torch there. Nothing here asserts a timing.

    .venv/bin/python bench/planner_step.py [--steps 20] [--warmup 3] [--device cpu] [--threads 1]
                                         [--profile] [--no-mlx]

tests/test_bench.py runs one warm-up step and one timed step (an MLX step on a Linux CPU takes
seconds): that checks that the benchmark runs, it measures nothing worth reading.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from bench.sdxl_step import MALLOC, PeakMemory, clock, page_in  # noqa: E402

# The tiny planner widened to something a step's time is worth measuring on (real 0.6B:
# hidden 1024, 28 layers, 16 heads, 8 kv heads, head_dim 128).
WIDE = {
    "hidden_size": 256,
    "intermediate_size": 768,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 32,
}
SONGS, SECONDS, WARMUP = 8, 30, 3
LINEAGE = {
    "tunesmith.version": "bench",
    "tunesmith.base_model_fingerprint": "bench",
    "tunesmith.run_key": "bench",
}
LABELS = {
    "caption": "warm lo-fi hip hop, dusty drums",
    "lyrics": "[Verse]\nwe ride the night",
    "bpm": 92,
    "keyscale": "A minor",
    "timesignature": "4",
    "language": "en",
}


def make_planner(folder: Path) -> int:
    """The widened tiny planner in the published layout; its parameter count."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from tunesmith.families.ace_step_planner.tiny import TINY_PLANNER_CONFIG, planner_tokenizer

    tokenizer = planner_tokenizer()
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **{**TINY_PLANNER_CONFIG, **WIDE},
    )
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(config).eval()
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return sum(p.numel() for p in model.parameters())


def songs(work: Path):
    """`SONGS` songs of random codes as the `encoded` stage's rows."""
    import pandas as pd

    from tunesmith.families.ace_step_planner.tiny import CODEBOOK_SIZE
    from tunesmith.store.tensors import write_safetensors

    g, rows = torch.Generator().manual_seed(1), []
    for i in range(SONGS):
        path = work / f"song{i}.safetensors"
        codes = torch.randint(0, CODEBOOK_SIZE, (SECONDS * 5,), generator=g)
        write_safetensors(path, {"audio_codes": codes})
        labels = {**LABELS, "duration": SECONDS}
        rows.append(
            {
                "path": f"song{i}.wav",
                "latents": str(path),
                "codes": len(codes),
                "planner_labels": json.dumps(labels),
                "trigger": "",
                "tag_position": "prepend",
            }
        )
    return pd.DataFrame(rows)


def run_config(planner: Path):
    from tunesmith.train.config import resolve_run

    raw = {
        "name": "bench",
        "family": "ace-step-planner",
        "base_model": "bench",
        "adapter": {"planner": str(planner)},
        "train": {"optimizer": "adamw", "accumulation": 1, "holdout": 1, "epochs": 100},
    }
    return resolve_run(raw, Path("tunesmith.toml"), 0)


def ours(folder: Path, work: Path, device: str):
    """Our trainer (`PlannerTrainer`), ready for the run loop."""
    from tunesmith.backends.placement import Placement
    from tunesmith.families.ace_step_planner.trainer import PlannerTrainer

    placement = Placement("torch", device, "float32", "bench")
    trainer = PlannerTrainer(
        run_config(folder), work, songs(work), work / "run", placement, LINEAGE
    )
    page_in(trainer.planner.model)
    return trainer


def mlx(folder: Path, work: Path, steps: int, warmup: int) -> dict:
    """Our step on MLX (the device MLX has: its GPU on Apple Silicon, else the CPU), wall time."""
    import mlx.core as mx

    from tunesmith.backends.placement import Placement
    from tunesmith.families.ace_step_planner.mlx_trainer import MlxPlannerTrainer

    where = "gpu" if mx.metal.is_available() else "cpu"
    placement = Placement("mlx", where, "float32", "bench")
    trainer = MlxPlannerTrainer(
        run_config(folder), work, songs(work), work / "run", placement, LINEAGE
    )
    walls = []
    for _ in range(warmup + steps):
        start = time.perf_counter()
        trainer.step()  # evaluates the update (mx.eval) before it returns
        walls.append(time.perf_counter() - start)
    return {
        "wall_steps_per_second": 1 / statistics.median(walls[warmup:]),
        "device": str(mx.default_device()),
    }


def bare(folder: Path, work: Path, device: str):
    """The bare loop's step, ready to run: (step function, trainable parameters)."""
    from peft import LoraConfig, get_peft_model
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tunesmith.families.ace_step_planner.data import build_example
    from tunesmith.families.ace_step_planner.model import planner_vocab

    tokenizer = AutoTokenizer.from_pretrained(folder)
    vocab = planner_vocab(tokenizer, folder)
    model = AutoModelForCausalLM.from_pretrained(folder, use_safetensors=True).to(device)
    data = []
    for row in songs(work).to_dict("records")[1:]:  # the holdout of one leaves seven to train
        codes = load_file(row["latents"])["audio_codes"]
        example = build_example(
            tokenizer,
            vocab,
            row["path"],
            json.loads(row["planner_labels"]),
            codes,
            model.config.max_position_embeddings,
        )
        data.append(
            (
                torch.tensor([example.input_ids], device=device),
                torch.tensor([example.labels], device=device),
            )
        )
    config = LoraConfig(
        r=16,
        lora_alpha=32,
        lora_dropout=0.0,
        task_type="CAUSAL_LM",
        target_modules=[
            "q_proj",
            "k_proj",
            "v_proj",
            "o_proj",
            "gate_proj",
            "up_proj",
            "down_proj",
        ],
    )
    model = get_peft_model(model, config)
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        p.data = p.data.float()
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    page_in(model)

    def step() -> None:
        ids, labels = data[int(torch.randint(0, len(data), (1,)))]
        loss = model(input_ids=ids, labels=labels).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()

    return step, sum(p.numel() for p in params)


MODEL_FILE = "transformers/models/qwen3/modeling_qwen3.py"


def child(kind: str, folder: Path, work: Path, args) -> dict:
    """'paired': both steps alternated through the run loop (the time ratio, the profile);
    'ours' / 'bare': one (its memory); 'mlx': our step on MLX."""
    from bench.steps import paired, profile_table

    if kind == "mlx":
        return mlx(folder, work, args.steps, args.warmup)
    if kind == "paired":
        step, trainable_b = bare(folder, work / "bare", args.device)
        trainer = ours(folder, work / "ours", args.device)
        bare_s, ours_s, profiles = paired(trainer, step, args.steps, args.warmup, args.profile)
        table = profile_table(profiles, MODEL_FILE, args.steps) if profiles else ""
        return {
            "bare": 1 / bare_s,
            "ours": 1 / ours_s,
            "trainable": [trainable_b, sum(p.numel() for p in trainer.params)],
            "profile": table,
        }
    if kind == "ours":
        step = ours(folder, work, args.device).step
    else:
        step, _ = bare(folder, work, args.device)
    walls = []  # wall time, beside MLX's (which has no other)
    with PeakMemory(args.device) as memory:
        for _ in range(args.warmup + args.steps):
            start = time.perf_counter()
            step()
            if args.device == "cuda":
                torch.cuda.synchronize()
            walls.append(time.perf_counter() - start)
    return {
        "memory": memory.added,
        "wall_steps_per_second": 1 / statistics.median(walls[args.warmup :]),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=WARMUP, help="untimed steps first")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=1, help="0: torch's default")
    parser.add_argument("--profile", action="store_true", help="each phase's time, both sides")
    parser.add_argument("--child", choices=["paired", "ours", "bare", "mlx"])
    parser.add_argument("--no-mlx", action="store_true", help="leave out the MLX comparison")
    parser.add_argument("--model", type=Path)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.child:
        torch.manual_seed(0)
        with tempfile.TemporaryDirectory() as work:
            for name in ("bare", "ours"):
                (Path(work) / name).mkdir()
            print(json.dumps(child(args.child, args.model, Path(work), args)))
        return
    names = ["paired", "bare", "ours"]
    if not args.no_mlx and importlib.util.find_spec("mlx_lm") is not None:
        names.append("mlx")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "acestep-5Hz-lm-bench"
        size = make_planner(folder)
        results = {}
        for name in names:
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
    trainable_b, trainable_o = paired["trainable"]
    timer = "thread CPU time" if clock(args.device) is time.thread_time else "wall time"
    print(
        f"device {args.device} (torch threads {args.threads or torch.get_num_threads()}, "
        f"{timer}), float32, planner {WIDE} ({size / 1e6:.1f} M parameters), songs of "
        f"{SECONDS} s ({SECONDS * 5} codes), LoRA rank 16 on 7 projections x "
        f"{WIDE['num_hidden_layers']} layers ({trainable_o} parameters; bare: "
        f"{trainable_b}), AdamW, one song a step"
    )
    if paired["profile"]:
        print(paired["profile"])
    print(
        f"bare transformers + PEFT loop: {paired['bare']:.2f} steps/s, "
        f"+{memory['bare'] / 2**20:.1f} MiB"
    )
    print(
        f"tunesmith planner step:        {paired['ours']:.2f} steps/s, "
        f"+{memory['ours'] / 2**20:.1f} MiB"
    )
    print(
        f"time ratio (ours/bare): {paired['bare'] / paired['ours']:.3f}  (goal ≤ 1.02, "
        "steps alternated in one process)"
    )
    print(f"memory ratio (ours/bare): {memory['ours'] / max(memory['bare'], 1):.3f}  (goal ≤ 1.0)")
    if "mlx" in results:
        m, t = results["mlx"]["wall_steps_per_second"], results["ours"]["wall_steps_per_second"]
        print(
            f"MLX ({results['mlx']['device']}, mlx-lm) {m:.2f} steps/s against torch "
            f"({args.device}) {t:.2f} steps/s, wall time: time ratio (MLX/torch) {t / m:.3f} "
            "(not a goal on a Linux CPU)"
        )


if __name__ == "__main__":
    main()
