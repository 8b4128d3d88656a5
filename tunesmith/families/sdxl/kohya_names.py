"""kohya's names for the SDXL UNet's attention projections, from diffusers' module names and back.

kohya sd-scripts trains SDXL on its own copy of Stability's UNet (generative-models, "SGM";
sd-scripts' library/sdxl_original_unet.py), so its LoRA keys spell the SGM module path with
"." → "_":

    diffusers   down_blocks.1.attentions.0.transformer_blocks.0.attn1.to_q
    kohya       lora_unet_input_blocks_4_1_transformer_blocks_0_attn1_to_q

Only the block prefix differs: inside an attention (a Transformer2DModel, SGM's
SpatialTransformer) both spell `transformer_blocks.N.attn1|attn2.to_q|to_k|to_v|to_out.0` alike.

The SGM numbering. Each SGM block is a sequence whose slot 0 is a resnet and slot 1 the
attention, where its level has one. With L = layers_per_block (2 in SDXL):

    input_blocks.0                 conv_in
    input_blocks.{1 + l·(L+1) + j} down level l, layer j < L: down_blocks.l.resnets.j (slot 0)
                                   and down_blocks.l.attentions.j (slot 1)
    input_blocks.{1 + l·(L+1) + L} down level l's downsampler, which takes a slot of its own;
                                   the last level has none, so nothing follows it
    middle_block.0 / .1 / .2       mid_block.resnets.0 / mid_block.attentions.0 / resnets.1
    output_blocks.{l·(L+1) + j}    up level l, layer j ≤ L (L+1 layers a level, the extra one
                                   taking the skip from the downsampler's slot):
                                   up_blocks.l.resnets.j (slot 0), .attentions.j (slot 1), and on
                                   the level's last layer its upsampler (slot 2, or 1 without
                                   attention)

so for SDXL (levels DownBlock2D, CrossAttnDownBlock2D ×2; up CrossAttnUpBlock2D ×2, UpBlock2D):

    down_blocks.1.attentions.0|1   input_blocks.4|5.1      (2 transformer blocks each)
    down_blocks.2.attentions.0|1   input_blocks.7|8.1      (10)
    mid_block.attentions.0         middle_block.1          (10)
    up_blocks.0.attentions.0|1|2   output_blocks.0|1|2.1   (10)
    up_blocks.1.attentions.0|1|2   output_blocks.3|4|5.1   (2)

diffusers undoes the same arithmetic in `_maybe_map_sgm_blocks_to_diffusers` when it loads such
a file; ComfyUI matches `lora_unet_` keys against its own (SGM) state dict.

Not handled, each an error naming the module: anything outside the attention projections
(resnets, up/downsamplers, conv_in/out, the time and added-condition embeddings, and proj_in,
proj_out and ff.net.*, which keep their names inside the attention too but are not trained
here); a per-level list for `layers_per_block` (diffusers' loader assumes one number); UNets whose
mid block is not `UNetMidBlock2DCrossAttn`. The text encoders' kohya names (`lora_te1_`,
`lora_te2_`) are the transformers module names already and need no table.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PREFIX = "lora_unet_"

_NUMBER = r"(0|[1-9][0-9]*)"  # no leading zeros, so every name has one spelling
_PROJECTION = re.compile(rf"transformer_blocks\.{_NUMBER}\.(attn[12])\.(to_q|to_k|to_v|to_out\.0)")
_KOHYA_PROJECTION = re.compile(
    rf"transformer_blocks_{_NUMBER}_(attn[12])_(to_q|to_k|to_v|to_out_0)"
)
_DIFFUSERS = re.compile(
    rf"(?:down_blocks\.{_NUMBER}\.attentions\.{_NUMBER}"
    r"|mid_block\.attentions\.0"
    rf"|up_blocks\.{_NUMBER}\.attentions\.{_NUMBER})\.(.+)"
)
_KOHYA = re.compile(
    rf"{PREFIX}(?:input_blocks_{_NUMBER}_1|middle_block_1|output_blocks_{_NUMBER}_1)_(.+)"
)


@dataclass(frozen=True)
class UnetLayout:
    """What of a UNet2DConditionModel config the numbering depends on."""

    layers_per_block: int
    down_attention: tuple[bool, ...]  # per down level (diffusers' down_blocks order)
    up_attention: tuple[bool, ...]  # per up level (up_blocks order: deepest first)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> UnetLayout:
        missing = [
            k
            for k in ("layers_per_block", "down_block_types", "up_block_types", "mid_block_type")
            if k not in config
        ]
        if missing:
            raise ValueError(f"UNet config: missing {', '.join(missing)}")
        layers = config["layers_per_block"]
        if not isinstance(layers, int):
            raise ValueError(
                f"UNet config: layers_per_block {layers!r}; kohya names need one number "
                "(diffusers' loader maps them with one)"
            )
        if config["mid_block_type"] != "UNetMidBlock2DCrossAttn":
            raise ValueError(
                f"UNet config: mid_block_type {config['mid_block_type']!r}; "
                "expected UNetMidBlock2DCrossAttn (middle_block.1 is its attention)"
            )
        down, up = tuple(config["down_block_types"]), tuple(config["up_block_types"])
        if len(down) != len(up):
            raise ValueError(f"UNet config: {len(down)} down_block_types, {len(up)} up_block_types")
        return cls(
            layers,
            tuple("CrossAttn" in t for t in down),
            tuple("CrossAttn" in t for t in up),
        )


def kohya_stem(module: str, unet_config: Mapping[str, Any]) -> str:
    """kohya's key stem for a diffusers UNet attention projection, e.g.
    `down_blocks.1.attentions.0.transformer_blocks.0.attn1.to_q` →
    `lora_unet_input_blocks_4_1_transformer_blocks_0_attn1_to_q` (SDXL); the LoRA keys are the
    stem + `.lora_down.weight`, `.lora_up.weight`, `.alpha`."""
    layout = UnetLayout.from_config(unet_config)
    match = _DIFFUSERS.fullmatch(module)
    inner = _PROJECTION.fullmatch(match[5]) if match else None
    if inner is None:
        raise ValueError(f"{module!r}: not an attention projection (to_q, to_k, to_v, to_out.0)")
    down_level, down_layer, up_level, up_layer, _ = match.groups()
    step = layout.layers_per_block + 1
    if down_level is not None:
        level, layer = int(down_level), int(down_layer)
        _check(module, "down", level, layer, layout.down_attention, layout.layers_per_block)
        block = f"input_blocks_{1 + level * step + layer}_1"
    elif up_level is not None:
        level, layer = int(up_level), int(up_layer)
        _check(module, "up", level, layer, layout.up_attention, step)
        block = f"output_blocks_{level * step + layer}_1"
    else:
        block = "middle_block_1"
    number, attention, projection = inner.groups()
    projection = projection.replace(".", "_")
    return f"{PREFIX}{block}_transformer_blocks_{number}_{attention}_{projection}"


def diffusers_module(stem: str, unet_config: Mapping[str, Any]) -> str:
    """The diffusers UNet module name for kohya's key stem (the inverse of `kohya_stem`)."""
    layout = UnetLayout.from_config(unet_config)
    match = _KOHYA.fullmatch(stem)
    inner = _KOHYA_PROJECTION.fullmatch(match[3]) if match else None
    if inner is None:
        raise ValueError(
            f"{stem!r}: not a kohya SDXL attention-projection stem "
            f"({PREFIX}input_blocks_N_1|middle_block_1|output_blocks_N_1"
            "_transformer_blocks_N_attn1|attn2_to_q|to_k|to_v|to_out_0)"
        )
    input_index, output_index, _ = match.groups()
    step = layout.layers_per_block + 1
    if input_index is not None:
        index = int(input_index)
        if index == 0:
            raise ValueError(f"{stem!r}: input_blocks.0 is conv_in, not an attention")
        level, layer = divmod(index - 1, step)
        _check(stem, "down", level, layer, layout.down_attention, layout.layers_per_block)
        block = f"down_blocks.{level}.attentions.{layer}"
    elif output_index is not None:
        level, layer = divmod(int(output_index), step)
        _check(stem, "up", level, layer, layout.up_attention, step)
        block = f"up_blocks.{level}.attentions.{layer}"
    else:
        block = "mid_block.attentions.0"
    number, attention, projection = inner.groups()
    projection = "to_out.0" if projection == "to_out_0" else projection
    return f"{block}.transformer_blocks.{number}.{attention}.{projection}"


def _check(
    name: str, side: str, level: int, layer: int, attention: tuple[bool, ...], layers: int
) -> None:
    """Raise unless `level` exists, has attention, and `layer` is one of its `layers`."""
    if level >= len(attention):
        raise ValueError(f"{name!r}: {side} level {level}, the UNet has {len(attention)}")
    if not attention[level]:
        raise ValueError(f"{name!r}: {side} level {level} has no attention")
    if layer >= layers:
        where = f"{side} level {level} has layers 0 to {layers - 1}"
        if side == "down" and layer == layers:
            where += f"; slot {layer} is its downsampler"
        raise ValueError(f"{name!r}: {where}, not {layer}")
