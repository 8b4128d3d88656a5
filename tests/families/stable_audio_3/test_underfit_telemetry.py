"""A Stable Audio 3 run's `train.log`: underfit's progress line per step, as its dashboard reads
it, and the gradient norm and adapter magnitude underfit computes.

The regular expressions are data copied from underfit's dashboard (`dashboard/server.py`, the
history parser's `_HISTORY_RE`, `_LR_RE`, `_GN_RE`, `_LM_RE` and `_STEP_PREFIX_RE`), and
`dashboard_points` follows that parser (`_parse_log_lines`: the step from `Step N,`, a line
whose in-epoch count is 0 skipped). `underfit_norms_reference` is underfit's
`_compute_grad_and_lora_norms` (`underfit/training/loop.py`) written out: each tensor's float32
L2 norm read as a Python float, the squares summed in order (a NaN gradient norm left out),
the square root; None where there is nothing to sum.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
import torch
from mlx.utils import tree_flatten

from tests.families.stable_audio_3.test_sa3_training import items, run_config
from tunesmith.backends.placement import Placement
from tunesmith.families.stable_audio_3.mlx import trainer as mlx_train
from tunesmith.families.stable_audio_3.trainer import TorchTrainer, underfit_norms
from tunesmith.train.loop import train

# underfit dashboard/server.py
HISTORY_RE = re.compile(
    r"Epoch (\d+):\s+\d+%.*?(\d+)/(\d+).*?train/loss=([\d.eE+-]+|nan[\d.]*|inf[\d.]*)"
)
LR_RE = re.compile(r"train/lr=([\d.eE+-]+|nan[\d.]*|inf[\d.]*)")
GN_RE = re.compile(r"train/grad_norm=([\d.eE+-]+|nan[\d.]*|inf[\d.]*)")
LM_RE = re.compile(r"train/lora_magnitude=([\d.eE+-]+|nan[\d.]*|inf[\d.]*)")
STEP_PREFIX_RE = re.compile(r"Step (\d+),")

CPU = Placement("torch", "cpu", "float32", "test")
MLX = Placement("mlx", "cpu", "float32", "test")


def dashboard_points(text: str) -> list[dict]:
    """Each line's (step, epoch, loss, lr, grad_norm, lora_magnitude) strings, as the
    dashboard's history parser finds them; every line must be one."""
    points = []
    for line in text.splitlines():
        m = HISTORY_RE.search(line)
        assert m, f"the dashboard does not read {line!r}"
        assert int(m.group(2)) != 0  # the dashboard skips a count of 0
        step = STEP_PREFIX_RE.search(line)
        points.append(
            {
                "step": int(step.group(1)),
                "epoch": int(m.group(1)),
                "loss": m.group(4),
                "lr": LR_RE.search(line).group(1),
                "grad_norm": GN_RE.search(line).group(1),
                "lora_magnitude": LM_RE.search(line).group(1),
            }
        )
    return points


def step_events(run_dir: Path) -> list[dict]:
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == "step"]


def assert_log_is_the_events(run_dir: Path) -> list[dict]:
    points = dashboard_points((run_dir / "train.log").read_text(encoding="utf-8"))
    events = step_events(run_dir)
    assert [p["step"] for p in points] == [e["step"] for e in events]
    for point, event in zip(points, events, strict=True):
        assert point["loss"] == f"{event['loss']:.6f}"
        assert point["lr"] == f"{event['lr']:.3e}"
        assert point["grad_norm"] == f"{event['grad_norm']:.6f}"
        assert point["lora_magnitude"] == f"{event['lora_magnitude']:.6f}"
        assert float(point["loss"]) == pytest.approx(event["loss"], abs=5e-7)
    return points


def fit(tiny_sa3, run_dir: Path, run, cls=TorchTrainer, placement=CPU):
    trainer = cls(run, Path(tiny_sa3), items(), run_dir, placement, {})
    return trainer, train(trainer, run_dir, log=lambda s: None)


def test_every_line_is_read_by_the_dashboard_and_is_the_step_event(tiny_sa3, tmp_path):
    run = run_config(tiny_sa3, steps=6, eval_every=3, checkpoint_every=3)
    _, result = fit(tiny_sa3, tmp_path, run)
    points = assert_log_is_the_events(tmp_path)
    assert [p["step"] for p in points] == [1, 2, 3, 4, 5, 6]
    # the epoch each step drew from: the checkpoints name it too
    epochs = {p["step"]: p["epoch"] for p in points}
    for path in result.checkpoints:
        step, epoch = map(int, re.search(r"step=(\d+)-epoch=(\d+)", path).groups())
        assert epochs[step] == epoch
    assert {p["epoch"] for p in points} == {0, 1}  # 5 training items, batch 1: 5 a pass


