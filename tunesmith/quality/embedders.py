"""Embedding models that quality measures compare checkpoints with: CLAP, CLIP and DINOv2.

Each embedder loads a model folder in the published Hugging Face layout (laion/clap-htsat-*,
openai/clip-vit-*, facebook/dinov2-*, or the tiny ones of `tunesmith.quality.tiny`) from
`.safetensors` weights only, never downloading, and turns clips, pictures or prompts into rows
of unit length (float64), so a cosine similarity is a dot product. The model runs in float32,
frozen, in batches of `batch_size`; a row does not depend on the other items of its call
beyond the last bits of the float32 arithmetic.

`ClapEmbedder.audio` takes clips at any rate and channel count: mixed to mono and resampled
to the model's rate (48 kHz for CLAP) with `tunesmith.media.audio.resample`. CLAP hears 10 s
at a time; a shorter clip is repeated to fill them (the published feature extractor's
"repeatpad"), and a longer one is cut into windows of 10 s spread evenly from its start to
its end, whose rows are averaged and normalised again. That keeps every row deterministic:
the feature extractor would otherwise crop a random 10 s (its "rand_trunc") or pick random
parts to fuse ("fusion").
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tunesmith.families.base_model import PICKLE_SUFFIXES

if TYPE_CHECKING:  # torch, transformers and Pillow are imported where they are used
    from PIL import Image

BATCH_SIZE = 16
# The embedder kinds and the model_type each folder's config.json must give.
MODEL_TYPES = {"clap": "clap", "clip": "clip", "dino": "dinov2"}
NAMES = {"clap": "CLAP", "clip": "CLIP", "dino": "DINOv2"}
# transformers 5 saves a processor as processor_config.json; published folders have
# preprocessor_config.json. Either loads.
PROCESSOR_FILES = ("preprocessor_config.json", "processor_config.json")


def check_folder(folder: Path, kind: str) -> list[str]:
    """Every reason `folder` is not a usable `kind` ("clap", "clip", "dino") model folder;
    empty when it is. Reads config.json only: no weights are loaded."""
    if kind not in MODEL_TYPES:
        raise ValueError(f"unknown embedding model kind {kind!r}; expected one of {list(NAMES)}")
    folder = Path(folder)
    if not folder.is_dir():
        return [f"{folder} is not a folder"]
    problems = []
    expected = MODEL_TYPES[kind]
    config = folder / "config.json"
    if not config.is_file():
        problems.append("config.json is missing")
    else:
        try:
            model_type = json.loads(config.read_text(encoding="utf-8")).get("model_type")
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as err:
            problems.append(f"config.json is not a JSON object ({err})")
        else:
            if model_type != expected:
                problems.append(
                    f"config.json gives model_type {model_type!r}, not {expected!r} "
                    f"(a {NAMES[kind]} model)"
                )
    if not any(folder.glob("*.safetensors")):
        pickles = sorted(p.name for p in folder.iterdir() if p.suffix in PICKLE_SUFFIXES)
        if pickles:
            problems.append(
                f"only pickle weights ({', '.join(pickles)}), which tunesmith refuses to "
                "load: convert them to .safetensors"
            )
        else:
            problems.append("no .safetensors weights")
    if not any((folder / name).is_file() for name in PROCESSOR_FILES):
        problems.append("preprocessor_config.json is missing")
    has_bpe = (folder / "vocab.json").is_file() and (folder / "merges.txt").is_file()
    if kind in ("clap", "clip") and not ((folder / "tokenizer.json").is_file() or has_bpe):
        problems.append("no tokenizer (tokenizer.json, or vocab.json and merges.txt)")
    return problems


def load_audio(path: Path) -> tuple[np.ndarray, int]:
    """float32 samples [channels, N] of the audio file at `path` and its rate (wav, flac, mp3,
    ogg, aiff; m4a and the rest through Essentia), as `ClapEmbedder.audio` takes them."""
    from tunesmith.media.audio import decode

    return decode(Path(path))


def load_picture(path: Path) -> Image.Image:
    """The picture at `path` as 8-bit RGB, EXIF orientation applied, alpha on white."""
    from tunesmith.media.images import load_image

    return load_image(Path(path))


class _Embedder:
    """What the three embedders share: checking the folder, loading it on first use,
    batching, rows. Constructing one reads config.json only, so a caller can key its cache
    on `fingerprint` and load no model when the cache answers."""

    kind: str

    def __init__(
        self,
        folder: Path,
        device: str = "cpu",
        *,
        batch_size: int = BATCH_SIZE,
        fingerprint_cache: Path | None = None,
    ):
        self.folder = Path(folder)
        problems = check_folder(self.folder, self.kind)
        if problems:
            lines = "\n".join(f"  - {p}" for p in problems)
            raise ValueError(f"{self.folder} is not a usable {NAMES[self.kind]} model:\n{lines}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        self.device, self.batch_size = device, batch_size
        self.fingerprint_cache = fingerprint_cache

    @functools.cached_property
    def _loaded(self) -> tuple:
        import torch

        from tunesmith.families.base_model import quiet_loading

        model_class, processor_class = self._classes()
        with quiet_loading():
            model = model_class.from_pretrained(
                self.folder, use_safetensors=True, local_files_only=True, dtype=torch.float32
            )
            processor = processor_class.from_pretrained(self.folder, local_files_only=True)
        return model.to(self.device).eval().requires_grad_(False), processor

    @property
    def model(self):
        return self._loaded[0]

    @property
    def processor(self):
        return self._loaded[1]

    def _classes(self) -> tuple:
        raise NotImplementedError

    @functools.cached_property
    def fingerprint(self) -> str:
        """A content hash of the folder's weights, configs and tokenizer files (with a
        `fingerprint_cache`, a file unchanged since it was hashed is not read again)."""
        from tunesmith.store.fingerprints import model_fingerprint

        return model_fingerprint(self.folder, self.fingerprint_cache)

    @property
    def dim(self) -> int:
        """The length of a row."""
        return int(self.model.config.projection_dim)

    def _rows(self, items: list, embed) -> np.ndarray:
        """Unit rows [len(items), dim] (float64) of `embed(batch) -> tensor`, batch by batch."""
        import torch

        if not items:
            return np.zeros((0, self.dim))
        parts = []
        with torch.inference_mode():
            for start in range(0, len(items), self.batch_size):
                out = embed(items[start : start + self.batch_size])
                pooled = out if isinstance(out, torch.Tensor) else out.pooler_output
                parts.append(pooled.to("cpu", torch.float64).numpy())
        return _unit(np.concatenate(parts))

    def _text_rows(self, prompts: list[str]) -> np.ndarray:
        def embed(batch: list[str]):
            tokens = self.processor.tokenizer(
                list(batch), padding=True, truncation=True, return_tensors="pt"
            )
            return self.model.get_text_features(**tokens.to(self.device))

        return self._rows([str(p) for p in prompts], embed)

    def _image_rows(self, pictures: list[Image.Image], embed) -> np.ndarray:
        from tunesmith.media.images import to_rgb

        processor = getattr(self.processor, "image_processor", self.processor)

        def pixels(batch):
            rgb = [p if p.mode == "RGB" else to_rgb(p) for p in batch]
            values = processor(images=rgb, return_tensors="pt")["pixel_values"]
            return embed(values.to(self.device, dtype=self.model.dtype))

        return self._rows(list(pictures), pixels)


class ClapEmbedder(_Embedder):
    """CLAP (laion/clap-htsat-*): clips and text prompts in one space."""

    kind = "clap"

    def _classes(self) -> tuple:
        from transformers import ClapModel, ClapProcessor

        return ClapModel, ClapProcessor

    @property
    def sample_rate(self) -> int:
        """The rate the model hears, which clips are resampled to."""
        return int(self.processor.feature_extractor.sampling_rate)

    def audio(self, clips: list[np.ndarray], sample_rate: int) -> np.ndarray:
        """Unit rows [len(clips), dim] of float32 clips [channels, samples] or [samples] at
        `sample_rate`; a clip longer than the model's 10 s is the mean of its windows."""
        import torch

        from tunesmith.media.audio import resample

        features = self.processor.feature_extractor
        window = int(features.nb_max_samples)
        windows, owners = [], []
        for i, clip in enumerate(clips):
            mono = torch.from_numpy(_mono(clip, i))
            mono = resample(mono, int(sample_rate), self.sample_rate).numpy()
            for piece in _windows(mono, window):
                windows.append(piece)
                owners.append(i)
        # Windows are never longer than the feature extractor's maximum, so it crops nothing
        # at random; "fusion" (a fused model's mode) then stacks four copies of the mel.
        fused = bool(self.model.config.audio_config.enable_fusion)
        truncation = "fusion" if fused else "rand_trunc"

        def embed(batch: list[np.ndarray]):
            inputs = features(
                batch, sampling_rate=self.sample_rate, truncation=truncation, return_tensors="pt"
            )
            # No window is longer than 10 s; "fusion" would mark one at random as longer.
            is_longer = torch.zeros_like(inputs["is_longer"])
            return self.model.get_audio_features(
                input_features=inputs["input_features"].to(self.device, dtype=torch.float32),
                is_longer=is_longer.to(self.device),
            )

        rows = self._rows(windows, embed)
        if len(windows) == len(clips):
            return rows
        summed = np.zeros((len(clips), self.dim))
        np.add.at(summed, np.asarray(owners), rows)
        return _unit(summed)

    def text(self, prompts: list[str]) -> np.ndarray:
        """Unit rows [len(prompts), dim]; a prompt is cut at the tokenizer's length (512)."""
        return self._text_rows(prompts)


