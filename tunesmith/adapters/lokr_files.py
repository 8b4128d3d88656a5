"""LoKr adapters of `torch_lokr` in PEFT's folder and LyCORIS's file: the names, factors and
configs `tunesmith/formats/peft.py` and `tunesmith/formats/lycoris.py` write.

    PEFT     `<layer>.lokr_w1` (and `.lokr_w2`, or `.lokr_w2_a`, `.lokr_w2_b`) with a
             `LoKrConfig` (r = dim, decompose_factor = factor, target_modules = the layer
             names); `PeftModel.from_pretrained` builds the same shapes from the config. The
             scale alpha/dim is multiplied into w1 and the config says alpha = dim, so PEFT's
             alpha/r is 1 and every loader, PEFT's, diffusers' and ComfyUI's (which reads no
             config and no alpha from a PEFT file), computes the trained function; the trained
             alpha belongs in the metadata.
    LyCORIS  the same layers' factors, alpha/dim folded into w1 as in the PEFT folder, and
             `.alpha` = dim: LyCORIS's forward, its `merge_to` and ComfyUI then all apply the
             trained scale once (`tunesmith/formats/lycoris.py` says why each needs it).

Layer names are the model's module names, or `rename(name)` where the file must name another
model's modules: Side-Step wraps ACE-Step's original decoder, whose attention projections are
`q_proj`, `k_proj`, `v_proj`, `o_proj` where diffusers' are `to_q`, `to_k`, `to_v`, `to_out.0`.
Not handled: per-layer ranks (PEFT's rank_pattern).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import peft
import torch

from tunesmith.adapters.torch_lokr import LoKrLinear, adapter_layers
from tunesmith.formats import FormatError, lycoris
from tunesmith.formats import peft as peft_format

Rename = Callable[[str], str] | None


def _settings(
    model: torch.nn.Module, rename: Rename
) -> tuple[dict[str, LoKrLinear], int, float, int]:
    """The adapters by their names in the file, and their one (dim, alpha, factor)."""
    layers = {}
    for name, module in adapter_layers(model).items():
        renamed = rename(name) if rename else name
        if renamed in layers:
            raise FormatError(f"two adapted layers are both named {renamed!r} in the file")
        layers[renamed] = module
    if not layers:
        raise FormatError("the model has no LoKr adapters to write")
    settings = {(m.dim, m.alpha, m.factor) for m in layers.values()}
    if len(settings) != 1:
        raise FormatError(
            f"one LoKrConfig holds one (dim, alpha, factor); the adapters have {sorted(settings)}"
        )
    dim, alpha, factor = settings.pop()
    return layers, dim, alpha, factor


def peft_adapter(
    model: torch.nn.Module, dtype: torch.dtype, base_model: str | None = None, rename: Rename = None
) -> tuple[dict[str, torch.Tensor], peft.LoKrConfig]:
    """(`<layer>.<factor>` → tensor in `dtype`, the LoKrConfig) of `model`'s adapters, the
    scale folded into w1 (module docstring)."""
    layers, dim, _, factor = _settings(model, rename)
    tensors = {}
    for name, module in layers.items():
        for key, param in module.factors().items():
            value = param.detach().float()
            if key == "lokr_w1":
                value = value * module.scaling  # the scale, folded
            tensors[f"{name}.{key}"] = value.to(dtype).cpu()
    config = peft.LoKrConfig(
        r=dim,
        alpha=float(dim),
        decompose_factor=factor,
        target_modules=sorted(layers),
        init_weights="lycoris",  # our init; PEFT only uses it to create fresh weights
        rank_dropout=0.0,
        module_dropout=0.0,
        inference_mode=True,  # as PeftModel.save_pretrained writes it
        base_model_name_or_path=base_model,
    )
    return tensors, config


def lycoris_state_dict(
    model: torch.nn.Module, dtype: torch.dtype | None = None, rename: Rename = None
) -> dict[str, torch.Tensor]:
    """`lycoris_<layer>.<factor>` and `.alpha` → tensor, the scale folded into w1 (module
    docstring)."""
    layers, dim, alpha, _ = _settings(model, rename)
    factors = {name: module.factors() for name, module in layers.items()}
    return lycoris.lokr_tensors(factors, dim, alpha, dtype)


def read_peft_lokr(folder: Path) -> tuple[dict[str, torch.Tensor], peft.LoKrConfig]:
    """A PEFT LoKr folder as (`<layer>.<factor>` → tensor, its LoKrConfig): `load_adapter_state`
    takes the first. Refuses a folder that is not a PEFT LoKr adapter, naming what is wrong."""
    state, config, _ = peft_format.read(folder, (peft.LoKrConfig,))
    return state, config
