"""An ACE-Step run through the one loop: the step's window (weights, accumulation, clipping,
dropout onto the null condition), the schedule, the optimizer split on the start line, the
target-loss stop, resuming bit for bit, and the settings a tiny DiT cannot train with."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from tunesmith.backends.placement import Placement
from tunesmith.families.ace_step import data, objective
from tunesmith.families.ace_step.trainer import AceStepTrainer
from tunesmith.train import loop
from tunesmith.train.config import ConfigError, resolve_run
from tunesmith.train.order import Order

PLACEMENT = Placement("torch", "cpu", "float32", "tests")
LINEAGE = {
    "tunesmith.version": "t",
    "tunesmith.base_model_fingerprint": "fp",
    "tunesmith.run_key": "k",
}


def make_run(adapter: dict | None = None, **train) -> object:
    raw = {
        "name": "unit",
        "family": "ace-step",
        "base_model": "tiny",
        "adapter": {"rank": 4, **(adapter or {})},
        "train": {"optimizer": "adamw", "crop_frames": 24, "epochs": 3, **train},
        "demos": [{"prompt": "zqx, a loop", "duration": 0.5, "steps": 2}],
    }
    return resolve_run(raw, Path("tunesmith.toml"), 0)


def trainer(ace_encoded, run, run_dir: Path) -> AceStepTrainer:
    encoded, _, models = ace_encoded
    rows = encoded.frame[encoded.frame["run"] == "unit"]
    run_dir.mkdir(parents=True, exist_ok=True)
    return AceStepTrainer(run, models / "tiny", rows, run_dir, PLACEMENT, LINEAGE)


def test_a_step_is_the_windows_weighted_mean_with_clipping(ace_encoded, tmp_path):
    """One update = `accumulation` crops, each loss scaled by ŵ_i / k with ŵ normalised over the
    window; the gradient the optimizer sees is the reference's, clipped to norm 1."""
    run = make_run(loss_weighting="flow_snr", accumulation=4, lr=1e-3)
    ours = trainer(ace_encoded, run, tmp_path)
    generator = torch.Generator()
    generator.set_state(ours.generator.get_state())
    order = Order(len(ours.train_items), 4, run.train.seed + data.ORDER_SEED, data.ORDER)
    window = order.next()
    crops = data.draw_window(ours.train_items, window, 24, generator, ours.mu, ours.sigma, 0.15)
    w = objective.weights(torch.cat([c.t for c in crops]), "flow_snr", 5.0, 0.5)
    assert len(crops) == 4 and not torch.allclose(w, torch.ones(4, dtype=torch.float64))
    pairs = list(zip(crops, w.tolist(), strict=True))
    reference = sum(float(ours._crop_loss(c).detach()) * wi / 4 for c, wi in pairs)
    ours.optimizer.zero_grad()
    sum(ours._crop_loss(c) * wi / 4 for c, wi in pairs).backward()
    norms = torch.stack([p.grad.norm() for p in ours.params])
    expected_norm = float(torch.linalg.vector_norm(norms))
    expected = [p.grad.clone() * min(1.0, 1.0 / (expected_norm + 1e-6)) for p in ours.params]
    seen = []
    ours.optimizer.register_step_pre_hook(
        lambda optimizer, args, kwargs: seen.extend(p.grad.clone() for p in ours.params)
    )
    report = ours.step()
    assert report.loss == pytest.approx(reference, rel=1e-6)
    assert report.fields["grad_norm"] == pytest.approx(expected_norm, rel=1e-5)
    assert report.fields["lr"] == 0.0  # HOT-Step's schedule: lr(0) = 0
    for got, want in zip(seen, expected, strict=True):
        assert torch.allclose(got, want, rtol=1e-4, atol=1e-9)


def test_a_dropped_crop_sees_the_null_condition(ace_encoded, tmp_path):
    ours = trainer(ace_encoded, make_run(), tmp_path)
    seen = []
    hook = ours.transformer.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append(kwargs["encoder_hidden_states"]),
        with_kwargs=True,
    )
    item = ours.train_items[0]
    crop = data.Crop(0, 0, 8, torch.tensor([0.5]), torch.tensor([True]), torch.randn(1, 8, 8))
    ours._crop_loss(crop)
    ours._crop_loss(replace(crop, drop=torch.tensor([False])))
    hook.remove()
    null = ours.pipe.condition_encoder.null_condition_emb
    assert torch.equal(seen[0], null.expand_as(item.conditioning))
    assert torch.equal(seen[1], item.conditioning)
    # and the draws drop about 15 % of the crops
    generator = torch.Generator().manual_seed(0)
    drops = [
        data.draw_window(ours.train_items, [0], 8, generator, -0.4, 1.0, 0.15)[0].drop
        for _ in range(2000)
    ]
    assert 0.12 < float(torch.cat(drops).float().mean()) < 0.18


