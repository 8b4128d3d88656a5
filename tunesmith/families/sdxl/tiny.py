"""A tiny SDXL with the real architecture, made from code (nothing is downloaded).

`make_tiny_sdxl` builds every component of a Stable Diffusion XL base model with the real
`diffusers`/`transformers` classes at tiny sizes and a fixed seed, and saves it in the
published diffusers folder layout (`model_index.json`, `unet/`, `vae/`, `text_encoder/`,
`text_encoder_2/`, `tokenizer/`, `tokenizer_2/`, `scheduler/`), so that
`StableDiffusionXLPipeline.from_pretrained(folder)` (and `tunesmith.families.sdxl.load_pipeline`)
loads it as it loads stabilityai/stable-diffusion-xl-base-1.0.

What is kept from the real model: every class and code path: the UNet's three levels (one
without attention, two with cross-attention, `layers_per_block` 2, linear projections in the
transformers) and its `text_time` added conditioning; a VAE with four blocks, so pictures are
downsampled 8 times into 4 latent channels, and SDXL's `scaling_factor`; CLIP-L style and
OpenCLIP-bigG style text encoders whose penultimate hidden states are concatenated for the
cross-attention, the second one with its projection giving the pooled embedding; two CLIP BPE
tokenizers padding to 77 tokens, the second padding with "!" as SDXL's does; the base model's
scheduler config. What is not: widths, depths, the vocabulary (bytes only, no
merges, so a caption costs one token a character and is cut at 77 as SDXL cuts it), and the
weights, which are random.

Each config value below carries the real one beside it (stable-diffusion-xl-base-1.0).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch

from tunesmith.families.sdxl.model import check_base_model
from tunesmith.families.tiny import write_tiny

FORMAT = 1  # bump when the builder changes what it writes for the same config and seed

TEXT_DIM = 32  # both text encoders' hidden size; real 768 (CLIP-L) and 1280 (bigG)
POOLED_DIM = 32  # text_encoder_2's projection_dim; real 1280
TIME_EMBED_DIM = 8  # the UNet's addition_time_embed_dim; real 256
MAX_TOKENS = 77  # CLIP's context length, as the real tokenizers' model_max_length

_TEXT_ENCODER = dict(  # CLIPTextConfig
    hidden_size=TEXT_DIM,
    intermediate_size=37,  # real 3072 / 5120
    num_hidden_layers=3,  # real 12 / 32: the pipeline takes hidden_states[-2], so at least 2
    num_attention_heads=4,  # real 12 / 20
    max_position_embeddings=MAX_TOKENS,
    hidden_act="quick_gelu",  # real: quick_gelu (CLIP-L) / gelu (bigG)
    layer_norm_eps=1e-5,
)
TINY_SDXL_CONFIG: dict[str, dict] = {
    "unet": dict(  # UNet2DConditionModel
        sample_size=8,  # real 128: the pipeline's default size is sample_size * 8 = 64 px
        in_channels=4,
        out_channels=4,
        down_block_types=["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"],
        up_block_types=["CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"],
        block_out_channels=[16, 32, 32],  # real [320, 640, 1280]
        layers_per_block=2,  # real 2
        norm_num_groups=8,  # real 32
        attention_head_dim=[2, 2, 4],  # heads per level, diffusers' old name; real [5, 10, 20]
        transformer_layers_per_block=[1, 1, 2],  # real [1, 2, 10]
        use_linear_projection=True,  # real
        # The concatenated penultimate hidden states of both text encoders; real 768 + 1280.
        cross_attention_dim=2 * TEXT_DIM,
        addition_embed_type="text_time",  # real: pooled text + size/crop conditioning
        addition_embed_type_num_heads=64,  # real
        addition_time_embed_dim=TIME_EMBED_DIM,
        # Six numbers (original size, crop top-left, target size) of TIME_EMBED_DIM each, and
        # the pooled embedding; real 6 * 256 + 1280 = 2816.
        projection_class_embeddings_input_dim=6 * TIME_EMBED_DIM + POOLED_DIM,
    ),
    "vae": dict(  # AutoencoderKL
        in_channels=3,
        out_channels=3,
        down_block_types=["DownEncoderBlock2D"] * 4,  # real: four, three of them halving
        up_block_types=["UpDecoderBlock2D"] * 4,
        block_out_channels=[8, 16, 16, 16],  # real [128, 256, 512, 512]
        layers_per_block=1,  # real 2
        norm_num_groups=8,  # real 32
        latent_channels=4,  # real
        sample_size=64,  # real 1024 (only read by tiling)
        scaling_factor=0.13025,  # real: SDXL's VAE, not SD 1.5's 0.18215
        force_upcast=True,  # real: SDXL's VAE overflows in float16
    ),
    "text_encoder": dict(_TEXT_ENCODER),  # CLIPTextModel
    # CLIPTextModelWithProjection; bigG's activation is gelu.
    "text_encoder_2": dict(_TEXT_ENCODER, hidden_act="gelu", projection_dim=POOLED_DIM),
    "tokenizer": dict(pad_token="<|endoftext|>"),  # real
    "tokenizer_2": dict(pad_token="!"),  # real: OpenCLIP pads with "!" (id 0)
    # stable-diffusion-xl-base-1.0's scheduler/scheduler_config.json, less the keys
    # EulerDiscreteScheduler does not take (sample_max_value, set_alpha_to_one, skip_prk_steps,
    # clip_sample: other schedulers' settings, ignored when the real file is loaded).
    "scheduler": dict(
        num_train_timesteps=1000,
        beta_start=0.00085,
        beta_end=0.012,
        beta_schedule="scaled_linear",
        prediction_type="epsilon",
        interpolation_type="linear",
        steps_offset=1,
        timestep_spacing="leading",
        use_karras_sigmas=False,
    ),
}


def make_tiny_sdxl(folder: Path, seed: int = 0) -> Path:
    """Write a tiny SDXL base model to `folder`; returns `folder` (see `write_tiny`: idempotent,
    atomic, and a folder it did not make is refused)."""
    return write_tiny(
        Path(folder),
        _config_hash(seed),
        lambda: build_tiny_sdxl(seed),
        lambda pipe: _marker(pipe, seed, _config_hash(seed)),
        check_base_model,
    )


def build_tiny_sdxl(seed: int = 0):
    """The tiny `StableDiffusionXLPipeline` in memory (fp32, CPU), without saving it."""
    from diffusers import (
        AutoencoderKL,
        EulerDiscreteScheduler,
        StableDiffusionXLPipeline,
        UNet2DConditionModel,
    )
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    cfg = TINY_SDXL_CONFIG
    tokenizer = _tokenizer(**cfg["tokenizer"])
    tokenizer_2 = _tokenizer(**cfg["tokenizer_2"])

    def text_config(tok, **kwargs) -> CLIPTextConfig:
        # The real ids of the tokenizer, so the pooled output is taken at the end-of-text token.
        ids = dict(bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
        return CLIPTextConfig(vocab_size=len(tok), pad_token_id=tok.pad_token_id, **ids, **kwargs)

    # fork_rng: the caller's global random state is left as it was.
    with torch.random.fork_rng(devices=[]):
        # One seed per component, so resizing one component does not change the others.
        torch.manual_seed(seed)
        unet = UNet2DConditionModel(**cfg["unet"])
        torch.manual_seed(seed + 1)
        vae = AutoencoderKL(**cfg["vae"])
        torch.manual_seed(seed + 2)
        text_encoder = CLIPTextModel(text_config(tokenizer, **cfg["text_encoder"]))
        torch.manual_seed(seed + 3)
        text_encoder_2 = CLIPTextModelWithProjection(
            text_config(tokenizer_2, **cfg["text_encoder_2"])
        )
    return StableDiffusionXLPipeline(
        vae=vae.eval(),
        text_encoder=text_encoder.eval(),
        text_encoder_2=text_encoder_2.eval(),
        tokenizer=tokenizer,
        tokenizer_2=tokenizer_2,
        unet=unet.eval(),
        scheduler=EulerDiscreteScheduler(**cfg["scheduler"]),
    )


def _tokenizer(pad_token: str):
    """A CLIP byte-level BPE tokenizer over bytes only, in CLIP's vocabulary layout.

    CLIP's vocabulary is the 256 byte characters, the same with "</w>" (end of word), the
    merges' tokens, then <|startoftext|> and <|endoftext|> last (49406 and 49407 in the real
    one). Without merges every character is a token; any text tokenizes, lower-cased.
    """
    from transformers import CLIPTokenizer

    chars = list(_bytes_to_unicode().values())
    tokens = chars + [c + "</w>" for c in chars] + ["<|startoftext|>", "<|endoftext|>"]
    return CLIPTokenizer(
        vocab={token: i for i, token in enumerate(tokens)},
        merges=[],
        pad_token=pad_token,
        model_max_length=MAX_TOKENS,
    )


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's (and CLIP's) reversible map of the 256 bytes to printable characters, in its
    order: printable bytes first (so "!" is token 0, SDXL's second pad id), then the rest."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    printable += range(ord("®"), ord("ÿ") + 1)
    others = [b for b in range(256) if b not in printable]
    return {
        **{b: chr(b) for b in printable},
        **{b: chr(256 + i) for i, b in enumerate(others)},
    }


def _config_hash(seed: int) -> str:
    spec = {"format": FORMAT, "seed": seed, "config": TINY_SDXL_CONFIG}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def _marker(pipe, seed: int, config_hash: str) -> dict:
    import diffusers
    import transformers

    modules = ("unet", "vae", "text_encoder", "text_encoder_2")
    return {
        "family": "sdxl",
        "format": FORMAT,
        "seed": seed,
        "config_hash": config_hash,
        "config": TINY_SDXL_CONFIG,
        "vae_scale_factor": pipe.vae_scale_factor,
        "parameters": {m: sum(p.numel() for p in getattr(pipe, m).parameters()) for m in modules},
        "made_with": {
            "torch": torch.__version__,
            "diffusers": diffusers.__version__,
            "transformers": transformers.__version__,
        },
    }
