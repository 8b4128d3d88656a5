"""Stable Audio 3 on MLX on two ranks of this machine, through the training child's
`mlx.launch --backend ring` launch: the same per-step losses and adapter as one MLX process
with the same global batch, to 1e-5 relative in float32. Not bit for bit: each rank sums its
items' weighted losses and the ranks' gradients are then summed and halved
(`nn.average_gradients`), another order than one process's mean over the batch, and the DiT's
matrix products run on batches of another size. The batch of 3 splits unevenly (2 and 1), so a
rank that averaged over its own items instead of weighting by the global batch would fail.
A killed rank is named and the next run resumes on two ranks (not on one), a rank that stops
with a reason is named with it, and an MLX run on several machines is refused. The ACE-Step
planner on MLX (mlx-lm) likewise matches one process, through a window a rank has no item of."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from pipelines import train_child
from tests.families.ace_step_planner.test_planner_trainer import (  # noqa: F401 (a fixture)
    PLANNER_RUN,
    planner_encoded,
)
from tests.train.test_distributed import (  # noqa: F401 (fixtures)
    LINEAGE,
    STEPS,
    assert_close,
    killed_rank_resumes,
    losses,
    one_thread,
    raw_run,
    relative,
    sa3_items,
)
from tests.train.test_distributed import extras as torch_extras
from tunesmith import family as families
from tunesmith.backends.placement import Placement
from tunesmith.families.stable_audio_3.mlx.trainer import MlxTrainer
from tunesmith.train import loop
from tunesmith.train.config import ConfigError, resolve_run
from tunesmith.train.trainer import TrainingError

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(train_child.mlx_launcher() is None, reason="mlx.launch is not installed"),
]
MLX = Placement("mlx", "cpu", "float32", "test")


@pytest.fixture
def clips(sa3_items):  # noqa: F811 (the fixture imported above, by its name)
    """The torch test's six encoded clips."""
    return sa3_items


def extras(raw: dict, model: Path, items, run_dir: Path) -> dict:
    return {**torch_extras(raw, model, items, run_dir), "placement": MLX.as_dict()}


def one_process(raw: dict, model: Path, items, run_dir: Path):
    run = resolve_run(raw, Path("tunesmith.toml"), 0)
    trainer = MlxTrainer(run, model, items, run_dir, MLX, LINEAGE)
    return loop.train(trainer, run_dir, log=lambda _: None)


def test_two_mlx_ranks_train_what_one_mlx_process_trains(tiny_sa3, clips, tmp_path):
    raw = raw_run("stable-audio-3", tiny_sa3, batch_size=3)
    single = one_process(raw, tiny_sa3, clips, tmp_path / "one")
    lines: list[str] = []
    two = extras(
        raw_run("stable-audio-3", tiny_sa3, batch_size=3, devices=2),
        tiny_sa3,
        clips,
        tmp_path / "two",
    )
    train_child.launch(two, 0, lines.append)

    result = json.loads((tmp_path / "two" / "result.json").read_text())
    assert result["world_size"] == 2 and result["steps"] == STEPS
    ours, theirs = losses(tmp_path / "two"), losses(tmp_path / "one")
    assert len(ours) == len(theirs) == STEPS
    worst = max(relative([a], [b]) for a, b in zip(ours, theirs, strict=True))
    for step, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        assert_close([a], [b], f"the loss of step {step + 1}")
    mine, one = load_file(result["last_path"]), load_file(single.last_path)
    assert mine.keys() == one.keys()
    whole = [torch.cat([x[k].flatten().double() for k in sorted(x)]) for x in (mine, one)]
    # B starts at zero, so it is what the steps trained (A and m hardly move from their start).
    # Looser than 1e-5: AdamW divides each element by its own running size, which magnifies
    # the rounding of near-zero gradients (1.4e-5 measured; 0.4 with no gradient averaging).
    trained = [
        torch.cat([x[k].flatten().double() for k in sorted(x) if k.endswith("lora_B")])
        for x in (mine, one)
    ]
    each = max(relative(mine[k], one[k]) for k in mine)
    print(
        f"relative difference: worst loss {worst:.3g}, adapter {relative(*whole):.3g}, "
        f"B {relative(*trained):.3g}, worst tensor {each:.3g}"
    )
    assert_close(*whole, "the adapter")
    assert relative(*trained) <= 1e-3, f"the adapter's B: relative difference {relative(*trained)}"
    assert any("under mlx.launch" in line for line in lines), lines
    assert any(line.startswith("[rank 1] rank 1 of 2") for line in lines), lines
    assert any(line.startswith("rank 0 of 2") for line in lines), lines
    assert any(f"step {STEPS} validation loss" in line for line in lines), lines
    assert not list((tmp_path / "two" / "ranks").glob("rank-*.error"))


def test_a_killed_mlx_rank_is_named_and_the_next_run_resumes(tiny_sa3, clips, tmp_path):
    killed_rank_resumes(tiny_sa3, clips, tmp_path / "run", extras, one_process)


