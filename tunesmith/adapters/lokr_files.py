"""LoKr adapters of `torch_lokr` as files: PEFT's folder and LyCORIS's single file.

The two loaders take different keys, so there are two writers:

    PEFT     `adapter_model.safetensors` with `base_model.model.<layer>.lokr_w1` (and `.lokr_w2`
             or `.lokr_w2_a`, `.lokr_w2_b`), beside `adapter_config.json`, a `LoKrConfig` as
             PEFT's own `save_pretrained` writes it (r = dim, alpha, decompose_factor = factor,
             target_modules = the layer names). `PeftModel.from_pretrained` builds the same
             shapes from the config and applies s = alpha/r.
    LyCORIS  one `.safetensors` with `lycoris_<layer, dots as underscores>.lokr_w1` ... and
             `.alpha`, what `LycorisNetwork.save_weights` writes and Side-Step saves as
             `lokr_weights.safetensors`; `lycoris.create_lycoris_from_weights` rebuilds each
             module from the tensors' shapes. Metadata `algo: lokr`, `format: lycoris`
             (Side-Step's).

One scale convention differs. With both factors full (w2 not split into w2_a·w2_b: dim ≥
max(w2's sides)/2), LyCORIS ignores alpha and uses a scale of 1 (its loader, and ComfyUI's, do
the same); PEFT uses alpha/dim always. The LyCORIS writer therefore folds alpha/dim into w1 for
such layers and stores alpha = dim, as LyCORIS itself stores it there. With HOT-Step's defaults
(dim 512, alpha 512) the factor is 1 and nothing changes.

Layer names are the model's module names, or `rename(name)` where the file must name another
model's modules: Side-Step wraps ACE-Step's original decoder, whose attention projections are
`q_proj`, `k_proj`, `v_proj`, `o_proj` where diffusers' are `to_q`, `to_k`, `to_v`, `to_out.0`.
Tensors are written in `dtype` (the families write bf16, HOT-Step's and Side-Step's export
dtype) and each file atomically. Not handled: reading a file back into a run (a run resumes
from its own state folder), per-layer ranks (PEFT's rank_pattern).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import peft
import torch
from safetensors.torch import load_file, save

from tunesmith.adapters.torch_lokr import LoKrLinear, adapter_layers
from tunesmith.store.atomic import atomic_write_bytes

PEFT_WEIGHTS = "adapter_model.safetensors"
PEFT_CONFIG = "adapter_config.json"
PEFT_PREFIX = "base_model.model."  # PeftModel's own prefix in adapter_model.safetensors
LYCORIS_PREFIX = "lycoris"  # LycorisNetwork.LORA_PREFIX


class LoKrFileError(ValueError):
    """A model whose LoKr adapters cannot be written as asked; the message says why."""


Rename = Callable[[str], str] | None


def _settings(
    model: torch.nn.Module, rename: Rename
) -> tuple[dict[str, LoKrLinear], int, float, int]:
    """The adapters by their names in the file, and their one (dim, alpha, factor)."""
    layers = {}
    for name, module in adapter_layers(model).items():
        renamed = rename(name) if rename else name
        if renamed in layers:
            raise LoKrFileError(f"two adapted layers are both named {renamed!r} in the file")
        layers[renamed] = module
    if not layers:
        raise LoKrFileError("the model has no LoKr adapters to write")
    settings = {(m.dim, m.alpha, m.factor) for m in layers.values()}
    if len(settings) != 1:
        raise LoKrFileError(
            f"one LoKrConfig holds one (dim, alpha, factor); the adapters have {sorted(settings)}"
        )
    dim, alpha, factor = settings.pop()
    return layers, dim, alpha, factor


def peft_config(
    model: torch.nn.Module, base_model: str | None = None, rename: Rename = None
) -> peft.LoKrConfig:
    """The LoKrConfig under which PEFT rebuilds `model`'s adapters with the same shapes."""
    layers, dim, alpha, factor = _settings(model, rename)
    return peft.LoKrConfig(
        r=dim,
        alpha=alpha,
        decompose_factor=factor,
        target_modules=sorted(layers),
        init_weights="lycoris",  # our init; PEFT only uses it to create fresh weights
        rank_dropout=0.0,
        module_dropout=0.0,
        inference_mode=True,  # as PeftModel.save_pretrained writes it
        base_model_name_or_path=base_model,
    )


def peft_state_dict(
    model: torch.nn.Module, dtype: torch.dtype | None = None, rename: Rename = None
) -> dict:
    """`base_model.model.<layer>.<factor>` → tensor, as PEFT saves a LoKr model."""
    out = {}
    for name, module in _settings(model, rename)[0].items():
        for factor, param in module.factors().items():
            out[f"{PEFT_PREFIX}{name}.{factor}"] = _tensor(param, dtype)
    return out