def test_the_schedule_and_the_start_line(ace_encoded, tmp_path):
    run = make_run(optimizer="muon", accumulation=2, epochs=10, warmup=0.1)
    run = replace(run, adapter=replace(run.adapter, rank=16))
    ours = trainer(ace_encoded, run, tmp_path)
    # 4 training songs (one of 5 held out) in windows of 2: 2 steps an epoch, 20 in 10 epochs.
    assert (len(ours.train_items), ours.horizon, ours.steps) == (4, 20, 20)
    assert ours.start_note.startswith("optimizer muon: 44 Muon / 0 AdamW")
    lrs = [ours.step().fields["lr"] for _ in range(3)]
    assert lrs == pytest.approx([0.0, 0.5 * run.train.lr, run.train.lr])  # warmup: 2 steps
    muon_group = [g for g in ours.optimizer.param_groups if g.get("lr_scale") == 20.0][0]
    assert muon_group["lr"] == pytest.approx(20 * ours._lr())


def run_loop(ace_encoded, run, run_dir: Path):
    logs = []
    result = loop.train(
        trainer(ace_encoded, run, run_dir),
        run_dir,
        log=logs.append,
        progress=open(run_dir.parent / f"{run_dir.name}.log", "w"),
    )
    return result, logs


def digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.mark.slow
def test_resume_is_bit_for_bit_with_muon_momentum(ace_encoded, tmp_path):
    run = make_run(optimizer="muon", accumulation=2, epochs=4, eval_every=2, checkpoint_every=2)
    run = replace(run, adapter=replace(run.adapter, rank=16))
    straight, logs = run_loop(
        ace_encoded, replace(run, train=replace(run.train, steps=6)), tmp_path / "straight"
    )
    assert any("44 Muon / 0 AdamW" in line for line in logs)
    run_loop(ace_encoded, replace(run, train=replace(run.train, steps=4)), tmp_path / "resumed")
    resumed, logs = run_loop(
        ace_encoded, replace(run, train=replace(run.train, steps=6)), tmp_path / "resumed"
    )
    assert resumed.resumed_from == 4 and any("resuming unit from step 4" in x for x in logs)
    assert resumed.history == straight.history
    assert digest(resumed.last_path) == digest(straight.last_path)
    assert digest(resumed.best_path) == digest(straight.best_path)


def test_holdout_zero_trains_and_validates_on_the_training_songs_saying_so(ace_encoded, tmp_path):
    run = make_run(holdout=0, steps=2, eval_every=2, checkpoint_every=2)
    result, logs = run_loop(ace_encoded, run, tmp_path / "run")
    note = "validation on training songs: train.holdout = 0, none held out"
    assert result.validation_note == note and result.steps == 2
    assert any(note in line for line in logs)


def test_the_target_loss_ends_the_run_on_the_five_epoch_average(ace_encoded, tmp_path):
    run = make_run(epochs=20, target_loss=50.0, eval_every=100)
    result, logs = run_loop(ace_encoded, run, tmp_path / "run")
    # one step an epoch (4 songs, accumulation 4): the average exists after epoch 5
    assert result.steps == 5 and result.history[-1]["step"] == 5
    assert "target loss 50 reached: the 5-epoch average is" in result.extra["stopped"]
    assert Path(result.best_path).exists()


def test_muon_with_nothing_to_orthogonalise_trains_with_adamw_and_says_so(ace_encoded, tmp_path):
    run = make_run({"type": "lokr", "rank": 8, "factor": 4}, optimizer="muon")
    trained = trainer(ace_encoded, run, tmp_path)
    assert type(trained.optimizer) is torch.optim.AdamW
    assert trained.start_note.startswith("optimizer muon: 0 Muon / 44 AdamW")
    assert "no 2-D parameter has a short side ≥ muon_min_dim 16" in trained.start_note


def test_a_lokr_factor_that_does_not_split_a_layer_names_it_and_the_nearest(ace_encoded, tmp_path):
    run = make_run({"type": "lokr", "rank": 8, "factor": 8})
    with pytest.raises(ConfigError) as caught:
        trainer(ace_encoded, run, tmp_path)
    message = str(caught.value)
    assert "adapter.factor 8 does not split layers.0.self_attn.to_q (32→32)" in message
    assert "PEFT splits its output size 32 as 8 x 4, LyCORIS as 4 x 8" in message
    assert "the nearest factor that splits it is 7" in message


def test_a_step_whose_loss_is_not_finite_changes_nothing(ace_encoded, tmp_path):
    """A crop whose loss is NaN ends the step before any update: the loss is reported as it
    is, every adapter tensor and the optimizer's step count stay as they were."""
    ours = trainer(ace_encoded, make_run(accumulation=2, lr=1e-3), tmp_path)
    before = [p.detach().clone() for p in ours.params]
    first = ours.params[0]
    with torch.no_grad():
        first[(0,) * first.dim()] = float("nan")  # poisons every crop's output
    kept = first.detach().clone()
    report = ours.step()
    assert report.loss != report.loss  # NaN
    assert ours.updates == 0
    assert all(p.grad is None for p in ours.params)
    assert torch.equal(first.detach().nan_to_num(), kept.nan_to_num())
    for p, b in zip(ours.params[1:], before[1:], strict=True):
        assert torch.equal(p.detach(), b)
