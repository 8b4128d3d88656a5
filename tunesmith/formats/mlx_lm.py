"""mlx-lm's LoRA adapter folder, what `mlx_lm.lora` writes and `mlx_lm.tuner.utils.load_adapters`
(and so `mlx_lm.load(model, adapter_path=folder)`) reads.

    adapter_config.json   fine_tune_type, num_layers, lora_parameters {rank, scale, dropout,
                          keys}, written by mlx-lm's own `save_config` (top-level keys sorted)
    adapters.safetensors  `<module>.lora_a` [in, r] and `.lora_b` [r, out], float32 as mlx-lm
                          saves them: mlx-lm multiplies x @ lora_a @ lora_b, so both are the
                          transposes of PEFT's A [r, in] and B [out, r]

mlx-lm's `scale` is PEFT's alpha / r. Factors pass in and out in PEFT's orientation, {module:
(A, B)}, the module named by its path in the model (`model.layers.3.self_attn.q_proj`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from tunesmith.formats import FormatError, factor_pairs, text_metadata
from tunesmith.store.atomic import atomic_write_bytes
from tunesmith.store.tensors import safetensors_bytes

if TYPE_CHECKING:
    import torch

WEIGHTS, CONFIG = "adapters.safetensors", "adapter_config.json"


def config(model: str, num_layers: int, rank: int, scale: float, keys: tuple[str, ...]) -> dict:
    """A LoRA's adapter_config.json document (dropout 0)."""
    return {
        "model": model,
        "fine_tune_type": "lora",
        "num_layers": num_layers,
        "lora_parameters": {"rank": rank, "scale": scale, "dropout": 0.0, "keys": list(keys)},
    }


def write(
    folder: Path,
    factors: Mapping[str, tuple[torch.Tensor, torch.Tensor]],
    document: dict,
    metadata: Mapping[str, str] | None = None,
) -> Path:
    """Write `folder/adapters.safetensors`, then `folder/adapter_config.json` (mlx-lm's own
    writer); returns the folder."""
    from mlx_lm.utils import save_config

    folder = Path(folder)
    tensors = {}
    for module, (a, b) in factors.items():
        tensors[f"{module}.lora_a"] = a.float().T.contiguous()
        tensors[f"{module}.lora_b"] = b.float().T.contiguous()
    meta = {"format": "mlx", **text_metadata(metadata)}
    atomic_write_bytes(folder / WEIGHTS, safetensors_bytes(tensors, meta))
    save_config(dict(document), folder / CONFIG)
    return folder


def read(folder: Path) -> tuple[dict[str, tuple[torch.Tensor, torch.Tensor]], dict, dict[str, str]]:
    """An mlx-lm LoRA folder as ({module: (A, B)} float32 in PEFT's orientation, its config,
    the weights' metadata). Refuses another fine-tune type and an A without its B."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    folder = Path(folder)
    try:
        document = json.loads((folder / CONFIG).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FormatError(f"{folder}: no readable {CONFIG} ({exc})") from None
    if document.get("fine_tune_type", "lora") != "lora":
        raise FormatError(f"{folder}: an mlx-lm {document.get('fine_tune_type')} adapter, not LoRA")
    if not (folder / WEIGHTS).is_file():
        raise FormatError(f"{folder}: no {WEIGHTS}")
    tensors = load_file(folder / WEIGHTS)
    pairs = factor_pairs(tensors, ".lora_a", ".lora_b", str(folder / WEIGHTS))
    # mlx-lm keeps A [in, r] and B [r, out]: PEFT's orientation is their transpose
    factors = {
        m: (a.float().T.contiguous(), b.float().T.contiguous()) for m, (a, b) in pairs.items()
    }
    with safe_open(folder / WEIGHTS, "pt") as f:
        metadata = dict(f.metadata() or {})
    return factors, document, metadata
