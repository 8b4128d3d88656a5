"""Data-parallel training on two gloo ranks of this machine, through the training child's
torchrun launch: the same per-step losses and adapter as one process with the same global
batch (to 1e-5 relative: the batch's sums are taken per rank, then over the ranks, so not
bit for bit), every rank's first line in the log, a killed rank named, and the next run
resuming from the saved state."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from pipelines import train_child
from tunesmith.backends.placement import Placement
from tunesmith.family import get
from tunesmith.train import loop
from tunesmith.train.config import ConfigError, resolve_run
from tunesmith.train.state import ResumeError
from tunesmith.train.trainer import TrainingError

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
CPU = Placement("torch", "cpu", "float32", "test")
LINEAGE = {"tunesmith.base_model_fingerprint": "fp"}
STEPS = 10


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Two ranks share this machine's cores; tiny models run fastest on one thread each."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    old = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"
    yield
    torch.set_num_threads(threads)
    if old is None:
        os.environ.pop("OMP_NUM_THREADS")
    else:
        os.environ["OMP_NUM_THREADS"] = old


@pytest.fixture(scope="module")
def sdxl_items(tiny_sdxl, tmp_path_factory) -> pd.DataFrame:
    from tunesmith.dataset.labels import build_labels
    from tunesmith.dataset.manifest import build_manifest
    from tunesmith.examples.rings import make_rings
    from tunesmith.families.sdxl import FAMILY
    from tunesmith.family import EncodeRequest
    from tunesmith.store import Store
    from tunesmith.train.config import resolve_run

    root = tmp_path_factory.mktemp("rings")
    folder, store = root / "rings", Store(root / "store")
    make_rings(folder, count=6)
    manifest, _ = build_manifest(folder, root / "hashes.json")
    labels = build_labels(folder, manifest, store).frame
    raw = {"family": "sdxl", "base_model": str(tiny_sdxl), "train": {"size": 64}}
    runs = [resolve_run(raw, Path("tunesmith.toml"), 0)]
    request = EncodeRequest(
        folder, labels, runs, [tiny_sdxl], root / "out", store, CPU, root / "fp.json"
    )
    built = FAMILY.encode(request)
    return built.frame.sort_values("path")


@pytest.fixture(scope="module")
def sa3_items(tmp_path_factory) -> pd.DataFrame:
    """Six encoded clips as the `encoded` stage stores them: latents and a sidecar each."""
    root = tmp_path_factory.mktemp("clips")
    g, rows = torch.Generator().manual_seed(3), []
    for i, frames in enumerate((40, 70, 90, 40, 70, 90)):
        latents = root / f"song{i}.npy"
        np.save(latents, torch.randn(16, frames, generator=g).numpy())
        sidecar = root / f"song{i}.json"
        sidecar.write_text(
            json.dumps({"padding_mask": [True] * frames, "seconds_total": frames * 4096 / 44100})
        )
        pieces = json.dumps([f"Title: song {i}", f"Prompt: a loop number {i}"])
        rows.append(
            {
                "path": f"song{i}.wav",
                "latents": str(latents),
                "sidecar": str(sidecar),
                "pieces": pieces,
            }
        )
    return pd.DataFrame(rows)


def raw_run(family: str, model: Path, **train) -> dict:
    common = {
        "steps": STEPS,
        "lr": 1e-3,
        "batch_size": 2,
        "eval_every": STEPS,
        "checkpoint_every": STEPS,
        **train,
    }
    if family == "sdxl":
        return {
            "name": "r",
            "family": "sdxl",
            "base_model": str(model),
            "trigger": "rng",
            "train": {"size": 64, **common},
            "demos": [{"prompt": "rng, a disc", "steps": 1}],
        }
    return {
        "name": "r",
        "family": "stable-audio-3",
        "base_model": str(model),
        "trigger": "zq",
        "adapter": {"type": "dora-rows", "rank": 4},
        "train": {"latent_crop_length": 48, **common},
        "demos": [{"prompt": "zq, a loop", "steps": 1, "duration": 0.5}],
    }


def extras(raw: dict, model: Path, items: pd.DataFrame, run_dir: Path) -> dict:
    run = resolve_run(raw, Path("tunesmith.toml"), 0)
    document = asdict(run)
    document["adapter"] = {
        k: list(v) if isinstance(v, tuple) else v for k, v in document["adapter"].items()
    }
    return {
        "run": document,
        "config_source": "tunesmith.toml",
        "base_model": str(model),
        "items": json.loads(items.to_json(orient="records")),
        "run_dir": str(run_dir),
        "result_path": str(run_dir / "result.json"),
        "placement": CPU.as_dict(),
        "metadata": LINEAGE,
    }


def one_process(raw: dict, model: Path, items: pd.DataFrame, run_dir: Path):
    run = resolve_run(raw, Path("tunesmith.toml"), 0)
    trainer = get(run.family).trainer("torch")(run, model, items, run_dir, CPU, LINEAGE)
    return loop.train(trainer, run_dir, log=lambda _: None)


def losses(run_dir: Path) -> list[float]:
    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    return [e["loss"] for e in events if e["event"] == "step"]


def relative(a, b) -> float:
    """‖a − b‖ / ‖b‖ (a tensor's elements near zero make an element-wise ratio meaningless:
    AdamW divides each gradient by its own running size)."""
    a, b = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def assert_close(a, b, what: str) -> None:
    difference = relative(a, b)
    assert difference <= 1e-5, f"{what}: relative difference {difference:.3g}"


@pytest.mark.parametrize("family", ["sdxl", "stable-audio-3"])
def test_two_ranks_train_what_one_process_trains(
    family, tiny_sdxl, tiny_sa3, sdxl_items, sa3_items, tmp_path
):
    model, items = (tiny_sdxl, sdxl_items) if family == "sdxl" else (tiny_sa3, sa3_items)
    single = one_process(raw_run(family, model), model, items, tmp_path / "one")
    lines: list[str] = []
    two = extras(raw_run(family, model, devices=2), model, items, tmp_path / "two")
    train_child.launch(two, 0, lines.append)

    result = json.loads((tmp_path / "two" / "result.json").read_text())
    assert result["world_size"] == 2 and result["steps"] == STEPS
    assert len(losses(tmp_path / "one")) == len(losses(tmp_path / "two")) == STEPS
    for step, (a, b) in enumerate(
        zip(losses(tmp_path / "two"), losses(tmp_path / "one"), strict=True)
    ):
        assert_close([a], [b], f"the loss of step {step + 1}")
    ours, theirs = load_file(result["last_path"]), load_file(single.last_path)
    assert ours.keys() == theirs.keys()
    whole = [torch.cat([x[k].flatten().double() for k in sorted(x)]) for x in (ours, theirs)]
    trained = [
        torch.cat([x[k].flatten().double() for k in sorted(x) if "lora_B" in k or "lora_up" in k])
        for x in (ours, theirs)
    ]
    each = max(relative(ours[k], theirs[k]) for k in ours)
    print(
        f"relative difference: adapter {relative(*whole):.3g}, "
        f"B {relative(*trained):.3g}, worst tensor {each:.3g}"
    )
    assert_close(*whole, "the adapter")
    assert any(line.startswith("[rank 1] rank 1 of 2") for line in lines), lines
    assert any(line.startswith("rank 0 of 2") for line in lines), lines
    assert any("step 10 validation loss" in line for line in lines), lines
    assert not (tmp_path / "two" / "ranks" / "rank-1.error").exists()


def test_a_killed_rank_is_named_and_the_next_run_resumes(tiny_sa3, sa3_items, tmp_path):
    killed_rank_resumes(tiny_sa3, sa3_items, tmp_path / "run", extras, one_process)


def killed_rank_resumes(model: Path, items, run_dir: Path, extras, one_process) -> None:
    """Rank 1 of a two-rank Stable Audio 3 run killed once a state is saved: the run fails
    naming the rank; the next run resumes on two ranks, and one process is refused. `extras`
    and `one_process` are the backend's (torch here, MLX in test_mlx_distributed.py)."""
    run_dir.mkdir()
    raw = raw_run(
        "stable-audio-3", model, devices=2, steps=400, checkpoint_every=2, eval_every=1000
    )
    (run_dir / "launch.json").write_text(json.dumps(extras(raw, model, items, run_dir)))
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pipelines.train_child",
            "--node-rank",
            "0",
            str(run_dir / "launch.json"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    rank1 = _wait_for(lambda: _pid_once_saved(run_dir), child)
    os.kill(rank1, signal.SIGSTOP)  # rank 0 waits for it in the next all-reduce
    os.kill(rank1, signal.SIGKILL)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 1, out[-2000:] + err[-3000:]
    assert f"training rank 1 (local rank 1, pid {rank1}) was ended by SIGKILL" in err, err[-3000:]
    saved = sorted(int(p.name.split("=")[1]) for p in (run_dir / "state").glob("step=*"))
    assert saved and saved[-1] < 400

    again = extras(
        {**raw, "train": {**raw["train"], "steps": saved[-1] + 2}}, model, items, run_dir
    )
    lines: list[str] = []
    train_child.launch(again, 0, lines.append)
    result = json.loads((run_dir / "result.json").read_text())
    assert result["resumed_from"] == saved[-1] and result["steps"] == saved[-1] + 2
    assert any(line.startswith(f"resuming r from step {saved[-1]}") for line in lines), lines
    with pytest.raises(ResumeError, match=r"trained on 2 process\(es\), this run has 1"):
        one_process(
            {**raw, "train": {**raw["train"], "devices": 1, "steps": saved[-1] + 4}},
            model,
            items,
            run_dir,
        )


def test_a_state_of_one_process_does_not_resume_on_two(tiny_sa3, sa3_items, tmp_path):
    one_process(raw_run("stable-audio-3", tiny_sa3, steps=2), tiny_sa3, sa3_items, tmp_path)
    two = extras(
        raw_run("stable-audio-3", tiny_sa3, devices=2, steps=4), tiny_sa3, sa3_items, tmp_path
    )
    with pytest.raises(
        TrainingError,
        match=r"training rank \d .* stopped: .*cannot resume: the "
        r"saved run was trained on 1 process\(es\), this run has 2",
    ):
        train_child.launch(two, 0, lambda _: None)


def test_the_launch_keys_are_checked(tiny_sa3, tmp_path):
    def problem(family="stable-audio-3", **train):
        with pytest.raises(ConfigError) as caught:
            resolve_run(raw_run(family, tiny_sa3, **train), Path("tunesmith.toml"), 0)
        return str(caught.value)

    assert "train.devices = 0: must be an integer ≥ 1" in problem(devices=0)
    assert "train.nodes > 1 needs train.master_addr" in problem(nodes=2)
    assert "train.batch_size (2) must be at least" in problem(devices=4)
    assert "master_addr must be host or host:port" in problem(nodes=2, master_addr="h:x")
    raw = {"name": "a", "family": "ace-step", "train": {"devices": 8}}
    with pytest.raises(ConfigError, match=r"train.accumulation \(4\) must be at least"):
        resolve_run(raw, Path("tunesmith.toml"), 0)
    ok = resolve_run(
        raw_run("sdxl", tiny_sa3, devices=2, nodes=2, master_addr="h:29400", batch_size=4),
        Path("tunesmith.toml"),
        0,
    )
    args = train_child.torchrun_args(ok.train, 1, tmp_path / "launch.json")
    assert args[:10] == [
        "--nnodes",
        "2",
        "--node-rank",
        "1",
        "--master-addr",
        "h",
        "--master-port",
        "29400",
        "--nproc-per-node",
        "2",
    ]


def _pid_once_saved(run_dir: Path) -> int | None:
    """Rank 1's pid (from its first line) once rank 0 has saved a state."""
    if not list((run_dir / "state").glob("step=*")):
        return None
    first = (run_dir / "ranks" / "rank-1.log").read_text().splitlines()[0]
    return int(first.split("(pid ")[1].split(",")[0])


def _wait_for(probe, child: subprocess.Popen):
    while (found := probe()) is None:
        if child.poll() is not None:
            raise AssertionError(child.stderr.read()[-3000:])
        time.sleep(0.01)
    return found
