"""A LoKr training step against a LoRA step on the same layers of an ACE-Step 1.5 DiT.

The DiT is the real `AceStepTransformer1DModel`, tunesmith's tiny one widened (`DIT`, a few
million parameters), adapted on every attention and MLP projection with HOT-Step's defaults:

    lora       LoRA rank 128, alpha 256 (`torch_lora`: PEFT's LoRA layer)
    lokr       LoKr dim 512, alpha 512, factor 6 (`torch_lokr`: the Kronecker matvec)
    peft-lokr  PEFT's own LoKr layer with the same config (it materialises ΔW every forward)

A step is the DiT's forward on one crop (`FRAMES` latent frames, `TEXT` condition tokens), a
flow-matching MSE, the backward and an AdamW step: the same in every arm, so what differs is
the adapter. Each arm runs in its own process (interleaved over `--rounds` rounds, the best
round per arm), on one torch thread, timed by this thread's CPU time (bench/sdxl_step.py's
clock and memory probe).

Printed, all ratios from this run: LoKr step / LoRA step (goal ≤ 1.5; HOT-Step measured 16.4
before it kept tokens out of the batched-matmul axis), the share of the LoKr step spent in the
LoKr forward (the forward with the adapters on less the forward with them off), PEFT's LoKr step
and memory against ours, and for one projection at ACE-Step 1.5's size (2048 x 2048, 344 tokens:
HOT-Step's crop) the tensors autograd keeps for the backward, beyond the weights and the input,
in our layer and in PEFT's, with their forward+backward times.

    .venv/bin/python bench/lokr_step.py [--quick] [--steps 10] [--rounds 1] [--device cpu]
                                        [--dtype float32]

`--dtype bfloat16` runs each step under torch.autocast (the factors stay float32); on CUDA the
steps are timed by wall time after a synchronize. The one projection is always on the CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from bench.muon_step import DIT, PROJECTIONS  # noqa: E402
from bench.sdxl_step import MALLOC, PeakMemory, clock  # noqa: E402

BATCH, FRAMES, TEXT, WARMUP = 1, 256, 64, 3
ARMS = ("lora", "lokr", "peft-lokr")


def build(arm: str):
    """The widened DiT (seed 0) with `arm`'s adapters; returns (dit, trainable parameters)."""
    import peft
    from diffusers import AceStepTransformer1DModel

    from tunesmith.adapters import torch_lokr, torch_lora
    from tunesmith.families.ace_step.tiny import TINY_ACE_STEP_CONFIG

    torch.manual_seed(0)
    dit = AceStepTransformer1DModel(**{**TINY_ACE_STEP_CONFIG["transformer"], **DIT})
    targets = [
        n
        for n, m in dit.named_modules()
        if isinstance(m, nn.Linear) and any(p in n for p in PROJECTIONS)
    ]
    if arm == "lora":
        torch_lora.attach(dit, targets, 128, 256.0, "lora")
    elif arm == "lokr":
        torch_lokr.attach(dit, targets, 512, 512.0, 6)
    else:
        dit.requires_grad_(False)
        config = peft.LoKrConfig(
            r=512, alpha=512, decompose_factor=6, target_modules=targets, init_weights="lycoris"
        )
        peft.inject_adapter_in_model(config, dit)
    params = [p for p in dit.parameters() if p.requires_grad]
    return dit, params


def batch(dit, g: torch.Generator, device: str = "cpu") -> dict:
    hidden = dit.config.hidden_size
    return dict(
        x0=torch.randn(BATCH, FRAMES, 8, generator=g).to(device),
        context_latents=torch.randn(BATCH, FRAMES, 16, generator=g).to(device),
        encoder_hidden_states=torch.randn(BATCH, TEXT, hidden, generator=g).to(device),
    )


def loss_of(dit, data: dict, g: torch.Generator) -> torch.Tensor:
    """Flow matching on one crop: x_t = t·noise + (1−t)·x0, target noise − x0."""
    x0 = data["x0"]
    t = torch.rand(BATCH, generator=g).to(x0.device)
    noise = torch.randn(x0.shape, generator=g).to(x0.device)
    xt = t[:, None, None] * noise + (1 - t[:, None, None]) * x0
    prediction = dit(xt, t, t, data["encoder_hidden_states"], data["context_latents"]).sample
    return F.mse_loss(prediction, noise - x0)