def test_a_resumed_run_appends_its_steps_once(tiny_sa3, tmp_path):
    run = run_config(tiny_sa3, steps=6, eval_every=2, checkpoint_every=2)
    fit(tiny_sa3, tmp_path / "straight", run)
    resumed = tmp_path / "resumed"
    fit(tiny_sa3, resumed, replace(run, train=replace(run.train, steps=4)))
    # A run killed after step 5 with its state at 4: step 5's line, then half of step 6's.
    with open(resumed / "train.log", "a", encoding="utf-8") as log:
        log.write("Step 5, Epoch 2:  83%|########3 | 5/6 [00:01<00:00, train/loss=9.000000]\n")
        log.write("Step 6, Epoch 2: 100%|##########| 6/6 [00:01<00:00, train/lo")
    fit(tiny_sa3, resumed, run)
    points = assert_log_is_the_events(resumed)
    assert [p["step"] for p in points] == [1, 2, 3, 4, 5, 6]
    straight = dashboard_points((tmp_path / "straight" / "train.log").read_text())
    assert points == straight  # a resumed run trains the same numbers


def test_a_fresh_run_in_a_used_folder_starts_the_log_over(tiny_sa3, tmp_path):
    (tmp_path / "train.log").write_text(
        "Step 9, Epoch 4:  90%|######### | 9/10 [00:09<00:01, train/loss=1.000000]\n"
    )
    fit(tiny_sa3, tmp_path, run_config(tiny_sa3, steps=2, eval_every=2, checkpoint_every=2))
    assert [p["step"] for p in assert_log_is_the_events(tmp_path)] == [1, 2]


# --- the numbers ---------------------------------------------------------------------------


def underfit_norms_reference(params):
    grad_sq, grad_count, lora_sq, lora_count = 0.0, 0, 0.0, 0
    for p in params:
        if p.grad is not None:
            gn = p.grad.data.float().norm(2).item()
            if gn == gn:
                grad_sq += gn**2
                grad_count += 1
        m = p.data.float().norm(2).item()
        lora_sq += m**2
        lora_count += 1
    return (
        math.sqrt(grad_sq) if grad_count else None,
        math.sqrt(lora_sq) if lora_count else None,
    )


def test_the_norms_are_underfits_to_the_bit():
    g = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(*s, generator=g)) for s in [(4, 8), (16, 4), (7,)]]
    params.append(torch.nn.Parameter(torch.randn(3, 3, generator=g).half()))
    assert underfit_norms(params) == (None, underfit_norms_reference(params)[1])
    for p in params[:2]:
        p.grad = torch.randn(p.shape, generator=g) * 1e3
    params[3].grad = torch.full((3, 3), float("nan"), dtype=torch.float16)
    reference = underfit_norms_reference(params)
    assert underfit_norms(params) == reference
    # the global L2 norm of the gradients, up to rounding
    flat = torch.cat([p.grad.flatten() for p in params[:2]])
    assert reference[0] == pytest.approx(flat.norm().item(), rel=1e-6)


def test_a_torch_step_reports_underfits_norms(tiny_sa3, tmp_path):
    run = run_config(tiny_sa3, steps=3, grad_clip=0.05)
    trainer = TorchTrainer(run, Path(tiny_sa3), items(), tmp_path, CPU, {})
    for _ in range(2):  # the second step: B is off zero, every gradient awake
        before = underfit_norms_reference([p.detach().clone() for p in trainer.params])[1]
        report = trainer.step()
        after = underfit_norms_reference(trainer.params)  # the gradients left by the step
        assert report.fields["lora_magnitude"] == before  # before the update
        assert report.fields["grad_norm"] == after[0]  # after clipping
    assert report.fields["grad_norm"] <= 0.05 * (1 + 1e-5)  # it was clipped
    points = dashboard_points((tmp_path / "train.log").read_text(encoding="utf-8"))
    assert [p["step"] for p in points] == [1, 2]
    assert points[-1]["grad_norm"] == f"{report.fields['grad_norm']:.6f}"


def _mlx_norms(tree) -> list[float]:
    return [float(np.linalg.norm(np.array(a, dtype=np.float32))) for _, a in tree_flatten(tree)]


def _combined(norms: list[float]) -> float:
    return math.sqrt(sum(n**2 for n in norms))


@pytest.mark.slow
def test_an_mlx_run_logs_underfits_line_and_norms(tiny_sa3, tmp_path):
    run = run_config(tiny_sa3, steps=4, eval_every=2, checkpoint_every=2)
    fit(tiny_sa3, tmp_path / "run", run, mlx_train.MlxTrainer, MLX)
    assert [p["step"] for p in assert_log_is_the_events(tmp_path / "run")] == [1, 2, 3, 4]

    # One step by hand: the norms the compiled step reports are those of its gradients (after
    # clipping) and of the adapter before the update, combined as underfit combines them.
    trainer = mlx_train.MlxTrainer(run, Path(tiny_sa3), items(), tmp_path / "by-hand", MLX, {})
    objective = trainer.objective
    d = trainer.draws.next()
    inputs = objective.inputs(d.batch, d.prompts, d.t, d.noise, d.drop)
    _, grads = mlx_train.loss_and_grads(objective.modules, *inputs)
    magnitude = _combined(_mlx_norms(objective.modules.trainable_parameters()))
    mx.eval(grads)
    _, grad_norm, reported = objective.step(d.batch, d.prompts, d.t, d.noise, d.drop)
    assert reported == pytest.approx(magnitude, rel=1e-6)
    assert grad_norm == pytest.approx(_combined(_mlx_norms(grads)), rel=1e-4)
