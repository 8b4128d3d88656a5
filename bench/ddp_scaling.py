"""Data-parallel scaling on this machine: Stable Audio 3 training samples per second on one
process and on two gloo ranks (torchrun, through the training child), and their ratio.

Both train the same run (the "tiny but not trivial" DiT of `train_step.py`, a `lora` of
rank 16, global batch 4, crop 256) on the CPU, each rank with one thread: the two-rank run
does the work of the one-process run on two cores, less what the gradient all-reduce and
the second process cost. Samples per second count the training steps only (no model load,
no validation), as the loop times them. On a machine whose cores are shared with other work
the ratio says more about the neighbours than about DDP; the core count is printed with it.

    .venv/bin/python bench/ddp_scaling.py [--steps 30] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["OMP_NUM_THREADS"] = "1"  # one thread per rank: the ranks are the parallelism
# The ranks run `python -m pipelines.train_child` from wherever this was started.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402

from bench.train_step import CROP, RANK, make_model  # noqa: E402

BATCH = 4
PLACEMENT = {"backend": "torch", "device": "cpu", "dtype": "float32"}


def items(folder: Path, count: int = 8) -> pd.DataFrame:
    """Encoded clips as the `encoded` stage stores them: latents and a sidecar each."""
    g, rows = torch.Generator().manual_seed(0), []
    for i in range(count):
        frames = CROP + 64 * (i % 3)
        latents, sidecar = folder / f"clip{i}.npy", folder / f"clip{i}.json"
        np.save(latents, torch.randn(16, frames, generator=g).numpy())
        sidecar.write_text(
            json.dumps({"padding_mask": [True] * frames, "seconds_total": frames * 4096 / 44100})
        )
        rows.append(
            {
                "path": f"clip{i}.wav",
                "latents": str(latents),
                "sidecar": str(sidecar),
                "pieces": json.dumps([f"Prompt: a loop number {i}"]),
            }
        )
    return pd.DataFrame(rows)


def extras(model: Path, frame: pd.DataFrame, run_dir: Path, steps: int, devices: int) -> dict:
    from tunesmith.train.config import resolve_run

    raw = {
        "name": "bench",
        "family": "stable-audio-3",
        "base_model": str(model),
        "adapter": {"type": "lora", "rank": RANK},
        "train": {
            "steps": steps,
            "batch_size": BATCH,
            "latent_crop_length": CROP,
            "eval_every": steps,
            "checkpoint_every": steps,
            "holdout": 1,
            "devices": devices,
        },
        "demos": [{"prompt": "a loop", "duration": 0.5, "steps": 1}],
    }
    run = asdict(resolve_run(raw, Path("tunesmith.toml"), 0))
    run["adapter"] = {k: list(v) if isinstance(v, tuple) else v for k, v in run["adapter"].items()}
    return {
        "run": run,
        "config_source": "tunesmith.toml",
        "base_model": str(model),
        "items": json.loads(frame.to_json(orient="records")),
        "run_dir": str(run_dir),
        "result_path": str(run_dir / "result.json"),
        "placement": PLACEMENT,
        "metadata": {"tunesmith.base_model_fingerprint": "bench"},
    }


def samples_per_second(extra: dict, devices: int) -> float:
    from pipelines import train_child
    from tunesmith.backends.placement import Placement
    from tunesmith.families.stable_audio_3.trainer import TorchTrainer
    from tunesmith.train import loop
    from tunesmith.train.config import resolve_run

    run_dir = Path(extra["run_dir"])
    if devices == 1:
        torch.set_num_threads(1)
        run = resolve_run(extra["run"], Path("tunesmith.toml"), 0)
        trainer = TorchTrainer(
            run,
            Path(extra["base_model"]),
            pd.DataFrame(extra["items"]),
            run_dir,
            Placement(**PLACEMENT, reason="bench"),
            extra["metadata"],
        )
        with open(os.devnull, "w") as quiet:
            result = loop.train(trainer, run_dir, log=lambda _: None, progress=quiet)
        return result.steps_per_second * BATCH
    train_child.launch(extra, 0, lambda _: None)
    result = json.loads(Path(extra["result_path"]).read_text())
    return result["steps_per_second"] * BATCH


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="2 steps: that it runs, no more")
    args = parser.parse_args()
    steps = 2 if args.quick else args.steps
    with tempfile.TemporaryDirectory(prefix="ddp-scaling-") as tmp:
        tmp = Path(tmp)
        make_model(tmp / "model")
        frame = items(tmp)
        rates = {
            devices: samples_per_second(
                extras(tmp / "model", frame, tmp / f"run{devices}", steps, devices), devices
            )
            for devices in (1, 2)
        }
    print(f"ddp_scaling: {os.cpu_count()} cores, global batch {BATCH}, {steps} steps, gloo")
    print(f"  1 process : {rates[1]:.2f} samples/s")
    print(f"  2 ranks   : {rates[2]:.2f} samples/s")
    print(f"  ratio 2/1 : {rates[2] / rates[1]:.2f} (ideal 2.00)")


if __name__ == "__main__":
    main()
