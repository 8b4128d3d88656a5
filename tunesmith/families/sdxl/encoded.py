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
              value.json             tokens (the caption's), kept, lost (the text cut off)
              key: the caption's text, both text encoders' and both tokenizers' fingerprints,
              the placement (and its tokens, where 150 or 225: captions.py)

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

A dataset with a run that sets one of kohya's data options (data_options.py: buckets, long
captions, caption variants and dropout, flips, masks) is encoded by `Shaped`, whose table has
SHAPED_COLUMNS: each picture at its bucket (buckets.py; a posterior at a bucket is keyed by the
bucket and the resized size), the flipped picture's posterior as an entry of its own, the mask
in the picture's entry (masks.py), the caption's variants and the empty caption as caption
entries (captions.py). `encode` chooses, so a dataset whose runs set none of them has the same
entries and table as before. Each caption entry says how many tokens were cut; the stage's
report has one line per picture whose caption lost some.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tunesmith import encoding
from tunesmith.backends.placement import Placement
from tunesmith.encoding import BatchEncoder, Encoded, ItemEncoder, Unit, Writer
from tunesmith.families.sdxl import captions, data_options, masks
from tunesmith.families.sdxl.base_model import FAMILY, check_base_model, encoder_details
from tunesmith.families.sdxl.buckets import (
    LANCZOS,
    BucketError,
    BucketFit,
    BucketRules,
    fit_bucket,
    fit_pixels,
    resolutions,
    select,
)
from tunesmith.families.sdxl.captions import CHUNK, Prompt
from tunesmith.media import images
from tunesmith.media.sniff import MediaError, ensure_unchanged
from tunesmith.store import DamagedEntry, Store, canonical_json, content_key
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
    """Captions into both text encoders' outputs, batched by their length (77 tokens, or 152
    and 227 for kohya's long captions: `captions.Prompt`; a plain string is 77). Their
    activations are the length x the encoders' width (under 2 MB for SDXL's at 77), so the item
    cap, not the memory budget, bounds these batches. Each entry's value.json says how many
    tokens the caption has and what of it was cut."""

    def shape(self, unit: Unit) -> Hashable:
        return _prompt(unit.item).positions

    def encode(self, model: Callable[[], Any], decoded: list) -> list[Writer]:
        from tunesmith.families.sdxl import model as sdxl

        prompts = [_prompt(d) for d in decoded]
        chunks = {p.chunks for p in prompts}
        if len(chunks) != 1:
            raise ValueError(f"captions of different lengths in one batch: {sorted(chunks)}")
        texts, [count] = [p.text for p in prompts], chunks
        if count == 1:
            embeds, pooled = sdxl.encode_captions(model(), texts)
        else:
            embeds, pooled = sdxl.encode_long_captions(model(), texts, count)
        lengths = sdxl.caption_tokens(model(), texts, prompts[0].tokens)
        return [
            functools.partial(
                _write_text, embeds[i].float().cpu(), pooled[i].float().cpu(), lengths[i]
            )
            for i in range(len(decoded))
        ]


def _prompt(text: Any) -> Prompt:
    return text if isinstance(text, Prompt) else Prompt(str(text))


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
        prompt = _prompt(text)
        return caption_key(self.text_fp, prompt.text, self.placement, prompt.tokens)

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
    return picture_area_cost(vae_config, size, size)


