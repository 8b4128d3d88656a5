"""SDXL at its published size: the components' configs, the real classes built from them, and a
base-model folder of them with random weights.

The configs are stabilityai/stable-diffusion-xl-base-1.0's files, as plain dicts:
`model_index.json`, `unet/config.json`, `vae/config.json`, `text_encoder/config.json`,
`text_encoder_2/config.json` and `scheduler/scheduler_config.json`. Left out of them: the keys
that only record who wrote a file (`_diffusers_version`, `_name_or_path`,
`transformers_version`); every key that shapes a model is as published.

`build` makes the real diffusers or transformers class a config names (these, or a user's
folder's read by `folder_configs`): on `meta` for names, shapes and the memory estimate
(nothing allocated, seconds for the 2.6 B-parameter UNet); on a real device with random
weights for measurements, each parameter one normal draw, never the classes' own
initialisation, which takes minutes for 3.5 B parameters. `write_base_model` saves such
components as a base-model folder in the published layout, which `load_pipeline` and the
trainer load as they load the real one.

Parameters at full size: UNet 2,567,463,684; VAE 83,653,863; text_encoder (CLIP ViT-L/14's
text tower) 123,060,480; text_encoder_2 (OpenCLIP bigG's, with its projection) 694,659,840.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from torch import nn

from tunesmith.families.base_model import default_dtype, quiet_loading

SOURCE = "stabilityai/stable-diffusion-xl-base-1.0"
COMPONENTS = ("unet", "vae", "text_encoder", "text_encoder_2")  # the parts with weights
STD = 0.02  # the random weights' spread: every step's numbers stay finite in bfloat16

# stabilityai/stable-diffusion-xl-base-1.0, model_index.json
MODEL_INDEX = {
    "_class_name": "StableDiffusionXLPipeline",
    "force_zeros_for_empty_prompt": True,
    "add_watermarker": None,
    "scheduler": ["diffusers", "EulerDiscreteScheduler"],
    "text_encoder": ["transformers", "CLIPTextModel"],
    "text_encoder_2": ["transformers", "CLIPTextModelWithProjection"],
    "tokenizer": ["transformers", "CLIPTokenizer"],
    "tokenizer_2": ["transformers", "CLIPTokenizer"],
    "unet": ["diffusers", "UNet2DConditionModel"],
    "vae": ["diffusers", "AutoencoderKL"],
}

# stabilityai/stable-diffusion-xl-base-1.0, unet/config.json
UNET = {
    "_class_name": "UNet2DConditionModel",
    "act_fn": "silu",
    "addition_embed_type": "text_time",
    "addition_embed_type_num_heads": 64,
    "addition_time_embed_dim": 256,
    "attention_head_dim": [5, 10, 20],
    "block_out_channels": [320, 640, 1280],
    "center_input_sample": False,
    "class_embed_type": None,
    "class_embeddings_concat": False,
    "conv_in_kernel": 3,
    "conv_out_kernel": 3,
    "cross_attention_dim": 2048,
    "cross_attention_norm": None,
    "down_block_types": ["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"],
    "downsample_padding": 1,
    "dual_cross_attention": False,
    "encoder_hid_dim": None,
    "encoder_hid_dim_type": None,
    "flip_sin_to_cos": True,
    "freq_shift": 0,
    "in_channels": 4,
    "layers_per_block": 2,
    "mid_block_only_cross_attention": None,
    "mid_block_scale_factor": 1,
    "mid_block_type": "UNetMidBlock2DCrossAttn",
    "norm_eps": 1e-05,
    "norm_num_groups": 32,
    "num_attention_heads": None,
    "num_class_embeds": None,
    "only_cross_attention": False,
    "out_channels": 4,
    "projection_class_embeddings_input_dim": 2816,
    "resnet_out_scale_factor": 1.0,
    "resnet_skip_time_act": False,
    "resnet_time_scale_shift": "default",
    "sample_size": 128,
    "time_cond_proj_dim": None,
    "time_embedding_act_fn": None,
    "time_embedding_dim": None,
    "time_embedding_type": "positional",
    "timestep_post_act": None,
    "transformer_layers_per_block": [1, 2, 10],
    "up_block_types": ["CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"],
    "upcast_attention": None,
    "use_linear_projection": True,
}

# stabilityai/stable-diffusion-xl-base-1.0, vae/config.json
VAE = {
    "_class_name": "AutoencoderKL",
    "act_fn": "silu",
    "block_out_channels": [128, 256, 512, 512],
    "down_block_types": ["DownEncoderBlock2D"] * 4,
    "force_upcast": True,
    "in_channels": 3,
    "latent_channels": 4,
    "layers_per_block": 2,
    "norm_num_groups": 32,
    "out_channels": 3,
    "sample_size": 1024,
    "scaling_factor": 0.13025,
    "up_block_types": ["UpDecoderBlock2D"] * 4,
}

# stabilityai/stable-diffusion-xl-base-1.0, text_encoder/config.json (openai/clip-vit-large-patch14)
TEXT_ENCODER = {
    "architectures": ["CLIPTextModel"],
    "attention_dropout": 0.0,
    "bos_token_id": 0,
    "dropout": 0.0,
    "eos_token_id": 2,
    "hidden_act": "quick_gelu",
    "hidden_size": 768,
    "initializer_factor": 1.0,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "layer_norm_eps": 1e-05,
    "max_position_embeddings": 77,
    "model_type": "clip_text_model",
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "pad_token_id": 1,
    "projection_dim": 768,
    "torch_dtype": "float16",
    "vocab_size": 49408,
}

# stabilityai/stable-diffusion-xl-base-1.0, text_encoder_2/config.json (OpenCLIP ViT-bigG/14)
TEXT_ENCODER_2 = {
    **TEXT_ENCODER,
    "architectures": ["CLIPTextModelWithProjection"],
    "hidden_act": "gelu",
    "hidden_size": 1280,
    "intermediate_size": 5120,
    "num_attention_heads": 20,
    "num_hidden_layers": 32,
    "projection_dim": 1280,
}

# stabilityai/stable-diffusion-xl-base-1.0, scheduler/scheduler_config.json
SCHEDULER = {
    "_class_name": "EulerDiscreteScheduler",
    "beta_end": 0.012,
    "beta_schedule": "scaled_linear",
    "beta_start": 0.00085,
    "clip_sample": False,
    "interpolation_type": "linear",
    "num_train_timesteps": 1000,
    "prediction_type": "epsilon",
    "sample_max_value": 1.0,
    "set_alpha_to_one": False,
    "skip_prk_steps": True,
    "steps_offset": 1,
    "timestep_spacing": "leading",
    "trained_betas": None,
    "use_karras_sigmas": False,
}

CONFIGS = {
    "model_index": MODEL_INDEX,
    "unet": UNET,
    "vae": VAE,
    "text_encoder": TEXT_ENCODER,
    "text_encoder_2": TEXT_ENCODER_2,
    "scheduler": SCHEDULER,
}


def reduced(**unet) -> dict[str, dict]:
    """The published configs at the tiny model's widths and depths (`tiny.TINY_SDXL_CONFIG`),
    `unet` overriding the UNet's further; every other key as published, so the same classes
    and code paths run in seconds."""
    from tunesmith.families.sdxl.tiny import TINY_SDXL_CONFIG as tiny

    return {
        **CONFIGS,
        "unet": {**UNET, **tiny["unet"], **unet},
        "vae": {**VAE, **tiny["vae"]},
        "text_encoder": {**TEXT_ENCODER, **tiny["text_encoder"]},
        "text_encoder_2": {**TEXT_ENCODER_2, **tiny["text_encoder_2"]},
    }


# The classes a component's config may name, by the library that has them.
_LIBRARIES = {
    "UNet2DConditionModel": "diffusers",
    "AutoencoderKL": "diffusers",
    "CLIPTextModel": "transformers",
    "CLIPTextModelWithProjection": "transformers",
}


def folder_configs(folder: Path) -> dict[str, dict]:
    """A base-model folder's configs, keyed as `CONFIGS`: no weights are read."""
    folder = Path(folder)
    files = {name: folder / name / "config.json" for name in COMPONENTS}
    files["model_index"] = folder / "model_index.json"
    files["scheduler"] = folder / "scheduler" / "scheduler_config.json"
    return {name: json.loads(path.read_text(encoding="utf-8")) for name, path in files.items()}


