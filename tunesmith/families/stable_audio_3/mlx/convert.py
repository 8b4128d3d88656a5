"""diffusers' Stable Audio 3 weights → the MLX modules of `mlx/model.py`.

Every diffusers key is listed in an explicit table (`dit_key_map`, `duration_embedder_key_map`)
with its MLX key and its layout change; nothing is matched by pattern at load time. The
table differs from the identity in three ways only:

    to_cond_embed.0.weight              ->  to_cond_embed.layers.0.weight   (MLX nn.Sequential)
    transformer_blocks.0.pre_norm.gamma ->  transformer_blocks.0.pre_norm.weight   (RMSNorm)
    preprocess_conv.weight (out, in, k) ->  preprocess_conv.weight (out, k, in)    (MLX Conv1d)

Strict both ways: a diffusers key the table does not know, a table key the state dict lacks,
a table value the MLX model lacks and an MLX parameter no table value names all raise
`KeyMapError` listing every such key; a shape that does not match raises too. Nothing is
skipped, nothing is left at its random initial value.

Tensors keep their dtype (float32, float16 or bfloat16). Not handled: the text encoder and the
VAE (torch only), adapters (their own files).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import mlx.core as mx
import torch
from mlx.utils import tree_flatten

from tunesmith.families.stable_audio_3.mlx.model import DurationEmbedder, StableAudio3DiT

# The constructor arguments, read from each diffusers module's config.json.
DIT_CONFIG_FIELDS = (
    "io_channels",
    "patch_size",
    "embed_dim",
    "depth",
    "num_heads",
    "cond_token_dim",
    "global_cond_dim",
    "local_add_cond_dim",
    "timestep_features_dim",
    "ff_mult",
    "num_memory_tokens",
    "use_differential_attention",
)
DURATION_CONFIG_FIELDS = ("output_dim", "fourier_dim", "min_val", "max_val", "min_freq", "max_freq")

# torch Conv1d weight (out, in, k) -> MLX Conv1d weight (out, k, in).
CONV1D_TO_MLX = (0, 2, 1)


class Target(NamedTuple):
    key: str  # the MLX parameter's name (tree_flatten of model.parameters())
    transpose: tuple[int, ...] | None = None  # axes for the torch tensor, None: as it is


class KeyMapError(ValueError):
    """The state dict and the key map (or the map and the MLX model) do not match."""


_SEQUENTIAL_LINEARS = ("0", "2")  # Linear, SiLU, Linear: the SiLU has no parameters


def _sequential(name: str, bias: bool) -> dict[str, Target]:
    params = ("weight", "bias") if bias else ("weight",)
    return {
        f"{name}.{i}.{p}": Target(f"{name}.layers.{i}.{p}")
        for i in _SEQUENTIAL_LINEARS
        for p in params
    }


def _block(i: int) -> dict[str, Target]:
    b = f"transformer_blocks.{i}"
    same = [
        "to_scale_shift_gate",
        "self_attn.to_qkv.weight",  # rows [q1|q2|k1|k2|v] in both: no permutation here
        "self_attn.to_out.weight",
        "cross_attn.to_q.weight",
        "cross_attn.to_kv.weight",
        "cross_attn.to_out.weight",
        "ff.proj_in.weight",
        "ff.proj_in.bias",
        "ff.proj_out.weight",
        "ff.proj_out.bias",
    ]
    norms = [
        "pre_norm",
        "self_attn.q_norm",
        "self_attn.k_norm",
        "cross_attend_norm",
        "cross_attn.q_norm",
        "cross_attn.k_norm",
        "ff_norm",
    ]
    table = {f"{b}.{name}": Target(f"{b}.{name}") for name in same}
    table |= {f"{b}.{name}.gamma": Target(f"{b}.{name}.weight") for name in norms}
    table |= _sequential(f"{b}.to_local_embed", bias=True)
    return table


def dit_key_map(depth: int, num_memory_tokens: int) -> dict[str, Target]:
    """Every key of `StableAudio3DiTModel.state_dict()` -> its MLX key and layout change."""
    table = {
        "prompt_padding_embedding": Target("prompt_padding_embedding"),
        "proj_in.weight": Target("proj_in.weight"),
        "proj_out.weight": Target("proj_out.weight"),
        "preprocess_conv.weight": Target("preprocess_conv.weight", CONV1D_TO_MLX),
        "postprocess_conv.weight": Target("postprocess_conv.weight", CONV1D_TO_MLX),
        # A persistent buffer in diffusers, so it is in the state dict; frozen in MLX.
        "rotary_pos_emb.inv_freq": Target("rotary_pos_emb.inv_freq"),
    }
    if num_memory_tokens > 0:
        table["memory_tokens"] = Target("memory_tokens")
    table |= _sequential("to_timestep_embed", bias=True)
    table |= _sequential("to_cond_embed", bias=False)
    table |= _sequential("to_global_embed", bias=False)
    table |= _sequential("global_cond_embedder", bias=True)
    for i in range(depth):
        table |= _block(i)
    return table


def duration_embedder_key_map() -> dict[str, Target]:
    """Every key of `StableAudio3DurationEmbedder.state_dict()` -> its MLX key."""
    return {
        "freqs": Target("freqs"),  # buffer in diffusers, frozen in MLX
        "linear.weight": Target("linear.weight"),
        "linear.bias": Target("linear.bias"),
    }


def _unmatched(what: str, left: str, right: str, only_left: set, only_right: set) -> None:
    if not only_left and not only_right:
        return
    lines = [f"{what}: the keys do not match, none is ignored."]
    if only_left:
        lines.append(f"  in {left}, not in {right}: " + ", ".join(sorted(only_left)))
    if only_right:
        lines.append(f"  in {right}, not in {left}: " + ", ".join(sorted(only_right)))
    raise KeyMapError("\n".join(lines))


def _to_mlx(tensor: torch.Tensor) -> mx.array:
    """The same values and dtype; bfloat16 goes through float32 (exact), numpy has none."""
    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:
        return mx.array(tensor.float().numpy()).astype(mx.bfloat16)
    return mx.array(tensor.numpy())


def load_state_dict(
    model, state_dict: Mapping[str, torch.Tensor], key_map: Mapping[str, Target], what: str
) -> None:
    """Convert `state_dict` by `key_map` into `model`, strictly (see the module docstring)."""
    sd, table = set(state_dict), set(key_map)
    _unmatched(what, "the state dict", "the key map", sd - table, table - sd)
    shapes = {k: v.shape for k, v in tree_flatten(model.parameters())}
    targets = {t.key for t in key_map.values()}
    _unmatched(what, "the key map", "the MLX model", targets - set(shapes), set(shapes) - targets)

    weights = []
    for key, target in key_map.items():
        value = _to_mlx(state_dict[key])
        if target.transpose is not None:
            value = value.transpose(target.transpose)
        if tuple(value.shape) != tuple(shapes[target.key]):
            expected = tuple(shapes[target.key])
            raise KeyMapError(
                f"{what}: {key} has shape {tuple(state_dict[key].shape)}, which becomes "
                f"{tuple(value.shape)}; the MLX parameter {target.key} is {expected}"
            )
        weights.append((target.key, value))
    model.load_weights(weights, strict=True)
    mx.eval(model.parameters())


def _config(config: Mapping, fields: tuple[str, ...], what: str) -> dict:
    missing = [f for f in fields if f not in config]
    if missing:
        raise KeyMapError(f"{what} config.json lacks {', '.join(missing)}")
    return {f: config[f] for f in fields}


def dit_from_state_dict(config: Mapping, state_dict: Mapping[str, torch.Tensor]) -> StableAudio3DiT:
    """An MLX DiT from a `StableAudio3DiTModel` config and state dict."""
    kwargs = _config(config, DIT_CONFIG_FIELDS, "StableAudio3DiTModel")
    model = StableAudio3DiT(**kwargs)
    key_map = dit_key_map(kwargs["depth"], kwargs["num_memory_tokens"])
    load_state_dict(model, state_dict, key_map, "StableAudio3DiTModel")
    return model


def duration_embedder_from_state_dict(
    config: Mapping, state_dict: Mapping[str, torch.Tensor]
) -> DurationEmbedder:
    """An MLX duration embedder from a `StableAudio3DurationEmbedder` config and state dict."""
    model = DurationEmbedder(
        **_config(config, DURATION_CONFIG_FIELDS, "StableAudio3DurationEmbedder")
    )
    load_state_dict(model, state_dict, duration_embedder_key_map(), "StableAudio3DurationEmbedder")
    return model


def from_diffusers(transformer, duration_embedder) -> tuple[StableAudio3DiT, DurationEmbedder]:
    """The MLX (DiT, duration embedder) holding the weights of the diffusers modules
    (`pipe.transformer`, `pipe.duration_embedder`), in their dtypes."""
    return (
        dit_from_state_dict(transformer.config, transformer.state_dict()),
        duration_embedder_from_state_dict(duration_embedder.config, duration_embedder.state_dict()),
    )
