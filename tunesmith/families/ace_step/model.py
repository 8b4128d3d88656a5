"""The `ace-step` family's model: ACE-Step 1.5 as diffusers ships it (`AceStepPipeline`), loaded,
and what encodes with it.

A base model is a folder in the diffusers layout, the one `AceStepPipeline.save_pretrained` and
diffusers' `scripts/convert_ace_step_to_diffusers.py` write:

    model_index.json          which class each component folder holds
    transformer/              AceStepTransformer1DModel     the DiT, config.json + *.safetensors
    condition_encoder/        AceStepConditionEncoder       lyric + timbre encoders, the text
                                                            projector, null_condition_emb and
                                                            silence_latent (a buffer)
    vae/                      AutoencoderOobleck            48 kHz stereo <-> 25 Hz latents
    text_encoder/             Qwen3Model                    Qwen3-Embedding-0.6B in the release
    tokenizer/                Qwen2Tokenizer(Fast)          tokenizer_config.json + tokenizer.json
    scheduler/                FlowMatchEulerDiscreteScheduler  scheduler_config.json
    audio_tokenizer/          AceStepAudioTokenizer         25 Hz latents -> 5 Hz FSQ codes
    audio_token_detokenizer/  AceStepAudioTokenDetokenizer  5 Hz codes -> 25 Hz latents

The last two are optional for the pipeline (text-to-music does not use them) and for DiT
training: a folder without them loads, trains and renders, and `check_base_model` says that
audio codes are skipped. Everything else is required; a folder that lacks any of it is refused
with every missing part named. Only `.safetensors` weights are ever loaded.

Encoding: pure functions over a loaded `AceStepPipeline` (no store, no Dagster):

- `load_audio`: a file as the VAE takes it: 48 kHz stereo, whole files up to 600 s (cut there
  with a warning), cut down to whole latent frames (tunesmith.media.audio does the work).
- `encode_latents`: Oobleck latents [T, C] at 25 Hz, float32, in ACE-Step's layout (frames
  first, as its preprocessors store `target_latents`). Above `chunk_seconds` the VAE encodes
  overlapping windows and keeps their centres: diffusers' own tiling of `AutoencoderOobleck`
  (30 s windows with 2 s of context each side by default, the same numbers as ACE-Step 1.5's
  and Side-Step's tiled encode). The latent is then drawn from the posterior, once, over the
  whole file, with a seeded generator (ACE-Step 1.5 and Side-Step call
  `latent_dist.sample()`; `posterior="mean"` keeps the mean instead).
- `audio_codes`: the 5 Hz FSQ codes of latents from the base model's own
  `AceStepAudioTokenizer`, padded with the base model's silence latent to whole 5-frame
  windows, as the pipeline's cover path tokenizes; `codes_text` writes them as the
  `<|audio_code_N|>` tokens the pipeline's `audio_codes` argument and the planner LM read.
- `encode_caption` / `encode_lyrics`: the text encoder's last hidden states of the caption
  string, and the token embeddings of the lyrics string (the lyric encoder contextualises
  them), each for one text, as `AceStepPipeline.encode_prompt` computes them.
- `conditioning` / `context_latents`: what the DiT reads besides its noisy latents, built
  from those as the pipeline's text-to-music call builds them.
- `write_item` / `write_text`: one item's (or text's) safetensors and JSON sidecar, atomically.

Not handled: the original ACE-Step 1.5 base model layout (`acestep-v15-*/model.safetensors`,
`vae/`, `Qwen3-Embedding-0.6B/`): it is refused with the diffusers command that converts it;
reference audio for the timbre encoder (text-to-music uses the silence latent); more than one
FSQ quantizer (the release has one).
"""

from __future__ import annotations

import json
import math
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import torch
from safetensors.torch import load_file, save

from tunesmith.families.base_model import frozen, quiet_loading
from tunesmith.media import audio as media_audio
from tunesmith.store.atomic import atomic_write_bytes, atomic_write_json

if TYPE_CHECKING:
    from diffusers import AceStepPipeline