def test_a_state_of_one_mlx_process_does_not_resume_on_two(tiny_sa3, clips, tmp_path):
    one_process(raw_run("stable-audio-3", tiny_sa3, steps=2), tiny_sa3, clips, tmp_path)
    two = extras(raw_run("stable-audio-3", tiny_sa3, devices=2, steps=4), tiny_sa3, clips, tmp_path)
    with pytest.raises(
        TrainingError,
        match=r"training rank \d \(local rank \d, pid \d+\) "
        r"stopped: .*cannot resume: the saved run was trained on 1 "
        r"process\(es\), this run has 2",
    ):
        train_child.launch(two, 0, lambda _: None)


def test_an_mlx_run_on_several_machines_is_refused(tiny_sa3, clips, tmp_path):
    raw = raw_run("stable-audio-3", tiny_sa3, devices=1, nodes=2, master_addr="h")
    with pytest.raises(ConfigError, match=r"MLX backend trains on one machine.*train.nodes"):
        train_child.launch(extras(raw, tiny_sa3, clips, tmp_path), 0, lambda _: None)
    assert not (tmp_path / "launch.json").exists()


def test_the_ranks_end_is_read_from_mlx_launch(tmp_path):
    """mlx.launch exits 0 whatever its ranks do: its lines say which failed, and how."""
    (tmp_path / "rank-0.log").write_text("rank 0 of 2 on h (pid 11, mlx:cpu) started\n")
    (tmp_path / "rank-1.log").write_text("rank 1 of 2 on h (pid 12, mlx:cpu) started\n")
    line = "\x1b[33m[WARN] Node with rank 1 exited with code -9 \x1b[0m\n"
    found = train_child._MLX_END.search(line)
    assert found and found.groups() == ("1", "-9")
    said = train_child._failed_mlx({1: -9, 0: 1}, tmp_path)
    assert said == (
        "training rank 1 (local rank 1, pid 12) was ended by SIGKILL; training "
        "rank 0 (local rank 0, pid 11) exited with code 1 (its traceback is in "
        "the run's log)"
    )
    (tmp_path / "rank-0.error").write_text("out of memory")
    assert train_child._failed_mlx({1: -15, 0: 1}, tmp_path).startswith(
        "training rank 0 (local rank 0, pid 11) stopped: out of memory; training rank 1"
    )


# --- the ACE-Step planner LM on MLX (mlx-lm) --------------------------------------------------


def planner_extras(raw: dict, models: Path, frame, run_dir: Path) -> dict:
    run = asdict(resolve_run(raw, Path("tunesmith.toml"), 0))
    run["adapter"] = {k: list(v) if isinstance(v, tuple) else v for k, v in run["adapter"].items()}
    return {
        "run": run,
        "config_source": "tunesmith.toml",
        "base_model": str(models / "tiny"),
        "items": json.loads(frame.to_json(orient="records")),
        "run_dir": str(run_dir),
        "result_path": str(run_dir / "result.json"),
        "placement": MLX.as_dict(),
        "metadata": LINEAGE,
    }


@pytest.fixture
def planner_data(planner_encoded):  # noqa: F811 (the fixture imported above, by its name)
    """The planner tests' encoded frame of five clips, and the models root."""
    return planner_encoded


def test_two_mlx_ranks_train_the_planner_as_one_process(planner_data, tmp_path):
    """The planner's windows of 3 over its 4 training songs: 3 then 1, so in every other
    window rank 1 has no song and joins at weight 0."""
    frame, models = planner_data
    raw = {
        **PLANNER_RUN,
        "train": {
            **PLANNER_RUN["train"],
            "accumulation": 3,
            "steps": 6,
            "eval_every": 6,
            "checkpoint_every": 6,
        },
    }
    run = resolve_run(raw, Path("tunesmith.toml"), 0)
    (tmp_path / "one").mkdir()
    make = families.get("ace-step-planner").trainer("mlx")
    trainer = make(run, models / "tiny", frame, tmp_path / "one", MLX, LINEAGE)
    assert "4 training songs, 2 steps an epoch" in trainer.start_note, trainer.start_note
    loop.train(trainer, tmp_path / "one", log=lambda _: None, progress=open(os.devnull, "w"))
    two = {**raw, "train": {**raw["train"], "devices": 2}}
    train_child.launch(planner_extras(two, models, frame, tmp_path / "two"), 0, lambda _: None)

    result = json.loads((tmp_path / "two" / "result.json").read_text())
    assert result["world_size"] == 2 and result["steps"] == 6
    ours, theirs = losses(tmp_path / "two"), losses(tmp_path / "one")
    assert len(ours) == len(theirs) == 6
    worst = max(relative([a], [b]) for a, b in zip(ours, theirs, strict=True))
    for step, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        assert_close([a], [b], f"the loss of step {step + 1}")
    mine, one = (
        load_file(tmp_path / side / "state" / "step=6" / "state.safetensors")
        for side in ("two", "one")
    )
    params = sorted(k for k in one if k.startswith("param."))
    assert params and mine.keys() == one.keys()
    whole = [torch.cat([x[k].flatten().double() for k in params]) for x in (mine, one)]
    print(f"planner relative difference: worst loss {worst:.3g}, adapter {relative(*whole):.3g}")
    assert_close(*whole, "the planner's adapter")
