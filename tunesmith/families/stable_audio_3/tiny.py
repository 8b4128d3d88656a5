"""Tiny base models with the real architectures, made from code (nothing is downloaded).

`make_tiny_stable_audio_3` builds every component of a Stable Audio 3 base model with the real
`diffusers`/`transformers` classes at tiny sizes and a fixed seed, and saves it in the
published diffusers folder layout, so `StableAudio3Pipeline.from_pretrained(folder)` (and
`tunesmith.families.stable_audio_3.load_pipeline`) loads it like a user's base model.

What is kept from the real model: every class and code path (differential attention, memory
tokens, the inpaint `to_local_embed` projections, the SAME VAE's 256-sample patches and one
stride-16 resampling block, so the downsampling ratio is the real 4096), 44.1 kHz stereo, a
Gemma BPE tokenizer with byte fallback. What is not: widths, depths and vocabulary (see the
configs below, each with the real value), and the weights, which are random.

Freshly initialised weights would leave some paths dead: diffusers initialises residual outputs
to zero (the VAE's attention and feed-forward outputs, the DiT's pre/post convs and inpaint
projections, the prompt padding embedding), so a fresh VAE encodes every clip to nearly the same
latent and decodes every latent to nearly the same audio. The builder redraws those parameters
and sharpens the VAE's attention (`_wake_zero_inits`, `_sharpen_same_attention`), so that every
path carries signal, as in a trained model: latents depend on the audio, audio on the
latents, and an adapter on any layer changes the output.

`make_tiny_stable_audio_3_arc` writes the tiny base model's ARC sibling, for demos with
`arc = true` (`arc.py`): the same components, and the DiT as post-training leaves it, the base's
weights each moved by a small seeded step (`ARC_STEP` of the tensor's own spread), so that an
adapter trained on the base fits it and the two models sound different; its scheduler is the
ping-pong one (`stochastic_sampling`), as the published distilled checkpoints ship it.

Not handled: the ACE-Step and SDXL tiny models (their own functions, later).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import torch

from tunesmith.families.stable_audio_3.model import check_base_model
from tunesmith.families.tiny import write_tiny

FORMAT = 2  # bump when the builder changes what it writes for the same config and seed

# One width is shared by the T5Gemma hidden size, the DiT's cond_token_dim and global_cond_dim,
# and the duration embedder's output: the duration embedding is appended to the text tokens as
# one more cross-attention token, and is also the global (AdaLN) input. Real: 768.
COND_DIM = 32
LATENT_DIM = 16  # real 256; the VAE's latent_dim is the DiT's io_channels

TINY_SA3_CONFIG: dict[str, dict] = {
    "transformer": dict(  # StableAudio3DiTModel; ~0.26 M parameters
        io_channels=LATENT_DIM,
        patch_size=1,  # real 1
        embed_dim=64,  # real 1536 (medium)
        depth=2,  # real 24 (medium)
        num_heads=2,  # head dim 32; real 64
        cond_token_dim=COND_DIM,
        global_cond_dim=COND_DIM,
        local_add_cond_dim=LATENT_DIM + 1,  # inpaint mask + context latents; real 257
        timestep_features_dim=32,  # real 256
        ff_mult=4.0,  # real 4
        num_memory_tokens=4,  # real 64
        use_differential_attention=True,  # real: the fused [q1|q2|k1|k2|v] projection
    ),
    "vae": dict(  # AutoencoderSAME; ~26 k parameters
        audio_channels=2,  # real: stereo
        patch_size=256,  # real 256
        encoder_channels=8,  # real 128 (SAME-S) / 256 (SAME-L)
        encoder_c_mults=[2],  # real [6]
        encoder_strides=[16],  # real [16]: downsampling ratio 256 * 16 = 4096, as the real one
        encoder_transformer_depths=[1],  # real [6] / [12]
        latent_dim=LATENT_DIM,
        use_differential_attention=True,  # real
        dim_heads=8,  # real 64
        ff_mult=3,  # real 3
        sliding_window=1,  # real 1
        sampling_rate=44100,  # real
    ),
    "text_encoder": dict(  # T5GemmaModuleConfig of the encoder (and the unused decoder)
        hidden_size=COND_DIM,  # t5gemma-b-b-ul2: 768
        intermediate_size=64,  # 2048 (full_size.T5GEMMA_B)
        num_hidden_layers=2,  # 12
        num_attention_heads=2,  # 12
        num_key_value_heads=1,  # 12
        head_dim=16,  # 64
        max_position_embeddings=512,  # the pipeline pads prompts to 256 tokens
    ),
    "duration_embedder": dict(output_dim=COND_DIM, fourier_dim=32),  # real 768 / 256
    # The base (non-distilled, rectified-flow) base model's scheduler, the one training uses:
    # deterministic Euler. timesteps = sigmas * num_train_timesteps, so 1 keeps t in [0, 1]
    # as the DiT expects; shift 1 leaves the pipeline's log-SNR sigmas as they are.
    "scheduler": dict(num_train_timesteps=1, shift=1.0, stochastic_sampling=False),
    # GemmaTokenizer (BPE with byte fallback, "▁" for spaces) over characters; Gemma's
    # 256 k-token vocabulary is not needed to exercise the code path.
    "tokenizer": dict(
        characters="▁abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,:;-'!?/&()#+",
        add_bos_token=True,  # Gemma's default
        add_eos_token=False,
    ),
}
# patch_size * prod(encoder_strides): samples per latent frame (AutoencoderSAME computes it,
# it is not in the VAE's config.json).
TINY_SA3_DOWNSAMPLING_RATIO = 256 * 16
# The tiny ARC: every DiT tensor of more than one value moves by ARC_STEP times its own standard
# deviation of Gaussian noise drawn from seed + ARC_SEED_OFFSET (a post-trained model stays near
# its base; the real ARC models are a distillation of their base).
ARC_STEP = 0.1
ARC_SEED_OFFSET = 100
WAKE_STD = 0.02  # std of the redrawn all-zero vectors (BERT/GPT-2's init std)
SAME_QK_GAIN = 4.0  # see _sharpen_same_attention


def make_tiny_stable_audio_3(folder: Path, seed: int = 0) -> Path:
    """Write a tiny Stable Audio 3 base model to `folder`; returns `folder` (see write_tiny)."""
    return write_tiny(
        Path(folder),
        _config_hash(seed),
        lambda: build_tiny_stable_audio_3(seed),
        lambda pipe: _marker(pipe, seed, _config_hash(seed)),
        check_base_model,
    )


def make_tiny_stable_audio_3_arc(folder: Path, seed: int = 0) -> Path:
    """Write the tiny base model's ARC sibling to `folder` (`tiny-stable-audio-3-arc` beside
    the base, `arc.arc_model_name`); returns `folder` (see write_tiny)."""
    config_hash = _arc_config_hash(seed)
    return write_tiny(
        Path(folder),
        config_hash,
        lambda: build_tiny_stable_audio_3_arc(seed),
        lambda pipe: {**_marker(pipe, seed, config_hash), **_arc_spec(seed)},
        check_base_model,
    )


def build_tiny_stable_audio_3_arc(seed: int = 0):
    """The tiny ARC `StableAudio3Pipeline` in memory: the tiny base of `seed` with its DiT
    moved (`ARC_STEP`) and the ping-pong scheduler."""
    from diffusers import FlowMatchEulerDiscreteScheduler

    pipe = build_tiny_stable_audio_3(seed)
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed + ARC_SEED_OFFSET)
        for param in pipe.transformer.parameters():
            if param.numel() > 1:
                param.add_(torch.randn_like(param) * (ARC_STEP * param.std()))
    scheduler = {**TINY_SA3_CONFIG["scheduler"], "stochastic_sampling": True}
    pipe.scheduler = FlowMatchEulerDiscreteScheduler(**scheduler)
    return pipe


def build_tiny_stable_audio_3(seed: int = 0):
    """The tiny `StableAudio3Pipeline` in memory (fp32, CPU), without saving it."""
    from diffusers import (
        AutoencoderSAME,
        FlowMatchEulerDiscreteScheduler,
        StableAudio3DiTModel,
        StableAudio3DurationEmbedder,
        StableAudio3Pipeline,
    )
    from transformers import T5GemmaConfig, T5GemmaEncoderModel
    from transformers.models.t5gemma.configuration_t5gemma import T5GemmaModuleConfig

    cfg = TINY_SA3_CONFIG
    tokenizer = _tokenizer(**cfg["tokenizer"])
    # fork_rng: the caller's global random state is left as it was.
    with torch.random.fork_rng(devices=[]):
        # One seed per component, so resizing one component does not change the others.
        torch.manual_seed(seed)
        transformer = _wake_zero_inits(StableAudio3DiTModel(**cfg["transformer"]))
        torch.manual_seed(seed + 1)
        vae = _sharpen_same_attention(_wake_zero_inits(AutoencoderSAME(**cfg["vae"])))
        torch.manual_seed(seed + 2)
        module = T5GemmaModuleConfig(vocab_size=len(tokenizer), **cfg["text_encoder"]).to_dict()
        text_config = T5GemmaConfig(
            encoder=module, decoder=module, is_encoder_decoder=False, vocab_size=len(tokenizer)
        )
        text_encoder = _wake_zero_inits(T5GemmaEncoderModel(text_config))
        torch.manual_seed(seed + 3)
        duration_embedder = _wake_zero_inits(
            StableAudio3DurationEmbedder(**cfg["duration_embedder"])
        )
    scheduler = FlowMatchEulerDiscreteScheduler(**cfg["scheduler"])
    return StableAudio3Pipeline(
        vae=vae.eval(),
        text_encoder=text_encoder.eval(),
        tokenizer=tokenizer,
        duration_embedder=duration_embedder.eval(),
        transformer=transformer.eval(),
        scheduler=scheduler,
    )


def _tokenizer(characters: str, add_bos_token: bool, add_eos_token: bool):
    from transformers import GemmaTokenizer

    # Gemma's layout: <pad>=0, <eos>=1, <bos>=2, <unk>=3, <mask>=4, then the 256 byte-fallback
    # tokens, so any text tokenizes (unknown characters become their UTF-8 bytes).
    vocab = {token: i for i, token in enumerate(["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"])}
    for byte in range(256):
        vocab[f"<0x{byte:02X}>"] = len(vocab)
    for char in characters:
        vocab.setdefault(char, len(vocab))
    return GemmaTokenizer(
        vocab=vocab, merges=[], add_bos_token=add_bos_token, add_eos_token=add_eos_token
    )


@torch.no_grad()
def _wake_zero_inits(model: torch.nn.Module) -> torch.nn.Module:
    """Redraw the parameters a fresh model starts without signal, in `named_parameters` order.

    All-zero matrices (and conv kernels) get nn.Linear's default init, kaiming-uniform with
    a=sqrt(5), that is U(±1/sqrt(fan_in)); other all-zero tensors get N(0, WAKE_STD²). SAME's
    learned output tokens (`new_tokens`, initialised to 1e-5 * randn) get N(0, 1): near zero,
    every output token asks the same query and the encoder's latents barely depend on the audio.
    """
    for name, param in model.named_parameters():
        if name.endswith("new_tokens"):
            param.normal_(0.0, 1.0)
        elif param.any():
            continue
        elif param.dim() >= 2:
            torch.nn.init.kaiming_uniform_(param, a=math.sqrt(5))
        else:
            param.normal_(0.0, WAKE_STD)
    return model


@torch.no_grad()
def _sharpen_same_attention(vae: torch.nn.Module) -> torch.nn.Module:
    """Multiply the gains of the SAME VAE's query/key norms by SAME_QK_GAIN.

    SAME normalises q and k with DynamicTanh (gamma * tanh(alpha * x) + beta), so with random
    weights the attention logits are small, both maps of the differential attention are close
    to the same band average, and their difference (the attention output) nearly cancels: the
    decoder would ignore its latents. A trained model attends sharply; a gain of 4 (logits x16)
    makes the tiny one do so too. The DiT needs no such help: its RMS norms give unit-scale q, k.
    """
    for name, param in vae.named_parameters():
        if name.endswith(("q_norm.gamma", "k_norm.gamma")):
            param.mul_(SAME_QK_GAIN)
    return vae


def _config_hash(seed: int) -> str:
    spec = {"format": FORMAT, "seed": seed, "config": TINY_SA3_CONFIG}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def _arc_spec(seed: int) -> dict:
    return {"arc": {"step": ARC_STEP, "seed": seed + ARC_SEED_OFFSET, "stochastic_sampling": True}}


def _arc_config_hash(seed: int) -> str:
    spec = {"format": FORMAT, "seed": seed, "config": TINY_SA3_CONFIG, **_arc_spec(seed)}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def _marker(pipe, seed: int, config_hash: str) -> dict:
    import diffusers
    import transformers

    modules = ("transformer", "vae", "text_encoder", "duration_embedder")
    return {
        "family": "stable-audio-3",
        "format": FORMAT,
        "seed": seed,
        "config_hash": config_hash,
        "config": TINY_SA3_CONFIG,
        "sample_rate": pipe.vae.config.sampling_rate,
        "audio_channels": pipe.vae.config.audio_channels,
        "latent_dim": pipe.vae.config.latent_dim,
        "downsampling_ratio": pipe.vae.downsampling_ratio,
        "parameters": {m: sum(p.numel() for p in getattr(pipe, m).parameters()) for m in modules},
        "made_with": {
            "torch": torch.__version__,
            "diffusers": diffusers.__version__,
            "transformers": transformers.__version__,
        },
    }
