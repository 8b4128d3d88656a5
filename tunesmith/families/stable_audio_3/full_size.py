"""The published Stable Audio 3 models' component configs, and the real classes built from them.

`MODELS` holds, per published architecture, the `config.json` of each component with weights
that a user's base model folder holds (`base_model.py` lists the parts), as plain dicts:

    medium   stabilityai/stable-audio-3-medium-base (underfit: sa3-medium)
    small    stabilityai/stable-audio-3-small-music-base and …-small-sfx-base (sa3-sm-music,
             sa3-sm-sfx): one architecture

The DiT and the VAE's widths are `published.py`'s (underfit's model templates under the names
diffusers' `scripts/convert_stable_audio_3_to_diffusers.py` gives them); the rest of each
config is named where it is set below. Nothing is downloaded: these are what a folder converted
by that script states, so the tests and the memory estimate can build the full-size models on
the `meta` device (no weights, seconds) and the benchmarks can write one with random weights.

`build(model, part)` builds one component; `write_base_model(folder, model)` writes a whole base
model folder in the published layout with random weights, `write_configs` only its configs.
The tokenizer and the scheduler of a written folder are the tiny model's (`tiny.py`): the
weights' shapes do not depend on them, and diffusers 0.42.1 lacks the published folders'
`StableAudio3EulerScheduler`.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import torch

from tunesmith.families.stable_audio_3.published import MEDIUM_DIT, SAME_L, SAME_S, SMALL_DIT

PARTS = ("transformer", "vae", "text_encoder", "duration_embedder")  # the parts with weights

# AutoencoderSAME, both variants: the values the conversion script's `_infer_vae_config` writes
# from a model_config.json, as diffusers' AutoencoderSAME docstring states them for SAME-S/L
# (one resampling block of stride 16 over 256-sample patches: 4096 samples a latent frame).
_SAME = {
    "audio_channels": 2,
    "patch_size": 256,
    "encoder_c_mults": [6],
    "encoder_strides": [16],
    "use_differential_attention": True,
    "dim_heads": 64,
    "ff_mult": 3,
    "sliding_window": 1,
    "encoder_sinusoidal_blocks": [0],
    "sampling_rate": 44100,
}
SAME_L_VAE = {
    **_SAME,
    **SAME_L,
    "encoder_transformer_depths": [12],  # underfit's sa3-medium template; diffusers' docstring
    "decoder_sinusoidal_blocks": [8],  # diffusers' AutoencoderSAME docstring (SAME-L)
}
SAME_S_VAE = {
    **_SAME,
    **SAME_S,
    "encoder_transformer_depths": [6],  # underfit's small templates; diffusers' docstring
    "decoder_sinusoidal_blocks": [0],  # AutoencoderSAME's default, which it says is SAME-S
}

# The encoder (and the unused decoder) of google/t5gemma-b-b-ul2, which every Stable Audio 3
# repository ships in its `t5gemma-b-b-ul2/` folder and the conversion script saves as a
# T5GemmaEncoderModel with is_encoder_decoder = False. The values are those of Stability-AI/
# stable-audio-3's MLX port (`optimized/mlx/models/defs/t5gemma_mlx.py`, "12 layers · dim 768 ·
# 12 heads · head_dim 64 · GeGLU(2048)"); keras-hub's t5gemma_b_b_ul2 preset states 591,490,560
# parameters, which is exactly two 256000 × 768 embeddings and 12 + 12 layers of these.
T5GEMMA_B = {
    "vocab_size": 256000,
    "hidden_size": 768,
    "intermediate_size": 2048,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "num_key_value_heads": 12,
    "head_dim": 64,
    "query_pre_attn_scalar": 64,
    "attn_logit_softcapping": 50.0,
    "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-6,
}
TEXT_ENCODER = {
    "encoder": T5GEMMA_B,
    "decoder": T5GEMMA_B,
    "is_encoder_decoder": False,
    "vocab_size": T5GEMMA_B["vocab_size"],
}
# The conversion script's `_infer_duration_embedder_config`: 768 out (the DiT's
# global_cond_dim), 256 Fourier features, seconds clamped to [0, 384].
DURATION_EMBEDDER = {
    "output_dim": 768,
    "fourier_dim": 256,
    "min_val": 0.0,
    "max_val": 384.0,
    "min_freq": 0.5,
    "max_freq": 10000.0,
}

MODELS: dict[str, dict[str, dict]] = {
    "medium": {
        "transformer": MEDIUM_DIT,
        "vae": SAME_L_VAE,
        "text_encoder": TEXT_ENCODER,
        "duration_embedder": DURATION_EMBEDDER,
    },
    "small": {
        "transformer": SMALL_DIT,
        "vae": SAME_S_VAE,
        "text_encoder": TEXT_ENCODER,
        "duration_embedder": DURATION_EMBEDDER,
    },
}
INIT_STD = 0.02  # the random weights' std (BERT/GPT-2's init std, as tiny.py's WAKE_STD)


def configs(model: str | dict) -> dict[str, dict]:
    """A model's component configs: a name of `MODELS`, or such a dict itself (a copy)."""
    if isinstance(model, str):
        if model not in MODELS:
            raise KeyError(f"no published Stable Audio 3 model {model!r}; known: {list(MODELS)}")
        model = MODELS[model]
    return copy.deepcopy(model)


