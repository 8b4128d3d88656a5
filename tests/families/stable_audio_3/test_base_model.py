"""Stable Audio 3 checkpoints: the tiny model, loading through diffusers, checks, fingerprints."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
import torch
from diffusers import (
    AutoencoderSAME,
    FlowMatchEulerDiscreteScheduler,
    StableAudio3DiTModel,
    StableAudio3DurationEmbedder,
    StableAudio3Pipeline,
)
from safetensors.torch import save_file
from transformers import AutoTokenizer, GemmaTokenizer, T5GemmaEncoderModel

from tunesmith.families.stable_audio_3.model import REQUIRED_PARTS, check_base_model, load_pipeline
from tunesmith.families.stable_audio_3.tiny import (
    TINY_SA3_DOWNSAMPLING_RATIO,
    make_tiny_stable_audio_3,
)
from tunesmith.families.tiny import MARKER
from tunesmith.store.fingerprints import model_fingerprint

PROMPT = "Genre: techno, BPM: 120"
HOUR_NS = 3600 * 10**9


def generate(pipe: StableAudio3Pipeline, seed: int, duration: float = 2.0) -> torch.Tensor:
    generator = torch.Generator("cpu").manual_seed(seed)
    return pipe(PROMPT, duration=duration, num_inference_steps=4, generator=generator).audios


def copy_of(folder: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(folder, tmp_path / "base_model"))


# --- the tiny model and loading ---------------------------------------------------------------


def test_tiny_model_generates_stereo_audio_of_the_requested_duration(pipe):
    audio = generate(pipe, seed=0, duration=2.0)
    assert audio.shape == (1, 2, 2 * 44100)
    assert torch.isfinite(audio).all()
    assert audio.abs().max() > 0


def test_same_seed_gives_identical_audio_and_another_seed_different_audio(pipe):
    first, again, other = generate(pipe, 0), generate(pipe, 0), generate(pipe, 1)
    assert torch.equal(first, again)
    assert (first - other).abs().mean() > 1e-3  # the VAE decodes what the DiT made


def test_loaded_components_are_the_real_classes(pipe, tiny_sa3):
    assert isinstance(pipe, StableAudio3Pipeline)
    assert isinstance(pipe.transformer, StableAudio3DiTModel)
    assert isinstance(pipe.vae, AutoencoderSAME)
    assert isinstance(pipe.text_encoder, T5GemmaEncoderModel)
    assert isinstance(pipe.tokenizer, GemmaTokenizer)
    assert isinstance(pipe.duration_embedder, StableAudio3DurationEmbedder)
    assert isinstance(pipe.scheduler, FlowMatchEulerDiscreteScheduler)
    assert isinstance(AutoTokenizer.from_pretrained(tiny_sa3 / "tokenizer"), GemmaTokenizer)
    assert all(p.dtype == torch.float32 for p in pipe.transformer.parameters())


def test_tiny_vae_keeps_the_real_rate_channels_and_downsampling(pipe, tiny_sa3):
    marker = json.loads((tiny_sa3 / MARKER).read_text())
    assert pipe.vae.config.sampling_rate == marker["sample_rate"] == 44100
    assert pipe.vae.config.audio_channels == marker["audio_channels"] == 2
    assert pipe.vae.downsampling_ratio == marker["downsampling_ratio"]
    assert pipe.vae.downsampling_ratio == TINY_SA3_DOWNSAMPLING_RATIO == 4096


def test_tiny_vae_latents_depend_on_the_audio(pipe):
    audio = torch.randn(2, 2, 4 * 4096, generator=torch.Generator().manual_seed(0)) * 0.3
    with torch.no_grad():
        latents = pipe.vae.encode(audio).latents
    assert latents.shape == (2, pipe.vae.config.latent_dim, 4)
    assert (latents[0] - latents[1]).abs().mean() > 1e-2 * latents.abs().mean()


def test_second_make_writes_nothing(tiny_sa3):
    before = {p: p.stat().st_mtime_ns for p in tiny_sa3.rglob("*")}
    assert make_tiny_stable_audio_3(tiny_sa3, seed=0) == tiny_sa3
    assert {p: p.stat().st_mtime_ns for p in tiny_sa3.rglob("*")} == before


def test_same_seed_makes_the_same_base_model_anywhere_and_another_seed_another(tiny_sa3, tmp_path):
    same = make_tiny_stable_audio_3(tmp_path / "same", seed=0)
    other = make_tiny_stable_audio_3(tmp_path / "other", seed=1)
    assert model_fingerprint(same) == model_fingerprint(tiny_sa3)
    assert model_fingerprint(other) != model_fingerprint(tiny_sa3)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]


def test_incomplete_tiny_model_is_rebuilt(tiny_sa3, tmp_path):
    folder = copy_of(tiny_sa3, tmp_path)
    shutil.rmtree(folder / "vae")
    make_tiny_stable_audio_3(folder, seed=0)
    check_base_model(folder)
    assert model_fingerprint(folder) == model_fingerprint(tiny_sa3)


def test_make_refuses_to_replace_a_folder_it_did_not_make(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "song.wav").write_bytes(b"RIFF")
    with pytest.raises(FileExistsError, match="refusing to replace"):
        make_tiny_stable_audio_3(tmp_path / "mine")
    assert (tmp_path / "mine" / "song.wav").read_bytes() == b"RIFF"


# --- check_base_model -----------------------------------------------------------------------


def test_check_accepts_the_tiny_model(tiny_sa3):
    check_base_model(tiny_sa3)


def test_empty_folder_names_every_part(tmp_path):
    with pytest.raises(ValueError) as err:
        check_base_model(tmp_path)
    message = str(err.value)
    assert str(tmp_path) in message
    assert "model_index.json is missing" in message
    for part in REQUIRED_PARTS:
        assert f"{part.name}/ is missing" in message
    assert "StableAudio3DiTModel" in message and "*.safetensors" in message


def test_folder_without_vae_names_the_vae_only(tiny_sa3, tmp_path):
    folder = copy_of(tiny_sa3, tmp_path)
    shutil.rmtree(folder / "vae")
    with pytest.raises(ValueError) as err:
        check_base_model(folder)
    problems = [line for line in str(err.value).splitlines() if line.startswith("  - ")]
    assert problems == ["  - vae/ is missing"]


def test_pickle_weights_are_refused(tiny_sa3, tmp_path):
    folder = copy_of(tiny_sa3, tmp_path)
    weights = folder / "transformer" / "diffusion_pytorch_model.safetensors"
    weights.rename(weights.with_suffix(".bin"))
    with pytest.raises(ValueError, match=r"transformer/ has only pickle weights .*\.bin.*refuses"):
        check_base_model(folder)
    with pytest.raises(ValueError, match="pickle"):
        load_pipeline(folder)  # refused before diffusers sees it


def test_component_without_config_or_weights_is_named(tiny_sa3, tmp_path):
    folder = copy_of(tiny_sa3, tmp_path)
    (folder / "text_encoder" / "config.json").unlink()
    (folder / "duration_embedder" / "diffusion_pytorch_model.safetensors").unlink()
    (folder / "tokenizer" / "tokenizer.json").unlink()
    with pytest.raises(ValueError) as err:
        check_base_model(folder)
    message = str(err.value)
    assert "text_encoder/config.json is missing" in message
    assert "duration_embedder/ has no .safetensors weights" in message
    assert "tokenizer/ has none of tokenizer.json, tokenizer.model" in message


def test_sdxl_folder_is_named_as_another_pipeline_with_its_missing_parts(tmp_path):
    index = {
        "_class_name": "StableDiffusionXLPipeline",
        "unet": ["diffusers", "UNet2DConditionModel"],
        "vae": ["diffusers", "AutoencoderKL"],
        "text_encoder": ["transformers", "CLIPTextModel"],
        "text_encoder_2": ["transformers", "CLIPTextModelWithProjection"],
        "tokenizer": ["transformers", "CLIPTokenizer"],
        "tokenizer_2": ["transformers", "CLIPTokenizer"],
        "scheduler": ["diffusers", "EulerDiscreteScheduler"],
    }
    (tmp_path / "model_index.json").write_text(json.dumps(index))
    for name, weights in (
        ("unet", "diffusion_pytorch_model"),
        ("vae", "diffusion_pytorch_model"),
        ("text_encoder", "model"),
        ("text_encoder_2", "model"),
    ):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text("{}")
        save_file({"w": torch.zeros(1)}, tmp_path / name / f"{weights}.safetensors")
    for name in ("tokenizer", "tokenizer_2"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "tokenizer_config.json").write_text("{}")
        (tmp_path / name / "vocab.json").write_text("{}")
    (tmp_path / "scheduler").mkdir()
    (tmp_path / "scheduler" / "scheduler_config.json").write_text("{}")

    with pytest.raises(ValueError) as err:
        check_base_model(tmp_path)
    message = str(err.value)
    assert "'StableDiffusionXLPipeline', not 'StableAudio3Pipeline'" in message
    assert "transformer/ is missing" in message
    assert "duration_embedder/ is missing" in message
    assert "'vae' as ['diffusers', 'AutoencoderKL'], expected AutoencoderSAME" in message
    assert "expected T5GemmaEncoderModel" in message
    assert "tokenizer/ has none of tokenizer.json" in message
    assert "expected FlowMatchEulerDiscreteScheduler" in message


def test_a_file_is_not_a_checkpoint_folder(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(ValueError, match="is not a folder"):
        check_base_model(tmp_path / "model.safetensors")


# --- model_fingerprint ----------------------------------------------------------------------


def age(folder: Path, ns: int = HOUR_NS) -> None:
    """Date every file back, as files are that were not written a moment ago."""
    past = time.time_ns() - ns
    for path in folder.rglob("*"):
        os.utime(path, ns=(past, past))


def test_fingerprint_changes_with_one_weight_byte_but_not_with_a_touch(tiny_sa3, tmp_path):
    folder = copy_of(tiny_sa3, tmp_path)
    cache = tmp_path / "cache" / "fingerprints.json"
    age(folder)
    first = model_fingerprint(folder, cache)
    assert first == model_fingerprint(folder)  # the cache never changes the answer
    weights = folder / "transformer" / "diffusion_pytorch_model.safetensors"
    assert json.loads(cache.read_text())[str(weights.resolve())]["size"] == weights.stat().st_size

    touched = time.time_ns() - HOUR_NS // 2
    os.utime(weights, ns=(touched, touched))
    assert model_fingerprint(folder, cache) == first
    assert json.loads(cache.read_text())[str(weights.resolve())]["mtime_ns"] == touched

    data = bytearray(weights.read_bytes())
    data[-1] ^= 0x01  # one bit of the last weight
    weights.write_bytes(bytes(data))
    os.utime(weights, ns=(touched + 1, touched + 1))
    changed = model_fingerprint(folder, cache)
    assert changed != first
    assert changed == model_fingerprint(folder)


def test_fingerprint_of_one_component_ignores_the_others(tiny_sa3, tmp_path):
    folder = copy_of(tiny_sa3, tmp_path)
    vae = model_fingerprint(folder / "vae")
    (folder / "transformer" / "config.json").write_text("{}")
    assert model_fingerprint(folder / "vae") == vae
    assert model_fingerprint(folder) != model_fingerprint(tiny_sa3)  # configs count too


def test_files_written_a_moment_ago_are_hashed_but_not_cached(tiny_sa3, tmp_path):
    folder = copy_of(tiny_sa3, tmp_path)
    age(folder, ns=0)  # modified now: within the racy window
    cache = tmp_path / "fingerprints.json"
    assert model_fingerprint(folder, cache) == model_fingerprint(tiny_sa3)
    assert not cache.exists()


def test_fingerprint_skips_markers_and_pickles(tiny_sa3, tmp_path):
    folder = copy_of(tiny_sa3, tmp_path)
    (folder / MARKER).write_text("{}")
    (folder / "vae" / "diffusion_pytorch_model.bin").write_bytes(b"pickle")
    assert model_fingerprint(folder) == model_fingerprint(tiny_sa3)
