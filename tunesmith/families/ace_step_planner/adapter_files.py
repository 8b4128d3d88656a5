"""The planner adapter's two folders, and the factors both backends read and write.

Both backends hold the same numbers: per projection, LoRA factors A [r, in] and B [out, r] and
one scale alpha / r, applied as y = W x + (alpha / r) * B A x. `LoraFactors` is that, keyed by
the module's path in the causal LM (`model.layers.3.self_attn.q_proj`), which is the same path
in transformers' Qwen3ForCausalLM and in mlx-lm's qwen3 Model.

    PEFT     adapter_config.json        PEFT's own LoraConfig file (r, lora_alpha, targets)
             adapter_model.safetensors  `base_model.model.<module>.lora_A.weight` [r, in] and
                                        `.lora_B.weight` [out, r], bf16 (as PEFT names them when
                                        it saves a PeftModel of a causal LM; HOT-Step's LM export
                                        writes the same keys)
    mlx-lm   adapter_config.json        fine_tune_type, num_layers, lora_parameters {rank, scale,
                                        dropout, keys}: what mlx_lm.lora writes and
                                        mlx_lm.tuner.utils.load_adapters reads
             adapters.safetensors       `<module>.lora_a` [in, r] and `.lora_b` [r, out]
                                        (mlx-lm multiplies x @ lora_a @ lora_b, so both are the
                                        transposes of PEFT's), float32 as mlx-lm saves them

mlx-lm's `scale` is PEFT's alpha / r (its default of 20 is not used). In both files the
safetensors `__metadata__` carries the trigger (`hot_step_trigger`,
`hot_step_trigger_position`, `modelspec.trigger_phrase`: HOT-Step's keys) and the run's
lineage, never adapter_config.json (PEFT builds LoraConfig(**json), and an unknown key is a
TypeError in some versions). Folders are written to a temporary sibling and renamed in.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file

from tunesmith.store.tensors import safetensors_bytes

PEFT_WEIGHTS, MLX_WEIGHTS, CONFIG = (
    "adapter_model.safetensors",
    "adapters.safetensors",
    "adapter_config.json",
)
PEFT_PREFIX = "base_model.model."
TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
MLX_KEYS = tuple(
    f"self_attn.{m}" if m.endswith(("q_proj", "k_proj", "v_proj", "o_proj")) else f"mlp.{m}"
    for m in TARGET_MODULES
)


@dataclass
class LoraFactors:
    """A LoRA over the planner's projections: {module: (A [r, in], B [out, r])} float32."""

    factors: dict[str, tuple[torch.Tensor, torch.Tensor]]
    rank: int
    alpha: float

    @property
    def scale(self) -> float:
        return self.alpha / self.rank


def trigger_metadata(trigger: str, position: str = "prepend") -> dict[str, str]:
    """HOT-Step's three trigger keys, all or none."""
    if not trigger:
        return {}
    return {
        "hot_step_trigger": trigger,
        "hot_step_trigger_position": position or "prepend",
        "modelspec.trigger_phrase": trigger,
    }


def write_peft(
    folder: Path,
    lora: LoraFactors,
    base_model: str = "",
    trigger: str = "",
    trigger_position: str = "prepend",
    lineage: dict[str, str] | None = None,
) -> Path:
    """A PEFT adapter folder that `PeftModel.from_pretrained(planner, folder)` loads."""
    from peft import LoraConfig

    config = LoraConfig(
        r=lora.rank,
        lora_alpha=lora.alpha,
        lora_dropout=0.0,
        target_modules=list(TARGET_MODULES),
        bias="none",
        task_type="CAUSAL_LM",
        base_model_name_or_path=base_model or None,
    )
    tensors = {}
    for module, (a, b) in lora.factors.items():
        tensors[f"{PEFT_PREFIX}{module}.lora_A.weight"] = a.to(torch.bfloat16).contiguous()
        tensors[f"{PEFT_PREFIX}{module}.lora_B.weight"] = b.to(torch.bfloat16).contiguous()
    meta = _metadata(trigger, trigger_position, lineage)

    def write(tmp: Path) -> None:
        config.save_pretrained(tmp)  # PEFT's own adapter_config.json
        (tmp / PEFT_WEIGHTS).write_bytes(safetensors_bytes(tensors, {"format": "pt", **meta}))

    return _write_folder(Path(folder), write)


def write_mlx_lm(
    folder: Path,
    lora: LoraFactors,
    num_layers: int,
    base_model: str = "",
    trigger: str = "",
    trigger_position: str = "prepend",
    lineage: dict[str, str] | None = None,
) -> Path:
    """An mlx-lm adapter folder that `mlx_lm.load(planner, adapter_path=folder)` loads."""
    from mlx_lm.utils import save_config

    config = {
        "model": base_model,
        "fine_tune_type": "lora",
        "num_layers": num_layers,
        "lora_parameters": {
            "rank": lora.rank,
            "scale": lora.scale,
            "dropout": 0.0,
            "keys": list(MLX_KEYS),
        },
    }
    tensors = {}
    for module, (a, b) in lora.factors.items():
        tensors[f"{module}.lora_a"] = a.float().T.contiguous()
        tensors[f"{module}.lora_b"] = b.float().T.contiguous()
    meta = _metadata(trigger, trigger_position, lineage)

    def write(tmp: Path) -> None:
        save_config(config, tmp / CONFIG)  # mlx-lm's own writer
        (tmp / MLX_WEIGHTS).write_bytes(safetensors_bytes(tensors, {"format": "mlx", **meta}))

    return _write_folder(Path(folder), write)


