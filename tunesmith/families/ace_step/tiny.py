"""A tiny ACE-Step 1.5 with the real architecture, made from code (nothing is downloaded).

`make_tiny_ace_step` builds every component of an ACE-Step 1.5 diffusers base model with the
real `diffusers`/`transformers` classes at tiny sizes and a fixed seed, and saves it in the
published folder layout (see `model.py`), so `AceStepPipeline.from_pretrained(folder)` and
`tunesmith.families.ace_step.load_pipeline` load it as they load a converted release.

What is kept from the real model: every class and code path: the DiT's alternating sliding /
full attention with GQA, its dual timestep embedding and patch size 2; the condition encoder's
lyric and timbre encoders, text projector, `null_condition_emb` and `silence_latent`; the
Oobleck VAE at 48 kHz stereo with the release's downsampling ratios [2, 4, 4, 6, 10], so one
latent frame is 1920 samples (25 Hz); a Qwen3 text encoder with a byte-level BPE Qwen2
tokenizer carrying `<|endoftext|>` (the templates' terminator), `<|im_start|>`, `<|im_end|>`;
the audio tokenizer's attention pooler over 5-frame windows and its residual FSQ (levels mixing
8 and 5 as the release's [8, 8, 8, 5, 5, 5] do), and the detokenizer. What is not: widths,
depths, the FSQ codebook size (200 codes, real 64000), the vocabulary, and the weights, which
are random. Each config value carries the release's beside it (acestep-v15 turbo / base).

Three things are set the way a trained model has them rather than as a fresh model
starts. A fresh Oobleck encoder shrinks its input layer after layer, so every clip encodes to
nearly the same latent, and every latent to nearly the same FSQ code: the encoder's last conv
is rescaled so latents come out about zero-mean and unit-variance (`_standardize_latents`),
and then they, and their codes, follow the audio. Its posterior is made narrow
(`_narrow_posterior`), so a latent drawn from it is the encoding of the audio, not noise. And
`silence_latent` is the tiny VAE's own encoding of silence (a fresh condition encoder holds
zeros, which the pipeline's comments call out of distribution).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch

from tunesmith.families.ace_step.model import SAMPLE_RATE, check_base_model
from tunesmith.families.base_model import quiet_loading
from tunesmith.families.tiny import write_tiny

FORMAT = 2  # bump when the builder changes what it writes for the same config and seed

LATENT_DIM = 8  # real 64: the VAE's latent channels, the DiT's audio_acoustic_hidden_dim
HIDDEN = 32  # real 2048: DiT, condition encoder, audio tokenizer and detokenizer width
TEXT_DIM = 16  # real 1024: the Qwen3 text encoder's hidden size (text_hidden_dim)
SILENCE_FRAMES = 15000  # real: the silence_latent buffer holds 600 s at 25 Hz

_BLOCK = dict(  # shared by the DiT and the encoders, as the release's one config.json does
    hidden_size=HIDDEN,
    intermediate_size=64,  # real 6144
    num_attention_heads=4,  # real 16
    num_key_value_heads=2,  # real 8 (GQA)
    head_dim=8,  # real 128
    rope_theta=1000000.0,  # real
    sliding_window=16,  # real 128
)
TINY_ACE_STEP_CONFIG: dict[str, dict] = {
    "transformer": dict(  # AceStepTransformer1DModel
        _BLOCK,
        num_hidden_layers=2,  # real 24: one sliding-window layer, one full-attention layer
        # The DiT's input is [context: source latents | chunk mask, noisy latents]: 3x the
        # latent width (real 192 = 3 * 64).
        in_channels=3 * LATENT_DIM,
        audio_acoustic_hidden_dim=LATENT_DIM,
        patch_size=2,  # real
        is_turbo=False,  # a base model: CFG against the learned null condition applies
    ),
    "condition_encoder": dict(  # AceStepConditionEncoder
        _BLOCK,
        text_hidden_dim=TEXT_DIM,
        timbre_hidden_dim=LATENT_DIM,  # the timbre encoder reads VAE latents
        num_lyric_encoder_hidden_layers=2,  # real 8
        num_timbre_encoder_hidden_layers=2,  # real 4
    ),
    "vae": dict(  # AutoencoderOobleck
        # The encoder's last conv gives mean and scale, so its width is twice the latent's
        # (real 128 = 2 * 64).
        encoder_hidden_size=2 * LATENT_DIM,
        downsampling_ratios=[2, 4, 4, 6, 10],  # real: 1920 samples a frame, 25 Hz at 48 kHz
        channel_multiples=[1, 2, 2, 4, 4],  # real [1, 2, 4, 8, 16]
        decoder_channels=4,  # real 128
        decoder_input_channels=LATENT_DIM,
        audio_channels=2,  # real: stereo
        sampling_rate=SAMPLE_RATE,  # real
    ),
    "text_encoder": dict(  # Qwen3Config of a Qwen3Model (Qwen3-Embedding-0.6B in the release)
        hidden_size=TEXT_DIM,
        intermediate_size=32,  # real 3072
        num_hidden_layers=2,  # real 28
        num_attention_heads=2,  # real 16
        num_key_value_heads=1,  # real 8
        head_dim=8,  # real 128
        max_position_embeddings=4096,  # real 32768; the pipeline sends up to 2048 lyric tokens
        rope_theta=1000000.0,  # real
        rms_norm_eps=1e-6,  # real
        tie_word_embeddings=True,  # real
    ),
    "audio_tokenizer": dict(  # AceStepAudioTokenizer
        _BLOCK,
        audio_acoustic_hidden_dim=LATENT_DIM,
        pool_window_size=5,  # real: 25 Hz latents -> one code every 0.2 s (5 Hz)
        fsq_dim=HIDDEN,  # real 2048 = the hidden size
        fsq_input_levels=[8, 5, 5],  # real [8, 8, 8, 5, 5, 5] (64000 codes); here 200
        fsq_input_num_quantizers=1,  # real
        num_attention_pooler_hidden_layers=2,  # real
    ),
    "audio_token_detokenizer": dict(  # AceStepAudioTokenDetokenizer
        _BLOCK,
        audio_acoustic_hidden_dim=LATENT_DIM,
        pool_window_size=5,  # real
        num_attention_pooler_hidden_layers=2,  # real
    ),
    # The release's scheduler: ACE-Step's timesteps live in [0, 1] and the pipeline passes its
    # own shifted sigmas, so the scheduler must leave them alone (the pipeline's docstring).
    "scheduler": dict(num_train_timesteps=1, shift=1.0),
    # Byte-level BPE trained on the corpus below (tokenizers' trainer, deterministic), so a
    # caption costs a few tokens a word as with Qwen's 151k vocabulary, and any text tokenizes.
    "tokenizer": dict(vocab_size=600, model_max_length=32768),
}
POSTERIOR_SCALE_BIAS = -6.0  # see _narrow_posterior: softplus(-6) + 1e-4 ~ 0.0026
CALIBRATION_RMS = 0.1  # the level of the white noise _standardize_latents measures with

# What the tokenizer's merges are learnt from: the text encoder's two templates (ACE-Step
# 1.5's acestep/constants.py, SFT_GEN_PROMPT and LYRIC_GEN_PROMPT) and common music words.
_CORPUS = (
    "# Instruction\nFill the audio semantic mask based on the given conditions:\n\n"
    "# Caption\n{}\n\n# Metas\n- bpm: 120\n- timesignature: 4\n- keyscale: C major\n"
    "- duration: 30 seconds\n",
    "# Languages\nen\n\n# Lyric\n[Verse]\n[Chorus]\n[Bridge]\n[Intro]\n[Outro]\n[Instrumental]",
    "warm bright dark deep soft tight dusty driving sunny lo-fi hip hop boom bap funk synth pop "
    "house techno indie rock jazz ambient folk piano guitar bass drums vocals strings pad loop "
    "song beat groove chords melody minor major sharp flat female male voice singing night "
    "light love heart dream fire rain sky city road home time we you the and of to in on with",
)


def make_tiny_ace_step(folder: Path, seed: int = 0) -> Path:
    """Write a tiny ACE-Step 1.5 base model to `folder`; returns `folder` (see `write_tiny`:
    idempotent, atomic, and a folder it did not make is refused)."""
    return write_tiny(
        Path(folder),
        _config_hash(seed),
        lambda: build_tiny_ace_step(seed),
        lambda pipe: _marker(pipe, seed, _config_hash(seed)),
        check_base_model,
    )


def build_tiny_ace_step(seed: int = 0):
    """The tiny `AceStepPipeline` in memory (fp32, CPU), without saving it."""
    from diffusers import (
        AceStepPipeline,
        AceStepTransformer1DModel,
        AutoencoderOobleck,
        FlowMatchEulerDiscreteScheduler,
    )
    from diffusers.pipelines.ace_step import (
        AceStepAudioTokenDetokenizer,
        AceStepAudioTokenizer,
        AceStepConditionEncoder,
    )
    from transformers import Qwen3Config, Qwen3Model

    cfg = TINY_ACE_STEP_CONFIG
    tokenizer = _tokenizer(**cfg["tokenizer"])
    text_config = Qwen3Config(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **cfg["text_encoder"],
    )
    # fork_rng: the caller's global random state is left as it was. One seed per component,
    # so resizing one component does not change the others. quiet_loading: Oobleck still
    # builds its convolutions with the deprecated weight_norm.
    with torch.random.fork_rng(devices=[]), quiet_loading():
        torch.manual_seed(seed)
        transformer = AceStepTransformer1DModel(**cfg["transformer"])
        torch.manual_seed(seed + 1)
        vae = _narrow_posterior(_standardize_latents(AutoencoderOobleck(**cfg["vae"]), seed))
        torch.manual_seed(seed + 2)
        text_encoder = Qwen3Model(text_config)
        torch.manual_seed(seed + 3)
        condition_encoder = AceStepConditionEncoder(**cfg["condition_encoder"])
        torch.manual_seed(seed + 4)
        audio_tokenizer = AceStepAudioTokenizer(**cfg["audio_tokenizer"])
        torch.manual_seed(seed + 5)
        detokenizer = AceStepAudioTokenDetokenizer(**cfg["audio_token_detokenizer"])
        _encode_silence(vae.eval(), condition_encoder)
    return AceStepPipeline(
        vae=vae,
        text_encoder=text_encoder.eval(),
        tokenizer=tokenizer,
        transformer=transformer.eval(),
        condition_encoder=condition_encoder.eval(),
        scheduler=FlowMatchEulerDiscreteScheduler(**cfg["scheduler"]),
        audio_tokenizer=audio_tokenizer.eval(),
        audio_token_detokenizer=detokenizer.eval(),
    )


def _tokenizer(vocab_size: int, model_max_length: int):
    """A Qwen2 byte-level BPE tokenizer (what Qwen3-Embedding ships), merges trained here.

    Qwen3-Embedding's special tokens: `<|endoftext|>` pads (and ends both templates),
    `<|im_end|>` ends a turn (its eos), `<|im_start|>` opens one.
    """
    from transformers import Qwen2Tokenizer

    bytes_only = Qwen2Tokenizer(
        vocab={char: i for i, char in enumerate(_byte_alphabet())},
        merges=[],
        unk_token=None,
        pad_token="<|endoftext|>",
        eos_token="<|im_end|>",
        additional_special_tokens=["<|im_start|>"],
        model_max_length=model_max_length,
    )
    # tokenizers' own BPE trainer, through transformers; it keeps the byte alphabet, so
    # unseen text still tokenizes byte by byte.
    return bytes_only.train_new_from_iterator(list(_CORPUS), vocab_size=vocab_size)


def _byte_alphabet() -> list[str]:
    """GPT-2's (and Qwen's) printable stand-ins for the 256 bytes, in their vocabulary order."""
    from tokenizers.pre_tokenizers import ByteLevel

    # Printable bytes stand for themselves, the others for chr(256 + n): code point order
    # is the vocabulary order.
    return sorted(ByteLevel.alphabet())


# The folder must be the same bytes on every machine: its fingerprint names the encoded files
# and keys the runs. Its calibration encodes noise and silence, and a forward pass's last bits
# depend on the processor (the convolutions' sums run in another order on another chip, or on
# more threads; silence's latent, a near cancellation, moved by 1e-3 of itself). So the
# calibration encodes in float64 and keeps float16's precision of what it measured: a float64
# sum's error is far below that rounding step.
def _encode_exactly(vae: torch.nn.Module, audio: torch.Tensor) -> torch.Tensor:
    """The posterior mean of `audio`, computed in float64 (the VAE is float32 again after)."""
    try:
        return vae.eval().double().encode(audio.double()).latent_dist.mean.float()
    finally:
        vae.float()  # float32 -> float64 -> float32 gives the same bytes


def _same_everywhere(values: torch.Tensor) -> torch.Tensor:
    """`values` rounded to float16's precision (11 bits)."""
    return values.to(torch.float16).to(values.dtype)