def child(arm: str, steps: int, device: str = "cpu", dtype: str = "float32") -> dict:
    from tunesmith.adapters import torch_lokr

    dit, params = build(arm)
    dit.to(device)
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    g = torch.Generator().manual_seed(1)
    data = batch(dit, g, device)
    cast = torch.autocast(device, getattr(torch, dtype), enabled=dtype != "float32")
    now, seconds = clock(device), []
    with PeakMemory(device) as memory:
        for step in range(WARMUP + steps):
            start = now()
            with cast:
                loss = loss_of(dit, data, g)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if device == "cuda":
                torch.cuda.synchronize()
            if step >= WARMUP:
                seconds.append(now() - start)
    out = {"step": statistics.median(seconds), "memory": memory.added, "saved": saved(dit, data)}
    out["frozen"] = sum(p.numel() for p in dit.parameters() if not p.requires_grad)
    if arm == "lokr":  # the LoKr forward: forward (with autograd) with the adapters on less off
        on, off = [], []
        for _ in range(steps):
            for strength, sink in ((1.0, on), (0.0, off)):
                torch_lokr.set_strength(dit, strength)
                start = now()
                with cast:
                    loss_of(dit, data, g)
                if device == "cuda":
                    torch.cuda.synchronize()
                sink.append(now() - start)
        out["lokr_forward"] = statistics.median(on) - statistics.median(off)
        out["projection"] = one_projection(steps)
    return out


def saved(module: nn.Module, data: dict | None = None, x: torch.Tensor | None = None) -> int:
    """Bytes autograd keeps for the backward of one forward, beyond the module's parameters and
    the input: distinct storages, counted once."""
    known = {p.untyped_storage().data_ptr() for p in module.parameters()}
    if x is not None:
        known.add(x.untyped_storage().data_ptr())
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in known:
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = module(x) if x is not None else loss_of(module, data, torch.Generator())
    out.sum().backward()
    return sum(storages.values())


def one_projection(reps: int) -> dict:
    """Our LoKrLinear and PEFT's LoKr Linear on one 2048 x 2048 projection, 344 tokens."""
    import peft
    from peft.tuners.lokr import layer as peft_lokr

    from tunesmith.adapters.torch_lokr import LoKrLinear

    torch.manual_seed(0)
    base = nn.Linear(2048, 2048).requires_grad_(False)
    ours = LoKrLinear(base, 512, 512.0, 6)
    config = peft.LoKrConfig(r=512, alpha=512, decompose_factor=6, init_weights="lycoris")
    theirs = peft_lokr.Linear(base, "default", config, r=512, alpha=512)
    x = torch.randn(1, 344, 2048, requires_grad=True)
    result = {"ours_saved": saved(ours, x=x), "peft_saved": saved(theirs, x=x)}
    now, times = clock("cpu"), {"ours": [], "peft": []}
    for _ in range(reps):
        for name, layer in (("ours", ours), ("peft", theirs)):
            start = now()
            layer(x).sum().backward()
            times[name].append(now() - start)
    result.update({f"{k}_time": statistics.median(v) for k, v in times.items()})
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="4 steps")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--child", choices=ARMS)
    args = parser.parse_args()
    torch.set_num_threads(1)
    steps = 4 if args.quick else args.steps
    if args.child:
        print(json.dumps(child(args.child, steps, args.device, args.dtype)))
        return
    results: dict[str, dict] = {}
    for _ in range(args.rounds):
        for arm in ARMS:  # interleaved: load drifts hit every arm
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    arm,
                    "--steps",
                    str(steps),
                    "--device",
                    args.device,
                    "--dtype",
                    args.dtype,
                ],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, **MALLOC},
            )
            result = json.loads(out.stdout.strip().splitlines()[-1])
            if arm not in results or result["step"] < results[arm]["step"]:
                results[arm] = result
    lora, lokr, peft_lokr = (results[a] for a in ARMS)
    print(
        f"DiT {DIT} ({lokr['frozen'] / 1e6:.1f} M parameters), batch {BATCH}, crop {FRAMES} "
        f"frames ({FRAMES // 2} tokens), {TEXT} condition tokens; {args.device}, {args.dtype}, "
        f"one torch thread, {'thread CPU' if args.device == 'cpu' else 'wall'} time, median "
        f"of {steps} steps, best of {args.rounds} round(s)"
    )
    print(f"LoKr step / LoRA step: {lokr['step'] / lora['step']:.2f}  (goal ≤ 1.5)")
    print(f"LoKr forward's share of the LoKr step: {lokr['lokr_forward'] / lokr['step']:.1%}")
    print(
        f"PEFT's LoKr step / ours: {peft_lokr['step'] / lokr['step']:.2f}; memory a step adds "
        f"(peak RSS) PEFT's / ours: {peft_lokr['memory'] / max(lokr['memory'], 1):.2f}; kept "
        f"for the backward: PEFT's {peft_lokr['saved'] / 2**20:.1f} MiB, ours "
        f"{lokr['saved'] / 2**20:.1f} MiB, LoRA's {lora['saved'] / 2**20:.1f} MiB"
    )
    one = lokr["projection"]
    print(
        f"one 2048x2048 projection, 344 tokens, LoKr dim 512 factor 6: kept for the backward "
        f"(beyond weights and input) PEFT's {one['peft_saved'] / 2**20:.2f} MiB, ours "
        f"{one['ours_saved'] / 2**20:.2f} MiB; forward+backward time PEFT's / ours "
        f"{one['peft_time'] / one['ours_time']:.2f}"
    )


if __name__ == "__main__":
    main()
