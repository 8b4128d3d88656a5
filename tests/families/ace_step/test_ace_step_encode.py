"""Encoding for ACE-Step 1.5 against the pipeline itself: 48 kHz stereo audio, chunked latents
equal to whole-file latents, the base model's own FSQ codes, the text encoder's inputs, what the
DiT reads, and one item's files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from diffusers.pipelines.ace_step.pipeline_ace_step import _parse_audio_code_string
from safetensors import safe_open

from tunesmith.families.ace_step import model
from tunesmith.families.ace_step.text import Metas, caption_text, lyrics_text

# Chunked and whole-file latents agree to this, relative to the largest latent (measured:
# about 3e-6, float32 rounding in convolutions of different lengths).
CHUNK_TOLERANCE = 1e-5


def _song(path: Path, seconds: float, rate: int = 44100, channels: int = 2) -> Path:
    """A tone that glides, with a click every half second: it changes over time."""
    t = np.arange(int(seconds * rate)) / rate
    glide = 0.3 * np.sin(2 * np.pi * (110 + 40 * t) * t)
    clicks = 0.4 * (t % 0.5 < 0.02) * np.sin(2 * np.pi * 900 * t)
    data = np.stack([glide + clicks, 0.8 * glide - clicks], axis=1)[:, :channels]
    sf.write(path, data.astype(np.float32), rate, subtype="PCM_16")
    return path


@pytest.fixture(scope="module")
def song(tmp_path_factory) -> Path:
    return _song(tmp_path_factory.mktemp("songs") / "glide.wav", 6.1)


@pytest.fixture(scope="module")
def latents(ace_pipe, song) -> torch.Tensor:
    return model.encode_latents(ace_pipe.vae, model.load_audio(song, ace_pipe.vae).samples)


def test_audio_becomes_48k_stereo_in_whole_latent_frames(ace_pipe, tmp_path):
    mono = _song(tmp_path / "mono.wav", 1.3, rate=22050, channels=1)
    audio = model.load_audio(mono, ace_pipe.vae)
    assert audio.sample_rate == 48000 and audio.samples.shape[0] == 2
    assert torch.equal(audio.samples[0], audio.samples[1])  # mono on both channels
    assert audio.samples.shape[1] == 32 * 1920  # 1.3 s is 32.5 frames: cut to whole frames
    assert audio.warnings == ()

    mean = model.encode_latents(ace_pipe.vae, audio.samples, posterior="mean")
    with torch.no_grad():
        expected = ace_pipe.vae.encode(audio.samples[None]).latent_dist.mean[0].T
    assert mean.shape == (32, 8) and torch.equal(mean, expected)
    with pytest.raises(ValueError, match="posterior 'mode'"):
        model.encode_latents(ace_pipe.vae, audio.samples, posterior="mode")


def test_a_file_over_600_s_is_cut_there_with_a_warning(ace_pipe, tmp_path):
    long = tmp_path / "long.flac"
    rate = 8000  # a small file that still holds 601 s
    sf.write(long, np.zeros(601 * rate, dtype=np.float32), rate, subtype="PCM_16")
    audio = model.load_audio(long, ace_pipe.vae, label="long.flac")
    assert audio.samples.shape == (2, 600 * 48000)
    assert audio.source_seconds == pytest.approx(601.0)
    assert audio.warnings == ("long.flac: 601.0 s is over 600 s; cut there",)


def test_latents_are_25_hz_frames_first(ace_pipe, song, latents):
    seconds = sf.info(song).duration
    assert latents.shape == (int(seconds * 25), 8) and latents.dtype == torch.float32
    with torch.no_grad():
        mean = ace_pipe.vae.encode(model.load_audio(song, ace_pipe.vae).samples[None])
    # The default draws from the posterior; the draw stays within a few of its (narrow) stds.
    assert (latents - mean.latent_dist.mean[0].T).abs().max() < 6 * mean.latent_dist.std.max()


def test_chunked_encoding_equals_whole_file_encoding(ace_pipe, song, latents):
    # `latents`: the whole file at once (6.1 s is under the 30 s chunk), drawn with seed 0.
    samples = model.load_audio(song, ace_pipe.vae).samples
    whole = latents
    # 6.1 s in windows of 2.4 s with 0.8 s of context each side: four windows. The same seed
    # draws the same noise, so the posterior draw agrees as its mean and std do.
    chunked = model.encode_latents(ace_pipe.vae, samples, chunk_seconds=2.4, overlap_seconds=0.8)
    scale = whole.abs().max()
    assert chunked.shape == whole.shape
    assert (chunked - whole).abs().max() <= CHUNK_TOLERANCE * scale
    # The context is what makes them equal: with 0.08 s the windows' edges show.
    starved = model.encode_latents(ace_pipe.vae, samples, chunk_seconds=2.4, overlap_seconds=0.08)
    assert (starved - whole).abs().max() > 100 * CHUNK_TOLERANCE * scale
    assert not ace_pipe.vae.use_tiling  # the VAE is left as it was


def test_chunk_sizes_must_be_whole_frames(ace_pipe, song):
    samples = model.load_audio(song, ace_pipe.vae).samples
    with pytest.raises(ValueError, match="whole latent frames"):
        model.encode_latents(ace_pipe.vae, samples, chunk_seconds=2.41)


def _fsq_reference(quantizer, pooled: torch.Tensor) -> torch.Tensor:
    """ResidualFSQ with preserve_symmetry, in float64, as HOT-Step's guide writes it: project,
    soft clamp tanh(z / c) * c with c = 1 + 1 / (L - 1), then floor((L - 1)(w + 1) / 2 + 0.5)
    per dimension, mixed radix (first dimension fastest) into one index."""
    weight, bias = quantizer.project_in.weight.double(), quantizer.project_in.bias.double()
    z = pooled.double() @ weight.T + bias
    levels = torch.tensor(quantizer.levels, dtype=torch.float64)
    c = 1 + 1 / (levels - 1)
    w = (torch.tanh(z / c) * c).clamp(-1, 1)
    digits = torch.floor((levels - 1) * (w + 1) / 2 + 0.5).long()
    radix = torch.cumprod(torch.tensor([1, *quantizer.levels[:-1]]), dim=0)
    return (digits * radix).sum(dim=-1)


def test_codes_are_the_checkpoints_own_tokenizer_output(ace_pipe, latents, tmp_path):
    stem = tmp_path / "glide"
    model.write_item(stem, latents, model.audio_codes(ace_pipe, latents), {"source": "glide"})
    stored_latents, stored_codes, sidecar = model.read_item(stem)
    assert stored_codes.dtype == torch.int64 and sidecar["audio_codes"] == len(stored_codes)

    tokenizer = ace_pipe.audio_tokenizer  # float32
    silence = ace_pipe.condition_encoder.silence_latent
    with torch.no_grad():
        quantized, indices = tokenizer.tokenize(stored_latents[None], silence)
        padded = torch.cat([stored_latents, silence[0, : (-len(stored_latents)) % 5]])
        pooled = tokenizer.attention_pooler(
            tokenizer.audio_acoustic_proj(padded.reshape(1, -1, 5, padded.shape[-1]))
        )[0]
    assert len(stored_codes) == math.ceil(len(stored_latents) / 5)
    assert torch.equal(stored_codes, indices[0, :, 0])  # every code, exactly
    assert torch.equal(stored_codes, _fsq_reference(tokenizer.quantizer, pooled))
    assert len(set(stored_codes.tolist())) > 3  # the codes follow the audio

    # The codes are what the pipeline decodes: its parser reads our text back, and the
    # quantizer's table maps them to the tokenizer's own quantized output.
    text = model.codes_text(stored_codes)
    assert _parse_audio_code_string(text, 199) == stored_codes.tolist()
    with torch.no_grad():
        table = tokenizer.quantizer.get_output_from_indices(stored_codes[None, :, None])
        source, frames = ace_pipe.prepare_src_latents(
            device="cpu", dtype=torch.float32, audio_codes=text, task_type="cover"
        )
    assert torch.allclose(table, quantized, atol=1e-6)
    assert frames == 5 * len(stored_codes) and source.shape == (1, frames, 8)


def test_texts_are_encoded_as_the_pipeline_encodes_them(ace_pipe):
    metas = Metas(bpm=112, keyscale="Bb major", timesignature="4", duration=10.0)
    caption = model.encode_caption(ace_pipe, caption_text("lpzsong, synth pop", metas))
    lyrics = model.encode_lyrics(ace_pipe, lyrics_text("[Chorus]\nride on ride on", "en"))
    text, text_mask, lyric, lyric_mask = ace_pipe.encode_prompt(
        "lpzsong, synth pop",
        "[Chorus]\nride on ride on",
        "cpu",
        "en",
        10.0,
        None,
        112,
        "Bb major",
        "4",
    )
    assert torch.equal(caption.hidden_states, text[0]) and text_mask.all()
    assert torch.equal(lyrics.hidden_states, lyric[0]) and lyric_mask.all()
    assert caption.cut_tokens == lyrics.cut_tokens == 0

    # Past 256 tokens the pipeline cuts the caption string, metas and all; so do we.
    long = model.encode_caption(ace_pipe, caption_text("la " * 300, metas))
    text, *_ = ace_pipe.encode_prompt(
        "la " * 300, "", "cpu", "en", 10.0, None, 112, "Bb major", "4"
    )
    assert long.tokens == 256 and long.cut_tokens > 0
    assert torch.equal(long.hidden_states, text[0])


def test_the_dit_reads_what_the_pipeline_feeds_it(ace_pipe):
    """One Euler step from t = 1 ends at x - v: the pipeline's v equals the DiT's output on
    our conditioning and context."""
    metas = Metas(bpm=92, keyscale="A minor", timesignature="4", duration=2.0)
    caption = model.encode_caption(ace_pipe, caption_text("warm lo-fi", metas))
    lyrics = model.encode_lyrics(ace_pipe, lyrics_text(None, "en"))
    noise = torch.randn(1, 50, 8, generator=torch.Generator().manual_seed(3))
    stepped = ace_pipe(
        prompt="warm lo-fi",
        lyrics="[Instrumental]",
        vocal_language="en",
        audio_duration=2.0,
        bpm=92,
        keyscale="A minor",
        timesignature="4",
        num_inference_steps=1,
        guidance_scale=1.0,
        latents=noise,
        output_type="latent",
    ).audios
    states, mask = model.conditioning(ace_pipe, caption, lyrics)
    assert mask.all()
    t = torch.ones(1)
    with torch.no_grad():
        v = ace_pipe.transformer(
            noise, t, t, states, model.context_latents(ace_pipe, 50), return_dict=False
        )[0]
    assert torch.allclose(stepped, noise - v, atol=1e-6)


def test_an_items_files_are_safetensors_and_a_sidecar(ace_pipe, latents, tmp_path):
    stem = tmp_path / "sub" / "glide"
    model.write_item(stem, latents, None, {"caption": "warm", "warnings": []})
    assert sorted(p.name for p in stem.parent.iterdir()) == ["glide.json", "glide.safetensors"]
    stored, codes, sidecar = model.read_item(stem)
    assert torch.equal(stored, latents) and codes is None
    assert sidecar == {
        "format": 1,
        "family": "ace-step",
        "sample_rate": 48000,
        "latent_shape": list(latents.shape),
        "audio_codes": None,
        "caption": "warm",
        "warnings": [],
    }
    json.loads(stem.with_suffix(".json").read_text(encoding="utf-8"))

    lyric = model.encode_lyrics(ace_pipe, lyrics_text("é ride on", "fr"))
    path = tmp_path / "text.safetensors"
    model.write_text(path, lyrics_text("é ride on", "fr"), lyric)
    with safe_open(path, "pt") as f:
        assert f.metadata()["text"] == "# Languages\nfr\n\n# Lyric\né ride on<|endoftext|>"
        assert torch.equal(f.get_tensor("hidden_states"), lyric.hidden_states)