def build(
    config: dict | str,
    device: str | torch.device = "meta",
    dtype: torch.dtype = torch.bfloat16,
    seed: int = 0,
) -> nn.Module:
    """The model a component's config names (a dict as its config.json, or a published
    component's name: "unet", "vae", "text_encoder", "text_encoder_2"), its parameters at
    `dtype` on `device`: on "meta" nothing is allocated; elsewhere each parameter is drawn
    from N(0, STD²) with a generator seeded by `seed`, and the buffers are the class's own."""
    if isinstance(config, str):
        config = CONFIGS[config]
    cls = _model_class(config)
    with default_dtype(dtype), _parameters_on_meta():
        if _LIBRARIES[cls.__name__] == "diffusers":
            model = cls.from_config(config)
        else:
            # The dtype is `dtype`: the file's records the one its weights were saved in.
            kept = {k: v for k, v in config.items() if k not in ("torch_dtype", "dtype")}
            model = cls(cls.config_class.from_dict(kept))
    if str(device) == "meta":
        return model.to("meta")
    _draw_parameters(model, torch.device(device), seed)
    return model.to(device)


def build_scheduler(config: dict):
    """The diffusers scheduler a scheduler_config.json names."""
    import diffusers

    with quiet_loading():
        return getattr(diffusers, config["_class_name"]).from_config(config)


