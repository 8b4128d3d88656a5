"""ACE-Step 1.5 at full size: the estimate against a training step's peak, and our step against
a bare diffusers + PEFT loop's (`bench/real_size.py` prints the rows).

The model: the release as diffusers ships it (`full_size.PUBLISHED`: the 1.58 B DiT, the
condition encoder, the Oobleck VAE, Qwen3-Embedding-0.6B, the audio tokenizer and
detokenizer; 6.3 GB in bfloat16), written as a base model folder with random bfloat16 weights.
The runs: HOT-Step's adapters on the DiT's attention and MLP (264 layers), LoRA r128/α256 and
LoKr dim 512 factor 6, crops of 750 latent frames (30 s), one crop a step, AdamW (the bare loop
has no Muon), each with gradient checkpointing on and off. The song's conditioning is as long
as the pipeline allows (256 caption and 2048 lyrics tokens), as the estimate assumes. With
`reduced` the same architecture at width 256 and depth 4 (a small VAE and text encoder) and
crops of 150 frames, for `make test`.

Each side runs in a child process of its own, `STEPS` steps, the last one timed, in bfloat16
(CUDA's dtype, and the folder's; on the CPU a float32 run holds twice the weights). On the CPU
each child runs one torch thread and a step is timed by that thread's CPU time, as
bench/ace_step_step.py times its steps: the two sides run minutes apart on a shared machine,
and with two threads timed by the wall clock ours/bare came out anywhere from 0.83 to 1.65
across the four rows of one run here.

    ours   the estimate first (`FAMILY.memory(...).estimate`, its runtime the child's resident
           set before loading; 0 on CUDA, where the peak counted is CUDA's), then
           bench/ace_step_step.py's `ours`: `AceStepTrainer.step()` as the run loop calls it
    bare   bench/ace_step_step.py's `bare`: the pipeline loaded, the song's conditioning once,
           PEFT's adapter added with diffusers' `add_adapter` on the same layers, the factors
           in float32, a crop, its level, CFG dropout, the flow-matching MSE, backward,
           clipping and AdamW; here its adapter is the row's (PEFT's LoRA r128/α256, or
           PEFT's LoKr with LyCORIS's init) and diffusers' `enable_gradient_checkpointing()`
           is called where the row has it (`_row_adapter`)

bench/ace_step_step.py's functions are sized by its module constants and its `songs` and
`run_config`; `_shaped` points them at this row.

Peak: on the CPU the child's resident set sampled while its steps run (bench/sdxl_step.py's
`PeakMemory`, its absolute peak), on CUDA `torch.cuda.max_memory_allocated()` over the steps
(the weights included). Loading is left out: diffusers reads each component through a memory
map whose pages count as resident while it copies them. Ours reads every weight of the
pipeline once before its steps (`page_in`): a component diffusers leaves mapped from its file
(the text encoder, the VAE, the audio tokenizers, all bfloat16 as stored) is resident only once
read, and a run reads them all at its first validation renders.

A row whose estimate is over the memory this machine has available is skipped with both
numbers.

    .venv/bin/python bench/full_size/ace_step.py [--reduced]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

SONGS = 1  # one song (its conditioning takes the time of a step)
CROPS = {False: 750, True: 150}  # HOT-Step's crop; reduced: a fifth, the same code at less cost
CROP, FRAMES = CROPS[False], CROPS[False] + 50  # the song's latent frames: a crop is drawn
ADAPTERS = {  # HOT-Step's defaults (tunesmith.families.ace_step.config.TYPE_DEFAULTS)
    "lora": ("LoRA r128", {"type": "lora"}),
    "lokr": ("LoKr dim 512 factor 6", {"type": "lokr"}),
}
STEPS = {False: 1, True: 2}  # full size: one step (a minute on a CPU); reduced: one to warm up
DTYPE = "bfloat16"
GB = 1e9
_WIDTH = dict(
    hidden_size=256,
    intermediate_size=768,
    num_attention_heads=8,
    num_key_value_heads=4,
    head_dim=32,
    sliding_window=64,
)


def use_crop(reduced: bool) -> None:
    """The rows' crop and the song's length, for the full size or the reduced form."""
    global CROP, FRAMES
    CROP, FRAMES = CROPS[reduced], CROPS[reduced] + 50


def reduced_model() -> dict[str, dict]:
    """The release's architecture at width 256, depth 4 (the encoders 2), a small VAE and a
    small text encoder; the latent width (64) and the tokens kept."""
    from tunesmith.families.ace_step.full_size import LAYER_TYPES, PUBLISHED

    text = {**PUBLISHED["text_encoder"], "hidden_size": 128, "intermediate_size": 256}
    text.update(num_hidden_layers=2, max_window_layers=2, num_attention_heads=4)
    text.update(num_key_value_heads=2, head_dim=32)
    return {
        "transformer": {
            **PUBLISHED["transformer"],
            **_WIDTH,
            "num_hidden_layers": 4,
            "layer_types": LAYER_TYPES[:4],
            "encoder_hidden_size": 256,
        },
        "condition_encoder": {
            **PUBLISHED["condition_encoder"],
            **_WIDTH,
            "text_hidden_dim": 128,
            "num_lyric_encoder_hidden_layers": 2,
            "num_timbre_encoder_hidden_layers": 2,
        },
        "audio_tokenizer": {**PUBLISHED["audio_tokenizer"], **_WIDTH, "fsq_dim": 256},
        "audio_token_detokenizer": {**PUBLISHED["audio_token_detokenizer"], **_WIDTH},
        "vae": {**PUBLISHED["vae"], "channel_multiples": [1, 1, 1, 1, 1], "decoder_channels": 8},
        "text_encoder": text,
    }


def run_config(kind: str, checkpointing: bool):
    from tunesmith.train.config import resolve_run

    train = {"optimizer": "adamw", "accumulation": 1, "crop_frames": CROP, "epochs": 100}
    if kind == "lokr":
        train["lr"] = 2e-3 / 4  # HOT-Step's lr at accumulation 4, scaled to 1 (config.problems)
    raw = {
        "name": "bench",
        "family": "ace-step",
        "base_model": "bench",
        "adapter": ADAPTERS[kind][1],
        "train": {**train, "gradient_checkpointing": checkpointing},
    }
    return resolve_run(raw, Path("tunesmith.toml"), 0)


def device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def estimate(folder: Path, kind: str, checkpointing: bool) -> float:
    """The run's estimated peak in GB, `folder` holding the component configs."""
    from tunesmith.families.ace_step import FAMILY
    from tunesmith.train.footprint import process_bytes

    run = run_config(kind, checkpointing)
    runtime = 0 if device() == "cuda" else process_bytes()
    model = FAMILY.memory(run, folder, getattr(torch, DTYPE))
    return model.estimate(run, runtime=runtime).total / GB


