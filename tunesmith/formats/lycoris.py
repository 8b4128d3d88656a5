"""LyCORIS's LoKr file: one `.safetensors` of `lycoris_<module, dots as underscores>.lokr_w1`
(and `.lokr_w2`, or `.lokr_w2_a` and `.lokr_w2_b`) and `.alpha` per module, what
`LycorisNetwork.save_weights` writes and Side-Step saves as `lokr_weights.safetensors`;
`lycoris.create_lycoris_from_weights` rebuilds each module from the tensors' shapes. Metadata
`algo: lokr`, `format: lycoris` (Side-Step's).

The scale alpha/dim is folded into w1 and the file stores alpha = dim, for every module, so
each reader applies a scale of 1 to the trained kron(s·w1, w2):

- with both factors full (w2 not split into w2_a·w2_b), LyCORIS ignores alpha and uses a scale
  of 1 (its loader, and ComfyUI's, do the same), where PEFT uses alpha/dim;
- with w2 split, LyCORIS 4.1.3's forward scales by alpha/dim once, but `get_diff_weight`, which
  `merge_to` and `onfly_merge` take, multiplies its `get_weight` (already scaled) by the scale
  again: a merge would apply (alpha/dim)², 50 % too much at alpha/dim = 1.5;
- ComfyUI reads `.alpha` / dim, which is then 1.

LoHa has the same double scale in LyCORIS 4.1.3 (`LohaModule.get_weight` scales by alpha/dim,
`get_diff_weight` once more), so `folded` puts a module's scale into the factor its algorithm
multiplies first (`lokr_w1`, `hada_w1_a`) and writes `.alpha` = the module's dim for LoKr and
LoHa alike, whatever the keys' prefix (kohya's `lora_unet_…` files hold the same tensors).
LoCon (`lora_down` / `lora_up`) scales once everywhere and keeps its alpha.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from tunesmith.formats import FormatError, read_header, text_metadata
from tunesmith.store.tensors import write_safetensors

if TYPE_CHECKING:
    import torch

PREFIX = "lycoris"  # LycorisNetwork.LORA_PREFIX
FACTORS = ("lokr_w1", "lokr_w2", "lokr_w2_a", "lokr_w2_b")
METADATA = {"algo": "lokr", "format": "lycoris"}


def name(module: str) -> str:
    """`layers.0.self_attn.to_q` → `lycoris_layers_0_self_attn_to_q` (LycorisNetwork's naming)."""
    return f"{PREFIX}_{module}".replace(".", "_")


def lokr_tensors(
    modules: Mapping[str, Mapping[str, torch.Tensor]],
    dim: int,
    alpha: float,
    dtype: torch.dtype | None = None,
) -> dict[str, torch.Tensor]:
    """`lycoris_<module>.<factor>` and `.alpha` for {module: {factor: tensor}} of one (dim,
    alpha), alpha/dim folded into w1 before the rounding to `dtype` and `.alpha` = dim (module
    docstring), each in `dtype` (alpha float32 when None)."""
    import torch

    out, seen = {}, {}
    for module, factors in modules.items():
        key = name(module)
        if key in seen:
            raise FormatError(f"layers {seen[key]!r} and {module!r} both become {key!r}")
        seen[key] = module
        out[f"{key}.lokr_w1"] = _tensor(factors["lokr_w1"].detach() * (alpha / dim), dtype)
        for factor, value in factors.items():
            if factor != "lokr_w1":
                out[f"{key}.{factor}"] = _tensor(value, dtype)
        out[f"{key}.alpha"] = torch.tensor(float(dim), dtype=dtype or torch.float32)
    return out


# The factor each algorithm's scale is folded into (the first in LyCORIS's product), and each
# algorithm's tensors as LyCORIS's modules name them (`weight_list`), alpha aside.
SCALED_FACTOR = {"lokr": "lokr_w1", "loha": "hada_w1_a"}
ALGO_FACTORS = {
    "lokr": ("lokr_w1", "lokr_w2", "lokr_w2_a", "lokr_w2_b"),
    "loha": ("hada_w1_a", "hada_w1_b", "hada_w2_a", "hada_w2_b"),
    "locon": ("lora_down.weight", "lora_up.weight", "dora_scale"),
}


def folded(
    factors: Mapping[str, torch.Tensor],
    algo: str,
    alpha: float,
    dim: int,
    dtype: torch.dtype | None = None,
) -> dict[str, torch.Tensor]:
    """One module's tensors (`factor` → tensor, as LyCORIS's module names them, `alpha` left
    out) as a file holds them, for a module that trained at `alpha` / `dim`: for LoKr and LoHa
    that scale multiplied into `SCALED_FACTOR[algo]` before the rounding to `dtype` and
    `alpha` = `dim` (module docstring); for LoCon the factors as they are and `alpha`."""
    import torch

    if algo not in ALGO_FACTORS:
        raise FormatError(f"algorithm {algo!r}: one of {', '.join(ALGO_FACTORS)}")
    unknown = sorted(set(factors) - set(ALGO_FACTORS[algo]))
    if unknown:
        raise FormatError(f"{algo}: tensors {unknown} are not LyCORIS's {algo} factors")
    first = SCALED_FACTOR.get(algo)
    out = {}
    for factor, value in factors.items():
        value = value.detach()
        if factor == first:
            value = value.float() * (alpha / dim)
        out[factor] = _tensor(value, dtype)
    out["alpha"] = torch.tensor(float(dim) if first else float(alpha), dtype=dtype or torch.float32)
    return out


def write(
    path: Path, tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, str] | None = None
) -> Path:
    """Write LyCORIS's file (as `lokr_tensors` gives them) to `path`; returns it."""
    path = Path(path)
    if path.suffix != ".safetensors":
        raise FormatError(f"{path}: a LyCORIS file is written as .safetensors")
    return write_safetensors(path, tensors, {**METADATA, **text_metadata(metadata)})


def validate(path: Path) -> tuple[dict[str, str], list[str]]:
    """Check a LyCORIS LoKr file from its header: every key `lycoris_<module>.<factor>` or
    `.alpha`, each module with w1, its w2 whole or split, and an alpha; returns (metadata,
    the modules' keys)."""
    path = Path(path)
    metadata, shapes, _ = read_header(path)
    modules: dict[str, set[str]] = {}
    for key in shapes:
        stem, _, factor = key.rpartition(".")
        if not stem.startswith(f"{PREFIX}_") or factor not in (*FACTORS, "alpha"):
            raise FormatError(f"{path}: key {key!r} is not {PREFIX}_<module>.<lokr factor|alpha>")
        modules.setdefault(stem, set()).add(factor)
    if not modules:
        raise FormatError(f"{path}: no LoKr modules")
    for stem, factors in sorted(modules.items()):
        w2 = factors & {"lokr_w2", "lokr_w2_a", "lokr_w2_b"}
        if not {"lokr_w1", "alpha"} <= factors or w2 not in (
            {"lokr_w2"},
            {"lokr_w2_a", "lokr_w2_b"},
        ):
            raise FormatError(
                f"{path}: {stem} has {sorted(factors)}; LyCORIS needs lokr_w1, "
                "lokr_w2 (or lokr_w2_a and lokr_w2_b) and alpha"
            )
    if metadata.get("algo") != "lokr":
        raise FormatError(f"{path}: metadata algo is {metadata.get('algo')!r}, not 'lokr'")
    return metadata, sorted(modules)


def _tensor(value: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    value = value.detach().cpu()
    return (value.to(dtype) if dtype is not None else value.clone()).contiguous()
