"""ACE-Step 1.5 at the size people download: every component's config.json, and the real
classes built from them (on `meta` for names and shapes, or with random weights to measure).

The configs are those diffusers' `scripts/convert_ace_step_to_diffusers.py` writes for the
release's base DiT (`ACE-Step/Ace-Step1.5`, `acestep-v15-base/config.json`): the converter
copies the DiT's, the condition encoder's and the audio tokenizer's and detokenizer's sizes
from that one config.json (`encoder_*` sizes fall back to the DiT's on the 2B models), copies
`vae/` and `Qwen3-Embedding-0.6B/` as they are, and writes the scheduler with
`num_train_timesteps=1, shift=1.0`. The converted folder loads as `AceStepPipeline`; the
parameter counts (DiT 1.58 B, condition encoder 0.61 B, Qwen3-Embedding-0.6B 0.60 B, VAE 0.17 B,
audio tokenizer and detokenizer 0.11 B each) are what tests/families/ace_step/test_full_size.py
holds them to.

`build(part)` makes one component from such a dict: on `meta` (seconds, nothing allocated) at
`dtype`; on another device with its parameters drawn from N(0, 0.02²) and no default init (the
classes' own init of three billion parameters takes minutes): the modules are made under
diffusers' and transformers' `no_init_weights`, so the buffers that are computed, not loaded
(Qwen3's rotary frequencies, the FSQ levels), hold their values. `write_base_model` writes such
a model as a base-model folder in the published layout, one component at a time, with the tiny
maker's tokenizer (its 600 ids are all inside Qwen3's vocabulary) and the release's scheduler.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import torch

from tunesmith.families.base_model import default_dtype, fill_normal, quiet_loading, without_init

# The DiT's layers alternate sliding-window and full attention, beginning with a sliding one.
LAYER_TYPES = ["sliding_attention", "full_attention"] * 12
_ATTENTION = dict(  # acestep-v15-base/config.json, shared by every ACE-Step component
    num_attention_heads=16,
    num_key_value_heads=8,
    head_dim=128,
    rope_theta=1000000,
    attention_bias=False,
    attention_dropout=0.0,
    rms_norm_eps=1e-06,
    sliding_window=128,
)
PUBLISHED: dict[str, dict] = {
    "transformer": {
        "_class_name": "AceStepTransformer1DModel",
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "num_hidden_layers": 24,
        **_ATTENTION,
        "in_channels": 192,
        "audio_acoustic_hidden_dim": 64,
        "patch_size": 2,
        "layer_types": LAYER_TYPES,
        "encoder_hidden_size": 2048,
        # The base DiT is not guidance-distilled; the release's model_version string was not
        # found in a readable copy of its config.json, and the pipeline reads is_turbo.
        "is_turbo": False,
    },
    "condition_encoder": {
        "_class_name": "AceStepConditionEncoder",
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "text_hidden_dim": 1024,
        "timbre_hidden_dim": 64,
        "num_lyric_encoder_hidden_layers": 8,
        "num_timbre_encoder_hidden_layers": 4,
        **_ATTENTION,
    },
    "audio_tokenizer": {
        "_class_name": "AceStepAudioTokenizer",
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "audio_acoustic_hidden_dim": 64,
        "pool_window_size": 5,
        "fsq_dim": 2048,
        "fsq_input_levels": [8, 8, 8, 5, 5, 5],
        "fsq_input_num_quantizers": 1,
        # not in acestep-v15-base/config.json: the converter's default, and the class's
        "num_attention_pooler_hidden_layers": 2,
        **_ATTENTION,
        "layer_types": LAYER_TYPES[:2],
    },
    "audio_token_detokenizer": {
        "_class_name": "AceStepAudioTokenDetokenizer",
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "audio_acoustic_hidden_dim": 64,
        "pool_window_size": 5,
        "num_attention_pooler_hidden_layers": 2,  # as the tokenizer's
        **_ATTENTION,
        "layer_types": LAYER_TYPES[:2],
    },
    "vae": {  # ACE-Step/Ace-Step1.5, vae/config.json
        "_class_name": "AutoencoderOobleck",
        "audio_channels": 2,
        "channel_multiples": [1, 2, 4, 8, 16],
        "decoder_channels": 128,
        "decoder_input_channels": 64,
        "downsampling_ratios": [2, 4, 4, 6, 10],
        "encoder_hidden_size": 128,
        "sampling_rate": 48000,
    },
    "text_encoder": {  # Qwen/Qwen3-Embedding-0.6B, config.json (its architecture keys)
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 151643,
        "eos_token_id": 151643,
        "head_dim": 128,
        "hidden_act": "silu",
        "hidden_size": 1024,
        "initializer_range": 0.02,
        "intermediate_size": 3072,
        "max_position_embeddings": 32768,
        "max_window_layers": 28,
        "num_attention_heads": 16,
        "num_hidden_layers": 28,
        "num_key_value_heads": 8,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000,
        "sliding_window": None,
        "tie_word_embeddings": True,
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": 151669,
    },
}
# Every component with weights, in AceStepPipeline's order; the last two are optional there.
PARTS = (
    "vae",
    "text_encoder",
    "transformer",
    "condition_encoder",
    "audio_tokenizer",
    "audio_token_detokenizer",
)
INIT_STD = 0.02  # the random weights' spread (Qwen3's initializer_range)


def _class(part: str):
    from diffusers import AceStepTransformer1DModel, AutoencoderOobleck
    from diffusers.pipelines.ace_step import (
        AceStepAudioTokenDetokenizer,
        AceStepAudioTokenizer,
        AceStepConditionEncoder,
    )

    classes = {
        "transformer": AceStepTransformer1DModel,
        "condition_encoder": AceStepConditionEncoder,
        "vae": AutoencoderOobleck,
        "audio_tokenizer": AceStepAudioTokenizer,
        "audio_token_detokenizer": AceStepAudioTokenDetokenizer,
    }
    if part not in classes and part != "text_encoder":
        raise ValueError(f"no ACE-Step 1.5 component {part!r}; known: {', '.join(PARTS)}")
    return classes.get(part)


def build(
    part: str,
    config: Mapping | None = None,
    device: str = "meta",
    dtype: torch.dtype = torch.bfloat16,
    seed: int = 0,
) -> torch.nn.Module:
    """The component `part` (a folder name of the base model) built from `config` (its
    config.json as a dict; the published one when None), in eval mode, frozen, at `dtype` on
    `device` (module docstring: random weights from `seed` off `meta`)."""
    config = dict(PUBLISHED[part] if config is None else config)
    cls = _class(part)
    with quiet_loading(), default_dtype(dtype), without_init(device):
        if cls is None:
            from transformers import Qwen3Config, Qwen3Model

            model = Qwen3Model(Qwen3Config.from_dict(config))
        else:
            model = cls.from_config(config)
    if device != "meta":
        fill_normal(model, INIT_STD, seed)
    return model.eval().requires_grad_(False)


def read_configs(folder: Path) -> dict[str, dict]:
    """The config.json of every component a base-model folder holds, by folder name."""
    folder = Path(folder)
    return {
        part: json.loads((folder / part / "config.json").read_text(encoding="utf-8"))
        for part in PARTS
        if (folder / part / "config.json").is_file()
    }


def write_base_model(
    folder: Path, configs: Mapping[str, Mapping] | None = None, seed: int = 0
) -> Path:
    """Write ACE-Step 1.5 at `configs` (the published ones by default) to `folder` in the
    published layout with random bf16 weights, as `AceStepPipeline.save_pretrained` lays it
    out; one component in memory at a time. Returns `folder`."""
    from diffusers import AceStepPipeline, FlowMatchEulerDiscreteScheduler

    from tunesmith.families.ace_step.tiny import TINY_ACE_STEP_CONFIG, _tokenizer

    configs = {**PUBLISHED, **(configs or {})}
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for index, part in enumerate(PARTS):
        model = build(part, configs[part], device="cpu", seed=seed + index)
        with quiet_loading():
            model.save_pretrained(folder / part, safe_serialization=True)
        del model
    tokenizer = _tokenizer(**TINY_ACE_STEP_CONFIG["tokenizer"])
    scheduler = FlowMatchEulerDiscreteScheduler(**TINY_ACE_STEP_CONFIG["scheduler"])
    tokenizer.save_pretrained(folder / "tokenizer")
    scheduler.save_pretrained(folder / "scheduler")
    # model_index.json as the pipeline writes it, from the components' classes (on meta)
    parts = {part: build(part, configs[part]) for part in PARTS}
    AceStepPipeline(tokenizer=tokenizer, scheduler=scheduler, **parts).save_config(folder)
    return folder