def available() -> float:
    """GB this machine has free for a row: the GPU's on CUDA, else the RAM's."""
    if device() == "cuda":
        return torch.cuda.mem_get_info()[0] / GB
    import psutil

    return psutil.virtual_memory().available / GB


def rows(work: Path, reduced: bool, checkpointing_modes=(True, False)) -> list[dict]:
    from tunesmith.families.ace_step import full_size

    use_crop(reduced)
    folder = full_size.write_base_model(work / "model", reduced_model() if reduced else None)
    size = "reduced " if reduced else ""
    found = []
    for kind, (name, _) in ADAPTERS.items():
        for checkpointing in checkpointing_modes:
            setting = f"{size}{name}, crop {CROP}"
            expected, free = estimate(folder, kind, checkpointing), available()
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
                side: _child(side, folder, work, kind, checkpointing, reduced)
                for side in ("ours", "bare")
            }
            found.append(
                {
                    "setting": setting,
                    "checkpointing": checkpointing,
                    "estimate_gb": sides["ours"]["estimate_gb"],
                    "peak_gb": sides["ours"]["peak_gb"],
                    "ours_s": sides["ours"]["seconds"],
                    "bare_s": sides["bare"]["seconds"],
                }
            )
    return found


def _child(side: str, folder: Path, work: Path, kind: str, on: bool, reduced: bool) -> dict:
    from bench.sdxl_step import MALLOC

    scratch = work / f"{side}-{kind}-{on}"
    scratch.mkdir()
    command = [sys.executable, __file__, "--child", side, "--model", str(folder)]
    command += ["--work", str(scratch), "--adapter", kind]
    command += ["--checkpointing"] * on + ["--reduced"] * reduced
    out = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **MALLOC})
    if out.returncode:
        raise RuntimeError(f"the {side} child failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def songs(folder: Path, work: Path):
    """`SONGS` random songs as the `encoded` stage's rows, at the folder's widths: latents of
    `FRAMES` frames, caption and lyrics states as long as the pipeline takes them."""
    import pandas as pd

    from tunesmith.families.ace_step.full_size import read_configs
    from tunesmith.families.ace_step.model import MAX_CAPTION_TOKENS, MAX_LYRICS_TOKENS
    from tunesmith.store.tensors import write_safetensors

    configs = read_configs(folder)
    latent = configs["transformer"]["audio_acoustic_hidden_dim"]
    text = configs["condition_encoder"]["text_hidden_dim"]
    g, rows = torch.Generator().manual_seed(1), []
    for i in range(SONGS):
        paths = {k: work / f"{k}{i}.safetensors" for k in ("latents", "caption", "lyrics")}
        write_safetensors(paths["latents"], {"latents": torch.randn(FRAMES, latent, generator=g)})
        for key, length in (("caption", MAX_CAPTION_TOKENS), ("lyrics", MAX_LYRICS_TOKENS)):
            states = torch.randn(length, text, generator=g)
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


def _shaped(kind: str, checkpointing: bool, reduced: bool):
    """bench/ace_step_step.py sized for this row: its constants, songs and run."""
    from bench import ace_step_step as step
    from tunesmith.families.ace_step.config import TYPE_DEFAULTS

    step.RANK = TYPE_DEFAULTS["lora"]["rank"]  # its bare LoRA: r = RANK, alpha = 2 x RANK
    step.SONGS, step.FRAMES, step.CROP = SONGS, FRAMES, CROP
    step.WARMUP = STEPS[reduced] - 1
    step.songs = songs
    step.run_config = lambda: run_config(kind, checkpointing)
    return step


@contextmanager
def _row_adapter(kind: str, checkpointing: bool):
    """The bare loop's `dit.add_adapter(LoraConfig(...))` adds the row's adapter on the layers
    it chose, then turns on diffusers' checkpointing where the row has it, as its user would."""
    from diffusers import AceStepTransformer1DModel
    from peft import LoKrConfig

    from tunesmith.families.ace_step.config import TYPE_DEFAULTS

    original = AceStepTransformer1DModel.add_adapter

    def add_adapter(dit, config, adapter_name: str = "default") -> None:
        if kind == "lokr":
            dim = TYPE_DEFAULTS["lokr"]["rank"]
            config = LoKrConfig(
                r=dim,
                alpha=dim,
                decompose_factor=6,
                target_modules=config.target_modules,
                init_weights="lycoris",
            )
        original(dit, config, adapter_name)
        if checkpointing:
            dit.enable_gradient_checkpointing()

    AceStepTransformer1DModel.add_adapter = add_adapter
    try:
        yield
    finally:
        AceStepTransformer1DModel.add_adapter = original


def child(side: str, folder: Path, work: Path, kind: str, on: bool, reduced: bool) -> dict:
    from bench.sdxl_step import PeakMemory, page_in
    from bench.steps import timed_step

    step = _shaped(kind, on, reduced)
    if device() == "cpu":  # one thread, timed by its CPU time: the machine's load falls on neither
        torch.set_num_threads(1)
    out = {}
    if side == "ours":
        out["estimate_gb"] = estimate(folder, kind, on)  # before anything is loaded
        trainer = step.ours(folder, work, device(), DTYPE)
        for component in trainer.pipe.components.values():
            if isinstance(component, torch.nn.Module):
                page_in(component)
        run = trainer.step
    else:
        with _row_adapter(kind, on):
            run, _ = step.bare(folder, work, device(), DTYPE)
    with PeakMemory(device()) as memory:
        out["seconds"] = timed_step(run, device(), step.WARMUP)
    peak = memory.start + memory.added if device() == "cuda" else memory.peak
    return {**out, "peak_gb": peak / GB}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reduced", action="store_true")
    parser.add_argument("--child", choices=["ours", "bare"])
    parser.add_argument("--model", type=Path)
    parser.add_argument("--work", type=Path)
    parser.add_argument("--adapter", choices=sorted(ADAPTERS), default="lora")
    parser.add_argument("--checkpointing", action="store_true")
    args = parser.parse_args()
    if args.child:
        use_crop(args.reduced)
        torch.manual_seed(0)
        found = child(
            args.child, args.model, args.work, args.adapter, args.checkpointing, args.reduced
        )
        print(json.dumps(found))
        return
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tunesmith-ace-step-") as work:
        for row in rows(Path(work), args.reduced):
            print(json.dumps(row))


if __name__ == "__main__":
    main()