class ClipEmbedder(_Embedder):
    """CLIP (openai/clip-vit-*): pictures and text prompts in one space."""

    kind = "clip"

    def _classes(self) -> tuple:
        from transformers import CLIPModel, CLIPProcessor

        return CLIPModel, CLIPProcessor

    def images(self, pictures: list[Image.Image]) -> np.ndarray:
        """Unit rows [len(pictures), dim]; pictures of any mode (alpha is put on white)."""
        return self._image_rows(pictures, lambda x: self.model.get_image_features(pixel_values=x))

    def text(self, prompts: list[str]) -> np.ndarray:
        """Unit rows [len(prompts), dim]; a prompt is cut at CLIP's 77 tokens, as CLIP was
        trained (the tokenizer's model_max_length)."""
        return self._text_rows(prompts)


class DinoEmbedder(_Embedder):
    """DINOv2 (facebook/dinov2-*): pictures only; a row is the CLS token's output."""

    kind = "dino"

    def _classes(self) -> tuple:
        from transformers import AutoImageProcessor, Dinov2Model

        return Dinov2Model, AutoImageProcessor

    @property
    def dim(self) -> int:
        return int(self.model.config.hidden_size)

    def images(self, pictures: list[Image.Image]) -> np.ndarray:
        """Unit rows [len(pictures), dim]: the pooled output (CLS token, after the final
        layer norm)."""
        return self._image_rows(pictures, lambda x: self.model(pixel_values=x))


