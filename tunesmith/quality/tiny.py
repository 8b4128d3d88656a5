"""Tiny embedding models with the real architectures, made from code (nothing is downloaded).

`make_tiny_clap`, `make_tiny_clip` and `make_tiny_dino` build a CLAP, a CLIP and a DINOv2 with
the real `transformers` classes at tiny sizes from a fixed seed, and save each as its
published folder is laid out (laion/clap-htsat-unfused, openai/clip-vit-large-patch14,
facebook/dinov2-small): `config.json`, `model.safetensors`, `preprocessor_config.json`, and
for the two with text `tokenizer.json` and `tokenizer_config.json`. So `ClapModel`, `CLIPModel`,
`AutoModel` and `AutoProcessor` load them as they load the published ones, and the
embedders of `tunesmith.quality.embedders` take the code path a real folder takes.

What is kept from the real models: every class and code path: CLAP's HTSAT audio encoder
(a Swin transformer over the 64-band log-mel picture of 10 s at 48 kHz, patch 4, window 8,
unfused) with its RoBERTa text encoder and both projections; CLIP's ViT and text transformer
with the end-of-text pooling; DINOv2's ViT with its CLS output; each model's processor with
the real settings (CLAP's feature extractor exactly as published; the image processors' mean,
std, resampling and centre crop). What is not: widths, depths, picture sizes (32 pixels
instead of 224), the vocabularies (bytes only, no merges, so a prompt costs one token a byte)
and the weights, which are random.

Each config value below carries the real one beside it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch

from tunesmith.families.sdxl.tiny import _bytes_to_unicode
from tunesmith.families.sdxl.tiny import _tokenizer as _clip_tokenizer
from tunesmith.families.tiny import write_tiny
from tunesmith.quality.embedders import check_folder

FORMAT = 1  # bump when a builder changes what it writes for the same config and seed

IMAGENET_MEAN = [0.485, 0.456, 0.406]  # DINOv2's normalisation (ImageNet's)
IMAGENET_STD = [0.229, 0.224, 0.225]
BICUBIC = 3  # PIL.Image.Resampling.BICUBIC, as the published image processors give it

TINY_CLAP_CONFIG: dict = {
    "text_config": dict(  # ClapTextConfig (RoBERTa)
        hidden_size=32,  # real 768
        intermediate_size=37,  # real 3072
        num_hidden_layers=2,  # real 12
        num_attention_heads=4,  # real 12
        max_position_embeddings=514,  # real: RoBERTa's 512 tokens after its 2 offset positions
        type_vocab_size=1,  # real
    ),
    "audio_config": dict(  # ClapAudioConfig (HTSAT)
        # The mel picture: 1001 frames x 64 bands folded into 256 x 256; both are fixed by
        # the feature extractor (10 s, hop 480, 64 bands), so they stay real.
        spec_size=256,  # real
        num_mel_bins=64,  # real
        patch_size=4,  # real
        patch_stride=[4, 4],  # real
        window_size=8,  # real
        patch_embeds_hidden_size=16,  # real 96
        depths=[1, 1],  # real [2, 2, 6, 2]
        num_attention_heads=[2, 4],  # real [4, 8, 16, 32]
        # The last stage's width, patch_embeds_hidden_size * 2 ** (len(depths) - 1); real 768.
        hidden_size=32,
        enable_fusion=False,  # real (the unfused model)
    ),
    "projection_dim": 16,  # real 512
    # laion/clap-htsat-unfused's preprocessor_config.json (its frequency_min and truncation
    # are not the class's defaults).
    "feature_extractor": dict(
        feature_size=64,
        sampling_rate=48000,
        hop_length=480,
        max_length_s=10,
        fft_window_size=1024,
        padding_value=0.0,
        return_attention_mask=False,
        frequency_min=50,
        frequency_max=14000,
        top_db=None,
        truncation="rand_trunc",
        padding="repeatpad",
    ),
    "tokenizer": dict(model_max_length=512),  # real
}

TINY_CLIP_CONFIG: dict = {
    "text_config": dict(  # CLIPTextConfig
        hidden_size=32,  # real 768
        intermediate_size=37,  # real 3072
        num_hidden_layers=2,  # real 12
        num_attention_heads=4,  # real 12
        max_position_embeddings=77,  # real
        hidden_act="quick_gelu",  # real
    ),
    "vision_config": dict(  # CLIPVisionConfig
        image_size=32,  # real 224
        patch_size=8,  # real 14
        hidden_size=32,  # real 1024
        intermediate_size=37,  # real 4096
        num_hidden_layers=2,  # real 24
        num_attention_heads=4,  # real 16
        hidden_act="quick_gelu",  # real
    ),
    "projection_dim": 16,  # real 768
    "image_processor": dict(  # CLIPImageProcessor; OpenAI's mean and std are its defaults
        size={"shortest_edge": 32},  # real 224
        crop_size={"height": 32, "width": 32},  # real 224
        do_center_crop=True,
        resample=BICUBIC,
    ),
    "tokenizer": dict(pad_token="<|endoftext|>"),  # real; 77 tokens, as real
}

TINY_DINO_CONFIG: dict = {
    "model": dict(  # Dinov2Config
        image_size=32,  # real 518
        patch_size=8,  # real 14
        hidden_size=32,  # real 384 (small)
        num_hidden_layers=2,  # real 12
        num_attention_heads=4,  # real 6
        mlp_ratio=4,  # real
        layerscale_value=1.0,  # real
    ),
    "image_processor": dict(  # BitImageProcessor, as facebook/dinov2-* ship it
        size={"shortest_edge": 32},  # real 256
        crop_size={"height": 32, "width": 32},  # real 224
        do_center_crop=True,
        resample=BICUBIC,
        image_mean=IMAGENET_MEAN,
        image_std=IMAGENET_STD,
        do_convert_rgb=True,
    ),
}

CONFIGS = {"clap": TINY_CLAP_CONFIG, "clip": TINY_CLIP_CONFIG, "dino": TINY_DINO_CONFIG}


def make_tiny_clap(folder: Path, seed: int = 0) -> Path:
    """Write a tiny CLAP to `folder`; returns `folder` (see `write_tiny`: idempotent, atomic,
    and a folder it did not make is refused)."""
    return _write("clap", Path(folder), seed, build_tiny_clap)


def make_tiny_clip(folder: Path, seed: int = 0) -> Path:
    """Write a tiny CLIP to `folder` (as `make_tiny_clap`)."""
    return _write("clip", Path(folder), seed, build_tiny_clip)


def make_tiny_dino(folder: Path, seed: int = 0) -> Path:
    """Write a tiny DINOv2 to `folder` (as `make_tiny_clap`)."""
    return _write("dino", Path(folder), seed, build_tiny_dino)


class TinyModel:
    """A model and its processor's parts, saved into one folder as the published ones are.

    The parts are saved one by one (not through the processor object, which transformers 5
    writes as one `processor_config.json`) so the folder holds `preprocessor_config.json`
    and the tokenizer files beside `config.json`, the layout the published folders have.
    """

    def __init__(self, model, processor, parts: tuple):
        self.model, self.processor, self.parts = model, processor, parts

    def save_pretrained(self, folder: Path, safe_serialization: bool = True) -> None:
        self.model.save_pretrained(folder, safe_serialization=safe_serialization)
        for part in self.parts:
            part.save_pretrained(folder)


def build_tiny_clap(seed: int = 0) -> TinyModel:
    """The tiny `ClapModel` and `ClapProcessor` in memory (fp32, CPU), without saving them."""
    from transformers import ClapConfig, ClapFeatureExtractor, ClapModel, ClapProcessor

    cfg = TINY_CLAP_CONFIG
    tokenizer = roberta_bytes_tokenizer(**cfg["tokenizer"])
    config = ClapConfig(
        text_config=_text_config(cfg["text_config"], tokenizer),
        audio_config=cfg["audio_config"],
        projection_dim=cfg["projection_dim"],
    )
    model = _seeded(seed, lambda: ClapModel(config))
    features = ClapFeatureExtractor(**cfg["feature_extractor"])
    processor = ClapProcessor(feature_extractor=features, tokenizer=tokenizer)
    return TinyModel(model, processor, (features, tokenizer))


def build_tiny_clip(seed: int = 0) -> TinyModel:
    """The tiny `CLIPModel` and `CLIPProcessor` in memory (fp32, CPU), without saving them."""
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor

    cfg = TINY_CLIP_CONFIG
    tokenizer = _clip_tokenizer(**cfg["tokenizer"])
    config = CLIPConfig(
        text_config=_text_config(cfg["text_config"], tokenizer),
        vision_config=cfg["vision_config"],
        projection_dim=cfg["projection_dim"],
    )
    model = _seeded(seed, lambda: CLIPModel(config))
    images = CLIPImageProcessor(**cfg["image_processor"])
    processor = CLIPProcessor(image_processor=images, tokenizer=tokenizer)
    return TinyModel(model, processor, (images, tokenizer))


def _text_config(text_config: dict, tokenizer) -> dict:
    """A text tower's config with the tokenizer's vocabulary size and its real special ids
    (CLIP takes the pooled output at the end-of-text token)."""
    return dict(
        text_config,
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )


def build_tiny_dino(seed: int = 0) -> TinyModel:
    """The tiny `Dinov2Model` and its `BitImageProcessor` in memory (fp32, CPU)."""
    from transformers import BitImageProcessor, Dinov2Config, Dinov2Model

    cfg = TINY_DINO_CONFIG
    model = _seeded(seed, lambda: Dinov2Model(Dinov2Config(**cfg["model"])))
    images = BitImageProcessor(**cfg["image_processor"])
    return TinyModel(model, images, (images,))


def roberta_bytes_tokenizer(model_max_length: int):
    """A RoBERTa byte-level BPE tokenizer over bytes only, in RoBERTa's vocabulary layout.

    RoBERTa's vocabulary starts with <s>, <pad>, </s>, <unk> (0 to 3), then the byte
    characters and the merges' tokens, and ends with <mask>. Without merges every byte is a
    token; any text tokenizes, case kept (RoBERTa does not lower-case).
    """
    from transformers import RobertaTokenizer

    chars = list(_bytes_to_unicode().values())
    tokens = ["<s>", "<pad>", "</s>", "<unk>", *chars, "<mask>"]
    return RobertaTokenizer(
        vocab={token: i for i, token in enumerate(tokens)},
        merges=[],
        model_max_length=model_max_length,
    )


def _seeded(seed: int, make):
    # fork_rng: the caller's global random state is left as it was.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return make().eval()


def _write(kind: str, folder: Path, seed: int, build) -> Path:
    config_hash = _config_hash(kind, seed)
    return write_tiny(
        folder,
        config_hash,
        lambda: build(seed),
        lambda tiny: _marker(kind, tiny, seed, config_hash),
        lambda path: _check(path, kind),
    )


def _check(folder: Path, kind: str) -> None:
    problems = check_folder(folder, kind)
    if problems:
        raise ValueError(f"{folder}: " + "; ".join(problems))


def _config_hash(kind: str, seed: int) -> str:
    spec = {"format": FORMAT, "kind": kind, "seed": seed, "config": CONFIGS[kind]}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def _marker(kind: str, tiny: TinyModel, seed: int, config_hash: str) -> dict:
    import transformers

    return {
        "kind": kind,
        "format": FORMAT,
        "seed": seed,
        "config_hash": config_hash,
        "config": CONFIGS[kind],
        "parameters": sum(p.numel() for p in tiny.model.parameters()),
        "made_with": {"torch": torch.__version__, "transformers": transformers.__version__},
    }
