"""The ACE-Step 1.5 planner at full size: the estimate against a training step's peak, and our
step against a bare transformers + PEFT loop's (`bench/real_size.py` prints the rows).

The model: `acestep-5Hz-lm-0.6B` (`full_size.PUBLISHED`: Qwen3-0.6B's architecture with the
planner's 217,204-token vocabulary, 0.66 B parameters, 1.3 GB in bfloat16), written as a
planner folder with random bfloat16 weights and a tokenizer carrying the release's 65,535 code
tokens. The run: the family's defaults, a LoRA of rank 16 (alpha 32) on the seven projections of
every layer, one song a step, AdamW (the bare loop has no Muon); the songs are
bench/planner_step.py's, the family's prompt and 150 audio codes each (30 s); one row with
gradient checkpointing on, one with it off. With `reduced` the same architecture at width 256
and depth 4 with the tiny maker's 200 code tokens, for `make test`.

Each side runs in a child process of its own, `STEPS` steps, the last one timed, in float32
(what bench/planner_step.py's `ours` loads; the placement's dtype on the CPU):

    ours   the estimate first (`FAMILY.memory(..., items).estimate` at the songs' length, its
           runtime the child's resident set once the libraries are imported; 0 on CUDA, where
           the peak counted is CUDA's), then bench/planner_step.py's `ours`:
           `PlannerTrainer.step()` as the run loop calls it
    bare   bench/planner_step.py's `bare`: the planner through `AutoModelForCausalLM`, PEFT's
           LoRA, the factors in float32, the model's own loss over the song, backward,
           clipping and AdamW; here loaded at the row's dtype, and with transformers'
           `gradient_checkpointing_enable` and training mode where the row has checkpointing,
           as its user would turn it on (`_row_model`)

Peak: the child's whole memory at its highest while its steps run (bench/sdxl_step.py's
`PeakMemory`: the resident set sampled on the CPU, `torch.cuda.max_memory_allocated()` on CUDA,
the weights included); loading is left out, as transformers reads the weights through a memory
map whose pages count as resident while they are copied. The process's lifetime peak
(ru_maxrss on the CPU) is in each row too, as `process_peak_gb`.

A row whose estimate is over this machine's memory (available RAM on the CPU, the GPU's on
CUDA) is skipped with both numbers.

    .venv/bin/python bench/full_size/ace_step_planner.py [--reduced]
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

NAME = "acestep-5Hz-lm-0.6B"
DTYPE = "float32"  # bench/planner_step.py's `ours` trains the planner at float32
STEPS = 2  # the first one warms up
GB = 1e9
_REDUCED = dict(  # bench/planner_step.py's widened tiny planner
    hidden_size=256,
    intermediate_size=768,
    num_hidden_layers=4,
    max_window_layers=4,
    num_attention_heads=8,
    num_key_value_heads=4,
    head_dim=32,
)


def device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def planner_config(reduced: bool) -> tuple[dict, int]:
    """(the planner's config.json, its code tokens): the release's, or the reduced one with a
    vocabulary just as long as the tiny maker's tokenizer."""
    from tunesmith.families.ace_step_planner.full_size import CODE_TOKENS, PUBLISHED
    from tunesmith.families.ace_step_planner.tiny import CODEBOOK_SIZE, planner_tokenizer

    if not reduced:
        return PUBLISHED[NAME], CODE_TOKENS
    vocab = len(planner_tokenizer(CODEBOOK_SIZE))
    return {**PUBLISHED[NAME], **_REDUCED, "vocab_size": vocab}, CODEBOOK_SIZE


def run_config(planner: Path, checkpointing: bool):
    """bench/planner_step.py's run, with the row's gradient checkpointing."""
    from bench import planner_step

    return _checkpointing(planner_step.run_config(planner), checkpointing)


def _checkpointing(run, on: bool):
    from dataclasses import replace

    return replace(run, train=replace(run.train, gradient_checkpointing=on))


def estimate(planner: Path, work: Path, checkpointing: bool) -> float:
    """The run's estimated peak in GB, at the length of bench/planner_step.py's songs."""
    import peft  # noqa: F401  (the libraries the trainer loads: in the runtime)
    import transformers  # noqa: F401

    from bench import planner_step
    from tunesmith.families.ace_step_planner import FAMILY
    from tunesmith.train.footprint import process_bytes

    run = run_config(planner, checkpointing)
    runtime = 0 if device() == "cuda" else process_bytes()
    items = planner_step.songs(work)
    model = FAMILY.memory(run, work, getattr(torch, DTYPE), items)
    return model.estimate(run, runtime=runtime).total / GB


def available() -> float:
    """GB this machine has free for a row: the GPU's on CUDA, else the RAM's."""
    if device() == "cuda":
        return torch.cuda.mem_get_info()[0] / GB
    import psutil

    return psutil.virtual_memory().available / GB


def rows(work: Path, reduced: bool, checkpointing_modes=(True, False)) -> list[dict]:
    from tunesmith.families.ace_step_planner.full_size import write_planner

    config, code_tokens = planner_config(reduced)
    planner = write_planner(work / NAME, config, code_tokens=code_tokens)
    setting = f"{'reduced ' if reduced else ''}{NAME}, LoRA r16, songs of 150 codes"
    found = []
    for checkpointing in checkpointing_modes:
        scratch = work / f"estimate-{checkpointing}"
        scratch.mkdir()
        expected, free = estimate(planner, scratch, checkpointing), available()
        if expected > free:
            found.append(
                {
                    "setting": setting,
                    "checkpointing": checkpointing,
                    "skipped": f"estimated {expected:.1f} GB, {free:.1f} GB available",
                }
            )
            continue
        sides = {
            side: _child(side, planner, work, checkpointing, reduced) for side in ("ours", "bare")
        }
        found.append(
            {
                "setting": setting,
                "checkpointing": checkpointing,
                "estimate_gb": sides["ours"]["estimate_gb"],
                "peak_gb": sides["ours"]["peak_gb"],
                "process_peak_gb": sides["ours"]["process_peak_gb"],
                "ours_s": sides["ours"]["seconds"],
                "bare_s": sides["bare"]["seconds"],
            }
        )
    return found


def _child(side: str, planner: Path, work: Path, on: bool, reduced: bool) -> dict:
    from bench.sdxl_step import MALLOC

    scratch = work / f"{side}-{on}"
    scratch.mkdir()
    command = [sys.executable, __file__, "--child", side, "--model", str(planner)]
    command += ["--work", str(scratch)] + ["--checkpointing"] * on + ["--reduced"] * reduced
    out = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **MALLOC})
    if out.returncode:
        raise RuntimeError(f"the {side} child failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


@contextmanager
def _row_model(checkpointing: bool) -> Iterator[None]:
    """bench/planner_step.py's bare loop loads the planner with
    `AutoModelForCausalLM.from_pretrained(folder, use_safetensors=True)`, at the folder's own
    dtype (bfloat16 here); here at the row's, then with transformers' non-reentrant gradient
    checkpointing and training mode where the row has checkpointing (transformers checkpoints
    a layer only in training mode; the planner has no dropout)."""
    from transformers import AutoModelForCausalLM

    original = AutoModelForCausalLM.from_pretrained

    def load(folder, **kwargs):
        model = original(folder, dtype=getattr(torch, DTYPE), **kwargs)
        if checkpointing:
            kwargs = {"use_reentrant": False}
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
            model.train()
        return model

    AutoModelForCausalLM.from_pretrained = load
    try:
        yield
    finally:
        AutoModelForCausalLM.from_pretrained = original


def child(side: str, planner: Path, work: Path, on: bool) -> dict:
    from bench import planner_step
    from bench.sdxl_step import PeakMemory
    from bench.steps import timed_step

    made = planner_step.run_config  # the run `ours` trains, with the row's checkpointing
    planner_step.run_config = lambda folder: _checkpointing(made(folder), on)
    out = {}
    if side == "ours":
        out["estimate_gb"] = estimate(planner, work, on)  # before anything is loaded
        step = planner_step.ours(planner, work, device()).step
    else:
        with _row_model(on):
            step, _ = planner_step.bare(planner, work, device())
    with PeakMemory(device()) as memory:
        out["seconds"] = timed_step(step, device(), STEPS - 1)
    peak = memory.start + memory.added if device() == "cuda" else memory.peak
    lifetime = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    return {**out, "peak_gb": peak / GB, "process_peak_gb": lifetime / GB}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reduced", action="store_true")
    parser.add_argument("--child", choices=["ours", "bare"])
    parser.add_argument("--model", type=Path)
    parser.add_argument("--work", type=Path)
    parser.add_argument("--checkpointing", action="store_true")
    args = parser.parse_args()
    if args.child:
        torch.manual_seed(0)
        print(json.dumps(child(args.child, args.model, args.work, args.checkpointing)))
        return
    with tempfile.TemporaryDirectory(prefix="tunesmith-planner-") as work:
        for row in rows(Path(work), args.reduced):
            print(json.dumps(row))


if __name__ == "__main__":
    main()