def picture_area_cost(vae_config: dict, height: int, width: int) -> int:
    """`picture_cost` of a height x width picture (a bucket)."""
    channels = int(vae_config["block_out_channels"][0])
    factor = 2 ** (len(vae_config["block_out_channels"]) - 1)
    tokens = (height // factor) * (width // factor)
    return 4 * (3 * channels * height * width + tokens * tokens)


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


def _write_text(embeds: torch.Tensor, pooled: torch.Tensor, length: dict, tmp: Path) -> None:
    tensors = {"prompt_embeds": embeds, "pooled": pooled}
    (tmp / "text.safetensors").write_bytes(safetensors_bytes(tensors))
    (tmp / "value.json").write_text(canonical_json(length), "utf-8")


def picture_key(
    sha256: str, vae_fp: str, size: int, placement: Placement, flipped: bool = False
) -> str:
    """A picture's posterior fitted to the square of `size` (flipped: its own entry)."""
    return content_key(
        stage="encoded",
        family=FAMILY,
        version=STAGE_VERSION,
        content=sha256,
        vae=vae_fp,
        size=size,
        params=PARAMS,
        placement=placement.as_dict(),
        **({"flipped": True} if flipped else {}),
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


def caption_key(text_fp: str, caption: str, placement: Placement, tokens: int = CHUNK) -> str:
    """A caption's entry; `tokens` (75, 150, 225) is in the key only where it is not 75."""
    return content_key(
        stage="text",
        family=FAMILY,
        version=STAGE_VERSION,
        encoders=text_fp,
        caption=caption,
        placement=placement.as_dict(),
        **({"tokens": tokens} if tokens != CHUNK else {}),
    )


def load_posterior(path: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean, logvar) [4, size/8, size/8] of a picture entry's `posterior.safetensors`."""
    from safetensors.torch import load_file

    tensors = load_file(path)
    return tensors["mean"], tensors["logvar"]


def load_caption(path: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """(prompt_embeds [77 (or 152, 227), C1 + C2], pooled [P]) of a caption entry's
    `text.safetensors`."""
    from safetensors.torch import load_file

    tensors = load_file(path)
    return tensors["prompt_embeds"], tensors["pooled"]


def _read_vae_config(base_model: Path) -> dict:
    return json.loads((base_model / "vae" / "config.json").read_text(encoding="utf-8"))


# ---------------------------------------------------------------------------------------------
# Buckets, flips, masks and caption variants (data_options.py): the stage with its extra
# columns, used where a run of the dataset sets one of them; a dataset whose runs set none is
# encoded by `Pictures` alone, into the same entries and the same table as before.

SHAPED_COLUMNS = (
    *COLUMNS,
    "target_height",
    "target_width",
    "flipped_posterior",
    "flipped_crop_left",
    "mask",
    "caption_variants",
    "empty_text",
)
# How a picture is fitted to its bucket (buckets.py): kohya's resize and cut, and its crop
# conditioning. In the key of every posterior made at a bucket.
BUCKET_PARAMS = {
    "fit": "bucket",
    "shrink": "box",
    "enlarge": "lanczos",
    "crop": "centre",
    "conditioning": "kohya get_crop_ltrb",
    "alpha": "over white",
    "min_side": images.MIN_SIDE,
}


@dataclass(frozen=True)
class PictureSetting:
    """What of a run changes its pictures' entries: the square's size or the bucket rules,
    flips, masks."""

    size: int
    buckets: BucketRules | None = None
    flip: bool = False
    mask: bool = False


def encode(request) -> Encoded:
    """The `encoded` stage for SDXL: `Pictures`, or `Shaped` where a run of the dataset sets a
    data option; then one line per picture whose caption was cut at its tokens."""
    chosen = [data_options.options(run.train) for run in request.runs]
    shaped = any(o != data_options.DEFAULTS for o in chosen)
    if any(o.masked_loss for o in chosen):
        request = replace(request, labels=_masks_apart(request.labels))
    encoded = encoding.encode(request, Shaped if shaped else Pictures)
    lines = truncation_lines(encoded.frame, request.store, request.runs)
    bucketed = [run.name for run, o in zip(request.runs, chosen, strict=True) if o.buckets]
    buckets = bucket_counts(encoded.frame, bucketed) if bucketed else {}
    if lines or buckets:
        extra = dict(encoded.result.extra)
        if lines:
            extra["warnings"] = list(dict.fromkeys([*extra.get("warnings", []), *lines]))
        if buckets:
            extra["buckets"] = buckets
        encoded = replace(encoded, result=replace(encoded.result, extra=extra))
    return encoded


def _masks_apart(labels):
    """The labels with each `<stem>.mask.<ext>` beside a picture marked as a mask (kind
    "mask"): never a picture to train on (masks.py)."""
    images_ = labels[labels["kind"] == "image"]["path"].tolist()
    found = set(masks.mask_files(images_).values())
    if not found:
        return labels
    labels = labels.copy()
    labels.loc[labels["path"].isin(found), "kind"] = "mask"
    return labels


def truncation_lines(frame, store: Store, runs) -> list[str]:
    """One line per picture (and run) whose caption as written was cut at its tokens."""
    if frame.empty:
        return []
    lengths = {run.name: data_options.options(run.train).max_token_length for run in runs}
    values: dict[str, Any] = {}
    lines = []
    for row in frame.to_dict("records"):
        key = row["caption_entry"]
        if key not in values:
            values[key] = store.read_json(key) or {}  # an entry from before: nothing said
        line = captions.truncation_line(row["path"], values[key], lengths.get(row["run"]))
        if line:
            lines.append(line)
    return list(dict.fromkeys(lines))


def bucket_counts(frame, runs: list[str]) -> dict[str, dict[str, int]]:
    """Per run of `runs`, its pictures per bucket ("WxH": count), as kohya lists them."""
    counts: dict[str, dict[str, int]] = {}
    mine = frame[frame["run"].isin(runs)]
    for row in mine.sort_values(["target_width", "target_height"]).to_dict("records"):
        bucket = f"{int(row['target_width'])}x{int(row['target_height'])}"
        mine = counts.setdefault(row["run"], {})
        mine[bucket] = mine.get(bucket, 0) + 1
    return counts


@dataclass
class _Shaped:
    """A decoded picture of `Shaped`: its fitted pixels, what its entries hold, its mask."""

    pixels: np.ndarray  # uint8 [bucket h, bucket w, 3]
    meta: dict  # the posterior's value.json
    flipped_meta: dict | None
    keys: tuple[str, str | None]  # the posterior's entry, the flipped one's
    pair: bool  # the unit's entry is the picture's (posteriors apart), not the posterior
    mask: np.ndarray | None  # float32 [h/8, w/8]
    value: dict  # the picture entry's value.json (pair only)


class Shaped(Pictures):
    """`Pictures` with kohya's buckets, flips, masks and caption variants (data_options.py).

    A unit's entry is the picture's posterior itself where its run flips and masks nothing;
    else it is the picture's own entry (value.json: the conditioning, the keys of its
    posterior and of the flipped picture's, where its mask came from; mask.safetensors),
    whose posteriors are entries of their own, keyed as any posterior: turning `flip_aug` on
    encodes the flipped pictures only, and `masked_loss` encodes no picture again. Publishing
    checks that both posteriors are still in the store; one that is not makes the picture's
    entry again, which encodes only what is missing."""

    columns = SHAPED_COLUMNS
    places = ("posterior", "text", "flipped_posterior", "mask", "caption_variants", "empty_text")

    def __init__(self, base_model: Path, request) -> None:
        super().__init__(base_model, request)
        labels = request.labels
        pictures = labels[labels["kind"].isin(["image", "mask"])]
        found = masks.mask_files(pictures["path"].tolist())
        hashes = dict(zip(pictures["path"], pictures["sha256"], strict=True))
        self.masks = {picture: (mask, hashes[mask]) for picture, mask in found.items()}
        self.factor = encoder_details(self.vae_config, 8)["vae_scale_factor"]
        self._tables: dict[BucketRules, list] = {}

    @staticmethod
    def setting(run) -> PictureSetting:
        images.check_size(run.train.size)
        wrong = data_options.problems(run.train, f"run {run.name}")
        if wrong:
            raise ValueError("\n".join(wrong))
        o = data_options.options(run.train)
        rules = BucketRules.of(run.train.size, o) if o.buckets else None
        return PictureSetting(run.train.size, rules, o.flip_aug, o.masked_loss)

    # -- where a picture goes, from the labels' width and height (nothing decoded) -----------

    def fit(self, item: dict, setting: PictureSetting) -> BucketFit | str:
        """The picture's fit, or why it has none (said when it is decoded)."""
        try:
            width, height = int(item["width"]), int(item["height"])
        except (TypeError, ValueError):
            return "its width and height are not in the labels"
        if min(width, height) < images.MIN_SIDE:
            return f"{width}x{height} pixels is too small to train on"
        if setting.buckets is None:
            return square_fit(width, height, setting.size)
        rules = setting.buckets
        if rules not in self._tables and not rules.no_upscale:
            self._tables[rules] = resolutions(rules)
        try:
            return select(width, height, rules, self._tables.get(rules))
        except BucketError as exc:
            return str(exc)

    def posterior_keys(self, item: dict, setting: PictureSetting, fit) -> tuple[str, str | None]:
        sha = item["sha256"]
        if isinstance(fit, str):  # no posterior: a key of its own, and decode says why
            return content_key(unusable=sha, setting=repr(setting)), None
        if setting.buckets is None:
            key = functools.partial(picture_key, sha, self.vae_fp, setting.size, self.placement)
        else:
            key = functools.partial(bucket_key, sha, self.vae_fp, fit, self.placement)
        return key(), (key(flipped=True) if setting.flip else None)

    def mask_source(self, item: dict) -> dict:
        found = self.masks.get(item["path"])
        return {"file": found[1]} if found else {"alpha": True}

    def key(self, item: dict, setting: PictureSetting) -> str:
        fit = self.fit(item, setting)
        posterior, flipped = self.posterior_keys(item, setting, fit)
        if not (setting.flip or setting.mask):
            return posterior
        return content_key(
            stage="encoded",
            family=FAMILY,
            version=STAGE_VERSION,
            picture=posterior,
            flipped=flipped,
            mask={**self.mask_source(item), "params": masks.PARAMS} if setting.mask else None,
        )

    def shape(self, unit: Unit) -> Hashable:
        fit = self.fit(unit.item, unit.setting)
        return fit if isinstance(fit, str) else fit.bucket

    def cost(self, unit: Unit) -> int:
        fit = self.fit(unit.item, unit.setting)
        if isinstance(fit, str):
            return 0
        width, height = fit.bucket
        return picture_area_cost(self.vae_config, height, width) * (2 if unit.setting.flip else 1)

    # -- decoding and encoding ---------------------------------------------------------------

    def decode(self, model: Callable[[], Any], unit: Unit) -> _Shaped:
        item, setting = unit.item, unit.setting
        label = item["path"]
        fit = self.fit(item, setting)
        if isinstance(fit, str):
            raise MediaError(f"{label}: {fit}")
        if setting.buckets is None:
            prepared = _prepare(self.folder, item, setting.size)
            pixels, meta = prepared.pixels, prepared.meta
            _check_size(label, meta["original_size"], fit)
            flipped_meta = {**meta, "crop_top_left": fit.flipped_crop_top_left}
        else:
            path = self.folder / label
            image = images.load_image(path, label)
            ensure_unchanged(path, item["sha256"], label)
            _check_size(label, [image.height, image.width], fit)
            pixels = fit_bucket(image, fit)
            meta = _bucket_meta(fit, flipped=False)
            flipped_meta = _bucket_meta(fit, flipped=True)
        keys = self.posterior_keys(item, setting, fit)
        pair = setting.flip or setting.mask
        mask, value = None, {}
        if pair:
            warnings = list(meta["warnings"])
            source = None
            if setting.mask:
                mask, source = self.read_mask(item, fit, setting)
                if mask is None:
                    warnings.append(
                        f"no mask (no {label.rsplit('.', 1)[0]}.mask.png beside it, no alpha "
                        "channel): every pixel of it counts"
                    )
            value = {
                "posterior": keys[0],
                "flipped": keys[1],
                "original_size": meta["original_size"],
                "crop_top_left": meta["crop_top_left"],
                "target_size": meta["target_size"],
                "flipped_crop_top_left": flipped_meta["crop_top_left"] if keys[1] else None,
                "mask": source,
                "warnings": warnings,
            }
        return _Shaped(pixels, meta, flipped_meta if keys[1] else None, keys, pair, mask, value)

    def read_mask(self, item: dict, fit: BucketFit, setting: PictureSetting):
        """(float32 [h/8, w/8] or None, where it came from) for a picture (masks.py)."""
        label = item["path"]
        found = self.masks.get(label)
        if found:
            path = self.folder / found[0]
            pixels = masks.read_mask(path, found[0], fit.width, fit.height, label)
            ensure_unchanged(path, found[1], found[0])
            source = found[0]
        else:
            pixels = images.load_alpha(self.folder / label, label)
            source = "alpha"
            if pixels is None:
                return None, None
            if pixels.shape != (fit.height, fit.width):
                raise MediaError(f"{label}: its alpha channel is not the picture's size")
        enlarge = images.ENLARGE if setting.buckets is None else LANCZOS
        fitted = fit_pixels(pixels[..., None], fit, enlarge)[..., 0]
        return masks.latent_mask(fitted, self.factor), source

    def encode(self, model: Callable[[], Any], decoded: list[_Shaped]) -> list[Writer]:
        from tunesmith.families.sdxl import model as sdxl

        jobs = []  # (decoded index, flipped, the posterior's key: None for the unit's own)
        for i, d in enumerate(decoded):
            if not d.pair:
                jobs.append((i, False, None))
                continue
            if not self.store.has(d.keys[0]):
                jobs.append((i, False, d.keys[0]))
            if d.keys[1] and not self.store.has(d.keys[1]):
                jobs.append((i, True, d.keys[1]))
        made: dict[int, list] = {i: [] for i in range(len(decoded))}
        if jobs:
            # kohya flips the fitted picture before the VAE (cache_batch_latents)
            stack = [decoded[i].pixels[:, ::-1] if f else decoded[i].pixels for i, f, _ in jobs]
            pixels = sdxl.pixels_to_tensor(np.ascontiguousarray(np.stack(stack)))
            mean, logvar = sdxl.encode_images(model().vae, pixels)
            for j, (i, flipped, key) in enumerate(jobs):
                meta = decoded[i].flipped_meta if flipped else decoded[i].meta
                made[i].append((key, mean[j].clone(), logvar[j].clone(), meta))
        return [functools.partial(self._write, d, made[i]) for i, d in enumerate(decoded)]

    def _write(self, decoded: _Shaped, made: list, tmp: Path) -> None:
        if not decoded.pair:
            [(_, mean, logvar, meta)] = made
            _write_picture(mean, logvar, meta, tmp)
            return
        for key, mean, logvar, meta in made:  # the posteriors: entries of their own
            with self.store.writing(key) as folder:
                _write_picture(mean, logvar, meta, folder)
        if decoded.mask is not None:
            import torch

            mask = {"mask": torch.from_numpy(decoded.mask)}
            (tmp / "mask.safetensors").write_bytes(safetensors_bytes(mask))
        (tmp / "value.json").write_text(canonical_json(decoded.value), "utf-8")

    # -- the entries' place in the table -----------------------------------------------------

    def publish(self, unit: Unit, value: Any, prepared: dict) -> str:
        """A picture's entry whose posteriors are gone is made again (they with it)."""
        if "posterior" in value:
            for key in (value["posterior"], value["flipped"]):
                if key and not self.store.has(key):
                    self.store.evict(unit.key, f"its posterior entry {key} is missing")
                    raise DamagedEntry(f"{self.store.path(unit.key)}: its posterior is missing")
        return ""

    def prepare(self, run, units: list[tuple[Unit, Any]], skipped) -> dict:
        """Per picture, the texts its run trains on (captions.prompts)."""
        o = data_options.options(run.train)
        tokens = data_options.tokens_of(o)
        return {
            unit.item["path"]: captions.prompts(unit.item["caption"], o, tokens, run.train.seed)
            for unit, _ in units
        }

    def texts(self, unit: Unit, value: Any, prepared: Any) -> dict[str, Hashable]:
        return dict(prepared)

    def row(self, unit: Unit, value: Any, run, prepared: Any, texts: dict[str, str]) -> dict:
        pair = "posterior" in value
        posterior = value["posterior"] if pair else unit.key
        flipped = value["flipped"] if pair else None
        height, width = value["original_size"]
        top, left = value["crop_top_left"]
        target_h, target_w = value["target_size"]
        text = lambda key: str(self.store.path(key) / "text.safetensors")  # noqa: E731
        variants = [texts[name] for name in texts if name.startswith("variant_")]
        return {
            "model": self.base_model.name,
            "run": run.name,
            "path": unit.item["path"],
            "entry": unit.key,
            "caption": unit.item["caption"],
            "caption_entry": texts["caption"],
            "posterior": str(self.store.path(posterior) / "posterior.safetensors"),
            "text": text(texts["caption"]),
            "original_height": height,
            "original_width": width,
            "crop_top": top,
            "crop_left": left,
            "size": unit.setting.size,
            "target_height": target_h,
            "target_width": target_w,
            "flipped_posterior": (
                str(self.store.path(flipped) / "posterior.safetensors") if flipped else None
            ),
            "flipped_crop_left": value["flipped_crop_top_left"][1] if flipped else None,
            "mask": (
                str(self.store.path(unit.key) / "mask.safetensors")
                if pair and value["mask"]
                else None
            ),
            "caption_variants": json.dumps([text(k) for k in variants]) if variants else None,
            "empty_text": text(texts["empty"]) if "empty" in texts else None,
        }

    def finish(self, store: Store, out: Path, units: list[tuple[Unit, Any]]) -> tuple[list, str]:
        """details.json per size, as `Pictures`; the posteriors of the pictures' entries."""
        kept = [k for _, v in units if "posterior" in v for k in (v["posterior"], v["flipped"])]
        sized = [(replace(unit, setting=unit.setting.size), value) for unit, value in units]
        _, written = super().finish(store, out, sized)
        return [k for k in kept if k], written


def _check_size(label: str, decoded: list[int], fit: BucketFit) -> None:
    """The picture decodes to the size the labels gave, which chose its bucket and key."""
    if decoded != fit.original_size:
        raise MediaError(
            f"{label}: {decoded[1]}x{decoded[0]} as decoded, but {fit.width}x{fit.height} in "
            "the labels: build the labels again"
        )


def square_fit(width: int, height: int, size: int) -> BucketFit:
    """The square fit (`images.fit_plan`) as a `BucketFit`: the crop conditioning is where the
    square was cut (diffusers' convention), and a flipped picture's is the cut from the
    right."""
    plan = images.fit_plan(width, height, size)
    return BucketFit(
        width,
        height,
        (size, size),
        (plan.width, plan.height),
        plan.left,
        plan.top,
        plan.left,
        plan.top,
        plan.width - size - plan.left,
        1.0 - width / height,
    )


def _bucket_meta(fit: BucketFit, flipped: bool) -> dict:
    """A bucketed posterior's value.json."""
    warnings = []
    if fit.enlarged:
        warnings.append(
            f"{fit.width}x{fit.height} is enlarged to {fit.resized[0]}x{fit.resized[1]} "
            f"(Lanczos) for its bucket {fit.bucket[0]}x{fit.bucket[1]}, so it trains on a "
            "blurred picture"
        )
    return {
        "original_size": fit.original_size,
        "crop_top_left": fit.flipped_crop_top_left if flipped else fit.crop_top_left,
        "target_size": fit.target_size,
        "cut_top_left": fit.cut_top_left,
        "resized": [fit.resized[1], fit.resized[0]],
        "flipped": flipped,
        "warnings": warnings,
    }


def bucket_key(
    sha256: str, vae_fp: str, fit: BucketFit, placement: Placement, flipped: bool = False
) -> str:
    """A picture's posterior at its bucket: the bucket and the resized size determine its
    pixels (the rules and `size` that chose them do not), so runs that put a picture in the
    same bucket share its entry."""
    return content_key(
        stage="encoded",
        family=FAMILY,
        version=STAGE_VERSION,
        content=sha256,
        vae=vae_fp,
        bucket=list(fit.bucket),
        resized=list(fit.resized),
        params=BUCKET_PARAMS,
        placement=placement.as_dict(),
        **({"flipped": True} if flipped else {}),
    )


def load_mask(path: Path) -> torch.Tensor:
    """float32 [h/8, w/8] of a picture entry's `mask.safetensors` (masks.py)."""
    from safetensors.torch import load_file

    return load_file(path)["mask"]


def text_choices(row: dict) -> tuple[list[str], str | None]:
    """A row's caption encodings for training: the variants' `text.safetensors` (the caption
    as written where nothing varies) and the empty caption's (None without dropout). The
    trainer picks among them at each step (`captions.pick_caption`)."""
    variants = row.get("caption_variants")
    listed = json.loads(variants) if isinstance(variants, str) else [row["text"]]
    empty = row.get("empty_text")
    return listed, empty if isinstance(empty, str) else None
