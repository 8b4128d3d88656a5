"""Stage `encoded` for SDXL: per picture the VAE posterior, per distinct caption the text encoders'.

The item encoder of the one loop (`tunesmith.encoding`). Two kinds of store entries, each keyed
by everything that determines its bytes:

    picture   posterior.safetensors  mean, logvar [4, size/8, size/8], float32, unscaled
              value.json             original_size [h, w] (after EXIF orientation),
                                     crop_top_left [top, left] (in the resized picture),
                                     target_size [size, size], warnings
              key: the file's content hash, the VAE's fingerprint, `size` and how the picture
              is fitted (PARAMS), the placement
    caption   text.safetensors       prompt_embeds [77, C1 + C2] and pooled [P], float32
              key: the caption's text, both text encoders' and both tokenizers' fingerprints,
              the placement

So editing one caption encodes that caption and no picture, and a caption shared by many
pictures is encoded once. float32 because the encoders run in float32 whatever the placement's
dtype (SDXL's VAE overflows in float16: its config says `force_upcast`), and a 1024² posterior
is 0.5 MB, small beside the picture it comes from.

`size` is each run's own (`train.size`, the encoder's `setting`): two runs of one dataset at
different sizes train on posteriors of their own size, so the table has one row per run and
picture (`run` column), and `<out>/encoded/<model>-<vae fingerprint[:8]>/details.json` (scaling
factor, latent channels, size: what a trainer needs to turn a posterior into a training
latent) is written per size, under `<size>/` beside it where the runs use more than one.

Pictures are all fitted to `size`², so they batch by size within the placement's memory budget
(`picture_cost` estimates a picture's activations from the VAE's config); captions are 77 tokens,
one shape, in batches of up to `MAX_ITEMS`. A batch's matrix products round differently from one
item's: an entry equals the one-at-a-time encoding within TOLERANCE, not bit for bit, and which
items shared its batch is part of what decides its last bits (its key is not: the same missing
items on the same machine make the same batches, so a fresh build is reproducible; a picture
that fails to decode leaves its batch's neighbours to a smaller batch, which agrees within
TOLERANCE). The model is loaded (without the UNet) only when something is missing.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tunesmith.backends.placement import Placement
from tunesmith.encoding import BatchEncoder, ItemEncoder, Unit, Writer
from tunesmith.families.sdxl.base_model import FAMILY, check_base_model, encoder_details
from tunesmith.media import images
from tunesmith.media.sniff import ensure_unchanged
from tunesmith.store import Store, canonical_json, content_key
from tunesmith.store.atomic import json_bytes, write_if_changed
from tunesmith.store.fingerprints import model_fingerprint
from tunesmith.store.tensors import safetensors_bytes

if TYPE_CHECKING:
    import torch

STAGE_VERSION = 1
SIZE = 1024  # SDXL's own size: stable-diffusion-xl-base-1.0 was trained at 1024²
PARAMS = {
    "shrink": "box",
    "enlarge": "bicubic",
    "crop": "centre",
    "alpha": "over white",
    "min_side": images.MIN_SIDE,
}
# A batched encoding against the same item encoded alone, largest absolute difference, in
# float32 on a CPU: measured ≤ 2.5e-6 on the tiny VAE and its text encoders (posteriors of
# order 1); tests/families/sdxl/test_encoded.py holds the stage to it.
TOLERANCE = 1e-5
CAPTION_TOKENS = 77  # both CLIP tokenizers pad every caption to their model_max_length
COLUMNS = (
    "model",
    "run",
    "path",
    "entry",
    "caption",
    "caption_entry",
    "posterior",
    "text",
    "original_height",
    "original_width",
    "crop_top",
    "crop_left",
    "size",
)


class Captions(BatchEncoder):
    """Captions into both text encoders' outputs: 77 tokens each, one shape. Their activations
    are 77 x the encoders' width (under 2 MB for SDXL's), so the item cap, not the memory
    budget, bounds these batches."""

    def shape(self, unit: Unit) -> Hashable:
        return CAPTION_TOKENS

    def encode(self, model: Callable[[], Any], decoded: list) -> list[Writer]:
        from tunesmith.families.sdxl import model as sdxl

        embeds, pooled = sdxl.encode_captions(model(), decoded)
        return [
            functools.partial(_write_text, embeds[i].float().cpu(), pooled[i].float().cpu())
            for i in range(len(decoded))
        ]


class Pictures(ItemEncoder):
    """Pictures into VAE posteriors, captions into the text encoders' outputs, for one base
    model; a run's `size` is the setting."""

    family, media, columns, per_run = FAMILY, "image", COLUMNS, True
    places = ("posterior", "text")
    texts_counted = "captions"
    text_encoder = Captions()

    def __init__(self, base_model: Path, request) -> None:
        super().__init__(base_model, request)
        check_base_model(self.base_model)
        self.vae_fp = self.fingerprint("vae")
        self.text_fp = text_fingerprint(self.base_model, self.fingerprint_cache)
        self.vae_config = _read_vae_config(self.base_model)

    def load(self, device: str):
        """The pipeline without its UNet. Encoders run in float32 whatever the placement's
        dtype (see the module's docstring)."""
        import torch

        from tunesmith.families.sdxl import model

        return model.load_pipeline(self.base_model, torch.float32, device, skip=("unet",))

    @staticmethod
    def setting(run) -> int:
        images.check_size(run.train.size)  # a wrong size is the run's error, not one picture's
        return run.train.size

    def key(self, item: dict, setting: Hashable) -> str:
        return picture_key(item["sha256"], self.vae_fp, setting, self.placement)

    def shape(self, unit: Unit) -> Hashable:
        return unit.setting

    def cost(self, unit: Unit) -> int:
        return picture_cost(self.vae_config, unit.setting)

    def decode(self, model: Callable[[], Any], unit: Unit) -> _Picture:
        return _prepare(self.folder, unit.item, unit.setting)

    def encode(self, model: Callable[[], Any], decoded: list[_Picture]) -> list[Writer]:
        from tunesmith.families.sdxl import model as sdxl

        pixels = sdxl.pixels_to_tensor(np.stack([p.pixels for p in decoded]))
        mean, logvar = sdxl.encode_images(model().vae, pixels)
        return [
            functools.partial(_write_picture, mean[i].clone(), logvar[i].clone(), p.meta)
            for i, p in enumerate(decoded)
        ]

    def warnings(self, unit: Unit, value: Any) -> list[str]:
        return [f"{unit.item['path']}: {w}" for w in value["warnings"]]

    def texts(self, unit: Unit, value: Any, prepared: Any) -> dict[str, Hashable]:
        return {"caption": unit.item["caption"]}

    def text_key(self, text: Hashable) -> str:
        return caption_key(self.text_fp, str(text), self.placement)

    def row(self, unit: Unit, value: Any, run, prepared: Any, texts: dict[str, str]) -> dict:
        height, width = value["original_size"]
        top, left = value["crop_top_left"]
        return {
            "model": self.base_model.name,
            "run": run.name,
            "path": unit.item["path"],
            "entry": unit.key,  # the store key of the posterior
            "caption": unit.item["caption"],
            "caption_entry": texts["caption"],  # the store key of both encoders' outputs
            "posterior": str(self.store.path(unit.key) / "posterior.safetensors"),
            "text": str(self.store.path(texts["caption"]) / "text.safetensors"),
            "original_height": height,
            "original_width": width,
            "crop_top": top,
            "crop_left": left,
            "size": unit.setting,
        }

    def finish(self, store: Store, out: Path, units: list[tuple[Unit, Any]]) -> tuple[list, str]:
        """details.json per size the runs use (see the module's docstring)."""
        folder = out / "encoded" / f"{self.base_model.name}-{self.vae_fp[:8]}"
        sizes = sorted({unit.setting for unit, _ in units})
        written = []
        for size in sizes:
            details = json_bytes(encoder_details(self.vae_config, size))
            where = folder if len(sizes) == 1 else folder / str(size)
            write_if_changed(where / "details.json", details)
            written.append(details.decode())
        return [], "".join(written)


