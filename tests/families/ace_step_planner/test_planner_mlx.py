"""The planner LoRA on MLX (mlx-lm) against PyTorch (PEFT), and the files across backends."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tests.families.ace_step_planner.conftest import nonzero_b
from tunesmith.families.ace_step_planner.adapter_files import read_metadata
from tunesmith.families.ace_step_planner.mlx_lm_backend import MlxPlannerLora
from tunesmith.families.ace_step_planner.model import load_planner
from tunesmith.families.ace_step_planner.torch_lm import TorchPlannerLora

K_STEPS = 5
LR = 1e-2  # large enough that five steps move the loss; the parity is what is tested


@pytest.fixture
def pair(tiny_planner, planner):
    """(torch LoRA, mlx LoRA) from the same non-zero factors, float32."""
    torch_lora = TorchPlannerLora(planner)
    nonzero_b(torch_lora.parameters())
    mlx_lora = MlxPlannerLora(tiny_planner)
    mlx_lora.set_factors(torch_lora.factors())
    return torch_lora, mlx_lora


def _mlx_name(torch_name: str) -> str:
    module = torch_name.removeprefix("base_model.model.").split(".lora_")[0]
    return f"{module}.lora_a" if ".lora_A." in torch_name else f"{module}.lora_b"


def test_loss_and_gradients_agree(pair, examples):
    from mlx.utils import tree_flatten

    torch_lora, mlx_lora = pair
    loss_t = torch_lora.loss(examples)
    loss_t.backward()
    loss_m, grads = mlx_lora.loss_and_grad(examples)
    rel = abs(loss_t.item() - loss_m.item()) / abs(loss_t.item())
    mlx_grads = dict(tree_flatten(grads))
    cosines = []
    for name, p in torch_lora.parameters().items():
        a = p.grad.double().flatten()
        b = torch.from_numpy(np.array(mlx_grads[_mlx_name(name)])).double().T.flatten()
        cosines.append(float(a @ b / (a.norm() * b.norm())))
    print(f"loss rel diff {rel:.2e}, worst gradient cosine 1 - {1 - min(cosines):.1e}")
    assert rel <= 1e-4
    assert len(cosines) == len(mlx_grads) == 28
    assert min(cosines) >= 0.9999


def test_adamw_steps_from_the_same_start_agree(pair, examples):
    import mlx.core as mx
    import mlx.optimizers as optim

    torch_lora, mlx_lora = pair
    torch_opt = torch.optim.AdamW(torch_lora.parameters().values(), lr=LR, weight_decay=0.01)
    # torch's AdamW always corrects the moments' bias; MLX's only when asked
    mlx_opt = optim.AdamW(learning_rate=LR, weight_decay=0.01, bias_correction=True)
    worst = 0.0
    losses = []
    for _ in range(K_STEPS):
        torch_opt.zero_grad()
        loss_t = torch_lora.loss(examples)
        loss_t.backward()
        torch_opt.step()
        loss_m, grads = mlx_lora.loss_and_grad(examples)
        mlx_opt.update(mlx_lora.model, grads)
        mx.eval(mlx_lora.model.parameters(), mlx_opt.state)
        losses.append(loss_t.item())
        worst = max(worst, abs(loss_t.item() - loss_m.item()) / abs(loss_t.item()))
    print(f"{K_STEPS} AdamW steps, losses {losses}, worst per-step rel diff {worst:.2e}")
    assert losses[-1] < losses[0]  # the steps did move the adapter
    assert worst <= 1e-4


def _logits_torch(torch_lora, ids):
    with torch.no_grad():
        return torch_lora.model(input_ids=torch.tensor([ids])).logits[0].numpy()


def test_mlx_lm_folder_loads_in_mlx_lm_and_in_torch(tiny_planner, pair, examples, tmp_path):
    from mlx_lm import load

    torch_lora, mlx_lora = pair
    folder = mlx_lora.save(tmp_path / "mlx", trigger="zqx", lineage={"tunesmith.run": "r1"})
    assert sorted(p.name for p in folder.iterdir()) == [
        "adapter_config.json",
        "adapters.safetensors",
    ]
    config = json.loads((folder / "adapter_config.json").read_text())
    assert config["fine_tune_type"] == "lora" and config["lora_parameters"]["scale"] == 2.0
    assert "zqx" not in json.dumps(config)
    meta = read_metadata(folder)
    assert meta["hot_step_trigger"] == "zqx" and meta["tunesmith.run"] == "r1"

    ids = list(examples[2].input_ids)
    mlx_lora.load(folder)  # the factors as written (rounded to bf16 values)
    model, _ = load(str(tiny_planner), adapter_path=str(folder))  # mlx-lm's own loader
    import mlx.core as mx

    loaded = np.array(model(mx.array([ids]))[0])
    np.testing.assert_allclose(loaded, mlx_lora.logits(ids), atol=1e-6)

    fresh = TorchPlannerLora(load_planner(tiny_planner))
    fresh.load(folder)  # written by MLX, read by torch
    np.testing.assert_allclose(_logits_torch(fresh, ids), loaded, atol=2e-5)


def test_peft_folder_from_torch_loads_in_mlx(tiny_planner, pair, examples, tmp_path):
    torch_lora, _ = pair
    folder = torch_lora.save(tmp_path / "peft", trigger="zqx")
    torch_lora.load(folder)  # bf16-rounded, as written
    mlx_lora = MlxPlannerLora(tiny_planner)
    meta = mlx_lora.load(folder)  # written by torch, read by MLX
    assert meta["hot_step_trigger"] == "zqx"
    ids = list(examples[0].input_ids)
    np.testing.assert_allclose(mlx_lora.logits(ids), _logits_torch(torch_lora, ids), atol=2e-5)


def _relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.mark.filterwarnings("ignore:.*is_gradient_checkpointing.*:FutureWarning")  # PEFT's ask
@pytest.mark.parametrize("backend", ["torch", "mlx"])
def test_the_two_twins_are_the_same_planner(tiny_planner, pair, examples, tmp_path, backend):
    """The PEFT folder and its mlx-lm twin, as a run writes them from one adapter, loaded by
    transformers + PEFT and by mlx-lm: the same logits in float32, the same top tokens."""
    import mlx.core as mx
    from mlx_lm import load
    from peft import PeftModel

    torch_lora, mlx_lora = pair
    lora = torch_lora if backend == "torch" else mlx_lora
    lora.save(tmp_path / "run.mlx-lm", "mlx-lm")  # as PlannerTrainer.write_adapter does
    lora.save(tmp_path / "run", "peft")
    ids = list(examples[2].input_ids)  # the planner prompt and an answer of codes
    by_peft = PeftModel.from_pretrained(load_planner(tiny_planner).model, tmp_path / "run")
    with torch.no_grad():
        peft_logits = by_peft(input_ids=torch.tensor([ids])).logits[0].float().numpy()
        with by_peft.disable_adapter():
            base = by_peft(input_ids=torch.tensor([ids])).logits[0].float().numpy()
    model, _ = load(str(tiny_planner), adapter_path=str(tmp_path / "run.mlx-lm"))
    mlx_logits = np.array(model(mx.array([ids]))[0].astype(mx.float32))
    rel = _relative(mlx_logits, peft_logits)
    effect = _relative(peft_logits, base)
    print(f"{backend}: the twins' logits differ by {rel:.2e}, the adapter's effect {effect:.2e}")
    assert effect > 0.1  # the adapter changes the planner
    assert rel <= 1e-6  # measured 4.8e-7; a float32 twin of unrounded factors gives 4.6e-3
    assert (peft_logits.argmax(-1) == mlx_logits.argmax(-1)).all()
