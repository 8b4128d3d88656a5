"""Stage `encoded` for SDXL: per picture the VAE posterior, per distinct caption the text encoders'.

Two kinds of store entries, each keyed by everything that determines its bytes:

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

Each picture and caption is encoded alone, never batched with whatever else happens to be
missing: a batch's matmuls round differently from a single item's, and an entry's bytes must
depend on its key only. The model is loaded (without the UNet) only when something is missing.

With `workers` > 1 (the compute resource's `encode_workers`) the pictures are shared out
`i::workers` over that many processes, each loading the encoders and writing its pictures'
and captions into the store (whose writes are atomic: two processes encoding one caption
publish one entry); the stage's own pass then reads them all as cached. The bytes are one
process's: every entry is encoded alone, so which process encodes it changes nothing.

Under `<out>/encoded/<model>-<vae fingerprint[:8]>/` goes `details.json` (scaling factor,
latent channels, size): what a trainer needs to turn a posterior into a training latent.
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from safetensors.torch import load_file

from tunesmith.backends.placement import Placement
from tunesmith.families.sdxl import model
from tunesmith.media import images
from tunesmith.media.sniff import MediaError, ensure_unchanged
from tunesmith.report import Skipped, StageResult
from tunesmith.store import Store, canonical_json, content_key
from tunesmith.store.atomic import json_bytes, write_if_changed
from tunesmith.store.fingerprints import model_fingerprint
from tunesmith.store.tensors import safetensors_bytes

STAGE_VERSION = 1
SIZE = 1024  # SDXL's own size: stable-diffusion-xl-base-1.0 was trained at 1024²
PARAMS = {
    "shrink": "box",
    "enlarge": "bicubic",
    "crop": "centre",
    "alpha": "over white",
    "min_side": images.MIN_SIDE,
}
COLUMNS = [
    "model", "path", "entry", "caption", "caption_entry", "posterior", "text",
    "original_height", "original_width", "crop_top", "crop_left", "size",
]  # fmt: skip


@dataclass
class Encoded:
    frame: pd.DataFrame  # one row per encoded picture and base model (COLUMNS)
    result: StageResult
    keys: list[str]  # store entries used (gc roots)


def build_encoded(
    folder: Path,
    labels: pd.DataFrame,
    base_models: list[Path],
    out: Path,
    store: Store,
    placement: Placement,
    fingerprint_cache: Path,
    size: int = SIZE,
    workers: int = 1,
) -> Encoded:
    """Encode the pictures and captions of `labels` for every base model folder in
    `base_models`, on up to `workers` processes."""
    images.check_size(size)  # a wrong size is the run's error, not one picture's
    start = time.perf_counter()
    items = labels[labels["kind"] == "image"].to_dict("records")
    rows, keys, skipped, warnings = [], [], [], []
    counts = {"cached": 0, "computed": 0, "captions_cached": 0, "captions_computed": 0}
    for checkpoint in base_models:
        checkpoint = Path(checkpoint)
        try:
            model.check_checkpoint(checkpoint)
        except ValueError as exc:
            skipped += [Skipped(item["path"], str(exc)) for item in items]
            continue
        vae_fp = model_fingerprint(checkpoint / "vae", fingerprint_cache)
        text_fp = text_fingerprint(checkpoint, fingerprint_cache)
        # Encoders run in float32 whatever the placement's dtype (see the docstring); the
        # pipeline without its UNet is loaded on first use only: a no-change run loads nothing.
        pipe = functools.cache(
            lambda c=checkpoint: model.load_pipeline(
                c, torch.float32, placement.device, skip=("unet",)
            )
        )
        shared = _in_workers(workers, items, folder, checkpoint, store, placement, size,
                             vae_fp, text_fp)  # fmt: skip
        for item in items:
            key = picture_key(item["sha256"], vae_fp, size, placement)
            try:
                built = store.make(key, lambda tmp: _encode_picture(folder, item, pipe, tmp, size))  # noqa: B023
                counts["computed" if built or key in shared else "cached"] += 1
                shared.discard(key)  # counted once, as one process counts it
            except MediaError as exc:
                skipped.append(Skipped(item["path"], str(exc)))
                continue
            caption_key, fresh = cache_caption(pipe, store, text_fp, item["caption"], placement)
            fresh = fresh or caption_key in shared
            shared.discard(caption_key)
            counts["captions_computed" if fresh else "captions_cached"] += 1
            keys += [key, caption_key]
            meta = store.read_json(key)
            warnings += [f"{item['path']}: {w}" for w in meta["warnings"]]
            rows.append(_row(checkpoint.name, item, store, key, caption_key, meta, size))
        if any(row["model"] == checkpoint.name for row in rows):
            details = model.encoder_details(_read_vae_config(checkpoint), size)
            target = out / "encoded" / f"{checkpoint.name}-{vae_fp[:8]}" / "details.json"
            write_if_changed(target, json_bytes(details))
    frame = pd.DataFrame(rows, columns=COLUMNS)
    result = StageResult(
        stage="encoded",
        data_version=content_key(stage="encoded", keys=keys, rows=frame.to_dict("records")),
        items=len(items) * len(base_models),
        cached=counts["cached"],
        computed=counts["computed"],
        skipped=skipped,
        seconds=time.perf_counter() - start,
        extra={
            "captions_cached": counts["captions_cached"],
            "captions_computed": counts["captions_computed"],
            **({"warnings": "; ".join(warnings)} if warnings else {}),
        },
    )
    return Encoded(frame, result, keys)


def _in_workers(workers, items, folder, checkpoint, store, placement, size, vae_fp, text_fp):
    """The store keys built by `workers` processes encoding `items[i::workers]` each; none
    with one worker, or where every picture is already in the store (a cached rebuild starts
    no process)."""
    if workers <= 1 or all(
        store.has(picture_key(i["sha256"], vae_fp, size, placement)) for i in items
    ):
        return set()
    from tunesmith.dataset.workers import run_all

    tasks = [(items[i::workers], folder, checkpoint, store.root, placement, size, vae_fp,
              text_fp, i) for i in range(workers)]  # fmt: skip
    return {key for built in run_all(_encode_share, tasks, workers) for key in built}


def _encode_share(task) -> list[str]:
    """One worker's share: its pictures and their captions into the store; the keys it built.
    A picture that cannot be read is left to the stage's own pass, which reports it."""
    items, folder, checkpoint, root, placement, size, vae_fp, text_fp, index = task
    store, device = Store(root), placement.device
    if device == "cuda" and torch.cuda.device_count() > 1:  # one GPU a worker, in turn
        device = f"cuda:{index % torch.cuda.device_count()}"
    pipe = functools.cache(
        lambda: model.load_pipeline(checkpoint, torch.float32, device, skip=("unet",))
    )
    built = []
    for item in items:
        key = picture_key(item["sha256"], vae_fp, size, placement)
        try:
            if store.make(key, lambda tmp: _encode_picture(folder, item, pipe, tmp, size)):  # noqa: B023
                built.append(key)
        except MediaError:
            continue
        caption_key, fresh = cache_caption(pipe, store, text_fp, item["caption"], placement)
        built += [caption_key] if fresh else []
    return built