def read(folder: Path) -> tuple[LoraFactors, dict[str, str]]:
    """(factors, safetensors metadata) of a PEFT or mlx-lm adapter folder."""
    folder = Path(folder)
    try:
        config = json.loads((folder / CONFIG).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{folder}: no readable {CONFIG} ({exc})") from None
    if (folder / PEFT_WEIGHTS).is_file():
        return _read_peft(folder, config)
    if (folder / MLX_WEIGHTS).is_file():
        return _read_mlx(folder, config)
    raise ValueError(f"{folder}: neither {PEFT_WEIGHTS} (PEFT) nor {MLX_WEIGHTS} (mlx-lm)")


def read_metadata(folder: Path) -> dict[str, str]:
    """The safetensors metadata of an adapter folder's weights file."""
    folder = Path(folder)
    path = folder / PEFT_WEIGHTS if (folder / PEFT_WEIGHTS).is_file() else folder / MLX_WEIGHTS
    with safe_open(path, "pt") as f:
        return dict(f.metadata() or {})


def validate_folder(folder: Path, lineage: tuple[str, ...] = ()) -> dict[str, str]:
    """Check a planner PEFT folder as PEFT loads it, and its mlx-lm twin `<folder>.mlx-lm`
    beside it (as the trainer writes them); returns the PEFT weights' metadata. ValueError
    naming the file and the rule."""
    from peft import LoraConfig, PeftConfig

    folder = Path(folder)
    config = PeftConfig.from_pretrained(str(folder))
    if not isinstance(config, LoraConfig) or config.task_type != "CAUSAL_LM":
        raise ValueError(f"{folder / CONFIG}: a {type(config).__name__}, not a causal-LM LoRA")
    lora, metadata = read(folder)
    with safe_open(folder / PEFT_WEIGHTS, "pt") as f:
        dtypes = {f.get_slice(k).get_dtype() for k in f.keys()}
    if dtypes != {"BF16"}:
        raise ValueError(f"{folder / PEFT_WEIGHTS}: tensors in {sorted(dtypes)}; expected BF16")
    wanted = set(config.target_modules)
    found = {module.rsplit(".", 1)[-1] for module in lora.factors}
    if found != wanted:
        raise ValueError(f"{folder / PEFT_WEIGHTS}: adapts {sorted(found)}, but "
                         f"adapter_config.json targets {sorted(wanted)}")  # fmt: skip
    missing = [k for k in lineage if k not in metadata]
    if missing:
        raise ValueError(f"{folder / PEFT_WEIGHTS}: lineage metadata missing: {', '.join(missing)}")
    twin = folder.parent / f"{folder.name}.mlx-lm"
    mlx, mlx_metadata = read(twin)
    if set(mlx.factors) != set(lora.factors) or mlx.rank != lora.rank:
        raise ValueError(f"{twin}: its modules or rank differ from {folder}")
    if any(mlx_metadata.get(k) != metadata.get(k) for k in lineage):
        raise ValueError(f"{twin / MLX_WEIGHTS}: its lineage differs from {folder}")
    return metadata


def _read_peft(folder: Path, config: dict) -> tuple[LoraFactors, dict[str, str]]:
    if config.get("peft_type") != "LORA" or config.get("use_dora") or config.get("use_rslora"):
        raise ValueError(f"{folder}: a PEFT adapter other than a plain LoRA (r, lora_alpha)")
    tensors = load_file(folder / PEFT_WEIGHTS)
    factors = {}
    for key in tensors:
        if key.endswith(".lora_A.weight"):
            module = key[len(PEFT_PREFIX) : -len(".lora_A.weight")]
            b = tensors.get(f"{PEFT_PREFIX}{module}.lora_B.weight")
            if b is None:
                raise ValueError(f"{folder / PEFT_WEIGHTS}: {key} has no lora_B partner")
            factors[module] = (tensors[key].float(), b.float())
    lora = LoraFactors(factors, int(config["r"]), float(config["lora_alpha"]))
    return lora, read_metadata(folder)


def _read_mlx(folder: Path, config: dict) -> tuple[LoraFactors, dict[str, str]]:
    if config.get("fine_tune_type", "lora") != "lora":
        raise ValueError(f"{folder}: an mlx-lm {config.get('fine_tune_type')} adapter, not LoRA")
    params = config["lora_parameters"]
    tensors = load_file(folder / MLX_WEIGHTS)
    factors = {}
    for key in tensors:
        if key.endswith(".lora_a"):
            module = key[: -len(".lora_a")]
            b = tensors.get(f"{module}.lora_b")
            if b is None:
                raise ValueError(f"{folder / MLX_WEIGHTS}: {key} has no lora_b partner")
            factors[module] = (tensors[key].float().T.contiguous(), b.float().T.contiguous())
    rank = int(params["rank"])
    lora = LoraFactors(factors, rank, float(params["scale"]) * rank)
    return lora, read_metadata(folder)


def _metadata(trigger: str, position: str, lineage: dict[str, str] | None) -> dict[str, str]:
    lineage = dict(lineage or {})
    not_text = [k for k, v in lineage.items() if not isinstance(k, str) or not isinstance(v, str)]
    if not_text:
        raise TypeError(f"lineage values must be strings (safetensors metadata): {not_text}")
    return {**lineage, **trigger_metadata(trigger, position)}


def _write_folder(folder: Path, write) -> Path:
    """Run `write(tmp)` into a fresh sibling folder, then rename it to `folder` (replacing an
    earlier adapter folder there), so a reader never sees half an adapter."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f".tmp-{folder.name}-{uuid.uuid4().hex[:12]}"
    tmp.mkdir()
    old = None
    try:
        write(tmp)
        if folder.exists():
            old = folder.parent / f".tmp-old-{folder.name}-{uuid.uuid4().hex[:12]}"
            os.replace(folder, old)
        os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    return folder
