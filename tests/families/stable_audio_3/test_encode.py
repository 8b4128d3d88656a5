"""Encoding for Stable Audio 3: chunked latents, and conditioning exactly as the pipeline's."""

import pytest
import torch

from tunesmith.families.stable_audio_3.model import conditioning, encode_audio, encode_prompts


@pytest.mark.slow
def test_chunked_encoding_matches_encoding_the_whole_file(pipe):
    vae = pipe.vae
    ratio = vae.downsampling_ratio
    torch.manual_seed(0)
    frames = 700  # about 65 s: three chunks of 30 s
    audio = 0.3 * torch.randn(2, frames * ratio)
    chunked = encode_audio(vae, audio)
    with torch.no_grad():
        whole = vae.encode(audio[None]).latents[0]
    assert chunked.shape == (vae.config.latent_dim, frames) and chunked.dtype == torch.float32
    error = (chunked - whole).abs().max().item()
    assert error < 1e-4 * whole.abs().max().item(), error


def test_short_audio_is_one_pass(pipe):
    audio = 0.3 * torch.randn(2, 20 * pipe.vae.downsampling_ratio)
    with torch.no_grad():
        assert torch.equal(encode_audio(pipe.vae, audio), pipe.vae.encode(audio[None]).latents[0])


def test_conditioning_is_what_the_pipeline_builds(pipe):
    prompts = ["Genre: techno, BPM: 120", ""]
    embeds, mask = encode_prompts(pipe, prompts)
    assert embeds.shape[:2] == mask.shape == (2, 256)
    seconds = torch.tensor([12.5, 30.0])
    context, context_mask, global_states = conditioning(pipe, embeds, mask, seconds)
    device = pipe.text_encoder.device
    ref_embeds, ref_mask = pipe.encode_prompt(prompts, device, 1)
    ref_global = torch.cat([pipe.encode_duration(s.item(), device, 1, 1) for s in seconds])
    ref_context, ref_context_mask = pipe.prepare_cross_attention(ref_embeds, ref_mask, ref_global)
    # the reference embeds durations one at a time: a batch of one rounds its matmul differently
    torch.testing.assert_close(context, ref_context, rtol=1e-6, atol=1e-6)
    assert torch.equal(context_mask, ref_context_mask)
    torch.testing.assert_close(global_states, ref_global, rtol=1e-6, atol=1e-6)
    assert torch.equal(context[:, :256], ref_context[:, :256])  # the text part is exact


def test_details_are_underfits(pipe, tiny_sa3):
    """underfit's details.json, made from the VAE's config.json (the stage loads no model for
    it), says what the loaded VAE does."""
    import json

    from tunesmith.families.stable_audio_3 import encoded as stage

    config = json.loads((tiny_sa3 / "vae" / "config.json").read_text(encoding="utf-8"))
    assert stage.encoder_details(config) == {
        "sample_rate": 44100,
        "downsampling_ratio": 4096,
        "latent_dim": pipe.vae.config.latent_dim,
        "scale": 1.0,
    }
    assert pipe.vae.downsampling_ratio == 4096 and pipe.vae.config.sampling_rate == 44100


def encode_folder(folder, tiny_sa3, work):
    """The stage's result for the clips of `folder` (manifest and labels built first)."""
    from tunesmith.backends.placement import Placement
    from tunesmith.dataset.labels import build_labels
    from tunesmith.dataset.manifest import build_manifest
    from tunesmith.families.stable_audio_3 import FAMILY
    from tunesmith.family import EncodeRequest
    from tunesmith.store import Store

    store = Store(work / "store")
    manifest, _ = build_manifest(folder, work / "hashes.json")
    labels = build_labels(folder, manifest, store).frame
    cpu = Placement("torch", "cpu", "float32", "test")
    return FAMILY.encode(
        EncodeRequest(folder, labels, [], [tiny_sa3], work / "out", store, cpu, work / "fp.json")
    )


def test_the_stage_encodes_clips_of_one_length_in_batches_as_one_at_a_time(
    tiny_sa3, tmp_path, monkeypatch
):
    """Five clips, three of one length and two of others: the stage's latents are each clip's
    own encoding within the stage's TOLERANCE (relative to the largest latent), the clips of
    one length went through the VAE in one call, and the rest one by one."""
    import numpy as np

    from tests.conftest import write_clip
    from tunesmith.families.stable_audio_3 import encoded as stage
    from tunesmith.families.stable_audio_3 import model
    from tunesmith.families.stable_audio_3.model import load_pipeline
    from tunesmith.media.audio import for_model

    folder = tmp_path / "songs"
    lengths = [2.0, 2.0, 1.5, 2.0, 1.0]
    for i, seconds in enumerate(lengths):
        write_clip(folder / f"clip{i}.wav", seconds=seconds, bpm=90 + 10 * i, freq=110.0 * (i + 1))
    calls = []
    original = model.encode_audio_batch
    monkeypatch.setattr(
        model, "encode_audio_batch", lambda vae, x: calls.append(len(x)) or original(vae, x)
    )
    built = encode_folder(folder, tiny_sa3, tmp_path)
    assert calls == [3] and built.result.computed == 5
    vae = load_pipeline(tiny_sa3).vae
    for row in built.frame.itertuples():
        audio = for_model(folder / row.path, 44100, vae.downsampling_ratio)
        alone = encode_audio(vae, audio.samples).numpy()
        batched = np.load(row.latents)
        assert batched.shape == alone.shape and batched.dtype == np.float32
        error = np.abs(batched - alone).max() / np.abs(alone).max()
        assert error <= stage.TOLERANCE, (row.path, error)


def test_a_header_that_gives_another_length_or_none_still_encodes_each_clip_right(
    tiny_sa3, tmp_path, monkeypatch
):
    """The batches are planned from the headers' lengths. A clip whose header gives a length it
    does not decode to is encoded with the clips of its own length, and one whose header gives
    none is encoded alone: every latent is still the clip's own encoding within TOLERANCE."""
    import numpy as np

    from tests.conftest import write_clip
    from tunesmith.families.stable_audio_3 import encoded as stage
    from tunesmith.families.stable_audio_3 import model
    from tunesmith.families.stable_audio_3.model import load_pipeline
    from tunesmith.media import audio as media_audio

    folder = tmp_path / "songs"
    for i, seconds in enumerate([2.0, 2.0, 2.0, 1.5, 2.0]):
        write_clip(folder / f"clip{i}.wav", seconds=seconds, freq=110.0 * (i + 1))
    pipe = load_pipeline(tiny_sa3)
    true_length, ratio = media_audio.model_length, pipe.vae.downsampling_ratio
    said = {"clip3.wav": true_length(folder / "clip0.wav", 44100, ratio), "clip4.wav": None}
    monkeypatch.setattr(
        media_audio, "model_length", lambda path, *a: said.get(path.name, true_length(path, *a))
    )
    calls = []
    original = model.encode_audio_batch
    monkeypatch.setattr(
        model, "encode_audio_batch", lambda vae, x: calls.append(len(x)) or original(vae, x)
    )
    built = encode_folder(folder, tiny_sa3, tmp_path)
    assert built.result.computed == 5 and not built.result.skipped
    assert calls == [3]  # clip0-2 together; clip3 (planned with them) and clip4 each alone
    vae = pipe.vae
    for row in built.frame.itertuples():
        audio = media_audio.for_model(folder / row.path, 44100, vae.downsampling_ratio)
        alone = encode_audio(vae, audio.samples).numpy()
        latents = np.load(row.latents)
        assert latents.shape == alone.shape
        assert np.abs(latents - alone).max() / np.abs(alone).max() <= stage.TOLERANCE
