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

`kohya_stem` and `diffusers_module` name the attention projections only, each other module an
error naming it. `unet_stem` and `unet_module` name those and the layers kohya's
networks/lora.py adds with `conv_dim` (its UNET_TARGET_REPLACE_MODULE_CONV2D_3X3: every Conv2d
and Linear of the ResnetBlock2D, Downsample2D and Upsample2D blocks), in SGM's spelling as
ComfyUI's `unet_to_diffusers` (comfy/utils.py) and diffusers' `_convert_unet_lora_key` have it:

    down_blocks.l.resnets.j.conv1|time_emb_proj|conv2|conv_shortcut
        input_blocks.{1 + l·(L+1) + j}_0_in_layers_2|emb_layers_1|out_layers_3|skip_connection
    down_blocks.l.downsamplers.0.conv   input_blocks.{1 + l·(L+1) + L}_0_op
    mid_block.resnets.0|1.…             middle_block_0|2_…
    up_blocks.l.resnets.j.…             output_blocks.{l·(L+1) + j}_0_…
    up_blocks.l.upsamplers.0.conv       output_blocks.{l·(L+1) + L}_2_conv (slot 1 without
                                        attention)

The text encoders' names (`text_encoder_stem`, `text_encoder_module`): kohya names the layers
its LoRA adapts in CLIP (every Linear of a CLIPAttention and a CLIPMLP: `self_attn.q_proj`,
`k_proj`, `v_proj`, `out_proj`, `mlp.fc1`, `fc2`) by the published checkpoints' module paths,
`lora_te1_text_model_encoder_layers_N_self_attn_q_proj` for CLIP-L (`text_encoder`) and
`lora_te2_…` for OpenCLIP-G (`text_encoder_2`), which ComfyUI's `model_lora_keys_clip` maps.
transformers 5 leaves the `text_model.` level out of CLIPTextModel's module paths (not of
CLIPTextModelWithProjection's), so a live module path is spelled with it before it is named.

