"""Checking an ACE-Step 1.5 folder: every missing part named at once, pickles refused, the
original layout pointed at its conversion, and a folder without the audio tokenizer accepted
for DiT training with codes skipped."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from tunesmith.families.ace_step.model import audio_codes, check_base_model, load_pipeline


@pytest.fixture
def copy(tiny_ace_step: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "copy"
    shutil.copytree(tiny_ace_step, folder)
    return folder


def test_a_whole_folder_passes_and_offers_codes(tiny_ace_step):
    report = check_base_model(tiny_ace_step)
    assert report.codes and report.codes_message == ""


def test_a_folder_that_is_not_ace_step_names_everything_missing(tmp_path, copy):
    other = tmp_path / "other"
    (other / "vae").mkdir(parents=True)
    (other / "model_index.json").write_text(json.dumps({"_class_name": "StableAudio3Pipeline"}))
    with pytest.raises(ValueError) as caught:
        check_base_model(other)
    message = str(caught.value)
    assert "not a usable ACE-Step 1.5 base model" in message
    assert "describes 'StableAudio3Pipeline', not 'AceStepPipeline'" in message
    for part in ("text_encoder", "tokenizer", "transformer", "condition_encoder", "scheduler"):
        assert f"{part}/ is missing" in message
    assert "vae/config.json is missing" in message

    shutil.rmtree(copy / "condition_encoder")
    (copy / "transformer" / "diffusion_pytorch_model.safetensors").rename(
        copy / "transformer" / "diffusion_pytorch_model.bin"
    )
    with pytest.raises(ValueError) as caught:
        load_pipeline(copy)
    problems = [line for line in str(caught.value).splitlines() if line.startswith("  - ")]
    assert problems == [
        "  - transformer/ has only pickle weights (diffusion_pytorch_model.bin), which tunesmith "
        "refuses to load: convert them to .safetensors",
        "  - condition_encoder/ is missing",
    ]


def test_the_original_layout_is_refused_with_the_conversion(tmp_path):
    original = tmp_path / "checkpoints"
    (original / "acestep-v15-turbo").mkdir(parents=True)
    (original / "acestep-v15-turbo" / "model.safetensors").write_bytes(b"")
    (original / "Qwen3-Embedding-0.6B").mkdir()
    with pytest.raises(ValueError, match="convert_ace_step_to_diffusers.py"):
        check_base_model(original)


@pytest.mark.parametrize("index_entries", ["kept", "removed"])
def test_without_the_audio_tokenizer_dit_training_still_loads(copy, index_entries):
    shutil.rmtree(copy / "audio_tokenizer")
    if index_entries == "removed":  # what older converted folders look like
        index = json.loads((copy / "model_index.json").read_text())
        for name in ("audio_tokenizer", "audio_token_detokenizer"):
            del index[name]
        (copy / "model_index.json").write_text(json.dumps(index))

    report = check_base_model(copy)
    assert not report.codes
    assert "audio codes are skipped (DiT training still runs)" in report.codes_message
    assert "audio_tokenizer/ is missing" in report.codes_message
    assert "audio_token_detokenizer/ is missing" not in report.codes_message

    pipe = load_pipeline(copy)
    assert pipe.audio_tokenizer is None and pipe.audio_token_detokenizer is None
    with pytest.raises(ValueError, match="no audio_tokenizer/"):
        audio_codes(pipe, torch.zeros(10, 8))
    audio = pipe(
        prompt="warm lo-fi hip hop",
        lyrics="",
        audio_duration=1.0,
        num_inference_steps=2,
        generator=torch.Generator("cpu").manual_seed(0),
    ).audios
    assert audio.shape == (1, 2, 48000)


def test_a_model_index_as_diffusers_converter_writes_it_loads(copy):
    # The conversion script names the library "diffusers" for the pipeline's own models, and
    # a tokenizer saved by transformers 4 is Qwen2TokenizerFast; save_pretrained here writes
    # "ace_step" and Qwen2Tokenizer. Both are the same folder to the loader.
    index = json.loads((copy / "model_index.json").read_text())
    for name in ("condition_encoder", "audio_tokenizer", "audio_token_detokenizer"):
        index[name] = ["diffusers", index[name][1]]
    index["tokenizer"] = ["transformers", "Qwen2TokenizerFast"]
    (copy / "model_index.json").write_text(json.dumps(index))
    assert check_base_model(copy).codes
    pipe = load_pipeline(copy)
    assert type(pipe.condition_encoder).__name__ == "AceStepConditionEncoder"
    assert pipe.audio_tokenizer is not None


@pytest.mark.parametrize("seconds", [4.4, 2.2, 0.5])
def test_a_demo_renders_at_any_duration(ace_pipe, seconds):
    """diffusers' AceStepPipeline takes its noise's length back from seconds (frames / 25 * 25,
    rounded up): 4.4 s is 111 frames, and 111 / 25 * 25 rounds up to 112, beside a context of
    111. The render passes its own noise, the pipeline's first draw, and gives every duration."""
    from tunesmith.families.ace_step.config import AceStepDemo
    from tunesmith.families.ace_step.sample import render_demo

    demo = AceStepDemo(prompt="zqx, a loop", duration=seconds, steps=2, seed=3)
    audio = render_demo(ace_pipe, demo)
    assert audio.shape == (2, round(seconds * 48000)) and np.isfinite(audio).all()
    if seconds == 0.5:  # a length the pipeline reads right: the same bytes as its own noise
        generator = torch.Generator().manual_seed(3)
        with torch.no_grad():
            own = ace_pipe(
                prompt=demo.prompt,
                lyrics="[Instrumental]",
                audio_duration=seconds,
                num_inference_steps=2,
                guidance_scale=demo.cfg,
                shift=demo.shift,
                generator=generator,
            ).audios[0]
        assert np.array_equal(audio, own.float().numpy()[:, : audio.shape[1]])