@torch.no_grad()
def _standardize_latents(vae: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Rescale the mean half of the encoder's last conv so two seconds of white noise (seeded,
    at CALIBRATION_RMS) encode to latents with zero mean and unit variance per channel.

    The conv is weight-normed (weight = g * v / |v|): multiplying g and the bias by a channel's
    gain scales that channel's output, and the bias then takes the mean away.
    """
    generator = torch.Generator().manual_seed(seed)
    noise = CALIBRATION_RMS * torch.randn(1, 2, 2 * SAMPLE_RATE, generator=generator)
    means = _encode_exactly(vae, noise)
    mean, std = _same_everywhere(means.mean(dim=(0, 2))), _same_everywhere(means.std(dim=(0, 2)))
    conv = vae.encoder.conv2
    conv.weight_g[:LATENT_DIM] *= (1 / std)[:, None, None]  # weight_g: [out_channels, 1, 1]
    conv.bias[:LATENT_DIM] = (conv.bias[:LATENT_DIM] - mean) / std
    return vae


@torch.no_grad()
def _narrow_posterior(vae: torch.nn.Module) -> torch.nn.Module:
    """Shift the bias of the scale half of the encoder's last conv to POSTERIOR_SCALE_BIAS.

    Oobleck's encoder gives mean and scale per latent channel; std = softplus(scale) + 1e-4.
    Fresh, the scale is near 0 and the std near 0.69, most of the latents' own spread, so a
    latent drawn from the posterior (as ACE-Step 1.5 and Side-Step encode training audio)
    would be half noise. A trained VAE's posterior is narrow; this one's std becomes about
    0.003.
    """
    conv = vae.encoder.conv2
    conv.bias[LATENT_DIM:] = POSTERIOR_SCALE_BIAS
    return vae


@torch.no_grad()
def _encode_silence(vae: torch.nn.Module, condition_encoder: torch.nn.Module) -> None:
    """Fill `silence_latent` [1, 15000, C] with the VAE's posterior mean of digital silence.

    Silence encodes to the same frame everywhere but near the ends (the convolutions' zero
    padding), so two seconds are encoded and their middle frame is repeated.
    """
    seconds = 2
    latents = _encode_exactly(vae, torch.zeros(1, 2, seconds * SAMPLE_RATE))
    middle = _same_everywhere(latents[0, :, latents.shape[-1] // 2])
    condition_encoder.silence_latent.copy_(middle.expand(1, SILENCE_FRAMES, LATENT_DIM))


def _config_hash(seed: int) -> str:
    spec = {
        "format": FORMAT,
        "seed": seed,
        "config": TINY_ACE_STEP_CONFIG,
        "corpus": _CORPUS,
        "posterior_scale_bias": POSTERIOR_SCALE_BIAS,
        "calibration_rms": CALIBRATION_RMS,
    }
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def _marker(pipe, seed: int, config_hash: str) -> dict:
    import diffusers
    import transformers

    modules = (
        "transformer",
        "condition_encoder",
        "vae",
        "text_encoder",
        "audio_tokenizer",
        "audio_token_detokenizer",
    )
    return {
        "family": "ace-step",
        "format": FORMAT,
        "seed": seed,
        "config_hash": config_hash,
        "config": TINY_ACE_STEP_CONFIG,
        "sample_rate": pipe.sample_rate,
        "latents_per_second": pipe.latents_per_second,
        "codebook_size": pipe.audio_tokenizer.quantizer.codebook_size,
        "vocab_size": len(pipe.tokenizer),
        "parameters": {m: sum(p.numel() for p in getattr(pipe, m).parameters()) for m in modules},
        "made_with": {
            "torch": torch.__version__,
            "diffusers": diffusers.__version__,
            "transformers": transformers.__version__,
        },
    }
