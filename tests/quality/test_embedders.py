"""The tiny CLAP, CLIP and DINOv2 folders and the embedders that load them: the published
layout, written once and the same from the same seed; rows of unit length that tell
different inputs apart and the same input at another sample rate not."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf
from PIL import Image

from tests.conftest import tree_bytes, write_image
from tunesmith.families.tiny import MARKER
from tunesmith.quality.embedders import (
    ClapEmbedder,
    ClipEmbedder,
    DinoEmbedder,
    check_folder,
    load_audio,
    load_picture,
)
from tunesmith.quality.tiny import make_tiny_clap, make_tiny_clip, make_tiny_dino

MAKERS = {"clap": make_tiny_clap, "clip": make_tiny_clip, "dino": make_tiny_dino}
PUBLISHED_FILES = {  # what the published folders hold that transformers 5 reads
    "clap": {"config.json", "model.safetensors", "preprocessor_config.json"}
    | {"tokenizer.json", "tokenizer_config.json"},
    "clip": {"config.json", "model.safetensors", "preprocessor_config.json"}
    | {"tokenizer.json", "tokenizer_config.json"},
    "dino": {"config.json", "model.safetensors", "preprocessor_config.json"},
}
CLASSES = {  # (AutoModel's class, AutoProcessor's class)
    "clap": ("ClapModel", "ClapProcessor"),
    "clip": ("CLIPModel", "CLIPProcessor"),
    # The image processor without torchvision is BitImageProcessorPil, with it BitImageProcessor.
    "dino": ("Dinov2Model", "BitImageProcessor"),
}
RATE = 48000


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("embedders")
    return {kind: make(root / kind) for kind, make in MAKERS.items()}


@pytest.fixture(scope="module")
def clap(folders) -> ClapEmbedder:
    return ClapEmbedder(folders["clap"])


def sine(freq: float = 220.0, seconds: float = 2.0, rate: int = RATE) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def noise(seconds: float = 2.0, rate: int = RATE, seed: int = 0) -> np.ndarray:
    return (0.1 * np.random.default_rng(seed).standard_normal(int(seconds * rate))).astype(
        np.float32
    )


def pictures() -> list[Image.Image]:
    rng = np.random.default_rng(0)
    return [
        Image.new("RGB", (64, 48), (200, 80, 40)),
        Image.fromarray(rng.integers(0, 256, (50, 40, 3), dtype=np.uint8)),
        Image.new("RGBA", (40, 40), (0, 0, 255, 128)),
    ]


def assert_unit_rows(rows: np.ndarray, n: int, dim: int) -> None:
    assert rows.shape == (n, dim)
    assert rows.dtype == np.float64
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-12)


# The tiny folders


@pytest.mark.parametrize("kind", list(MAKERS))
def test_tiny_folders_have_the_published_layout_and_load(folders, kind):
    from transformers import AutoModel, AutoProcessor

    folder = folders[kind]
    files = {p.name for p in folder.iterdir()}
    assert files == PUBLISHED_FILES[kind] | {MARKER}
    assert check_folder(folder, kind) == []
    marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    assert marker["kind"] == kind and marker["seed"] == 0
    assert {"config_hash", "made_with", "parameters"} <= marker.keys()

    model = AutoModel.from_pretrained(folder, use_safetensors=True, local_files_only=True)
    processor = AutoProcessor.from_pretrained(folder, local_files_only=True)
    assert type(model).__name__ == CLASSES[kind][0]
    assert type(processor).__name__.removesuffix("Pil") == CLASSES[kind][1]
    assert marker["parameters"] == sum(p.numel() for p in model.parameters())


def test_tiny_clap_loads_as_the_published_clap_does(folders):
    from transformers import ClapModel, ClapProcessor

    model = ClapModel.from_pretrained(folders["clap"], use_safetensors=True, local_files_only=True)
    processor = ClapProcessor.from_pretrained(folders["clap"], local_files_only=True)
    features = processor.feature_extractor
    assert (features.sampling_rate, features.nb_max_samples) == (48000, 480000)
    assert features.truncation == "rand_trunc" and features.padding == "repeatpad"
    assert model.config.audio_config.enable_fusion is False
    # RoBERTa's special tokens around one token a byte ("é" is two bytes).
    ids = processor.tokenizer("dé")["input_ids"]
    assert ids[0] == processor.tokenizer.bos_token_id
    assert ids[-1] == processor.tokenizer.eos_token_id
    assert len(ids) == 2 + 3


@pytest.mark.parametrize("kind", list(MAKERS))
def test_tiny_folders_are_written_once_and_the_same_from_the_same_seed(folders, tmp_path, kind):
    make = MAKERS[kind]
    before = tree_bytes(folders[kind])
    mtimes = {p.name: p.stat().st_mtime_ns for p in folders[kind].iterdir()}
    assert make(folders[kind]) == folders[kind]  # already there: left as it was
    assert tree_bytes(folders[kind]) == before
    assert {p.name: p.stat().st_mtime_ns for p in folders[kind].iterdir()} == mtimes

    assert tree_bytes(make(tmp_path / "again")) == before
    other = tree_bytes(make(tmp_path / "seed-1", seed=1))
    assert other["model.safetensors"] != before["model.safetensors"]
    assert other["config.json"] == before["config.json"]


def test_a_folder_that_is_not_a_tiny_model_is_refused(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me", encoding="utf-8")
    with pytest.raises(FileExistsError):
        make_tiny_clip(tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text(encoding="utf-8") == "keep me"


# check_folder


def test_check_folder_names_what_is_missing(tmp_path, folders):
    empty = tmp_path / "empty"
    empty.mkdir()
    problems = check_folder(empty, "clap")
    assert any("config.json is missing" in p for p in problems)
    assert any("no .safetensors weights" in p for p in problems)
    assert any("preprocessor_config.json" in p for p in problems)
    assert any("tokenizer" in p for p in problems)
    assert not any("tokenizer" in p for p in check_folder(empty, "dino"))

    pickled = tmp_path / "pickled"
    pickled.mkdir()
    (pickled / "pytorch_model.bin").write_bytes(b"not to be unpickled")
    problems = check_folder(pickled, "dino")
    assert any("pytorch_model.bin" in p and ".safetensors" in p for p in problems)
    assert any("config.json is missing" in p for p in problems)

    assert check_folder(tmp_path / "nowhere", "clip") == [f"{tmp_path / 'nowhere'} is not a folder"]
    # A CLIP folder is not a CLAP one.
    assert check_folder(folders["clip"], "clap") == [
        "config.json gives model_type 'clip', not 'clap' (a CLAP model)"
    ]
    with pytest.raises(ValueError, match="usable DINOv2 model"):
        DinoEmbedder(pickled)
    with pytest.raises(ValueError, match="unknown embedding model kind"):
        check_folder(empty, "dinov3")


# CLAP


def test_clap_rows_are_unit_and_deterministic(clap, folders):
    clips = [sine(), noise(), np.stack([sine(), sine()])]
    rows = clap.audio(clips, RATE)
    assert_unit_rows(rows, 3, 16)
    assert np.array_equal(rows[0], rows[2])  # stereo of one signal is that signal
    assert not np.allclose(rows[0], rows[1], atol=1e-4)  # a tone is not noise
    np.testing.assert_allclose(clap.audio([noise()], RATE)[0], rows[1], atol=1e-6)
    again = ClapEmbedder(folders["clap"]).audio(clips, RATE)
    assert np.array_equal(again, rows)
    assert clap.audio([], RATE).shape == (0, 16)


def test_clap_hears_a_clip_at_44_1_khz_as_at_48_khz(clap):
    rows = clap.audio([sine(rate=48000), sine(rate=44100), noise()], RATE)
    rows[1] = clap.audio([sine(rate=44100)], 44100)[0]
    same = rows[0] @ rows[1]
    apart = rows[0] @ rows[2]
    assert same > 0.99
    # The tiny random model maps every input close to one direction; the resampled clip
    # sits far closer to the original than the noise does.
    assert 1 - same < 0.2 * (1 - apart)


def test_clap_embeds_a_long_clip_as_the_mean_of_its_windows(clap):
    tone, hiss = sine(seconds=10.0), noise(seconds=10.0)
    long = np.concatenate([tone, hiss, tone[: RATE * 5]])  # 25 s: windows at 0, 7.5 s, 15 s
    row = clap.audio([long], RATE)[0]
    windows = clap.audio([long[:480000], long[360000:840000], long[720000:]], RATE)
    mean = windows.sum(axis=0)
    np.testing.assert_allclose(row, mean / np.linalg.norm(mean), atol=1e-6)
    assert np.array_equal(row, clap.audio([long], RATE)[0])  # no random crop


def test_clap_text_rows(clap):
    rows = clap.text(["a dog barking", "a warm piano melody", "é" * 2000])
    assert_unit_rows(rows, 3, 16)
    assert not np.allclose(rows[0], rows[1], atol=1e-4)
    # Alone it is padded to another length: the same row but for float32's last bits.
    np.testing.assert_allclose(clap.text(["a dog barking"])[0], rows[0], atol=1e-6)
    assert np.array_equal(clap.text(["a dog barking", "a warm piano melody"])[0], rows[0])


def test_clap_rejects_clips_it_cannot_read(clap):
    with pytest.raises(ValueError, match="clip 1 is empty"):
        clap.audio([sine(), np.zeros(0, np.float32)], RATE)
    with pytest.raises(ValueError, match=r"\[channels, samples\]"):
        clap.audio([np.stack([sine(), sine()], axis=1)], RATE)


def test_load_audio_reads_files_for_clap(clap, tmp_path):
    stereo = np.stack([sine(rate=44100), noise(rate=44100)])
    sf.write(tmp_path / "clip.wav", stereo.T, 44100, subtype="FLOAT")
    sf.write(tmp_path / "clip.flac", stereo.T, 44100, subtype="PCM_24")
    wav, rate = load_audio(tmp_path / "clip.wav")
    assert rate == 44100 and wav.shape == stereo.shape and wav.dtype == np.float32
    np.testing.assert_array_equal(wav, stereo)
    flac, _ = load_audio(tmp_path / "clip.flac")
    rows = clap.audio([wav, flac], rate)
    assert rows[0] @ rows[1] > 0.999999


def test_clap_fingerprint_is_the_folders_content(clap, folders, tmp_path):
    assert len(clap.fingerprint) == 64
    copy = make_tiny_clap(tmp_path / "copy")
    assert ClapEmbedder(copy).fingerprint == clap.fingerprint
    assert ClapEmbedder(make_tiny_clap(tmp_path / "other", seed=1)).fingerprint != clap.fingerprint


# CLIP and DINOv2


def test_clip_rows(folders):
    clip = ClipEmbedder(folders["clip"])
    rows = clip.images(pictures())
    assert_unit_rows(rows, 3, 16)
    assert not np.allclose(rows[0], rows[1], atol=1e-4)
    assert np.array_equal(ClipEmbedder(folders["clip"]).images(pictures()), rows)
    # Transparent blue over white is the light blue it shows.
    light = Image.new("RGB", (40, 40), (127, 127, 255))
    np.testing.assert_allclose(clip.images([light])[0], rows[2], atol=1e-6)

    text = clip.text(["a red square", "a photo of a cat", "x" * 200, "x" * 300])
    assert_unit_rows(text, 4, 16)
    assert not np.allclose(text[0], text[1], atol=1e-4)
    np.testing.assert_allclose(text[2], text[3], atol=1e-6)  # both cut at 77 tokens
    assert clip.images([]).shape == (0, 16)


def test_dino_rows(folders):
    dino = DinoEmbedder(folders["dino"])
    rows = dino.images(pictures())
    assert_unit_rows(rows, 3, 32)
    assert not np.allclose(rows[0], rows[1], atol=1e-4)
    assert np.array_equal(DinoEmbedder(folders["dino"]).images(pictures()), rows)
    assert not hasattr(dino, "text")


def test_load_picture_gives_rgb(tmp_path, folders):
    path = write_image(tmp_path / "red.png")
    picture = load_picture(path)
    assert picture.mode == "RGB" and picture.size == (64, 48)
    dino = DinoEmbedder(folders["dino"])
    np.testing.assert_allclose(
        dino.images([picture])[0], dino.images([pictures()[0]])[0], atol=1e-12
    )


# Against transformers' own features: the rows are the model's projections, normalised, and
# the measures' similarities are the cosines of those projections.


def _unit_torch(features) -> np.ndarray:
    import torch

    pooled = features if isinstance(features, torch.Tensor) else features.pooler_output
    rows = pooled.detach().to(torch.float64).numpy()
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_clap_rows_and_similarities_are_transformers_own_features(folders, clap):
    import torch
    from transformers import ClapModel, ClapProcessor

    from tunesmith.quality.measures import paired_similarity, similarity

    folder = folders["clap"]
    model = ClapModel.from_pretrained(folder, use_safetensors=True, local_files_only=True).eval()
    processor = ClapProcessor.from_pretrained(folder, local_files_only=True)
    prompts = ["a warm piano melody", "a dog barking"]
    clips = [sine(220.0), noise(seed=3)]  # 2 s at 48 kHz: under CLAP's 10 s, repeat-padded
    with torch.inference_mode():
        tokens = processor.tokenizer(prompts, padding=True, return_tensors="pt")
        text = _unit_torch(model.get_text_features(**tokens))
        inputs = processor.feature_extractor(clips, sampling_rate=RATE, return_tensors="pt")
        assert not inputs["is_longer"].any()  # nothing cropped at random
        audio = _unit_torch(
            model.get_audio_features(
                input_features=inputs["input_features"], is_longer=inputs["is_longer"]
            )
        )
    ours_text, ours_audio = clap.text(prompts), clap.audio(clips, RATE)
    np.testing.assert_allclose(ours_text, text, atol=1e-6)
    np.testing.assert_allclose(ours_audio, audio, atol=1e-6)
    # the measures: each render against its prompt, and every render against the references
    np.testing.assert_allclose(
        paired_similarity(ours_audio, ours_text), np.sum(audio * text, axis=1), atol=1e-6
    )
    np.testing.assert_allclose(similarity(ours_audio, ours_audio), audio @ audio.T, atol=1e-6)


def test_clip_rows_and_similarities_are_transformers_own_features(folders):
    import torch
    from transformers import CLIPModel, CLIPProcessor

    from tunesmith.quality.measures import paired_similarity

    folder = folders["clip"]
    model = CLIPModel.from_pretrained(folder, use_safetensors=True, local_files_only=True).eval()
    processor = CLIPProcessor.from_pretrained(folder, local_files_only=True)
    prompts = ["a red square", "a photo of noise", "light blue"]
    # the RGBA picture as it shows on white; the other two are RGB already
    shown = [*pictures()[:2], Image.new("RGB", (40, 40), (127, 127, 255))]
    with torch.inference_mode():
        inputs = processor(text=prompts, images=shown, padding=True, return_tensors="pt")
        text = _unit_torch(
            model.get_text_features(
                input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"]
            )
        )
        images = _unit_torch(model.get_image_features(pixel_values=inputs["pixel_values"]))
    clip = ClipEmbedder(folder)
    ours_text, ours_images = clip.text(prompts), clip.images(pictures())
    np.testing.assert_allclose(ours_text, text, atol=1e-6)
    np.testing.assert_allclose(ours_images, images, atol=1e-5)  # RGBA over white: rounding
    np.testing.assert_allclose(
        paired_similarity(ours_images, ours_text), np.sum(images * text, axis=1), atol=1e-5
    )