def write_base_model(
    folder: Path,
    configs: dict[str, dict] | None = None,
    dtype: torch.dtype = torch.bfloat16,
    seed: int = 0,
) -> Path:
    """Write a base model of `configs` (default: the published ones) with random weights at
    `dtype` to `folder`, in the published layout; returns `folder`.

    One component at a time is built and saved, so the process holds the largest (the UNet,
    5.1 GB in bfloat16), never all four. The tokenizers are the tiny model's byte-level ones:
    CLIP's 49,408-token vocabulary is data, not configuration, and nothing here downloads it;
    their ids stay within the text encoders' vocabulary."""
    from tunesmith.families.sdxl.model import check_base_model
    from tunesmith.families.sdxl.tiny import TINY_SDXL_CONFIG, _tokenizer

    configs = configs or CONFIGS
    folder = Path(folder)
    folder.mkdir(parents=True)
    for index, name in enumerate(COMPONENTS):
        model = build(configs[name], "cpu", dtype, seed + index)
        with quiet_loading():
            model.save_pretrained(folder / name, safe_serialization=True)
        del model
    for name in ("tokenizer", "tokenizer_2"):
        _tokenizer(**TINY_SDXL_CONFIG[name]).save_pretrained(folder / name)
    build_scheduler(configs["scheduler"]).save_pretrained(folder / "scheduler")
    index = json.dumps(configs["model_index"], indent=2, sort_keys=True)
    (folder / "model_index.json").write_text(index + "\n", encoding="utf-8")
    check_base_model(folder)
    return folder


def _model_class(config: dict) -> type:
    name = config.get("_class_name") or (config.get("architectures") or [""])[0]
    if name not in _LIBRARIES:
        raise ValueError(f"{name!r}: not an SDXL component class ({', '.join(_LIBRARIES)})")
    return getattr(importlib.import_module(_LIBRARIES[name]), name)


@contextmanager
def _parameters_on_meta() -> Iterator[None]:
    """Every parameter a module registers goes to `meta`, so the classes' initialisation runs
    on no data; buffers (CLIP's position ids) are made as the classes make them."""
    register = nn.Module.register_parameter

    def on_meta(module, name, param):
        if param is not None and not param.is_meta:
            param = nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)
        register(module, name, param)

    nn.Module.register_parameter = on_meta
    try:
        yield
    finally:
        nn.Module.register_parameter = register


def _draw_parameters(model: nn.Module, device: torch.device, seed: int) -> None:
    """Replace every `meta` parameter by a draw from N(0, STD²) on `device` (a parameter shared
    by several modules stays shared)."""
    generator = torch.Generator(device).manual_seed(seed)
    drawn: dict[int, nn.Parameter] = {}
    for module in model.modules():
        for name, param in module._parameters.items():
            if param is None or not param.is_meta:
                continue
            if id(param) not in drawn:
                value = torch.empty(param.shape, dtype=param.dtype, device=device)
                value.normal_(0.0, STD, generator=generator)
                drawn[id(param)] = nn.Parameter(value, requires_grad=param.requires_grad)
            module._parameters[name] = drawn[id(param)]
