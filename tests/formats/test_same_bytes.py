"""Every adapter file of every family and format has the same bytes in every process.

Python seeds its string hashes per process, so a set of module names (PEFT's
`target_modules`) lists in another order under another `PYTHONHASHSEED`, and a file written
from it gets other bytes: every cache keyed on that file's hash then misses. Three processes
with seeds 1, 2 and 3 write the same adapters (random factors on the tiny models, through the
families' own writers) and every file, `adapter_config.json` included, must be the same.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import tree_bytes

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
LINEAGE = {
    "tunesmith.version": "t",
    "tunesmith.base_model_fingerprint": "fp",
    "tunesmith.run_key": "k",
    "tunesmith.training_config": "{}",
}
TRIGGER = ("zqx", "prepend")


def _randomise(parameters, seed: int) -> None:
    import torch

    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in parameters:
            p.copy_(0.1 * torch.randn(p.shape, generator=g))


def _sdxl(out: Path) -> None:
    import torch
    from diffusers import EulerDiscreteScheduler, UNet2DConditionModel

    from tunesmith.families.sdxl import files
    from tunesmith.families.sdxl.objective import SdxlLora
    from tunesmith.families.sdxl.tiny import TINY_SDXL_CONFIG

    torch.manual_seed(0)
    unet = UNet2DConditionModel(**TINY_SDXL_CONFIG["unet"])
    scheduler = EulerDiscreteScheduler(**TINY_SDXL_CONFIG["scheduler"])
    lora = SdxlLora(unet, scheduler, 0.13025, rank=4, alpha=8.0)
    _randomise(lora.parameters(), 1)
    path = files.save_peft(lora, out / "sdxl.safetensors", LINEAGE)
    files.save_kohya(lora, files.kohya_path(path), LINEAGE, "sdxl", 3, 64)


def _ace_step(out: Path) -> None:
    import torch
    from diffusers import AceStepTransformer1DModel
    from torch import nn

    from tunesmith.adapters import torch_lokr, torch_lora
    from tunesmith.families.ace_step import files
    from tunesmith.families.ace_step.tiny import TINY_ACE_STEP_CONFIG
    from tunesmith.train.config import resolve_run

    settings = {
        "lora": {"type": "lora", "rank": 4, "alpha": 8.0},
        "lokr": {"type": "lokr", "rank": 8, "alpha": 12.0, "factor": 4},
    }
    for name, adapter in settings.items():
        torch.manual_seed(0)
        dit = AceStepTransformer1DModel(**TINY_ACE_STEP_CONFIG["transformer"])
        kinds = (".self_attn.", ".cross_attn.", ".mlp.")
        targets = [
            n
            for n, m in dit.named_modules()
            if isinstance(m, nn.Linear) and any(kind in n for kind in kinds)
        ]
        if adapter["type"] == "lokr":
            torch_lokr.attach(dit, targets, adapter["rank"], adapter["alpha"], adapter["factor"])
            _randomise([p for _, p in torch_lokr.named_adapter_parameters(dit)], 2)
        else:
            torch_lora.attach(dit, targets, adapter["rank"], adapter["alpha"], "lora")
            _randomise(torch_lora.adapter_parameters(dit), 2)
        raw = {"name": name, "family": "ace-step", "base_model": "tiny", "adapter": adapter}
        run = resolve_run(raw, Path("tunesmith.toml"), 0)
        files.write_adapter(out / name / files.WEIGHTS, dit, run, TRIGGER, LINEAGE)


def _planner(out: Path) -> None:
    import torch

    from tunesmith.families.ace_step_planner import adapter_files

    g = torch.Generator().manual_seed(3)
    factors = {}
    for layer in range(2):
        for key in adapter_files.MLX_KEYS:
            a, b = torch.randn(4, 16, generator=g), torch.randn(16, 4, generator=g)
            factors[f"model.layers.{layer}.{key}"] = (a, b)
    lora = adapter_files.LoraFactors(factors, rank=4, alpha=8.0)
    adapter_files.write(out / "plan", "peft", lora, 2, "tiny-planner", *TRIGGER, LINEAGE)
    adapter_files.write(out / "plan.mlx-lm", "mlx-lm", lora, 2, "tiny-planner", *TRIGGER, LINEAGE)


def _stable_audio_3(out: Path) -> None:
    import torch
    from diffusers import StableAudio3DiTModel, StableAudio3DurationEmbedder
    from torch import nn

    from tunesmith.adapters import torch_lora
    from tunesmith.families.stable_audio_3 import files
    from tunesmith.families.stable_audio_3 import names as sa3_names
    from tunesmith.families.stable_audio_3.tiny import TINY_SA3_CONFIG
    from tunesmith.formats.underfit import AdapterConfig

    torch.manual_seed(0)
    transformer = StableAudio3DiTModel(**TINY_SA3_CONFIG["transformer"])
    embedder = StableAudio3DurationEmbedder(**TINY_SA3_CONFIG["duration_embedder"])
    modules = nn.ModuleDict({"transformer": transformer, "duration_embedder": embedder})
    targets = list(sa3_names.adapter_targets(transformer, embedder))
    torch_lora.attach(modules, targets, 4, 8.0, "dora-rows")
    _randomise(torch_lora.adapter_parameters(modules), 4)
    config = AdapterConfig(rank=4, alpha=8.0, adapter_type="dora-rows", step=3, epoch=1)
    differential = transformer.config.use_differential_attention
    state = torch_lora.adapter_state(modules)
    files.write_adapter(out / "sa3.safetensors", state, config, differential, LINEAGE)


def write_every_format(out: str) -> None:
    """In the child: each family's adapter files under `out`."""
    import torch

    torch.set_num_threads(1)
    for write in (_sdxl, _ace_step, _planner, _stable_audio_3):
        folder = Path(out) / write.__name__.strip("_")
        folder.mkdir(parents=True)
        write(folder)


def test_every_file_has_the_same_bytes_under_three_hash_seeds(tmp_path):
    trees = []
    for seed in ("1", "2", "3"):
        out = tmp_path / seed
        code = f"from tests.formats.test_same_bytes import write_every_format as w; w({str(out)!r})"
        env = {**os.environ, "PYTHONHASHSEED": seed, "OMP_NUM_THREADS": "1"}
        child = subprocess.run(
            [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True
        )
        assert child.returncode == 0, child.stderr[-3000:]
        trees.append(tree_bytes(out))
    names = sorted(trees[0])
    assert (
        "ace_step/lokr/adapter_config.json" in names and "planner/plan/adapter_config.json" in names
    )
    assert len(names) == 16, names
    for tree in trees[1:]:
        assert sorted(tree) == names
        differ = [name for name in names if tree[name] != trees[0][name]]
        assert not differ, f"bytes differ between processes: {differ}"
