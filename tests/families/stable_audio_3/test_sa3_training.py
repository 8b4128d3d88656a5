"""Training Stable Audio 3 adapters: resume, files, gradients, stopping, on the tiny model."""

import json
import re
import struct
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from diffusers.models.transformers import transformer_stable_audio3 as sa3_dit

from tunesmith.adapters import torch_lora
from tunesmith.backends.placement import Placement
from tunesmith.families.stable_audio_3.config import Sa3Adapter as AdapterConfig
from tunesmith.families.stable_audio_3.config import Sa3Train as TrainConfig
from tunesmith.families.stable_audio_3.data import ORDER, Item, crop, draw_batch
from tunesmith.families.stable_audio_3.files import read_adapter
from tunesmith.families.stable_audio_3.trainer import Objective, TorchTrainer
from tunesmith.formats.underfit import validate_file
from tunesmith.train.config import ConfigError, RunConfig
from tunesmith.train.holdout import split_holdout
from tunesmith.train.loop import train
from tunesmith.train.order import Order
from tunesmith.train.schedules import inverse_lr
from tunesmith.train.state import ResumeError
from tunesmith.train.trainer import TrainingError

CPU = Placement("torch", "cpu", "float32", "test")


def items(n=6, frames=(40, 70, 90)):
    g = torch.Generator().manual_seed(3)
    return [
        Item(
            path=f"song{i}.wav",
            latents=torch.randn(16, frames[i % len(frames)], generator=g),
            padding_mask=torch.ones(frames[i % len(frames)], dtype=torch.bool),
            seconds_total=frames[i % len(frames)] * 4096 / 44100,
            pieces=(f"Title: song {i}", f"Prompt: a loop number {i}"),
        )
        for i in range(n)
    ]


def first_batch(data, batch_size, crop_length, seed):
    """The first batch a run of `seed` draws from `data` (its order, then its crops)."""
    order = Order(len(data), batch_size, seed, ORDER)
    return draw_batch(data, order.next(), crop_length, order.generator), order


def run_config(tiny_sa3, **train):
    defaults = dict(steps=6, lr=1e-3, eval_every=3, checkpoint_every=3, latent_crop_length=48)
    return RunConfig(
        name="t",
        family="stable-audio-3",
        base_model=str(tiny_sa3),
        trigger="zq",
        adapter=AdapterConfig(type="dora-rows", rank=4),
        train=TrainConfig(**{**defaults, **train}),
    )


def fit(tiny_sa3, run_dir, run, data=None, **kw):
    lineage = {"lineage": "test", "tunesmith.base_model_fingerprint": "tiny"}
    trainer = TorchTrainer(run, Path(tiny_sa3), data or items(), run_dir, CPU, lineage)
    result = train(trainer, run_dir, log=lambda s: None, **kw)
    return trainer.objective, result


def test_resuming_gives_the_same_adapter_bit_for_bit(tiny_sa3, tmp_path):
    run8 = run_config(tiny_sa3, steps=8, checkpoint_every=4, eval_every=4)
    _, straight = fit(tiny_sa3, tmp_path / "a", run8)
    fit(tiny_sa3, tmp_path / "b", replace(run8, train=replace(run8.train, steps=4)))
    _, resumed = fit(tiny_sa3, tmp_path / "b", run8)
    assert resumed.resumed_from == 4 and resumed.steps_trained == 4
    a, b = read_adapter(straight.last_path)[0], read_adapter(resumed.last_path)[0]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    from safetensors.torch import load_file

    sa = load_file(tmp_path / "a" / "state" / "step=8" / "state.safetensors")
    sb = load_file(tmp_path / "b" / "state" / "step=8" / "state.safetensors")
    assert all(torch.equal(sa[k], sb[k]) for k in sa)  # fp32 params, AdamW moments, RNGs
    assert straight.history == resumed.history


