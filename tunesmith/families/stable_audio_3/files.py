"""A Stable Audio 3 adapter as underfit's file (`tunesmith/formats/underfit.py`), of any of
underfit's adapter types: diffusers' layer names and the fused QKV's rows mapped onto underfit's
(`names.py`). The format decides which tensors of a type are row-indexed (`ROW_PARAMS`: lora_B,
a row magnitude, magnitude_r, a baked row norm); the hook here reorders them."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch

from tunesmith.families.stable_audio_3 import names as sa3_names
from tunesmith.formats import underfit


def write_adapter(
    path: Path,
    state: Mapping[str, torch.Tensor],
    config: underfit.AdapterConfig,
    differential: bool,
    metadata: Mapping[str, str],
) -> Path:
    """Write `state` (`<diffusers layer>.parametrizations.weight.0.<param>`, the params of
    `config.adapter_type`) of a DiT with or without differential attention as underfit's file;
    returns its path."""
    return underfit.write_adapter_file(
        path,
        state,
        config,
        to_checkpoint_name=sa3_names.to_underfit,
        permute_rows=row_permutation(differential),
        extra_metadata=metadata,
    )


def read_adapter(
    path: Path, differential: bool = True
) -> tuple[dict[str, torch.Tensor], underfit.AdapterInfo]:
    """An underfit file of any adapter type as (adapter state under diffusers' names,
    AdapterInfo), for a DiT with (`differential`, as the medium and the tiny model) or without
    differential attention."""
    return underfit.read_adapter_file(
        path, to_diffusers_name=sa3_names.to_diffusers, permute_rows=row_permutation(differential)
    )


def validate_files(path: Path) -> dict[str, str]:
    """underfit's validation of the file; returns its metadata other than `lora_config`."""
    return underfit.validate_file(path).metadata


def row_permutation(differential: bool):
    """The row hook of a DiT's adapter files: the fused QKV is reordered only where attention
    is differential (five blocks, e.g. the medium); a plain [q | k | v] projection (the small
    models) has one order on both sides, as diffusers' conversion script treats it."""
    return _permute_rows if differential else None


def _permute_rows(name: str, tensor: torch.Tensor, direction: str) -> torch.Tensor:
    """The fused differential self-attention QKV keeps its rows in another order in underfit's
    files. Called on the row-indexed tensors only; other layers' are returned as they are."""
    if not sa3_names.is_fused_qkv(name):
        return tensor
    if direction == "to_checkpoint":
        return sa3_names.qkv_rows_to_underfit(tensor)
    return sa3_names.qkv_rows_to_diffusers(tensor)