def read_configs(folder: Path) -> dict[str, dict]:
    """The component configs a base model folder states (`<part>/config.json`)."""
    return {
        part: json.loads((Path(folder) / part / "config.json").read_text(encoding="utf-8"))
        for part in PARTS
    }


def build(
    model: str | dict,
    part: str,
    device: str = "meta",
    dtype: torch.dtype = torch.bfloat16,
    seed: int = 0,
) -> torch.nn.Module:
    """Component `part` of `model` (a name of `MODELS` or a dict of component configs, such as
    `read_configs` gives) as its real class, in eval mode.

    On `meta` it holds no memory. On another device its parameters are drawn from
    N(0, INIT_STD²) with `seed` (no default init runs: it would take minutes at full size),
    and its buffers are the ones the class computes (rotary frequencies and the like)."""
    config = configs(model)[part]
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # parameters are made at `dtype`, never in float32 first
    try:
        with torch.device(device), _no_init():
            module = _construct(part, config)
    finally:
        torch.set_default_dtype(previous)
    # The buffers a class makes in float32 on purpose (rotary frequencies), at `dtype` as
    # diffusers' from_pretrained(dtype=) leaves them; nn.Module's `to`, without the warning
    # diffusers' own gives for a cast after construction. And on `device`: once transformers
    # has loaded a model in this process, torch.linspace ignores the device context (its
    # `meta_device_safe_creation_ops` swaps linspace while torch caches the list of factory
    # functions the context redirects), so the duration embedder's frequencies come out on
    # the CPU.
    torch.nn.Module.to(module, device=device, dtype=dtype)
    if device != "meta":
        generator = torch.Generator(device).manual_seed(seed)
        with torch.no_grad():
            for param in module.parameters():
                param.normal_(0.0, INIT_STD, generator=generator)
    return module.eval()


def parameter_counts(model: str | dict) -> dict[str, int]:
    """The parameters of each component, counted on `meta`."""
    return {part: sum(p.numel() for p in build(model, part).parameters()) for part in PARTS}


def write_configs(folder: Path, model: str | dict = "medium") -> Path:
    """The `<part>/config.json` files of `model` as its classes write them, without weights:
    all that the memory estimate and the published-model recognition read of a folder."""
    folder = Path(folder)
    for part in PARTS:
        module = build(model, part)
        if part == "text_encoder":
            module.config.save_pretrained(folder / part)
        else:
            module.save_config(folder / part)
    return folder


def write_base_model(
    folder: Path, model: str | dict = "medium", dtype: torch.dtype = torch.bfloat16, seed: int = 0
) -> Path:
    """A base model folder of `model` in the published diffusers layout, random weights at
    `dtype`: each component written as it is built (one in memory at a time), the tiny
    model's tokenizer and scheduler, and the pipeline's `model_index.json`."""
    from diffusers import FlowMatchEulerDiscreteScheduler, StableAudio3Pipeline

    from tunesmith.families.base_model import quiet_loading
    from tunesmith.families.stable_audio_3.base_model import check_base_model
    from tunesmith.families.stable_audio_3.tiny import TINY_SA3_CONFIG, _tokenizer

    folder = Path(folder)
    for index, part in enumerate(PARTS):
        module = build(model, part, device="cpu", dtype=dtype, seed=seed + index)
        with quiet_loading():
            module.save_pretrained(folder / part, safe_serialization=True)
        del module
    tokenizer = _tokenizer(**TINY_SA3_CONFIG["tokenizer"])
    tokenizer.save_pretrained(folder / "tokenizer")
    scheduler = FlowMatchEulerDiscreteScheduler(**TINY_SA3_CONFIG["scheduler"])
    scheduler.save_pretrained(folder / "scheduler")
    # model_index.json as the pipeline writes it, from its components' classes (on meta).
    parts = {part: build(model, part) for part in PARTS}
    StableAudio3Pipeline(tokenizer=tokenizer, scheduler=scheduler, **parts).save_config(folder)
    check_base_model(folder)
    return folder


def _construct(part: str, config: dict) -> torch.nn.Module:
    from diffusers import AutoencoderSAME, StableAudio3DiTModel, StableAudio3DurationEmbedder
    from transformers import T5GemmaConfig, T5GemmaEncoderModel

    if part == "text_encoder":
        return T5GemmaEncoderModel(T5GemmaConfig.from_dict(config))
    classes = {
        "transformer": StableAudio3DiTModel,
        "vae": AutoencoderSAME,
        "duration_embedder": StableAudio3DurationEmbedder,
    }
    return classes[part].from_config(config)


def _no_init():
    """No weight initialisation while a model is constructed (torch's and transformers')."""
    from transformers.initialization import no_init_weights

    return no_init_weights()