from tunesmith.families.ace_step.base_model import (  # noqa: F401 (model's names)
    AUDIO_CHANNELS,
    CHUNK_SECONDS,
    CODE_PARTS,
    FAMILY,
    FAMILY_NAME,
    FORMAT,
    LATENT_RATE,
    OVERLAP_SECONDS,
    PIPELINE_CLASS,
    REQUIRED_PARTS,
    SAMPLE_RATE,
    CheckpointReport,
    check_base_model,
)

MAX_CAPTION_TOKENS = 256  # the pipeline's max_text_length and ACE-Step's caption length
MAX_LYRICS_TOKENS = 2048  # the pipeline's max_lyric_length and ACE-Step's LYRIC_MAX_LENGTH
TIMBRE_SECONDS = 30  # the pipeline feeds the timbre encoder 30 s of silence latent

Posterior = Literal["sample", "mean"]


def load_pipeline(
    folder: Path, dtype: torch.dtype = torch.float32, device: str = "cpu"
) -> AceStepPipeline:
    """Check `folder`, then load it as an `AceStepPipeline` from .safetensors only, offline.

    Every component is cast to `dtype`, and the pipeline is moved to `device`. Where the audio
    tokenizer or detokenizer is missing, both are left None (`pipe.audio_tokenizer is None`);
    `check_base_model` says why.
    """
    from diffusers import AceStepPipeline  # imported here: diffusers takes seconds

    report = check_base_model(folder)
    # An incomplete optional part must not be loaded at all: passing None overrides whatever
    # model_index.json declares for it.
    skip = {} if report.codes else {part.name: None for part in CODE_PARTS}
    with quiet_loading():
        pipe = AceStepPipeline.from_pretrained(
            Path(folder), dtype=dtype, use_safetensors=True, local_files_only=True, **skip
        )
    pipe.set_progress_bar_config(disable=True)
    return frozen(pipe).to(device)


def hop_length(vae) -> int:
    """Audio samples per latent frame: the product of the VAE's downsampling ratios."""
    return int(vae.hop_length)


def silence_latent(pipe) -> torch.Tensor:
    """The base model's encoded silence [1, T, C]: what the pipeline and the audio tokenizer pad
    with, and the DiT's context where no source audio is given."""
    return pipe.condition_encoder.silence_latent


def load_audio(path: Path, vae, label: str | None = None) -> media_audio.ModelAudio:
    """Decode `path` as 48 kHz stereo float32 [2, N], N a whole number of latent frames.

    Mono is repeated to both channels, other rates resampled, anything past 600 s cut with a
    warning in `.warnings` (tunesmith.media.audio; 600 s is also ACE-Step 1.5's longest song,
    `DURATION_MAX`).
    """
    if int(vae.config.sampling_rate) != SAMPLE_RATE:
        raise ValueError(
            f"the VAE runs at {vae.config.sampling_rate} Hz; ACE-Step 1.5's runs at {SAMPLE_RATE}"
        )
    return media_audio.for_model(Path(path), SAMPLE_RATE, hop_length(vae), label)


@torch.no_grad()
def encode_latents(
    vae,
    samples: torch.Tensor,
    posterior: Posterior = "sample",
    seed: int = 0,
    chunk_seconds: float = CHUNK_SECONDS,
    overlap_seconds: float = OVERLAP_SECONDS,
) -> torch.Tensor:
    """Latents [T, C] float32 of stereo audio [2, N] (N a multiple of the hop), on the CPU.

    The encoder runs on windows of `chunk_seconds` where the audio is longer: each window has
    `overlap_seconds` of context on both sides, dropped after encoding. The Oobleck encoder
    sees about 0.3 s each way (its kernels and dilations), so 2 s of context makes a chunked
    encoding equal the whole file's up to float rounding.
    """
    hop = hop_length(vae)
    chunk, overlap = round(chunk_seconds * SAMPLE_RATE), round(overlap_seconds * SAMPLE_RATE)
    if chunk % hop or overlap % hop or chunk <= 2 * overlap:
        raise ValueError(
            f"chunk {chunk_seconds} s and overlap {overlap_seconds} s must be whole latent "
            f"frames ({hop} samples) with the chunk longer than twice the overlap"
        )
    if samples.ndim != 2 or samples.shape[0] != 2 or samples.shape[1] % hop:
        raise ValueError(f"expected stereo audio [2, N] with N a multiple of {hop}")
    x = samples.to(device=vae.device, dtype=vae.dtype)[None]
    with _tiling(vae, chunk, overlap):
        distribution = vae.encode(x).latent_dist
    if posterior == "mean":
        latents = distribution.mean
    elif posterior == "sample":
        # One draw for the whole file after the windows are joined, so chunking does not
        # change the noise. A CPU generator: diffusers draws on the CPU and moves the noise,
        # so the same seed gives the same latents on any device.
        latents = distribution.sample(generator=torch.Generator("cpu").manual_seed(seed))
    else:
        raise ValueError(f"posterior {posterior!r}: expected 'sample' or 'mean'")
    return latents[0].transpose(0, 1).float().cpu().contiguous()