def save_peft_lokr(
    folder: Path,
    model: torch.nn.Module,
    metadata: dict[str, str] | None = None,
    dtype: torch.dtype | None = None,
    base_model: str | None = None,
    rename: Rename = None,
) -> Path:
    """Write `folder/adapter_model.safetensors` and `folder/adapter_config.json`; returns folder.

    The config is written last, so a folder with a config has its weights.
    """
    folder = Path(folder)
    config = peft_config(model, base_model, rename)
    tensors = peft_state_dict(model, dtype, rename)
    atomic_write_bytes(folder / PEFT_WEIGHTS, save(tensors, {"format": "pt", **(metadata or {})}))
    with tempfile.TemporaryDirectory() as tmp:  # PEFT's own writer, then moved in atomically
        config.save_pretrained(tmp)
        atomic_write_bytes(folder / PEFT_CONFIG, (Path(tmp) / PEFT_CONFIG).read_bytes())
    return folder


def lycoris_name(layer: str) -> str:
    """`layers.0.self_attn.to_q` → `lycoris_layers_0_self_attn_to_q` (LycorisNetwork's naming)."""
    return f"{LYCORIS_PREFIX}_{layer}".replace(".", "_")


def lycoris_state_dict(
    model: torch.nn.Module, dtype: torch.dtype | None = None, rename: Rename = None
) -> dict:
    """`lycoris_<layer>.<factor>` and `.alpha` → tensor, in LyCORIS's scale convention."""
    layers, dim, alpha, _ = _settings(model, rename)
    out, seen = {}, {}
    for name, module in layers.items():
        key = lycoris_name(name)
        if key in seen:
            raise LoKrFileError(f"layers {seen[key]!r} and {name!r} both become {key!r}")
        seen[key] = name
        factors = module.factors()
        w1, stored_alpha = factors["lokr_w1"].detach(), float(alpha)
        if "lokr_w2" in factors:  # both factors full: LyCORIS applies a scale of 1
            w1, stored_alpha = w1 * (alpha / dim), float(dim)
        out[f"{key}.lokr_w1"] = _tensor(w1, dtype)
        for factor, param in factors.items():
            if factor != "lokr_w1":
                out[f"{key}.{factor}"] = _tensor(param, dtype)
        out[f"{key}.alpha"] = torch.tensor(stored_alpha, dtype=dtype or torch.float32)
    return out


def save_lycoris_lokr(
    path: Path,
    model: torch.nn.Module,
    metadata: dict[str, str] | None = None,
    dtype: torch.dtype | None = None,
    rename: Rename = None,
) -> Path:
    """Write LyCORIS's file of `model`'s adapters to `path` (a `.safetensors`); returns it."""
    path = Path(path)
    if path.suffix != ".safetensors":
        raise LoKrFileError(f"{path}: a LyCORIS file is written as .safetensors")
    tensors = lycoris_state_dict(model, dtype, rename)
    info = {"algo": "lokr", "format": "lycoris", **(metadata or {})}
    atomic_write_bytes(path, save(tensors, info))
    return path


def read_peft_lokr(folder: Path) -> tuple[dict[str, torch.Tensor], peft.LoKrConfig]:
    """A PEFT LoKr folder as (`<layer>.<factor>` → tensor, its LoKrConfig): `load_adapter_state`
    takes the first. Refuses a folder that is not a PEFT LoKr adapter, naming what is wrong."""
    folder = Path(folder)
    for name in (PEFT_CONFIG, PEFT_WEIGHTS):
        if not (folder / name).is_file():
            raise LoKrFileError(f"{folder}: no {name}; a PEFT adapter folder holds both")
    config = peft.PeftConfig.from_pretrained(str(folder))
    if not isinstance(config, peft.LoKrConfig):
        raise LoKrFileError(f"{folder / PEFT_CONFIG}: a {type(config).__name__}, not a LoKrConfig")
    state = {}
    for key, value in load_file(folder / PEFT_WEIGHTS).items():
        if not key.startswith(PEFT_PREFIX):
            raise LoKrFileError(f"{folder / PEFT_WEIGHTS}: key {key!r} lacks {PEFT_PREFIX!r}")
        state[key.removeprefix(PEFT_PREFIX)] = value
    return state, config


def _tensor(value: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    value = value.detach().cpu()
    return (value.to(dtype) if dtype is not None else value.clone()).contiguous()
