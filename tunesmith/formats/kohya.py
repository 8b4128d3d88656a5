"""kohya sd-scripts' LoRA file, which ComfyUI, A1111/Forge and kohya's own tools load.

One `.safetensors` with `<stem>.lora_down.weight` (PEFT's A, [r, in]), `<stem>.lora_up.weight`
(B, [out, r]) and `<stem>.alpha` per module, the stem as kohya names the module
(`lora_unet_input_blocks_4_1_transformer_blocks_0_attn1_to_q`: the family's name map), and
kohya's training metadata (`ss_*`, train_network.py) with Stability's model spec
(`modelspec.*`, sai_model_spec 1.0.0). No wall-clock fields (kohya's
`ss_training_finished_at`, `modelspec.date` are optional): the same tensors and settings must
give the same bytes, which the renders' cache keys on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tunesmith.formats import FormatError, lora_pairs, read_header, text_metadata
from tunesmith.store.tensors import write_safetensors

if TYPE_CHECKING:
    import torch

DOWN, UP, ALPHA = ".lora_down.weight", ".lora_up.weight", ".alpha"


@dataclass(frozen=True)
class Network:
    """One LoRA network's settings as kohya's metadata names them."""

    dim: int
    alpha: float
    target: tuple[str, ...]  # the module names adapted (ss_network_args' `target`)
    base_model_version: str  # ss_base_model_version, e.g. "sdxl_base_v1-0"
    architecture: str  # modelspec.architecture, e.g. "stable-diffusion-xl-v1-base/lora"
    implementation: str  # modelspec.implementation: the reference code's repository
    prediction_type: str  # modelspec.prediction_type: "epsilon" or "v_prediction"
    name: str = ""  # ss_output_name and modelspec.title
    steps: int = 0
    size: int = 1024  # the training resolution, square
    base_model: str = ""  # ss_sd_model_name

    def metadata(self) -> dict[str, str]:
        return {
            # kohya sd-scripts' training metadata (train_network.py), the keys its tools read
            "ss_network_module": "networks.lora",
            "ss_network_dim": str(self.dim),
            "ss_network_alpha": _number(self.alpha),
            "ss_network_args": json.dumps({"target": list(self.target)}),
            "ss_base_model_version": self.base_model_version,
            "ss_v2": "False",
            "ss_output_name": self.name,
            "ss_steps": str(self.steps),
            "ss_resolution": f"({self.size}, {self.size})",
            "ss_sd_model_name": self.base_model,
            # Stability's model spec (sai_model_spec 1.0.0), which ComfyUI and A1111 show
            "modelspec.sai_model_spec": "1.0.0",
            "modelspec.architecture": self.architecture,
            "modelspec.implementation": self.implementation,
            "modelspec.title": self.name,
            "modelspec.resolution": f"{self.size}x{self.size}",
            "modelspec.prediction_type": self.prediction_type,
        }


def lora_tensors(
    factors: Mapping[str, tuple[torch.Tensor, torch.Tensor]], alpha: float
) -> dict[str, torch.Tensor]:
    """`<stem>.lora_down.weight` (A), `.lora_up.weight` (B), `.alpha` for {stem: (A, B)},
    in float32."""
    import torch

    out = {}
    for stem, (a, b) in factors.items():
        out[stem + DOWN] = a.detach().float().cpu().contiguous()
        out[stem + UP] = b.detach().float().cpu().contiguous()
        out[stem + ALPHA] = torch.tensor(alpha, dtype=torch.float32)
    return out


def write(
    path: Path,
    tensors: Mapping[str, torch.Tensor],
    network: Network,
    metadata: Mapping[str, str] | None = None,
) -> Path:
    """Write kohya's file: `tensors` (as `lora_tensors` gives them), the network's `ss_*` and
    `modelspec.*` keys and `metadata` (the run's lineage); returns `path`."""
    meta = {"format": "pt", **text_metadata(metadata), **network.metadata()}
    return write_safetensors(Path(path), tensors, meta)


def validate(path: Path, prefix: str) -> tuple[dict[str, str], list[str]]:
    """Check a kohya LoRA file from its header: readable, `<prefix>…` down/up pairs whose
    ranks chain, each with its `.alpha`, the `ss_network_dim` and `modelspec.architecture`
    metadata; returns (metadata, the stems)."""
    path = Path(path)
    metadata, shapes, _ = read_header(path)
    stems = lora_pairs(path, shapes, prefix, DOWN, UP)
    no_alpha = [stem for stem in stems if stem + ALPHA not in shapes]
    if no_alpha:
        raise FormatError(f"{path}: no .alpha for {', '.join(no_alpha[:5])}")
    if "ss_network_dim" not in metadata or "modelspec.architecture" not in metadata:
        raise FormatError(f"{path}: no ss_network_dim / modelspec.architecture metadata")
    return metadata, stems


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))
