"""The tiny SDXL: the real classes in the published layout, loaded and drawn by diffusers itself;
checking a folder that is not SDXL, and a single-file checkpoint; encoding as the pipeline does."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from tunesmith.families.sdxl.model import (
    check_base_model,
    encode_captions,
    encode_images,
    encoder_details,
    load_pipeline,
)
from tunesmith.families.sdxl.tiny import make_tiny_sdxl
from tunesmith.families.tiny import MARKER


@pytest.fixture(scope="module")
def sdxl(tiny_sdxl: Path):
    return load_pipeline(tiny_sdxl)


def test_diffusers_loads_the_tiny_model_with_the_real_classes_and_draws(tiny_sdxl):
    from diffusers import (
        AutoencoderKL,
        EulerDiscreteScheduler,
        StableDiffusionXLPipeline,
        UNet2DConditionModel,
    )
    from transformers import (
        AutoTokenizer,
        CLIPTextModel,
        CLIPTextModelWithProjection,
        CLIPTokenizer,
    )

    pipe = StableDiffusionXLPipeline.from_pretrained(tiny_sdxl, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    assert type(pipe.unet) is UNet2DConditionModel and type(pipe.vae) is AutoencoderKL
    assert type(pipe.text_encoder) is CLIPTextModel
    assert type(pipe.text_encoder_2) is CLIPTextModelWithProjection
    assert type(pipe.scheduler) is EulerDiscreteScheduler
    assert pipe.scheduler.config.num_train_timesteps == 1000
    assert pipe.vae_scale_factor == 8 and pipe.vae.config.latent_channels == 4
    for name in ("tokenizer", "tokenizer_2"):
        tokenizer = AutoTokenizer.from_pretrained(tiny_sdxl / name)
        assert type(tokenizer) is CLIPTokenizer and tokenizer.model_max_length == 77
    assert pipe.tokenizer_2.pad_token == "!" and pipe.tokenizer_2.pad_token_id == 0  # as SDXL's

    def draw():
        generator = torch.Generator("cpu").manual_seed(3)
        return pipe(
            "a red disc on a purple ground",
            height=64,
            width=64,
            num_inference_steps=4,
            generator=generator,
            output_type="np",
        ).images

    image = draw()
    assert image.shape == (1, 64, 64, 3) and np.isfinite(image).all()
    assert image.std() > 0.01  # a picture, not a flat colour
    assert np.array_equal(image, draw())  # same seed, same picture


def test_dimensions_fit_together_as_in_sdxl(sdxl):
    unet, te, te2 = sdxl.unet.config, sdxl.text_encoder.config, sdxl.text_encoder_2.config
    assert unet.addition_embed_type == "text_time"
    assert unet.cross_attention_dim == te.hidden_size + te2.hidden_size
    assert unet.projection_class_embeddings_input_dim == (
        6 * unet.addition_time_embed_dim + te2.projection_dim
    )
    assert len(sdxl.vae.config.block_out_channels) == 4  # three halvings: 8 pixels a latent


def test_making_twice_writes_nothing_and_a_foreign_folder_is_refused(tiny_sdxl, tmp_path):
    before = {p: p.stat().st_mtime_ns for p in tiny_sdxl.rglob("*")}
    assert make_tiny_sdxl(tiny_sdxl, seed=0) == tiny_sdxl
    assert {p: p.stat().st_mtime_ns for p in tiny_sdxl.rglob("*")} == before
    assert json.loads((tiny_sdxl / MARKER).read_text())["family"] == "sdxl"
    assert sum(p.stat().st_size for p in tiny_sdxl.rglob("*") if p.is_file()) < 5_000_000
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="refusing to replace it"):
        make_tiny_sdxl(foreign)


def test_a_stable_audio_folder_is_not_sdxl_and_the_error_says_what_is_missing(tiny_sa3):
    with pytest.raises(ValueError) as error:
        check_base_model(tiny_sa3)
    message = str(error.value)
    assert f"{tiny_sa3} is not a usable SDXL base model" in message
    assert "describes 'StableAudio3Pipeline', not 'StableDiffusionXLPipeline'" in message
    for missing in ("unet/ is missing", "text_encoder_2/ is missing", "tokenizer_2/ is missing"):
        assert missing in message
    assert "gives 'vae' as ['diffusers', 'AutoencoderSAME'], expected AutoencoderKL" in message


@pytest.mark.parametrize("name", ["sd_xl_base_1.0.safetensors", "model.ckpt"])
def test_a_single_file_checkpoint_is_refused_with_how_to_convert_it(tmp_path, name):
    path = tmp_path / name
    save_file({"x": torch.zeros(1)}, path)
    with pytest.raises(ValueError, match="single-file SDXL checkpoint") as error:
        check_base_model(path)
    assert f"from_single_file({str(path)!r})" in str(error.value)
    assert ("pickles" in str(error.value)) == name.endswith(".ckpt")
    with pytest.raises(ValueError, match=f"holds no model_index.json but {name}"):
        check_base_model(tmp_path)  # the folder the file is in


def test_pickle_weights_are_refused(tiny_sdxl, tmp_path):
    copy = shutil.copytree(tiny_sdxl, tmp_path / "pickled")
    weights = copy / "unet" / "diffusion_pytorch_model.safetensors"
    weights.rename(weights.with_suffix(".bin"))
    with pytest.raises(ValueError, match=r"unet/ has only pickle weights \(diffusion_pytorch"):
        check_base_model(copy)


def test_captions_are_encoded_as_the_pipeline_encodes_them(sdxl):
    captions = ["a kvadring picture of three red discs", ""]
    embeds, pooled = encode_captions(sdxl, captions)
    assert embeds.shape == (2, 77, 64) and pooled.shape == (2, 32)
    # By hand: each encoder's penultimate hidden states, concatenated; text_encoder_2's
    # projected end-of-text embedding as the pooled one.
    states, pooled_by_hand = [], None
    pairs = [(sdxl.tokenizer, sdxl.text_encoder), (sdxl.tokenizer_2, sdxl.text_encoder_2)]
    for tokenizer, encoder in pairs:
        ids = tokenizer(captions, padding="max_length", max_length=77, truncation=True).input_ids
        with torch.no_grad():
            output = encoder(torch.tensor(ids), output_hidden_states=True)
        states.append(output.hidden_states[-2])
        pooled_by_hand = output[0]
    assert torch.equal(embeds, torch.cat(states, dim=-1))
    assert torch.equal(pooled, pooled_by_hand)


def test_images_give_the_posterior_mean_and_logvar(sdxl):
    pixels = torch.rand(2, 3, 64, 48, generator=torch.Generator().manual_seed(0)) * 2 - 1
    mean, logvar = encode_images(sdxl.vae, pixels)
    assert mean.shape == logvar.shape == (2, 4, 8, 6) and mean.dtype == torch.float32
    with torch.no_grad():
        posterior = sdxl.vae.encode(pixels).latent_dist
    assert torch.equal(mean, posterior.mean) and torch.equal(logvar, posterior.logvar)
    assert not torch.equal(mean[0], mean[1])  # the latents depend on the picture
    details = encoder_details(sdxl.vae.config, 1024)
    assert details["scaling_factor"] == 0.13025 and details["vae_scale_factor"] == 8


def test_encoding_without_the_unet(tiny_sdxl):
    pipe = load_pipeline(tiny_sdxl, skip=("unet",))
    assert pipe.unet is None and pipe.vae is not None
    assert encode_captions(pipe, ["a disc"])[0].shape == (1, 77, 64)
