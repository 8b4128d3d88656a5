"""The tiny ACE-Step 1.5: the real classes in the published layout, loaded by diffusers itself and
singing lyrics; made idempotently from a seed; a folder it did not make is left alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tunesmith.families.ace_step.model import CODE_PARTS, REQUIRED_PARTS, load_pipeline
from tunesmith.families.ace_step.tiny import build_tiny_ace_step, make_tiny_ace_step
from tunesmith.families.tiny import MARKER


def _sing(pipe, lyrics: str, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator("cpu").manual_seed(seed)
    return pipe(
        prompt="bright synth pop song with a female voice",
        lyrics=lyrics,
        vocal_language="en",
        audio_duration=2.0,
        num_inference_steps=3,
        guidance_scale=3.0,  # a base model: CFG against the learned null condition
        bpm=112,
        keyscale="Bb major",
        timesignature="4",
        generator=generator,
    ).audios


def test_diffusers_loads_the_tiny_model_with_the_real_classes_and_sings(tiny_ace_step):
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
    from transformers import AutoTokenizer, Qwen2Tokenizer, Qwen3Model

    index = json.loads((tiny_ace_step / "model_index.json").read_text())
    assert index["_class_name"] == "AceStepPipeline"
    assert {p.name for p in REQUIRED_PARTS + CODE_PARTS} == {k for k in index if k[0] != "_"}

    pipe = AceStepPipeline.from_pretrained(tiny_ace_step, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    expected = {
        "transformer": AceStepTransformer1DModel,
        "condition_encoder": AceStepConditionEncoder,
        "vae": AutoencoderOobleck,
        "text_encoder": Qwen3Model,
        "scheduler": FlowMatchEulerDiscreteScheduler,
        "audio_tokenizer": AceStepAudioTokenizer,
        "audio_token_detokenizer": AceStepAudioTokenDetokenizer,
    }
    for name, cls in expected.items():
        assert type(getattr(pipe, name)) is cls, name
    tokenizer = AutoTokenizer.from_pretrained(tiny_ace_step / "tokenizer")
    assert type(tokenizer) is Qwen2Tokenizer and tokenizer.pad_token == "<|endoftext|>"
    # The templates' terminator is one special token, as in Qwen's vocabulary.
    assert tokenizer("a<|endoftext|>").input_ids[-1] == tokenizer.pad_token_id
    assert pipe.sample_rate == 48000 and pipe.latents_per_second == 25.0
    assert not pipe.is_turbo

    sung = _sing(pipe, "[Verse]\nlast bus home through the city light")
    assert sung.shape == (1, 2, 96000) and torch.isfinite(sung).all()
    assert torch.equal(sung, _sing(pipe, "[Verse]\nlast bus home through the city light"))
    # The lyrics reach the DiT: other words, other audio from the same seed.
    other = _sing(pipe, "[Verse]\npaper moon above the old hotel")
    assert (sung - other).abs().max() > 1e-3


def test_load_pipeline_gives_what_diffusers_gives(tiny_ace_step):
    from diffusers import AceStepPipeline

    ours = load_pipeline(tiny_ace_step)
    theirs = AceStepPipeline.from_pretrained(tiny_ace_step, local_files_only=True)
    theirs.set_progress_bar_config(disable=True)
    assert torch.equal(_sing(ours, "[Chorus]\nride on"), _sing(theirs, "[Chorus]\nride on"))
    assert ours.transformer.dtype == torch.float32


def test_the_same_seed_builds_the_same_weights(ace_pipe):
    rebuilt = build_tiny_ace_step(seed=0)
    for name in ("transformer", "vae", "audio_tokenizer", "condition_encoder"):
        saved, again = getattr(ace_pipe, name).state_dict(), getattr(rebuilt, name).state_dict()
        assert saved.keys() == again.keys()
        assert all(torch.equal(saved[k], again[k]) for k in saved), name
    assert len(rebuilt.tokenizer) == len(ace_pipe.tokenizer)


def test_the_tiny_vae_encodes_the_audio_not_a_constant(ace_pipe):
    # A fresh Oobleck gives nearly the same latent for any input; the builder standardises it.
    seconds = 2 * 48000
    t = torch.arange(seconds) / 48000
    tone = 0.3 * torch.sin(2 * torch.pi * 220 * t).expand(2, -1)
    with torch.no_grad():
        latents = [
            ace_pipe.vae.encode(x[None]).latent_dist
            for x in (tone, torch.zeros(2, seconds), 0.3 * torch.sign(tone))
        ]
    means = torch.stack([d.mean.mean(dim=-1)[0] for d in latents])
    assert means.std(dim=0).mean() > 0.1  # clips differ by more than a tenth of a unit
    assert max(d.std.max().item() for d in latents) < 0.01  # a narrow posterior
    silence = ace_pipe.condition_encoder.silence_latent
    assert silence.shape == (1, 15000, 8)
    # the builder keeps float16's precision of silence's latent (the same bytes on every machine)
    assert torch.allclose(silence[0, 0], latents[1].mean[0, :, 25], atol=5e-4)


def test_making_it_again_leaves_it_and_a_foreign_folder_is_refused(tiny_ace_step, tmp_path):
    marker = tiny_ace_step / MARKER
    before = marker.stat().st_mtime_ns
    assert make_tiny_ace_step(tiny_ace_step, seed=0) == tiny_ace_step
    assert marker.stat().st_mtime_ns == before
    record = json.loads(marker.read_text())
    assert record["family"] == "ace-step" and record["codebook_size"] == 200
    assert record["parameters"]["transformer"] > 0

    foreign = tmp_path / "my-model"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not a tiny model made by tunesmith"):
        make_tiny_ace_step(foreign)
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]
    assert not list(Path(tmp_path).glob(".tmp-*"))