def picture_cost(vae_config: dict, size: int) -> int:
    """Bytes of activations the VAE's encoder holds for one `size`² picture in float32: three
    full-resolution tensors of its first block's width (a ResNet block's input, its normalised
    copy, a convolution's output) and the mid-block attention's scores over the latent grid
    (the most a plain attention holds; SDPA's fused kernels hold less)."""
    width = int(vae_config["block_out_channels"][0])
    tokens = (size // 2 ** (len(vae_config["block_out_channels"]) - 1)) ** 2
    return 4 * (3 * width * size * size + tokens * tokens)


@dataclass
class _Picture:
    pixels: np.ndarray  # uint8 [size, size, 3]
    meta: dict  # value.json


def _prepare(folder: Path, item: dict, size: int) -> _Picture:
    """Decode and fit one picture; its value.json (sizes, crop, warnings)."""
    path, label = folder / item["path"], item["path"]
    image = images.load_image(path, label)
    ensure_unchanged(path, item["sha256"], label)
    plan = images.fit_plan(image.width, image.height, size)
    warnings = []
    if plan.enlarged:
        warnings.append(
            f"{image.width}x{image.height} is smaller than {size} on its short side: enlarged "
            "(bicubic), so it trains on a blurred picture"
        )
    meta = {
        "original_size": [image.height, image.width],
        "crop_top_left": [plan.top, plan.left],
        "target_size": [size, size],
        "warnings": warnings,
    }
    return _Picture(images.fit_square(image, size), meta)


def _write_picture(mean: torch.Tensor, logvar: torch.Tensor, meta: dict, tmp: Path) -> None:
    tensors = {"mean": mean, "logvar": logvar}
    (tmp / "posterior.safetensors").write_bytes(safetensors_bytes(tensors))
    (tmp / "value.json").write_text(canonical_json(meta), "utf-8")


def _write_text(embeds: torch.Tensor, pooled: torch.Tensor, tmp: Path) -> None:
    tensors = {"prompt_embeds": embeds, "pooled": pooled}
    (tmp / "text.safetensors").write_bytes(safetensors_bytes(tensors))


def picture_key(sha256: str, vae_fp: str, size: int, placement: Placement) -> str:
    return content_key(
        stage="encoded",
        family=FAMILY,
        version=STAGE_VERSION,
        content=sha256,
        vae=vae_fp,
        size=size,
        params=PARAMS,
        placement=placement.as_dict(),
    )


def text_fingerprint(base_model: Path, cache: Path | None) -> str:
    """Both text encoders' weights and configs, and every file of both tokenizers.

    The tokenizers are hashed whole here: model_fingerprint skips `.txt`, and a slow CLIP
    tokenizer keeps its BPE merges in `merges.txt`.
    """
    return content_key(
        text_encoder=model_fingerprint(base_model / "text_encoder", cache),
        text_encoder_2=model_fingerprint(base_model / "text_encoder_2", cache),
        tokenizer=_files_hash(base_model / "tokenizer"),
        tokenizer_2=_files_hash(base_model / "tokenizer_2"),
    )


def _files_hash(folder: Path) -> str:
    """sha256 over (name, sha256 of content) of every non-hidden file in a small folder."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        if not any(part.startswith(".") for part in rel.split("/")):
            digest.update(f"{rel}\0{hashlib.sha256(path.read_bytes()).hexdigest()}\n".encode())
    return digest.hexdigest()


def caption_key(text_fp: str, caption: str, placement: Placement) -> str:
    return content_key(
        stage="text",
        family=FAMILY,
        version=STAGE_VERSION,
        encoders=text_fp,
        caption=caption,
        placement=placement.as_dict(),
    )


def load_posterior(path: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean, logvar) [4, size/8, size/8] of a picture entry's `posterior.safetensors`."""
    from safetensors.torch import load_file

    tensors = load_file(path)
    return tensors["mean"], tensors["logvar"]


def load_caption(path: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """(prompt_embeds [77, C1 + C2], pooled [P]) of a caption entry's `text.safetensors`."""
    from safetensors.torch import load_file

    tensors = load_file(path)
    return tensors["prompt_embeds"], tensors["pooled"]


def _read_vae_config(base_model: Path) -> dict:
    return json.loads((base_model / "vae" / "config.json").read_text(encoding="utf-8"))