@contextmanager
def _tiling(vae, chunk: int, overlap: int):
    """Turn on AutoencoderOobleck's own tiled encode with these sizes, and restore after."""
    saved = (vae.use_tiling, vae.tile_sample_min_length, vae.tile_sample_overlap)
    vae.use_tiling, vae.tile_sample_min_length, vae.tile_sample_overlap = True, chunk, overlap
    try:
        yield
    finally:
        vae.use_tiling, vae.tile_sample_min_length, vae.tile_sample_overlap = saved


@torch.no_grad()
def audio_codes(pipe, latents: torch.Tensor) -> torch.Tensor:
    """The FSQ codes [ceil(T / 5)] (int64) of latents [T, C] from the base model's tokenizer.

    The tokenizer pools windows of `pool_window_size` (5) frames; the last window is filled
    with the base model's silence latent, as the pipeline's cover path does.
    """
    tokenizer = pipe.audio_tokenizer
    if tokenizer is None:
        raise ValueError("this base model has no audio_tokenizer/; audio codes are skipped")
    if int(tokenizer.config.fsq_input_num_quantizers) != 1:
        raise ValueError("the audio tokenizer has several FSQ quantizers; tunesmith reads one")
    dtype, device = tokenizer.dtype, tokenizer.device
    silence = silence_latent(pipe).to(device=device, dtype=dtype)
    _, indices = tokenizer.tokenize(latents[None].to(device=device, dtype=dtype), silence)
    return indices[0, :, 0].cpu()


def codes_text(codes: torch.Tensor) -> str:
    """Codes as ACE-Step's planner writes them: `<|audio_code_N|>` tokens, one per 0.2 s."""
    return "".join(f"<|audio_code_{int(code)}|>" for code in codes.tolist())


@dataclass(frozen=True)
class TextEncoding:
    """One text as the condition encoder takes it."""

    hidden_states: torch.Tensor  # [L, C] float32
    tokens: int  # L, after the cut
    cut_tokens: int  # tokens beyond the pipeline's limit, dropped as the pipeline drops them


@torch.no_grad()
def encode_caption(pipe, text: str, max_tokens: int = MAX_CAPTION_TOKENS) -> TextEncoding:
    """The text encoder's last hidden states of a caption string (see text.caption_text)."""
    ids, cut = _token_ids(pipe, text, max_tokens)
    hidden = pipe.text_encoder(input_ids=ids).last_hidden_state[0]
    return TextEncoding(hidden.float().cpu(), ids.shape[1], cut)


@torch.no_grad()
def encode_lyrics(pipe, text: str, max_tokens: int = MAX_LYRICS_TOKENS) -> TextEncoding:
    """The token embeddings of a lyrics string (see text.lyrics_text): the lyric encoder in
    the condition encoder contextualises them, so the text encoder's layers do not run."""
    ids, cut = _token_ids(pipe, text, max_tokens)
    hidden = pipe.text_encoder.get_input_embeddings()(ids)[0]
    return TextEncoding(hidden.float().cpu(), ids.shape[1], cut)


def _token_ids(pipe, text: str, max_tokens: int) -> tuple[torch.Tensor, int]:
    full = pipe.tokenizer(text, return_tensors="pt").input_ids
    cut = max(0, full.shape[1] - max_tokens)
    return full[:, :max_tokens].to(pipe.text_encoder.device), cut