def picture_key(sha256: str, vae_fp: str, size: int, placement: Placement) -> str:
    return content_key(
        stage="encoded",
        family=model.FAMILY,
        version=STAGE_VERSION,
        content=sha256,
        vae=vae_fp,
        size=size,
        params=PARAMS,
        placement=placement.as_dict(),
    )


def text_fingerprint(checkpoint: Path, cache: Path | None) -> str:
    """Both text encoders' weights and configs, and every file of both tokenizers.

    The tokenizers are hashed whole here: model_fingerprint skips `.txt`, and a slow CLIP
    tokenizer keeps its BPE merges in `merges.txt`.
    """
    return content_key(
        text_encoder=model_fingerprint(checkpoint / "text_encoder", cache),
        text_encoder_2=model_fingerprint(checkpoint / "text_encoder_2", cache),
        tokenizer=_files_hash(checkpoint / "tokenizer"),
        tokenizer_2=_files_hash(checkpoint / "tokenizer_2"),
    )


def _files_hash(folder: Path) -> str:
    """sha256 over (name, sha256 of content) of every non-hidden file in a small folder."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        if not any(part.startswith(".") for part in rel.split("/")):
            digest.update(f"{rel}\0{hashlib.sha256(path.read_bytes()).hexdigest()}\n".encode())
    return digest.hexdigest()


def _encode_picture(folder: Path, item: dict, pipe: Callable, tmp: Path, size: int) -> None:
    """Encode one picture into the store's temporary folder `tmp`."""
    path, label = folder / item["path"], item["path"]
    image = images.load_image(path, label)
    ensure_unchanged(path, item["sha256"], label)
    plan = images.fit_plan(image.width, image.height, size)
    pixels = images.fit_square(image, size)
    mean, logvar = model.encode_images(pipe().vae, model.pixels_to_tensor(pixels))
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
    tensors = {"mean": mean[0], "logvar": logvar[0]}
    (tmp / "posterior.safetensors").write_bytes(safetensors_bytes(tensors))
    (tmp / "value.json").write_text(canonical_json(meta), encoding="utf-8")


def cache_caption(
    pipe, store: Store, text_fp: str, caption: str, placement: Placement
) -> tuple[str, bool]:
    """(store key of `caption`'s encoding, whether it was computed now)."""
    key = content_key(
        stage="text",
        family=model.FAMILY,
        version=STAGE_VERSION,
        encoders=text_fp,
        caption=caption,
        placement=placement.as_dict(),
    )

    def encode(tmp: Path) -> None:
        embeds, pooled = model.encode_captions(pipe(), [caption])
        tensors = {"prompt_embeds": embeds[0].float().cpu(), "pooled": pooled[0].float().cpu()}
        (tmp / "text.safetensors").write_bytes(safetensors_bytes(tensors))

    return key, store.make(key, encode)


def load_posterior(path: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean, logvar) [4, size/8, size/8] of a picture entry's `posterior.safetensors`."""
    tensors = load_file(path)
    return tensors["mean"], tensors["logvar"]


def load_caption(path: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """(prompt_embeds [77, C1 + C2], pooled [P]) of a caption entry's `text.safetensors`."""
    tensors = load_file(path)
    return tensors["prompt_embeds"], tensors["pooled"]


def _read_vae_config(checkpoint: Path) -> dict:
    return json.loads((checkpoint / "vae" / "config.json").read_text(encoding="utf-8"))


def _row(
    name: str, item: dict, store: Store, key: str, caption_key: str, meta: dict, size: int
) -> dict:
    height, width = meta["original_size"]
    top, left = meta["crop_top_left"]
    return {
        "model": name,
        "path": item["path"],
        "entry": key,  # the store key of the posterior
        "caption": item["caption"],
        "caption_entry": caption_key,  # the store key of both encoders' outputs
        "posterior": str(store.path(key) / "posterior.safetensors"),
        "text": str(store.path(caption_key) / "text.safetensors"),
        "original_height": height,
        "original_width": width,
        "crop_top": top,
        "crop_left": left,
        "size": size,
    }