def _mono(clip: np.ndarray, index: int) -> np.ndarray:
    """float32 [samples]: the mean of the channels of [channels, samples], or [samples]."""
    samples = np.asarray(clip, dtype=np.float32)
    if samples.ndim == 2:
        if samples.shape[0] > samples.shape[1]:
            raise ValueError(
                f"clip {index}: shape {samples.shape} has more channels than samples; "
                "expected [channels, samples]"
            )
        samples = samples.mean(axis=0)
    elif samples.ndim != 1:
        raise ValueError(f"clip {index}: shape {samples.shape}; expected [channels, samples]")
    if samples.size == 0:
        raise ValueError(f"clip {index} is empty")
    return np.ascontiguousarray(samples)


def _windows(samples: np.ndarray, length: int) -> list[np.ndarray]:
    """`samples` whole if it fits in `length`, else windows of `length` spread evenly from its
    start to its end (the fewest that cover it)."""
    if samples.shape[0] <= length:
        return [samples]
    count = math.ceil(samples.shape[0] / length)
    starts = np.linspace(0, samples.shape[0] - length, count).round().astype(int)
    return [samples[s : s + length] for s in starts]


def _unit(rows: np.ndarray) -> np.ndarray:
    """Each row divided by its length; a zero row stays zero."""
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms > 0, norms, 1.0)
