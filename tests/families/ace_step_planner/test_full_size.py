"""The three planner releases at full size on the `meta` device: their sizes against the
published weights, and the adapter folders a run writes for each, read back by PEFT's and
mlx-lm's own loaders onto the full model."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from tunesmith.families.ace_step_planner import adapter_files
from tunesmith.families.ace_step_planner.adapter_files import TARGET_MODULES, LoraFactors
from tunesmith.families.ace_step_planner.full_size import PUBLISHED, build
from tunesmith.families.ace_step_planner.model import Planner
from tunesmith.families.ace_step_planner.torch_lm import ALPHA, RANK, TorchPlannerLora

# The bf16 model.safetensors of each release as its repository lists it (the 4B comes in two
# shards, listed without sizes), and the parameters the config builds.
PARAMETERS = {
    "acestep-5Hz-lm-0.6B": 662_884_352,
    "acestep-5Hz-lm-1.7B": 1_854_243_840,
    "acestep-5Hz-lm-4B": 4_189_554_176,
}
PUBLISHED_BYTES = {"acestep-5Hz-lm-0.6B": 1_325_804_024, "acestep-5Hz-lm-1.7B": 3_708_521_528}


@pytest.mark.parametrize("name", PARAMETERS)
def test_the_config_builds_the_release(name):
    model = build(name)
    assert next(model.parameters()).device.type == "meta"
    assert model.lm_head.weight is model.model.embed_tokens.weight  # tied, as released
    count = sum(p.numel() for p in model.parameters())
    assert count == PARAMETERS[name]
    if name in PUBLISHED_BYTES:  # bf16 weights and a safetensors header of some kilobytes
        assert 0 < PUBLISHED_BYTES[name] - 2 * count < 64 * 1024


@pytest.mark.parametrize("name", PARAMETERS)
def test_a_runs_adapter_files_load_onto_the_full_planner(name, tmp_path: Path):
    """The run's default LoRA attached to the full planner on `meta`; its PEFT folder and mlx-lm
    twin written by the family's writer (float32 zeros of the factors' shapes: the names and
    shapes are what is checked); PEFT's loader finds every key a LoRA parameter of the full
    model and none missing, mlx-lm's `load_adapters` makes exactly the file's LoRA parameters."""
    from mlx.utils import tree_flatten
    from mlx_lm.models import qwen3
    from mlx_lm.tuner.utils import load_adapters
    from peft.utils import load_peft_weights, set_peft_model_state_dict
    from safetensors import safe_open

    config = PUBLISHED[name]
    layers = config["num_hidden_layers"]
    model = build(name)
    modules = dict(model.named_modules())
    lora = TorchPlannerLora(Planner(Path(name), model, None, None, 0))
    pairs = lora.factor_parameters()
    assert len(pairs) == layers * len(TARGET_MODULES)
    for module, (a, b) in pairs.items():  # A [r, in], B [out, r] of a Linear of the planner
        base = modules[module]
        assert isinstance(base, torch.nn.Linear)
        assert (a.shape, b.shape) == ((RANK, base.in_features), (base.out_features, RANK))
    factors = {m: (torch.zeros(a.shape), torch.zeros(b.shape)) for m, (a, b) in pairs.items()}
    lora_factors = LoraFactors(factors, RANK, ALPHA)
    peft_folder = adapter_files.write(tmp_path / "run", "peft", lora_factors, layers)
    mlx_folder = adapter_files.write(tmp_path / "run.mlx-lm", "mlx-lm", lora_factors, layers)

    weights = load_peft_weights(str(peft_folder))
    assert len(weights) == 2 * layers * len(TARGET_MODULES)
    with warnings.catch_warnings():  # copying into `meta` parameters is a no-op, and says so
        warnings.simplefilter("ignore", UserWarning)
        loaded = set_peft_model_state_dict(lora.model, weights)
    assert loaded.unexpected_keys == []
    assert [k for k in loaded.missing_keys if ".lora_" in k] == []

    mlx_model = qwen3.Model(qwen3.ModelArgs.from_dict(config))  # lazy: nothing is computed
    mlx_model.freeze()
    load_adapters(mlx_model, str(mlx_folder))
    made = {key for key, _ in tree_flatten(mlx_model.trainable_parameters())}
    with safe_open(mlx_folder / adapter_files.MLX_WEIGHTS, "np") as f:
        keys = set(f.keys())
    assert len(keys) == 2 * layers * len(TARGET_MODULES)
    assert made == keys
