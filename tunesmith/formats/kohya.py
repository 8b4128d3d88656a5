"""kohya sd-scripts' LoRA file, which ComfyUI, A1111/Forge and kohya's own tools load.

One `.safetensors` with `<stem>.lora_down.weight` (PEFT's A, [r, in]), `<stem>.lora_up.weight`
(B, [out, r]) and `<stem>.alpha` per module, the stem as kohya names the module
(`lora_unet_input_blocks_4_1_transformer_blocks_0_attn1_to_q`: the family's name map), and
kohya's training metadata (`ss_*`, train_network.py) with Stability's model spec
(`modelspec.*`, sai_model_spec 1.0.0). No wall-clock fields (kohya's
`ss_training_finished_at`, `modelspec.date` are optional): the same tensors and settings must
give the same bytes, which the renders' cache keys on.

The other networks kohya's tools load from the same file layout, each module's tensors under
its stem (`validate_network` checks every form):

    lora, locon   `lora_down.weight`, `lora_up.weight`, `alpha` (a conv layer's down
                  [r, in, k, k] and up [out, r, 1, 1], as networks/lora.py and LyCORIS's LoCon
                  write them)
    dora          the same and `dora_scale`, the magnitude [out, 1] (LyCORIS's `dora_wd` with
                  `wd_on_output`, its default)
    lokr          `lokr_w1`, `lokr_w2` or `lokr_w2_a` and `lokr_w2_b`, `alpha` (LyCORIS)
    loha          `hada_w1_a`, `hada_w1_b`, `hada_w2_a`, `hada_w2_b`, `alpha` (LyCORIS)

A LyCORIS network says `ss_network_module` "lycoris.kohya" (sd-scripts' `--network_module`
for LyCORIS) and its `algo` and settings in `ss_network_args`, as sd-scripts records its
`--network_args`; a network that trains the text encoders records `ss_text_encoder_lr` and
`ss_network_train_unet_only` "False".
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
    module: str = "networks.lora"  # ss_network_module; "lycoris.kohya" for LyCORIS's
    args: tuple[tuple[str, str], ...] = ()  # further ss_network_args (algo, conv_dim, ...)
    text_encoder_lr: float | None = None  # ss_text_encoder_lr where the text encoders train
    training: tuple[tuple[str, str], ...] = ()  # further ss_ keys: the options a run set

    def metadata(self) -> dict[str, str]:
        text_encoders = {}
        if self.text_encoder_lr is not None:
            text_encoders = {
                "ss_text_encoder_lr": number(self.text_encoder_lr),
                "ss_network_train_unet_only": "False",
            }
        return {
            # kohya sd-scripts' training metadata (train_network.py), the keys its tools read
            "ss_network_module": self.module,
            "ss_network_dim": str(self.dim),
            "ss_network_alpha": number(self.alpha),
            "ss_network_args": json.dumps({"target": list(self.target), **dict(self.args)}),
            **text_encoders,
            **dict(self.training),
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


# Each network's tensors per module (a stem's suffixes, `alpha` aside), by algorithm name.
FORMS = {
    "lora": frozenset({"lora_down.weight", "lora_up.weight"}),
    "dora": frozenset({"lora_down.weight", "lora_up.weight", "dora_scale"}),
    "lokr": frozenset({"lokr_w1", "lokr_w2"}),
    "lokr_split": frozenset({"lokr_w1", "lokr_w2_a", "lokr_w2_b"}),
    "loha": frozenset({"hada_w1_a", "hada_w1_b", "hada_w2_a", "hada_w2_b"}),
}
_SUFFIXES = sorted({s for form in FORMS.values() for s in form} | {"alpha"}, key=len, reverse=True)


def validate_network(
    path: Path, prefixes: tuple[str, ...]
) -> tuple[dict[str, str], dict[str, str]]:
    """Check a kohya-layout file of any network above from its header: readable, every key
    `<stem>.<tensor>` with a stem under one of `prefixes`, each stem's tensors one form whose
    ranks chain, with its `.alpha`, and the `ss_network_dim` / `modelspec.architecture`
    metadata. Returns (metadata, {stem: form})."""
    path = Path(path)
    metadata, shapes, _ = read_header(path)
    tensors: dict[str, dict[str, tuple[int, ...]]] = {}
    for key, shape in shapes.items():
        suffix = next((s for s in _SUFFIXES if key.endswith(f".{s}")), None)
        stem = key[: -len(suffix) - 1] if suffix else ""
        if suffix is None or not stem.startswith(prefixes):
            raise FormatError(
                f"{path}: key {key!r} is not <{'|'.join(prefixes)}…>.<lora_down.weight|"
                "lora_up.weight|dora_scale|lokr_w1|lokr_w2|lokr_w2_a|lokr_w2_b|hada_w1_a|…|alpha>"
            )
        tensors.setdefault(stem, {})[suffix] = shape
    if not tensors:
        raise FormatError(f"{path}: no modules")
    forms = {}
    for stem, found in sorted(tensors.items()):
        if "alpha" not in found:
            raise FormatError(f"{path}: no .alpha for {stem}")
        factors = frozenset(found) - {"alpha"}
        form = next((name for name, want in FORMS.items() if factors == want), None)
        if form is None:
            raise FormatError(
                f"{path}: {stem} holds {sorted(factors)}, no network's set of tensors"
            )
        _chain(path, stem, form, found)
        forms[stem] = form.removesuffix("_split")
    if "ss_network_dim" not in metadata or "modelspec.architecture" not in metadata:
        raise FormatError(f"{path}: no ss_network_dim / modelspec.architecture metadata")
    return metadata, forms


def _chain(path: Path, stem: str, form: str, shapes: dict[str, tuple[int, ...]]) -> None:
    """The factors of one module multiply: the inner sizes agree."""
    pairs = {
        "lora": [("lora_down.weight", 0, "lora_up.weight", 1)],
        "dora": [
            ("lora_down.weight", 0, "lora_up.weight", 1),
            ("lora_up.weight", 0, "dora_scale", 0),
        ],
        "lokr_split": [("lokr_w2_a", 1, "lokr_w2_b", 0)],
        "loha": [
            ("hada_w1_a", 1, "hada_w1_b", 0),
            ("hada_w2_a", 1, "hada_w2_b", 0),
            ("hada_w1_a", 0, "hada_w2_a", 0),
        ],
    }
    for first, i, second, j in pairs.get(form, []):
        a, b = shapes[first], shapes[second]
        if len(a) <= i or len(b) <= j or a[i] != b[j]:
            raise FormatError(f"{path}: {stem}: {first} {a} and {second} {b} do not chain")


def number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))