def test_written_files_follow_underfits_format_and_reload_to_the_bit(tiny_sa3, tmp_path):
    run = run_config(tiny_sa3)
    trainer, result = fit(tiny_sa3, tmp_path, run)
    names = sorted(Path(p).name for p in result.checkpoints)
    assert names == ["t-step=3-epoch=0.safetensors", "t-step=6-epoch=1.safetensors"]
    # underfit's dashboard lists each `.safetensors` of a session's checkpoints folder as a step
    # (`step=(\d+)` in its name, else 0; dashboard/server.py): each step once, the best apart
    listed = [
        int(m.group(1)) if (m := re.search(r"step=(\d+)", f.name)) else 0
        for f in (tmp_path / "checkpoints").iterdir()
        if f.name.endswith(".safetensors") and not f.name.startswith(".")
    ]
    assert sorted(listed) == [3, 6]
    assert Path(result.best_path).parent == tmp_path / "best"
    info = validate_file(result.last_path)
    config = info.lora_config
    assert (config["rank"], config["alpha"], config["adapter_type"]) == (4, 4, "dora-rows")
    assert config["step"] == 6
    assert "base_model" not in config  # not a published model: underfit infers the model
    assert config["include"] == ["model.transformer.layers."]
    assert all(k.startswith(("model.transformer.layers.", "conditioners.")) for k in info.keys)
    assert info.metadata["lineage"] == "test"

    # The file onto a fresh model reproduces the trainer's own output (its fp16-rounded factors).
    state, _ = read_adapter(result.last_path)
    fresh = Objective(Path(tiny_sa3), run, CPU)
    torch_lora.load_adapter_state(fresh.modules, state)
    with torch.no_grad():
        for p in trainer.parameters():
            p.copy_(p.half().float())
    batch, _ = first_batch(items(), 2, 48, seed=0)
    t, noise = torch.tensor([0.3, 0.8]), torch.randn(2, 16, 48)
    drop = torch.tensor([False, True])
    with torch.no_grad():
        expected = trainer.loss(batch, ["zq, a", "b"], t, noise, drop)
        assert torch.equal(fresh.loss(batch, ["zq, a", "b"], t, noise, drop), expected)


def _rotary_in_input_dtype(t, freqs):
    rot = freqs.shape[-1]
    t_rot, t_pass = t[..., :rot], t[..., rot:]
    freqs = freqs[-t_rot.shape[-3] :].to(t.dtype).unsqueeze(1)
    t_rot = t_rot * freqs.cos() + sa3_dit._rotate_half(t_rot) * freqs.sin()
    return torch.cat((t_rot, t_pass), dim=-1)