Not handled, each an error naming the module: conv_in/out, the time and added-condition
embeddings, and proj_in, proj_out and ff.net.* (not trained here); a per-level list for
`layers_per_block` (diffusers' loader assumes one number); UNets whose mid block is not
`UNetMidBlock2DCrossAttn`.
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


# -- every layer a kohya SDXL network trains here: attention projections, the conv blocks,
# and the text encoders --------------------------------------------------------------------

# diffusers' name of a resnet layer → SGM's (comfy/utils.py UNET_MAP_RESNET)
RESNET_LAYERS = {
    "conv1": "in_layers_2",
    "time_emb_proj": "emb_layers_1",
    "conv2": "out_layers_3",
    "conv_shortcut": "skip_connection",
}
_SGM_RESNET_LAYERS = {sgm: diffusers for diffusers, sgm in RESNET_LAYERS.items()}
_RESNET = "|".join(RESNET_LAYERS)
_DIFFUSERS_CONV = re.compile(
    rf"(?:(down|up)_blocks\.{_NUMBER}\.resnets\.{_NUMBER}|mid_block\.resnets\.([01]))"
    rf"\.({_RESNET})"
    rf"|down_blocks\.{_NUMBER}\.downsamplers\.0\.conv|up_blocks\.{_NUMBER}\.upsamplers\.0\.conv"
)
_SGM_RESNET = "|".join(_SGM_RESNET_LAYERS)
_KOHYA_CONV = re.compile(
    rf"{PREFIX}(?:(input|output)_blocks_{_NUMBER}_0_({_SGM_RESNET})"
    rf"|middle_block_([02])_({_SGM_RESNET})"
    rf"|input_blocks_{_NUMBER}_0_op|output_blocks_{_NUMBER}_([12])_conv)"
)


def unet_stem(module: str, unet_config: Mapping[str, Any]) -> str:
    """kohya's key stem for a UNet layer kohya's SDXL networks train: an attention projection
    (`kohya_stem`) or a layer of a resnet, downsampler or upsampler, e.g.
    `down_blocks.1.resnets.0.conv1` → `lora_unet_input_blocks_4_0_in_layers_2` (SDXL)."""
    if _DIFFUSERS.fullmatch(module):
        return kohya_stem(module, unet_config)
    layout = UnetLayout.from_config(unet_config)
    match = _DIFFUSERS_CONV.fullmatch(module)
    if match is None:
        raise ValueError(
            f"{module!r}: not an attention projection nor a layer of a resnet, downsampler or "
            "upsampler (conv1, time_emb_proj, conv2, conv_shortcut, downsamplers.0.conv, "
            "upsamplers.0.conv)"
        )
    side, level, layer, mid, resnet_layer, down_sampler, up_sampler = match.groups()
    layers, step = layout.layers_per_block, layout.layers_per_block + 1
    levels = len(layout.down_attention)
    if side == "down":
        level, layer = int(level), int(layer)
        _check_level(module, "down", level, levels, layer, layers)
        return f"{PREFIX}input_blocks_{1 + level * step + layer}_0_{RESNET_LAYERS[resnet_layer]}"
    if side == "up":
        level, layer = int(level), int(layer)
        _check_level(module, "up", level, levels, layer, step)
        return f"{PREFIX}output_blocks_{level * step + layer}_0_{RESNET_LAYERS[resnet_layer]}"
    if mid is not None:
        return f"{PREFIX}middle_block_{2 * int(mid)}_{RESNET_LAYERS[resnet_layer]}"
    if down_sampler is not None:
        level = int(down_sampler)
        _check_sampler(module, "down", level, levels)
        return f"{PREFIX}input_blocks_{1 + level * step + layers}_0_op"
    level = int(up_sampler)
    _check_sampler(module, "up", level, levels)
    slot = 2 if layout.up_attention[level] else 1
    return f"{PREFIX}output_blocks_{level * step + layers}_{slot}_conv"


def unet_module(stem: str, unet_config: Mapping[str, Any]) -> str:
    """The diffusers UNet module name for a kohya stem `unet_stem` gives (its inverse)."""
    if _KOHYA.fullmatch(stem):
        return diffusers_module(stem, unet_config)
    layout = UnetLayout.from_config(unet_config)
    match = _KOHYA_CONV.fullmatch(stem)
    if match is None:
        raise ValueError(
            f"{stem!r}: not a kohya SDXL stem of an attention projection, a resnet layer "
            f"({PREFIX}input_blocks_N_0_…, middle_block_0|2_…, output_blocks_N_0_…: "
            f"{', '.join(_SGM_RESNET_LAYERS)}) or a sampler (input_blocks_N_0_op, "
            "output_blocks_N_1|2_conv)"
        )
    side, index, resnet_layer, mid, mid_layer, down_sampler, up_sampler, slot = match.groups()
    layers, step = layout.layers_per_block, layout.layers_per_block + 1
    levels = len(layout.down_attention)
    if side == "input":
        if int(index) == 0:
            raise ValueError(f"{stem!r}: input_blocks.0 is conv_in, not a resnet")
        level, layer = divmod(int(index) - 1, step)
        _check_level(stem, "down", level, levels, layer, layers)
        return f"down_blocks.{level}.resnets.{layer}.{_SGM_RESNET_LAYERS[resnet_layer]}"
    if side == "output":
        level, layer = divmod(int(index), step)
        _check_level(stem, "up", level, levels, layer, step)
        return f"up_blocks.{level}.resnets.{layer}.{_SGM_RESNET_LAYERS[resnet_layer]}"
    if mid is not None:
        return f"mid_block.resnets.{int(mid) // 2}.{_SGM_RESNET_LAYERS[mid_layer]}"
    if down_sampler is not None:
        if int(down_sampler) == 0:
            raise ValueError(f"{stem!r}: input_blocks.0 is conv_in, not a downsampler")
        level, layer = divmod(int(down_sampler) - 1, step)
        if layer != layers:
            raise ValueError(f"{stem!r}: slot {layer} of down level {level} is a resnet's")
        _check_sampler(stem, "down", level, levels)
        return f"down_blocks.{level}.downsamplers.0.conv"
    level, layer = divmod(int(up_sampler), step)
    if layer != layers:
        raise ValueError(f"{stem!r}: only the last layer of an up level has the upsampler")
    _check_sampler(stem, "up", level, levels)
    if int(slot) != (2 if layout.up_attention[level] else 1):
        raise ValueError(f"{stem!r}: up level {level}'s upsampler is not in slot {slot}")
    return f"up_blocks.{level}.upsamplers.0.conv"


def _check_level(name: str, side: str, level: int, levels: int, layer: int, layers: int) -> None:
    if level >= levels:
        raise ValueError(f"{name!r}: {side} level {level}, the UNet has {levels}")
    if layer >= layers:
        where = f"{side} level {level} has resnets 0 to {layers - 1}"
        if side == "down" and layer == layers:
            where += f"; slot {layer} is its downsampler"
        raise ValueError(f"{name!r}: {where}, not {layer}")


def _check_sampler(name: str, side: str, level: int, levels: int) -> None:
    """diffusers gives every level but the last its sampler (`add_downsample`/`add_upsample`
    = not is_final_block)."""
    if level >= levels - 1:
        raise ValueError(f"{name!r}: {side} level {level} has no {side}sampler (the last level)")


# diffusers' component → kohya's prefix (sd-scripts' LORA_PREFIX_TEXT_ENCODER1/2 for SDXL)
TEXT_ENCODER_PREFIXES = {"text_encoder": "lora_te1_", "text_encoder_2": "lora_te2_"}
TEXT_ENCODER_TARGETS = ("q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2")
_TEXT_LAYER = re.compile(
    rf"(?:text_model\.)?encoder\.layers\.{_NUMBER}\."
    r"(self_attn\.(?:q_proj|k_proj|v_proj|out_proj)|mlp\.(?:fc1|fc2))"
)
_KOHYA_TEXT_LAYER = re.compile(
    rf"(lora_te[12]_)text_model_encoder_layers_{_NUMBER}_"
    r"(self_attn_(?:q_proj|k_proj|v_proj|out_proj)|mlp_(?:fc1|fc2))"
)


def text_encoder_name(module: str) -> str:
    """The published checkpoint's path of a CLIP layer kohya trains:
    `encoder.layers.0.self_attn.q_proj` (transformers 5's CLIPTextModel) and
    `text_model.encoder.layers.0.self_attn.q_proj` both → the latter."""
    match = _TEXT_LAYER.fullmatch(module)
    if match is None:
        raise ValueError(
            f"{module!r}: not a CLIP layer kohya trains (encoder.layers.N.self_attn."
            "q_proj|k_proj|v_proj|out_proj or mlp.fc1|fc2)"
        )
    return f"text_model.encoder.layers.{match[1]}.{match[2]}"


def text_encoder_stem(component: str, module: str) -> str:
    """`("text_encoder", "encoder.layers.0.self_attn.q_proj")` →
    `lora_te1_text_model_encoder_layers_0_self_attn_q_proj`."""
    if component not in TEXT_ENCODER_PREFIXES:
        known = ", ".join(TEXT_ENCODER_PREFIXES)
        raise ValueError(f"{component!r}: not an SDXL text encoder ({known})")
    return TEXT_ENCODER_PREFIXES[component] + text_encoder_name(module).replace(".", "_")


def text_encoder_module(stem: str) -> tuple[str, str]:
    """(component, the published checkpoint's module path) for a `lora_te1_`/`lora_te2_` stem."""
    match = _KOHYA_TEXT_LAYER.fullmatch(stem)
    if match is None:
        raise ValueError(
            f"{stem!r}: not a kohya SDXL text-encoder stem (lora_te1_|lora_te2_"
            "text_model_encoder_layers_N_self_attn_q_proj|k_proj|v_proj|out_proj or mlp_fc1|fc2)"
        )
    prefix, layer, inner = match.groups()
    component = next(c for c, p in TEXT_ENCODER_PREFIXES.items() if p == prefix)
    attention, _, projection = inner.partition("_attn_")
    inner = f"self_attn.{projection}" if projection else inner.replace("mlp_", "mlp.")
    return component, f"text_model.encoder.layers.{layer}.{inner}"
