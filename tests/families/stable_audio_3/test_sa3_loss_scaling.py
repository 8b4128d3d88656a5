"""Loss scaling over a float16 base (underfit's "16-mixed"): fp16 autocast and torch's
GradScaler, its state resumed exactly; none over float32 or bfloat16. On the CPU, where torch
has both fp16 autocast and a GradScaler; CUDA and MPS take the same code with their device."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import torch
from safetensors.torch import load_file

from tests.families.stable_audio_3.test_sa3_training import first_batch, items, run_config
from tunesmith.backends.placement import Placement
from tunesmith.families.stable_audio_3 import optim
from tunesmith.families.stable_audio_3.files import read_adapter
from tunesmith.families.stable_audio_3.trainer import Objective, TorchTrainer
from tunesmith.train.loop import train

HALF = Placement("torch", "cpu", "float16", "test")


def fit(tiny_sa3, run_dir, run):
    lineage = {"tunesmith.base_model_fingerprint": "tiny"}
    trainer = TorchTrainer(run, Path(tiny_sa3), items(), run_dir, HALF, lineage)
    return trainer, train(trainer, run_dir, log=lambda s: None)


def test_only_a_float16_base_gets_autocast_and_a_scaler():
    cpu = torch.device("cpu")
    assert isinstance(optim.grad_scaler(cpu, torch.float16), torch.amp.GradScaler)
    assert optim.grad_scaler(cpu, torch.float32) is None
    assert optim.grad_scaler(cpu, torch.bfloat16) is None  # float32's exponent range: no underflow
    with optim.autocast(cpu, torch.float16):
        assert torch.is_autocast_enabled("cpu")
        assert torch.get_autocast_dtype("cpu") == torch.float16
    with optim.autocast(cpu, torch.bfloat16):
        assert not torch.is_autocast_enabled("cpu")


def test_a_float16_run_resumes_bit_for_bit_with_its_scaler(tiny_sa3, tmp_path):
    run = run_config(tiny_sa3, steps=6, checkpoint_every=3, eval_every=3)
    trainer, straight = fit(tiny_sa3, tmp_path / "a", run)
    assert trainer.scaler is not None and trainer.objective.pipe.transformer.dtype == torch.float16
    fit(tiny_sa3, tmp_path / "b", replace(run, train=replace(run.train, steps=3)))
    _, resumed = fit(tiny_sa3, tmp_path / "b", run)
    assert resumed.resumed_from == 3
    a, b = read_adapter(straight.last_path)[0], read_adapter(resumed.last_path)[0]
    assert all(torch.equal(a[k], b[k]) for k in a)
    sa = load_file(tmp_path / "a" / "state" / "step=6" / "state.safetensors")
    sb = load_file(tmp_path / "b" / "state" / "step=6" / "state.safetensors")
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    documents = [
        json.loads((tmp_path / x / "state" / "step=6" / "state.json").read_text())["trainer"]
        for x in ("a", "b")
    ]
    assert documents[0]["grad_scaler"] == documents[1]["grad_scaler"]
    assert documents[0]["grad_scaler"]["_growth_tracker"] == 6  # six clean steps since 2^16
    assert documents[0]["schedule_step"] == documents[1]["schedule_step"] == 6
    assert straight.history == resumed.history


def test_the_scaler_keeps_the_gradients_fp16_flushes_to_zero(tiny_sa3):
    """The loss times 1e-5 (a small loss, as a well-fit step gives): its gradients through the
    fp16 base fall under fp16's smallest number and vanish (measured: 98.8 % of the adapter's
    gradient entries exactly zero; 0.1 % at the loss as it is, 7 % at 1e-2, 75 % at 1e-4);
    scaled by 2^16 first, they survive (0.1 % zero) and, unscaled, point where the float32
    model's do (cosine 0.9994)."""
    run = run_config(tiny_sa3)
    batch, _ = first_batch(items(), 2, 32, seed=1)
    g = torch.Generator().manual_seed(0)
    t, noise = torch.tensor([0.3, 0.7]), torch.randn(2, 16, 32, generator=g)
    drop = torch.tensor([False, False])
    small = 1e-5

    def gradients(placement: Placement, scaler: torch.amp.GradScaler | None) -> torch.Tensor:
        objective = Objective(Path(tiny_sa3), run, placement)
        params = objective.parameters()
        with torch.no_grad():  # B off zero (the same for both), so every factor has a gradient
            gen = torch.Generator().manual_seed(1)
            for p in params:
                p.add_(1e-2 * torch.randn(p.shape, generator=gen))
        loss = small * objective.loss(batch, ["zq, a", "b"], t, noise, drop).mean()
        if scaler is None:
            loss.backward()
        else:
            optimizer = torch.optim.SGD(params, lr=0.0)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
        return torch.cat([p.grad.flatten() for p in params])

    reference = gradients(Placement("torch", "cpu", "float32", "test"), None)
    plain = gradients(HALF, None)
    scaled = gradients(HALF, torch.amp.GradScaler("cpu"))
    zero_plain = (plain == 0).float().mean().item()
    zero_scaled = (scaled == 0).float().mean().item()
    cosine = torch.nn.functional.cosine_similarity(scaled, reference, dim=0).item()
    print(
        f"zero gradients: {zero_plain:.1%} unscaled, {zero_scaled:.1%} scaled; "
        f"cosine to float32 {cosine:.5f}"
    )
    assert (reference == 0).float().mean().item() < 0.01
    assert zero_plain > 0.9 and zero_scaled < 0.01 and cosine > 0.999
