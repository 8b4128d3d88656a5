"""Muon's optimizer step against AdamW's on the same adapter parameters, bucketed and not.

The parameters are those of an ACE-Step 1.5 DiT widened from tunesmith's tiny one (`DIT`), built
on the meta device with the real `AceStepTransformer1DModel` and adapted on its attention and MLP
projections the way the ace-step family adapts them: LoRA rank 128 (PEFT's layer, `torch_lora`)
and LoKr dim 512 factor 6 (`torch_lokr`), HOT-Step's defaults. The arms, interleaved step by step
in one process on the same parameters and gradients:

    adamw            torch.optim.AdamW on every parameter
    muon f32 b=16    tunesmith's Muon beside AdamW (`build_optimizer`), float32 Newton–Schulz,
                     same-shape parameters 16 to a batched iteration (the default)
    muon f32 b=1     the same, one parameter at a time
    muon bf16 b=16   bfloat16 Newton–Schulz (torch's precision), bucketed
    torch.optim.Muon torch's own, bfloat16, one at a time, beside the same AdamW

The bfloat16 arms run on the LoRA set only with `--bf16` (or on CUDA): on a CPU without
bfloat16 matrix units a bfloat16 matmul is ~10x slower than a float32 one, which is also why
float32 is the default there.

Printed: each arm's median step time over AdamW's (ratios from the same run; on the CPU one
torch thread and this thread's CPU time), and the split of the parameters. Absolute times are
not the point.

    .venv/bin/python bench/muon_step.py [--quick] [--steps 8] [--device cpu] [--bf16]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from bench.sdxl_step import clock  # noqa: E402

# Over TINY_ACE_STEP_CONFIG["transformer"] (hidden 32, 2 layers); the release has 2048 and 24.
DIT = dict(
    hidden_size=256,
    intermediate_size=768,
    num_attention_heads=8,
    num_key_value_heads=4,
    head_dim=32,
    num_hidden_layers=4,
    sliding_window=64,
)
PROJECTIONS = (".self_attn.", ".cross_attn.", ".mlp.")


def adapter_shapes(kind: str, layers: int) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of every adapter parameter of the widened DiT for `kind`."""
    from diffusers import AceStepTransformer1DModel

    from tunesmith.adapters import torch_lokr, torch_lora
    from tunesmith.families.ace_step.tiny import TINY_ACE_STEP_CONFIG

    with torch.device("meta"):
        dit = AceStepTransformer1DModel(
            **{**TINY_ACE_STEP_CONFIG["transformer"], **DIT, "num_hidden_layers": layers}
        )
    targets = [
        n
        for n, m in dit.named_modules()
        if isinstance(m, nn.Linear) and any(p in n for p in PROJECTIONS)
    ]
    if kind == "lora r128":
        torch_lora.attach(dit, targets, 128, 256.0, "lora")
        named = [(n, p) for n, p in dit.named_parameters() if p.requires_grad]
    else:
        torch_lokr.attach(dit, targets, 512, 512.0, 6)
        named = torch_lokr.named_adapter_parameters(dit)
    return [(n, tuple(p.shape)) for n, p in named]


def make_arms(shapes, device: str, bf16: bool, lr: float = 1e-3) -> dict[str, tuple]:
    from tunesmith.train.optimizers import OptimizerSettings, build_optimizer, split_parameters

    def fresh():
        g = torch.Generator().manual_seed(0)
        return [
            (n, nn.Parameter(0.02 * torch.randn(*s, generator=g).to(device))) for n, s in shapes
        ]

    arms = {}
    named = fresh()
    arms["adamw"] = ([p for _, p in named], torch.optim.AdamW([p for _, p in named], lr=lr))
    muons = [("muon f32 b=16", "float32", 16), ("muon f32 b=1", "float32", 1)]
    muons += [("muon bf16 b=16", "bfloat16", 16)] if bf16 else []
    for label, dtype, bucket in muons:
        named = fresh()
        settings = OptimizerSettings("muon", muon_ns_dtype=dtype, muon_bucket=bucket)
        arms[label] = ([p for _, p in named], build_optimizer(named, lr, settings)[0])
    if not bf16:
        return arms
    named = fresh()
    split = split_parameters(named, OptimizerSettings("muon"))
    by_name = dict(named)
    muon = torch.optim.Muon([by_name[n] for n, _ in split.muon], lr=lr * 20, weight_decay=0.01)
    rest = [by_name[n] for n, _ in split.adamw]
    parts = [muon] + ([torch.optim.AdamW(rest, lr=lr)] if rest else [])
    arms["torch.optim.Muon"] = ([p for _, p in named], parts)
    return arms


def measure(shapes, steps: int, device: str, bf16: bool) -> dict[str, float]:
    arms = make_arms(shapes, device, bf16)
    now, seconds = clock(device), {name: [] for name in arms}
    g = torch.Generator().manual_seed(1)
    for step in range(steps + 1):  # the first step creates the optimizers' state
        grads = [torch.randn(s, generator=g).to(device) for _, s in shapes]
        for name, (params, optimizer) in arms.items():  # interleaved: load drifts hit all
            for p, grad in zip(params, grads, strict=True):
                p.grad = grad.clone()
            if device == "cuda":
                torch.cuda.synchronize()
            start = now()
            for part in optimizer if isinstance(optimizer, list) else [optimizer]:
                part.step()
            if device == "cuda":
                torch.cuda.synchronize()
            if step:
                seconds[name].append(now() - start)
    return {name: statistics.median(values) for name, values in seconds.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="2 DiT layers, 3 steps")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--bf16", action="store_true", help="bfloat16 arms on the LoRA set too")
    parser.add_argument("--threads", type=int, default=1, help="torch's CPU threads (0: default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    layers, steps = (2, 3) if args.quick else (DIT["num_hidden_layers"], args.steps)
    from tunesmith.train.optimizers import OptimizerSettings, split_parameters

    timer = "thread CPU time" if clock(args.device) is time.thread_time else "wall time"
    print(
        f"DiT {dict(DIT, num_hidden_layers=layers)}; {args.device}, torch threads "
        f"{torch.get_num_threads()}, {timer}, median of {steps} steps"
    )
    for kind in ("lokr dim 512 factor 6", "lora r128"):
        shapes = adapter_shapes(kind, layers)
        named = [(n, torch.empty(s, device="meta")) for n, s in shapes]
        split = split_parameters(named, OptimizerSettings("muon"))
        print(f"\n{kind}: {len(shapes)} parameters; {split.summary()}")
        bf16 = kind.startswith("lokr") or args.bf16 or args.device == "cuda"
        times = measure(shapes, steps, args.device, bf16)
        base = times["adamw"]
        for name, value in times.items():
            print(f"  {name:<17} {value / base:6.2f} x AdamW's step")
        b1, b16 = times["muon f32 b=1"], times["muon f32 b=16"]
        print(f"  bucketing (f32): one at a time / buckets of 16 = {b1 / b16:.2f}")
        if bf16:
            torch_muon, ours = times["torch.optim.Muon"], times["muon bf16 b=16"]
            print(
                f"  bf16: torch.optim.Muon one at a time / ours bucketed = {torch_muon / ours:.2f}"
            )


if __name__ == "__main__":
    main()
