"""`tunesmith render` against a bare diffusers script doing the same render, in one run.

The rings and songs examples (the tiny SDXL and the tiny ACE-Step 1.5) are built once with a
short training (`tunesmith`'s job, in this process), then for each run its first demo's prompt,
seed, steps and guidance are rendered with its best adapter by, alternately, in fresh
processes:

- ours: `python -m pipelines.cli render DATASET RUN --prompt …`, the whole command: finding the
  dataset, the run and its adapter, loading the family's renderer, rendering, and writing what
  the renders stage writes (SDXL: PNG and sidecar; ACE-Step: WAV, MP3 where ffmpeg is present,
  spectrogram and sidecar);
- bare: what a user writes by hand: `StableDiffusionXLPipeline` / `AceStepPipeline`
  `.from_pretrained` on the same folder, the adapter with diffusers' own `load_lora_weights`
  and `set_adapters`, one call with the same settings and generator, the picture saved with
  PIL or the samples with soundfile.

Both render the same thing: the bare picture's pixels equal ours, and ours' WAV is the bare
samples as the renders stage writes them (`wav_bytes`); the benchmark stops if not. Stable Audio
3 is not timed: its adapters are underfit's files, which no diffusers loader reads.

Printed per run: each side's seconds, process start to exit (the best of `--rounds`, each
round both sides, alternated), as CPU time of the process (user and system; on a machine shared
with other busy processes this moves less than the wall time, printed beside it) and the ratio
ours / bare (goal ≤ 1.3). Both children run with one torch/OpenMP thread (`--threads`). With
tiny models most of either side is importing torch, diffusers and transformers; the difference
is what the command does besides. tests/test_bench.py runs `--quick` (one round, two inference
steps, the examples built up to their adapters), which checks that the benchmark runs and
measures nothing worth reading.

    .venv/bin/python bench/render.py [--rounds 3] [--threads 1] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ROUNDS = 3
GOAL = 1.3


def build(root: Path, quick: bool) -> dict[str, dict]:
    """The rings and songs examples with a short training, built by the job under `root`;
    returns per run what both sides render: dataset, model, adapter and the first demo."""
    import dagster as dg
    import pandas as pd

    from pipelines.definitions import defs
    from tunesmith.examples import RINGS_TOML, SONGS_TOML, TINY_ACE_STEP, TINY_SDXL
    from tunesmith.examples.rings import make_rings
    from tunesmith.examples.songs import make_songs
    from tunesmith.families.ace_step.tiny import make_tiny_ace_step
    from tunesmith.families.sdxl.tiny import make_tiny_sdxl
    from tunesmith.train.config import read_plan

    datasets, models = root / "datasets", root / "models"
    make_tiny_sdxl(models / TINY_SDXL)
    make_tiny_ace_step(models / TINY_ACE_STEP)
    make_rings(datasets / "rings", count=4)
    make_songs(datasets / "songs")
    rings = RINGS_TOML.replace("steps = 200", "steps = 2")
    songs = SONGS_TOML.split("# The planner LM")[0].replace("epochs = 60", "epochs = 1")
    if quick:
        rings = rings.replace("steps = 20", "steps = 2")
        songs = songs.replace("steps = 8", "steps = 2").replace("duration = 8.0", "duration = 2.0")
    (datasets / "rings" / "tunesmith.toml").write_text(rings)
    (datasets / "songs" / "tunesmith.toml").write_text(songs)
    job = defs.resolve_job_def("build_dataset")
    quiet = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
    # --quick: the stages up to the adapters, all that both sides render from (the renders
    # stage's own renders and the auditions are not compared)
    stages = ("manifest", "labels", "encoded", "adapters")
    selection = [dg.AssetKey(stage) for stage in stages] if quick else None
    found = {}
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("datasets", ["rings", "songs"])
        for dataset in ("rings", "songs"):
            result = job.execute_in_process(
                instance=instance,
                partition_key=dataset,
                run_config=quiet,
                asset_selection=selection,
            )
            assert result.success, dataset
            out = root / "out" / dataset
            (run,) = read_plan(out).runs
            (row,) = pd.read_parquet(out / "adapters.parquet").to_dict("records")
            demo = run.demos[0]
            found[run.name] = {
                "dataset": dataset,
                "family": run.family,
                "model": str(models / run.base_model),
                "adapter": row["best_path"],
                "run_dir": row["run_dir"],
                "demo": asdict(demo),
                "size": getattr(run.train, "size", None),
            }
    return found


def bare_sdxl(case: dict, out: Path) -> None:
    import torch
    from diffusers import StableDiffusionXLPipeline

    demo, adapter = case["demo"], Path(case["adapter"])
    pipe = StableDiffusionXLPipeline.from_pretrained(
        case["model"], dtype=torch.float32, use_safetensors=True, local_files_only=True
    )
    pipe.set_progress_bar_config(disable=True)
    pipe.load_lora_weights(str(adapter.parent), weight_name=adapter.name, adapter_name="mine")
    pipe.set_adapters(["mine"], adapter_weights=[demo["strength"]])
    image = pipe(
        prompt=demo["prompt"],
        height=case["size"],
        width=case["size"],
        num_inference_steps=demo["steps"],
        guidance_scale=demo["cfg"],
        generator=torch.Generator().manual_seed(demo["seed"]),
    ).images[0]
    image.save(out / "bare.png")


def bare_ace_step(case: dict, out: Path) -> None:
    import soundfile
    import torch
    from diffusers import AceStepPipeline

    demo, folder = case["demo"], Path(case["adapter"]).parent
    pipe = AceStepPipeline.from_pretrained(
        case["model"], dtype=torch.float32, use_safetensors=True, local_files_only=True
    )
    pipe.set_progress_bar_config(disable=True)
    pipe.load_lora_weights(
        str(folder), weight_name="adapter_model.safetensors", adapter_name="mine"
    )
    pipe.set_adapters(["mine"], adapter_weights=[demo["strength"]])
    audio = pipe(
        prompt=demo["prompt"],
        lyrics=demo["lyrics"] or "[Instrumental]",
        audio_duration=float(demo["duration"]),
        vocal_language=demo["language"],
        num_inference_steps=demo["steps"],
        guidance_scale=demo["cfg"],
        shift=demo["shift"],
        generator=torch.Generator().manual_seed(demo["seed"]),
    ).audios[0]
    rate = pipe.vae.config.sampling_rate
    samples = audio.float().numpy()[:, : round(demo["duration"] * rate)]
    soundfile.write(out / "bare.wav", samples.T, rate, subtype="FLOAT")


BARE = {"sdxl": bare_sdxl, "ace-step": bare_ace_step}


def timed(command: list[str], env: dict) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one child process, start to exit."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout[-2000:]}{done.stderr[-4000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def same_render(case: dict, out: Path) -> None:
    """Stop unless ours and the bare script rendered the same picture or samples."""
    import numpy as np

    from tunesmith.render.adhoc import slug

    demo = case["demo"]
    name = f"{slug(demo['prompt'])}-seed{demo['seed']}-s{demo['strength']:g}"
    ours = Path(case["run_dir"]) / "renders" / name
    if case["family"] == "sdxl":
        from PIL import Image

        a = np.asarray(Image.open(out / "bare.png").convert("RGB"))
        b = np.asarray(Image.open(ours.with_name(ours.name + ".png")).convert("RGB"))
        assert np.array_equal(a, b), "the pictures differ"
        return
    import soundfile

    from tunesmith.media.writers import wav_bytes

    samples, rate = soundfile.read(out / "bare.wav", dtype="float32", always_2d=True)
    expected = wav_bytes(samples.T, rate)
    assert ours.with_name(ours.name + ".wav").read_bytes() == expected, "the samples differ"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="processes of each side")
    parser.add_argument("--threads", type=int, default=1, help="torch/OpenMP threads a child")
    parser.add_argument("--quick", action="store_true", help="one round, 2 steps: check only")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # a bare side: its case as JSON
    args = parser.parse_args()
    if args.child:
        case = json.loads(args.child)
        BARE[case["family"]](case, Path(case["out"]))
        return
    rounds = 1 if args.quick else args.rounds
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        roots = {f"TUNESMITH_{n.upper()}": str(root / n) for n in ("datasets", "out", "store")}
        roots["TUNESMITH_MODELS"] = str(root / "models")
        os.environ.update(roots)
        cases = build(root, args.quick)
        threads = str(args.threads)
        env = {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
        print(f"one process a side, {threads} torch thread(s), best of {rounds} round(s)")
        for run, case in cases.items():
            case["out"] = str(root / f"bare-{run}")
            Path(case["out"]).mkdir()
            ours = [sys.executable, "-m", "pipelines.cli", "render", case["dataset"], run]
            ours += ["--prompt", case["demo"]["prompt"]]
            bare = [sys.executable, __file__, "--child", json.dumps(case)]
            times = {"bare": [], "ours": []}
            for _ in range(rounds):
                for side, command in (("bare", bare), ("ours", ours)):
                    times[side].append(timed(command, env))
            same_render(case, Path(case["out"]))
            (b_cpu, b_wall), (o_cpu, o_wall) = min(times["bare"]), min(times["ours"])
            print(
                f"{run} ({case['family']}, {case['demo']['steps']} steps): "
                f"bare {b_cpu:.2f} s CPU ({b_wall:.2f} s wall), "
                f"ours {o_cpu:.2f} s CPU ({o_wall:.2f} s wall), "
                f"ratio (ours/bare) {o_cpu / b_cpu:.3f} CPU, {o_wall / b_wall:.3f} wall  "
                f"(goal ≤ {GOAL})"
            )


if __name__ == "__main__":
    main()
