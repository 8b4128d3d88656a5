"""Stable Audio 3 layer names: diffusers' modules ↔ underfit's checkpoint names.

underfit writes adapters under the names of the reference (stable-audio-tools) model, with two
roots: `model.` for the DiT (the reference's `model.model.`, less one `model.`) and
`conditioners.` for the conditioner. diffusers renamed some modules when it converted that
model (diffusers' `scripts/convert_stable_audio_3_to_diffusers.py`) and reordered the rows of
one fused weight. Here a diffusers name is qualified by its pipeline component, as in diffusers'
own LoRA state dicts:

    transformer.transformer_blocks.3.ff.proj_in   ↔  model.transformer.layers.3.ff.ff.0.proj
    transformer.proj_in                           ↔  model.transformer.project_in
    transformer.to_cond_embed.0                   ↔  model.to_cond_embed.0
    transformer.prompt_padding_embedding          ↔  conditioners.prompt.padding_embedding
    duration_embedder.linear                      ↔  conditioners.seconds_total.embedder.embedding.1

Names may be module names or parameter names (a module name plus `.weight`, `.bias`, ...).
Anything else raises UnknownLayerName (a KeyError) saying what is known.

Not handled: the T5Gemma text encoder (frozen: the reference keeps it out of the conditioner's
registered modules, so underfit never adapts it) and the VAE (never adapted).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from tunesmith.formats.underfit import ROW_PARAMS

DIT_ROOT_DIFFUSERS = "transformer."  # the pipeline component
DIT_ROOT_UNDERFIT = "model."  # get_lora_state_dict(model.model): reference DiT keys less one model.
CONDITIONER_ROOT = "conditioners."  # get_lora_state_dict(model.conditioner)

# DiT names outside the blocks: diffusers → reference, relative to the roots.
_DIT_TOP = {
    "to_timestep_embed": "to_timestep_embed",
    "to_cond_embed": "to_cond_embed",
    "to_global_embed": "to_global_embed",
    "preprocess_conv": "preprocess_conv",
    "postprocess_conv": "postprocess_conv",
    "proj_in": "transformer.project_in",
    "proj_out": "transformer.project_out",
    "memory_tokens": "transformer.memory_tokens",
    "rotary_pos_emb": "transformer.rotary_pos_emb",
    "global_cond_embedder": "transformer.global_cond_embedder",
    "transformer_blocks": "transformer.layers",
}
# Inside one block (`transformer_blocks.{i}` ↔ `transformer.layers.{i}`). Only the SwiGLU
# feed-forward is renamed: the reference's ff.ff.0 is a GLU holding `proj`, ff.ff.2 the Linear out.
_BLOCK = {
    name: name
    for name in (
        "pre_norm",
        "self_attn",
        "self_attn.to_qkv",
        "self_attn.to_out",
        "self_attn.q_norm",
        "self_attn.k_norm",
        "cross_attend_norm",
        "cross_attn",
        "cross_attn.to_q",
        "cross_attn.to_kv",
        "cross_attn.to_out",
        "cross_attn.q_norm",
        "cross_attn.k_norm",
        "ff_norm",
        "ff",
        "to_scale_shift_gate",
        "to_local_embed",
    )
} | {"ff.proj_in": "ff.ff.0.proj", "ff.proj_out": "ff.ff.2"}
# Whole names (component-qualified diffusers → underfit) that live on the conditioner side.
_CONDITIONER = {
    "transformer.prompt_padding_embedding": "conditioners.prompt.padding_embedding",
    "duration_embedder.linear": "conditioners.seconds_total.embedder.embedding.1",
}
_SEQUENTIALS = ("to_timestep_embed", "to_cond_embed", "to_global_embed", "global_cond_embedder")
_PARAMETERS = ("weight", "bias", "gamma", "inv_freq")


@dataclass(frozen=True)
class _Direction:
    """The tables for translating names one way."""

    root_from: str
    root_to: str
    top: dict[str, str]
    blocks: tuple[str, str]  # the block list's name on each side
    block: dict[str, str]
    sequentials: dict[str, str]  # nn.Sequential(Linear, SiLU, Linear) names, kept indices
    conditioner: dict[str, str]


def _reverse(table: dict[str, str]) -> dict[str, str]:
    return {v: k for k, v in table.items()}


_TO_UNDERFIT_NAMES = _Direction(
    root_from=DIT_ROOT_DIFFUSERS,
    root_to=DIT_ROOT_UNDERFIT,
    top=_DIT_TOP,
    blocks=("transformer_blocks", "transformer.layers"),
    block=_BLOCK,
    sequentials={k: _DIT_TOP[k] for k in _SEQUENTIALS},
    conditioner=_CONDITIONER,
)
_TO_DIFFUSERS_NAMES = _Direction(
    root_from=DIT_ROOT_UNDERFIT,
    root_to=DIT_ROOT_DIFFUSERS,
    top=_reverse(_DIT_TOP),
    blocks=("transformer.layers", "transformer_blocks"),
    block=_reverse(_BLOCK),
    sequentials={_DIT_TOP[k]: k for k in _SEQUENTIALS},
    conditioner=_reverse(_CONDITIONER),
)


class UnknownLayerName(KeyError):
    """A name with no counterpart on the other side; the message says what is known."""

    def __str__(self) -> str:  # KeyError would print the message with quotes around it
        return str(self.args[0])


def to_underfit(diffusers_name: str) -> str:
    """`transformer.transformer_blocks.0.ff.proj_in` → `model.transformer.layers.0.ff.ff.0.proj`."""
    return _translate(diffusers_name, _TO_UNDERFIT_NAMES, "diffusers")


def to_diffusers(underfit_name: str) -> str:
    """`model.transformer.layers.0.ff.ff.0.proj` → `transformer.transformer_blocks.0.ff.proj_in`."""
    return _translate(underfit_name, _TO_DIFFUSERS_NAMES, "underfit")


def _translate(name: str, way: _Direction, side: str) -> str:
    """A module name, or a module name and one parameter name (`.weight`, `.gamma`, ...)."""
    translated = _module(name, way)
    if translated is None:
        head, _, last = name.rpartition(".")
        if head and last in _PARAMETERS and (module := _module(head, way)) is not None:
            translated = f"{module}.{last}"
    if translated is None:
        raise _unknown(name, side)
    return translated


def _module(name: str, way: _Direction) -> str | None:
    if name in way.conditioner:
        return way.conditioner[name]
    if not name.startswith(way.root_from):
        return None
    local = name.removeprefix(way.root_from)
    if local in way.top:
        return way.root_to + way.top[local]
    blocks_from, blocks_to = way.blocks
    if local.startswith(blocks_from + "."):
        index, _, rest = local.removeprefix(blocks_from + ".").partition(".")
        if not index.isdigit():
            return None
        if not rest:
            return f"{way.root_to}{blocks_to}.{index}"
        inner = way.block.get(rest) or _sequential_child(rest, {"to_local_embed": "to_local_embed"})
        return None if inner is None else f"{way.root_to}{blocks_to}.{index}.{inner}"
    child = _sequential_child(local, way.sequentials)
    return None if child is None else way.root_to + child


def _sequential_child(local: str, sequentials: dict[str, str]) -> str | None:
    """`to_cond_embed.2` → its counterpart: the same index under the (renamed) Sequential."""
    head, _, index = local.rpartition(".")
    if head in sequentials and index in ("0", "1", "2"):  # Linear, SiLU, Linear
        return f"{sequentials[head]}.{index}"
    return None


def _unknown(name: str, side: str) -> UnknownLayerName:
    if side == "diffusers":
        known = (
            f"names under {DIT_ROOT_DIFFUSERS!r} (StableAudio3DiTModel: "
            f"{', '.join(_DIT_TOP)}; in blocks: {', '.join(_BLOCK)}) or {', '.join(_CONDITIONER)}"
        )
    else:
        known = (
            f"names under {DIT_ROOT_UNDERFIT!r} (the reference DiT: "
            f"{', '.join(_DIT_TOP.values())}; in layers: {', '.join(_BLOCK.values())}) "
            f"or {', '.join(_CONDITIONER.values())}"
        )
    other = "underfit" if side == "diffusers" else "diffusers"
    frozen = ("text_encoder.", "vae.", "conditioners.prompt.model.", "pretransform.")
    why = (
        " (the T5Gemma text encoder and the VAE are frozen and never adapted)"
        if name.startswith(frozen)
        else ""
    )
    return UnknownLayerName(
        f"{name!r} is not a Stable Audio 3 {side} layer name with a {other} counterpart{why}; "
        f"known: {known}, each optionally followed by .{'/.'.join(_PARAMETERS)}"
    )


def adapter_targets(
    transformer: nn.Module, duration_embedder: nn.Module | None = None
) -> dict[str, str]:
    """Every nn.Linear and nn.Conv1d (underfit's target types): diffusers name → underfit name.

    Call it on the plain models, before adapters wrap them. Raises UnknownLayerName if a layer
    has no underfit name (a diffusers version that added one).
    """
    targets = {}
    for root, model in (("transformer", transformer), ("duration_embedder", duration_embedder)):
        if model is None:
            continue
        for name, module in model.named_modules():
            if isinstance(module, (nn.Linear, nn.Conv1d)):
                qualified = f"{root}.{name}"
                targets[qualified] = to_underfit(qualified)
    return targets


# ---------------------------------------------------------------------------------------------
# The fused self-attention projection `self_attn.to_qkv` (differential attention: 5 blocks of
# `dim` output rows each) has another row order on each side:
#
#     reference / underfit   [ q | k | v | q2 | k2 ]
#     diffusers              [ q1 | q2 | k1 | k2 | v ]     (q1 = q, k1 = k)
#
# Going to diffusers is W_d = P W_u for the block permutation matrix P, block j of W_d being
# block _TO_DIFFUSERS[j] of W_u. An adapter's update follows the weight:
#   - LoRA: ΔW = s·B·A (B: out × r, A: r × in). P·ΔW = s·(P·B)·A, so B's rows are permuted and
#     A, which acts on the input side, is unchanged. The same holds for lora-xs' U (out × r),
#     with V and M_xs unchanged.
#   - DoRA-rows: W' = m ⊙ V / ‖V‖_row with V = W + s·B·A and one magnitude per output row.
#     Row norms move with their rows (‖P V‖_row = P ‖V‖_row), so m is permuted like B.
#   - DoRA-cols (one magnitude per input column): ‖P V‖_col = ‖V‖_col, so m is unchanged.
#     BoRA: magnitude_r is permuted, magnitude_c is not.
# The cross-attention `to_q` ([q | q2]) and `to_kv` ([k | k2 | v]) have the same order on both.

_TO_DIFFUSERS = (0, 3, 1, 4, 2)  # diffusers block j = underfit block _TO_DIFFUSERS[j]
_TO_UNDERFIT = tuple(_TO_DIFFUSERS.index(j) for j in range(5))  # (0, 2, 4, 1, 3)

# Row-indexed adapter tensors of each underfit adapter type (the format's `ROW_PARAMS`, which
# the file writer and reader permute); every other tensor of these types is input-side.
ROW_TENSORS = {**ROW_PARAMS, "dora": ROW_PARAMS["dora-rows"]}  # "dora": legacy dora-rows
_INPUT_TENSORS = {"lora_A", "magnitude", "magnitude_c", "V", "M_xs", "lora_dropout_mask"}


def is_fused_qkv(name: str) -> bool:
    """Whether `name` (either side, module or parameter) is a self-attention to_qkv."""
    return re.search(r"(^|\.)self_attn\.to_qkv(\.|$)", name) is not None


def qkv_rows_to_diffusers(rows: torch.Tensor) -> torch.Tensor:
    """Reorder dim 0 from underfit's [q|k|v|q2|k2] to diffusers' [q1|q2|k1|k2|v]."""
    return _permute_blocks(rows, _TO_DIFFUSERS)


def qkv_rows_to_underfit(rows: torch.Tensor) -> torch.Tensor:
    """Reorder dim 0 from diffusers' [q1|q2|k1|k2|v] to underfit's [q|k|v|q2|k2]."""
    return _permute_blocks(rows, _TO_UNDERFIT)


def convert_qkv_adapter_tensor(
    tensor_name: str,
    tensor: torch.Tensor,
    adapter_type: str,
    to: Literal["underfit", "diffusers"],
) -> torch.Tensor:
    """Convert one adapter tensor of a self_attn.to_qkv layer (e.g. `lora_B`) to the other order.

    `tensor_name` is the last part of the key (`...parametrizations.weight.0.lora_B` → "lora_B").
    Row-indexed tensors are permuted, input-side ones returned as they are.
    """
    if adapter_type not in ROW_TENSORS:
        raise ValueError(
            f"unknown adapter_type {adapter_type!r}; known: {', '.join(sorted(ROW_TENSORS))}"
        )
    if tensor_name in ROW_TENSORS[adapter_type]:
        return qkv_rows_to_diffusers(tensor) if to == "diffusers" else qkv_rows_to_underfit(tensor)
    if tensor_name in _INPUT_TENSORS:
        return tensor
    raise UnknownLayerName(
        f"adapter tensor {tensor_name!r} of a {adapter_type} to_qkv: not known to be row- or "
        f"input-indexed (row: {sorted(ROW_TENSORS[adapter_type])}; input: {sorted(_INPUT_TENSORS)})"
    )


def _permute_blocks(rows: torch.Tensor, order: tuple[int, ...]) -> torch.Tensor:
    if rows.dim() == 0 or rows.shape[0] % 5:
        raise ValueError(
            f"a fused to_qkv tensor needs a first dimension divisible by 5, got shape "
            f"{tuple(rows.shape)}"
        )
    blocks = rows.chunk(5, dim=0)
    return torch.cat([blocks[j] for j in order], dim=0)