@torch.no_grad()
def conditioning(
    pipe, caption: TextEncoding, lyrics: TextEncoding
) -> tuple[torch.Tensor, torch.Tensor]:
    """The DiT's cross-attention input [1, S, H] and its mask [1, S] for one song, built as
    `AceStepPipeline.__call__` builds it for text-to-music: the condition encoder over the
    caption states, the lyric embeddings and 30 s of silence latent as the timbre reference."""
    encoder = pipe.condition_encoder
    device, dtype = encoder.device, encoder.dtype
    frames = math.ceil(TIMBRE_SECONDS * pipe.latents_per_second)
    timbre = silence_latent(pipe)[:, :frames, :].to(device=device, dtype=dtype)

    def one(encoding: TextEncoding):
        states = encoding.hidden_states[None].to(device=device, dtype=dtype)
        return states, torch.ones(1, encoding.tokens, dtype=torch.bool, device=device)

    text_states, text_mask = one(caption)
    lyric_states, lyric_mask = one(lyrics)
    return encoder(
        text_hidden_states=text_states,
        text_attention_mask=text_mask,
        lyric_hidden_states=lyric_states,
        lyric_attention_mask=lyric_mask,
        refer_audio_acoustic_hidden_states_packed=timbre,
        refer_audio_order_mask=torch.zeros(1, dtype=torch.long, device=device),
    )


def context_latents(pipe, frames: int) -> torch.Tensor:
    """The DiT's context [1, T, 2C] for text-to-music: the silence latent as source (tiled
    where the song is longer than the buffer) and a chunk mask of ones (generate everywhere)."""
    silence = silence_latent(pipe)
    repeats = math.ceil(frames / silence.shape[1])
    source = silence.repeat(1, repeats, 1)[:, :frames, :]
    return torch.cat([source, torch.ones_like(source)], dim=-1)


def write_item(stem: Path, latents: torch.Tensor, codes: torch.Tensor | None, info: dict) -> None:
    """Write `<stem>.safetensors` (latents [T, C] float32, audio_codes [P] int64 when given)
    and `<stem>.json` (the shapes and rates, then `info`), each atomically, sidecar last."""
    stem = Path(stem)
    tensors = {"latents": latents.float().contiguous()}
    if codes is not None:
        tensors["audio_codes"] = codes.to(torch.int64).contiguous()
    atomic_write_bytes(stem.with_suffix(".safetensors"), save(tensors))
    sidecar = {
        "format": FORMAT,
        "family": "ace-step",
        "sample_rate": SAMPLE_RATE,
        "latent_shape": list(latents.shape),
        "audio_codes": None if codes is None else int(codes.shape[0]),
        **info,
    }
    atomic_write_json(stem.with_suffix(".json"), sidecar)


def write_text(path: Path, text: str, encoding: TextEncoding) -> None:
    """Write one text's hidden states [L, C] float32 to `path` (.safetensors), the text and its
    token counts in the file's metadata."""
    metadata = {
        "text": text,
        "tokens": str(encoding.tokens),
        "cut_tokens": str(encoding.cut_tokens),
    }
    data = save({"hidden_states": encoding.hidden_states.contiguous()}, metadata=metadata)
    atomic_write_bytes(Path(path), data)


def read_item(stem: Path) -> tuple[torch.Tensor, torch.Tensor | None, dict]:
    """(latents, codes or None, sidecar) of an item `write_item` wrote."""
    stem = Path(stem)
    tensors = load_file(stem.with_suffix(".safetensors"))
    sidecar = json.loads(stem.with_suffix(".json").read_text(encoding="utf-8"))
    return tensors["latents"], tensors.get("audio_codes"), sidecar


def first_noise(pipe, frames: int, generator: torch.Generator) -> torch.Tensor:
    """The noise AceStepPipeline draws first, [1, frames, C], drawn here to pass as `latents`.

    The pipeline counts its context's frames, then takes the noise's length back from seconds
    (frames / 25, times 25, rounded up), which is one frame more for some counts: 111 frames
    (a 4.4 s demo) come back as 112 and the two no longer concatenate. The draw is the
    pipeline's own (the same shape, generator, device and dtype, and the generator's only use),
    so every other length renders the same bytes as without it."""
    from diffusers.utils.torch_utils import randn_tensor

    shape = (1, frames, pipe.transformer.config.audio_acoustic_hidden_dim)
    return randn_tensor(
        shape, generator=generator, device=pipe._execution_device, dtype=pipe.transformer.dtype
    )
