"""MLX adapter training against the torch path, in float32 on the CPU, on the tiny SA3.

Both sides are the project's own objectives built from the same base model folder and run
config (`stable_audio_3.train.Objective`, `mlx_train.MLXObjective`), with adapters on every
Linear of the DiT and the duration embedder (the nn.Sequential children and the conditioner
included, the fused QKV too), B moved off zero and the dora magnitude off ‖W‖ so that every
gradient path is awake. Inputs are made once in torch and fed to both: a batch of 2, the
second clip shorter than the crop, one sample CFG-dropped.

Thresholds: gradient cosine ≥ 0.9999 per adapter tensor, outputs through the other side's file
≥ 70 dB, adapters after K steps ≥ 60 dB and what the K steps changed ≥ 55 dB.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from tunesmith.adapters import mlx_lora, torch_lora
from tunesmith.backends.placement import Placement
from tunesmith.families.stable_audio_3 import optim as sa3_optim
from tunesmith.families.stable_audio_3.config import Sa3Adapter as AdapterConfig
from tunesmith.families.stable_audio_3.config import Sa3Train as TrainConfig
from tunesmith.families.stable_audio_3.data import Batch
from tunesmith.families.stable_audio_3.files import read_adapter
from tunesmith.families.stable_audio_3.mlx import convert as mlx_convert
from tunesmith.families.stable_audio_3.mlx import trainer as mlx_train
from tunesmith.families.stable_audio_3.trainer import Objective
from tunesmith.train.config import RunConfig
from tunesmith.train.schedules import lr_scheduler

pytestmark = pytest.mark.slow

MIN_GRAD_COSINE = 0.9999
MIN_OUTPUT_PSNR_DB = 70.0
MIN_TRAINED_PSNR_DB = 60.0
# What K steps changed, torch against MLX: 61-63 dB measured with the run's defaults; the same
# steps with MLX on torch's betas (0.9, 0.999) give 39 dB, the schedule one step off 12 dB.
MIN_UPDATE_PSNR_DB = 55.0
STEPS = 5
FRAMES = 24
PROMPTS = ["Genre: house, BPM: 120", "Title: a much longer prompt about a slow ambient piece"]
ADAPTER_TYPES = ("lora", "dora-rows")


def psnr(reference, other) -> float:
    reference, other = np.asarray(reference, np.float64), np.asarray(other, np.float64)
    mse = np.mean((reference - other) ** 2)
    return float("inf") if mse == 0 else float(10 * np.log10(np.abs(reference).max() ** 2 / mse))


def cosine(a, b) -> float:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def run_config(folder: Path, adapter_type: str, grad_clip: float = 0.0) -> RunConfig:
    return RunConfig(
        name="parity",
        family="stable-audio-3",
        base_model=str(folder),
        adapter=AdapterConfig(
            type=adapter_type,
            rank=4,
            alpha=8.0,  # s = 2: a scale bug shows
            include=("model.", "conditioners."),
            exclude=("preprocess_conv", "postprocess_conv"),  # the MLX path adapts Linears
        ),
        train=TrainConfig(lr=1e-3, grad_clip=grad_clip, seed=3),
    )


def objectives(folder: Path, adapter_type: str, grad_clip: float = 0.0):
    """(torch Objective, MLXObjective) holding the same adapter, B and m moved off init."""
    run = run_config(folder, adapter_type, grad_clip)
    torch_side = Objective(folder, run, Placement("torch", "cpu", "float32", "test"))
    mlx_side = mlx_train.MLXObjective(folder, run, Placement("mlx", "cpu", "float32", "test"))
    generator = torch.Generator().manual_seed(7)
    state = torch_lora.adapter_state(torch_side.modules)
    for key, value in state.items():
        if key.endswith("lora_B"):
            state[key] = 0.05 * torch.randn(value.shape, generator=generator)
        elif key.endswith("magnitude"):
            state[key] = value * (1 + 0.1 * torch.rand(value.shape, generator=generator))
    torch_lora.load_adapter_state(torch_side.modules, state)
    mlx_lora.load_adapter_state(mlx_side.modules, state)
    return torch_side, mlx_side


def draws(seed: int, channels: int):
    """(batch, prompts, t, noise, drop) as the loop makes them."""
    generator = torch.Generator().manual_seed(seed)
    mask = torch.ones(2, FRAMES, dtype=torch.bool)
    mask[1, 17:] = False
    batch = Batch(
        latents=torch.randn(2, channels, FRAMES, generator=generator),
        mask=mask,
        seconds_total=torch.tensor([10.0, 47.5]),
        pieces=[(), ()],
        paths=["a", "b"],
    )
    t = torch.rand(2, generator=generator, dtype=torch.float64)
    noise = torch.randn(2, channels, FRAMES, generator=generator)
    drop = torch.tensor([False, seed % 2 == 0])
    return batch, PROMPTS, t, noise, drop


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    from tunesmith.families.stable_audio_3.tiny import make_tiny_stable_audio_3

    return make_tiny_stable_audio_3(tmp_path_factory.mktemp("models") / "tiny-sa3", seed=0)


@pytest.mark.parametrize("adapter_type", ADAPTER_TYPES)
def test_adapter_gradients_match_torch(folder, adapter_type):
    torch_side, mlx_side = objectives(folder, adapter_type)
    inputs = draws(0, 16)
    torch_side.loss(*inputs).mean().backward()
    torch_grads = {
        key: param.grad
        for key, param in zip(
            torch_lora.adapter_state(torch_side.modules), torch_side.parameters(), strict=True
        )
    }
    loss, grads = mlx_train.loss_and_grads(mlx_side.modules, *mlx_side.inputs(*inputs))
    mlx_grads = mlx_lora.state_from_tree(mlx_side.modules, grads)
    assert set(mlx_grads) == set(torch_grads) and len(torch_grads) >= 58
    worst = min(cosine(torch_grads[k].numpy(), np.array(mlx_grads[k])) for k in torch_grads)
    print(f"{adapter_type}: worst gradient cosine {worst:.8f} over {len(torch_grads)} tensors")
    assert worst >= MIN_GRAD_COSINE


def _prediction_psnr(torch_side, mlx_side) -> float:
    """The per-sample losses on fixed inputs: the output of each side, as the trainer sees it."""
    inputs = draws(1, 16)
    with torch.no_grad():
        reference = torch_side.loss(*inputs).numpy()
    return psnr(reference, mlx_side.loss(*inputs).numpy())


@pytest.mark.parametrize("adapter_type", ADAPTER_TYPES)
def test_files_written_by_either_side_load_on_the_other(folder, adapter_type, tmp_path):
    torch_side, mlx_side = objectives(folder, adapter_type)
    for writer, name in ((mlx_side, "mlx"), (torch_side, "torch")):
        path = writer.save(tmp_path, 1, 0, {}, name=f"{name}.safetensors")
        state, info = read_adapter(path)
        assert info.config.adapter_type == adapter_type and info.config.rank == 4
        torch_lora.load_adapter_state(torch_side.modules, state)
        mlx_lora.load_adapter_state(mlx_side.modules, state)
        measured = _prediction_psnr(torch_side, mlx_side)
        print(f"{adapter_type}: file written by {name}, output PSNR {measured:.1f} dB")
        assert measured >= MIN_OUTPUT_PSNR_DB
    # Byte for byte the same tensors: both sides wrote the same (fp16) adapter.
    mlx_state, _ = read_adapter(tmp_path / "mlx.safetensors")
    torch_state, _ = read_adapter(tmp_path / "torch.safetensors")
    for key in torch_state:
        torch.testing.assert_close(mlx_state[key], torch_state[key], rtol=0, atol=0)


@pytest.mark.parametrize("adapter_type", ADAPTER_TYPES)
def test_strength_zero_is_the_base_model_exactly(folder, adapter_type):
    _, mlx_side = objectives(folder, adapter_type)
    base = mlx_train.SA3Modules(*mlx_convert.from_diffusers(*_plain_components(folder)))
    inputs = mlx_side.inputs(*draws(2, 16))
    mlx_lora.set_strength(mlx_side.modules, 0.0)
    np.testing.assert_array_equal(
        np.array(mlx_train.per_sample_loss(mlx_side.modules, *inputs)),
        np.array(mlx_train.per_sample_loss(base, *inputs)),
    )


def _plain_components(folder: Path):
    from tunesmith.families.stable_audio_3 import model

    pipe = model.load_pipeline(folder)
    return pipe.transformer, pipe.duration_embedder


@pytest.mark.parametrize("adapter_type", ADAPTER_TYPES)
def test_k_training_steps_end_in_the_same_adapter(folder, adapter_type):
    """The run's AdamW (underfit's betas 0.9/0.95, weight decay 0.01) and InverseLR schedule on
    both sides; what is compared is what the K steps changed (after − before), since the
    warmup's first steps move the adapter by ~1e-5 of its size."""
    torch_side, mlx_side = objectives(folder, adapter_type, grad_clip=1.0)
    params = torch_side.parameters()
    before = {k: v.clone() for k, v in torch_lora.adapter_state(torch_side.modules).items()}
    optimizer = sa3_optim.torch_adamw(params, torch_side.run.train)
    scheduler = lr_scheduler(optimizer, sa3_optim.lr_schedule(torch_side.run.train))
    for k in range(STEPS):
        inputs = draws(10 + k, 16)
        # The torch trainer's step, line for line (float32: no loss scaler).
        loss = torch_side.loss(*inputs).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        scheduler.step()
        mlx_loss, _, _ = mlx_side.step(*inputs)
        assert abs(mlx_loss - loss.item()) <= 1e-4 * abs(loss.item())
        assert mlx_side.lr(mlx_side.schedule_step) == optimizer.param_groups[0]["lr"]
    assert mlx_side._step.traces == 1  # a new lr every step, one trace
    torch_state = torch_lora.adapter_state(torch_side.modules)
    mlx_state = mlx_lora.adapter_state(mlx_side.modules)
    worst = min(psnr(torch_state[k].numpy(), mlx_state[k].numpy()) for k in torch_state)
    moved = {k: (torch_state[k] - before[k], mlx_state[k] - before[k]) for k in torch_state}
    assert all(t.abs().max() > 0 for t, _ in moved.values())
    update = min(psnr(t.numpy(), m.numpy()) for t, m in moved.values())
    print(
        f"{adapter_type}: after {STEPS} steps, worst adapter PSNR {worst:.1f} dB, "
        f"worst update PSNR {update:.1f} dB"
    )
    assert worst >= MIN_TRAINED_PSNR_DB and update >= MIN_UPDATE_PSNR_DB


def test_a_materialization_on_mlx_writes_a_valid_checkpoint_and_says_mlx(
    storage, instance, tiny_sa3, monkeypatch
):
    import json

    from tests.conftest import materialize
    from tests.pipelines.test_encoded import make_dataset
    from tunesmith.formats.underfit import validate_file

    # One value for every stage: training takes MLX; `encoded` (torch only) says it could not.
    monkeypatch.setenv("TUNESMITH_BACKEND", "mlx")
    make_dataset(Path(storage.datasets_root), tiny_sa3)
    stages = materialize(instance, storage, "songs")
    assert stages["adapters"]["placement"] == "mlx/cpu/float32"
    assert stages["renders"]["placement"] == "torch/cpu/float32"
    assert stages["checks"]["underfit_contract"]
    report = json.loads((Path(storage.out_root) / "songs" / "report.json").read_text())
    (run,) = report["stages"]["adapters"]["runs"]
    assert run["placement"] == "mlx/cpu/float32" and run["steps"] == 2
    info = validate_file(run["last_path"])
    assert info.config.adapter_type == "dora-rows" and info.config.step == 2