def test_adapter_gradients_match_central_finite_differences_in_float64(tiny_sa3, monkeypatch):
    run = run_config(tiny_sa3)
    objective = Objective(Path(tiny_sa3), run, CPU)
    objective.pipe.to(torch.float64)
    # diffusers computes RMSNorm and RoPE in float32 whatever the input (the reference's
    # force_fp32); a float64 check needs the whole forward in float64.
    for module in objective.pipe.transformer.modules():
        if isinstance(module, sa3_dit.StableAudio3RMSNorm):
            module.force_fp32 = False
    monkeypatch.setattr(sa3_dit, "_apply_rotary_partial", _rotary_in_input_dtype)
    params = objective.parameters()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():  # move B off zero so every factor has a gradient
        for p in params:
            p.add_(1e-2 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    batch, _ = first_batch(items(), 2, 32, seed=1)
    t, noise = torch.tensor([0.25, 0.7], dtype=torch.float64), torch.randn(2, 16, 32, generator=g)
    drop = torch.tensor([False, True])

    def loss():
        return objective.loss(batch, ["zq, a", "b"], t, noise, drop).mean()

    loss().backward()
    eps = 1e-6
    for p in params[:: max(1, len(params) // 6)]:
        for index in torch.randint(p.numel(), (3,), generator=g).tolist():
            flat = p.data.view(-1)
            original = flat[index].item()
            with torch.no_grad():
                flat[index] = original + eps
                up = loss().item()
                flat[index] = original - eps
                down = loss().item()
                flat[index] = original
            numeric = (up - down) / (2 * eps)
            analytic = p.grad.view(-1)[index].item()
            assert abs(numeric - analytic) <= 1e-6 * max(1.0, abs(numeric)), (numeric, analytic)


def test_a_nan_loss_stops_the_run_naming_the_step_and_keeps_the_last_checkpoint(tiny_sa3, tmp_path):
    data = items(8)
    held_out = {item.path for item in split_holdout(data).validation}
    i = next(i for i, item in enumerate(data[3:], 3) if item.path not in held_out)
    data[i] = replace(data[i], latents=torch.full_like(data[i].latents, float("nan")))
    run = run_config(tiny_sa3, steps=30, checkpoint_every=1, eval_every=100, batch_size=1)
    with pytest.raises(
        TrainingError, match=r"loss is nan at step (\d+); training stopped"
    ) as error:
        fit(tiny_sa3, tmp_path, run, data=data)
    kept = str(error.value).split("Last good checkpoint: ")[1]
    assert Path(kept).exists()
    validate_file(kept)  # what was kept is a whole, finite file


def test_resuming_with_another_adapter_type_is_refused(tiny_sa3, tmp_path):
    run = run_config(tiny_sa3, steps=3)
    fit(tiny_sa3, tmp_path, run)
    other = replace(
        run, adapter=replace(run.adapter, type="lora"), train=replace(run.train, steps=6)
    )
    with pytest.raises(ResumeError, match="adapter_type 'dora-rows', this run has 'lora'"):
        fit(tiny_sa3, tmp_path, other)


def test_progress_events_and_loss_by_timestep(tiny_sa3, tmp_path):
    import io

    stream = io.StringIO()
    run = run_config(tiny_sa3)
    fit(tiny_sa3, tmp_path, run, progress=stream)
    assert stream.getvalue() == ""  # the trainer's own lines replace the loop's bar
    text = (tmp_path / "train.log").read_text(encoding="utf-8")
    # underfit logs the lr after the scheduler's step: after step 6, InverseLR's value at 6.
    lr = f"train/lr={run.train.lr * inverse_lr()(6):.3e}"
    for key in ("train/loss=", lr, "train/grad_norm=", "train/lora_magnitude="):
        assert key in text
    assert "Step 6, Epoch 1" in text
    records = (tmp_path / "loss_by_timestep.bin").read_bytes()
    assert len(records) == 6 * 12
    steps = [struct.unpack("<Iff", records[i : i + 12])[0] for i in range(0, len(records), 12)]
    assert steps == [1, 2, 3, 4, 5, 6]
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events].count("validation") == 2


def test_crops_pad_short_items_and_tiny_datasets_oversample():
    short = items(3, frames=(20,))
    batch, order = first_batch(short, batch_size=4, crop_length=48, seed=0)
    assert batch.latents.shape == (4, 16, 48)
    assert batch.mask[:, :20].all() and not batch.mask[:, 20:].any()
    assert len(order.order) == 400  # fewer items than the batch: 100 batches an epoch
    assert order.epoch == 0  # underfit counts epochs from 0
    latents, mask = crop(short[0], 10, 5)
    assert torch.equal(latents, short[0].latents[:, 5:15]) and mask.all()


def test_holdout_zero_trains_and_validates_on_the_training_items_saying_so(tiny_sa3, tmp_path):
    import io

    lines = []
    run = run_config(tiny_sa3, steps=2, eval_every=2, checkpoint_every=2, holdout=0)
    lineage = {"tunesmith.base_model_fingerprint": "tiny"}
    trainer = TorchTrainer(run, Path(tiny_sa3), items(), tmp_path, CPU, lineage)
    result = train(trainer, tmp_path, log=lines.append, progress=io.StringIO())
    note = "validation on training items: train.holdout = 0, none held out"
    assert result.validation_note == note and result.steps == 2
    assert any(note in line for line in lines)


def test_a_holdout_of_every_item_is_refused_in_one_line(tiny_sa3, tmp_path):
    run = run_config(tiny_sa3, holdout=6)
    with pytest.raises(ConfigError, match="^train.holdout 6 leaves no training items out of 6"):
        fit(tiny_sa3, tmp_path, run)


def test_holdout_rules():
    assert split_holdout(items(4)).on_training_items
    split = split_holdout(items(8))
    assert len(split.validation) == 1 and len(split.train) == 7
    assert len(split_holdout(items(40)).validation) == 4
    assert len(split_holdout(items(8), holdout=3).validation) == 3
