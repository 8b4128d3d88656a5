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

What is missing is encoded in batches (`tunesmith.backends.batches`): pictures, all fitted to
`size`², in batches within the placement's memory budget (PICTURE_COST estimates a picture's
activations from the VAE's config), captions in batches of up to `MAX_ITEMS`. Pictures are
decoded as the batches fill, so at most one batch of pixels is held. A batch's matrix products
round differently from one item's: an entry equals the one-at-a-time encoding within
TOLERANCE, not bit for bit, and which items shared its batch is part of what decides its last
bits (its key is not: the same missing items on the same machine make the same batches, so a
fresh build is reproducible). The model is loaded (without the UNet) only when something is
missing.

With `workers` > 1 (the compute resource's `encode_workers`) the missing pictures are dealt
out over that many processes a whole batch at a time (`_shares`), each loading the encoders (on
CUDA one GPU each, in turn) and writing its pictures into the store; every process forms the
batches one process would have formed, so the entries are one process's bytes (a picture that
fails to decode shifts its own batch's neighbours, which then agree within TOLERANCE). Captions
are encoded by the stage itself.

Under `<out>/encoded/<model>-<vae fingerprint[:8]>/` goes `details.json` (scaling factor,
latent channels, size): what a trainer needs to turn a posterior into a training latent.
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from tunesmith.backends import batches
from tunesmith.backends.placement import Placement
from tunesmith.dataset.workers import deal, process_device, run_all
from tunesmith.families.sdxl.checkpoint import FAMILY, check_checkpoint, encoder_details
from tunesmith.media import images
from tunesmith.media.sniff import MediaError, ensure_unchanged
from tunesmith.report import Skipped, StageResult
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
    `base_models`, the pictures on up to `workers` processes."""
    images.check_size(size)  # a wrong size is the run's error, not one picture's
    start = time.perf_counter()
    items = labels[labels["kind"] == "image"].to_dict("records")
    rows, keys, skipped, warnings = [], [], [], []
    counts = {"cached": 0, "computed": 0, "captions_cached": 0, "captions_computed": 0}
    for checkpoint in map(Path, base_models):
        try:
            check_checkpoint(checkpoint)
        except ValueError as exc:
            skipped += [Skipped(item["path"], str(exc)) for item in items]
            continue
        vae_fp = model_fingerprint(checkpoint / "vae", fingerprint_cache)
        text_fp = text_fingerprint(checkpoint, fingerprint_cache)
        pipe = _loader(checkpoint, placement.device)
        pictures = {i["path"]: picture_key(i["sha256"], vae_fp, size, placement) for i in items}
        todo = batches.missing(items, lambda i: pictures[i["path"]], store.has)  # noqa: B023
        cost = picture_cost(_read_vae_config(checkpoint), size)
        per_batch = max(1, min(batches.MAX_ITEMS, batches.memory_budget(placement) // max(cost, 1)))
        shares = _shares(todo, per_batch, workers)
        if len(shares) > 1:
            tasks = [(number, share, folder, checkpoint, store.root, placement, size, pictures,
                      cost, per_batch) for number, share in enumerate(shares)]  # fmt: skip
            failed = {
                k: v for part in run_all(_encode_share, tasks, workers) for k, v in part.items()
            }
        elif todo:
            failed = encode_pictures(
                folder, todo, pictures, pipe, store, size, (cost, placement), per_batch
            )
        else:
            failed = {}
        reasons = {pictures[path]: reason for path, reason in failed.items()}
        keyed = ((i["path"], pictures[i["path"]]) for i in items)
        failed = {path: reasons[key] for path, key in keyed if key in reasons}  # copies fail too
        skipped += [Skipped(path, reason) for path, reason in failed.items()]
        usable = [item for item in items if item["path"] not in failed]
        captions = {c: caption_key(text_fp, c, placement) for c in (i["caption"] for i in usable)}
        fresh = encode_captions(pipe, store, captions, placement)
        encoded_now = {item["path"] for item in todo}
        for item in usable:
            key, caption_entry = pictures[item["path"]], captions[item["caption"]]
            counts["computed" if item["path"] in encoded_now else "cached"] += 1
            counts["captions_computed" if item["caption"] in fresh else "captions_cached"] += 1
            fresh.discard(item["caption"])  # a caption shared by several pictures counts once
            keys += [key, caption_entry]
            meta = store.read_json(key)
            warnings += [f"{item['path']}: {w}" for w in meta["warnings"]]
            rows.append(_row(checkpoint.name, item, store, key, caption_entry, meta, size))
        if usable:
            _write_details(out, checkpoint, vae_fp, size)
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


def _shares(todo: list[dict], per_batch: int, workers: int) -> list[list[dict]]:
    """The pictures `todo` dealt out to `workers` processes a whole batch at a time.

    Every picture has one shape, so one process cuts `todo` into consecutive batches of
    `per_batch` items; dealing those very batches (batch j to process j mod workers) makes each
    process form the same batches, so the entries' bytes are one process's."""
    if workers <= 1 or not todo:
        return [todo]
    return deal([todo[k : k + per_batch] for k in range(0, len(todo), per_batch)], workers)


def _loader(checkpoint: Path, device: str) -> Callable:
    """The pipeline without its UNet, loaded on first call only: a no-change run loads (and
    imports) no model. Encoders run in float32 whatever the placement's dtype (see the module's
    docstring)."""

    def load():
        import torch

        from tunesmith.families.sdxl import model

        return model.load_pipeline(checkpoint, torch.float32, device, skip=("unet",))

    return functools.cache(load)


def _encode_share(task) -> dict[str, str]:
    """One process's share of the pictures into the store; path → reason for each that failed."""
    number, share, folder, checkpoint, root, placement, size, pictures, cost, per_batch = task
    pipe = _loader(checkpoint, process_device(placement.device, number))
    store = Store(root)
    return encode_pictures(folder, share, pictures, pipe, store, size, (cost, placement), per_batch)


def _write_details(out: Path, checkpoint: Path, vae_fp: str, size: int) -> None:
    details = encoder_details(_read_vae_config(checkpoint), size)
    target = out / "encoded" / f"{checkpoint.name}-{vae_fp[:8]}" / "details.json"
    write_if_changed(target, json_bytes(details))


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
    item: dict
    pixels: np.ndarray  # uint8 [size, size, 3]
    meta: dict  # value.json


def encode_pictures(
    folder: Path,
    todo: list[dict],
    keys: dict[str, str],
    pipe: Callable,
    store: Store,
    size: int,
    budget_of: tuple[int, Placement],
    max_items: int = batches.MAX_ITEMS,
) -> dict[str, str]:
    """Encode the pictures `todo` into their store entries (`keys` by path), in batches;
    returns path → reason for each picture that could not be used."""
    import torch

    cost, placement = budget_of
    failed: dict[str, str] = {}

    def decoded() -> Iterator[_Picture]:
        for item in todo:
            try:
                yield _prepare(folder, item, size)
            except MediaError as exc:
                failed[item["path"]] = str(exc)

    budget = batches.memory_budget(placement)
    shape = lambda p: p.pixels.shape  # noqa: E731
    for batch in batches.stream(decoded(), shape, lambda p: cost, budget, max_items):
        encode = functools.partial(_encode_batch, pipe)
        for part, (mean, logvar) in batches.halving(encode, batch, torch.OutOfMemoryError):
            for i, picture in enumerate(part):
                with store.writing(keys[picture.item["path"]]) as tmp:
                    tensors = {"mean": mean[i].clone(), "logvar": logvar[i].clone()}
                    (tmp / "posterior.safetensors").write_bytes(safetensors_bytes(tensors))
                    (tmp / "value.json").write_text(canonical_json(picture.meta), "utf-8")
    return failed


def _encode_batch(pipe: Callable, part: list[_Picture]) -> tuple[torch.Tensor, torch.Tensor]:
    from tunesmith.families.sdxl import model

    pixels = model.pixels_to_tensor(np.stack([p.pixels for p in part]))
    return model.encode_images(pipe().vae, pixels)


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
    return _Picture(item, images.fit_square(image, size), meta)


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


def caption_key(text_fp: str, caption: str, placement: Placement) -> str:
    return content_key(
        stage="text",
        family=FAMILY,
        version=STAGE_VERSION,
        encoders=text_fp,
        caption=caption,
        placement=placement.as_dict(),
    )


def encode_captions(
    pipe: Callable, store: Store, keys: dict[str, str], placement: Placement
) -> set[str]:
    """Encode the captions of `keys` (caption → store key) the store lacks, in batches;
    returns the captions encoded now."""
    todo = [caption for caption, key in keys.items() if not store.has(key)]
    # Every caption is 77 tokens: one shape. Its activations are 77 x the encoders' width
    # (under 2 MB for SDXL's), so the item cap, not the memory budget, bounds these batches.
    budget = batches.memory_budget(placement)
    for batch in batches.stream(todo, lambda c: CAPTION_TOKENS, lambda c: 0, budget):
        from tunesmith.families.sdxl import model

        embeds, pooled = model.encode_captions(pipe(), batch)
        for i, caption in enumerate(batch):
            tensors = {"prompt_embeds": embeds[i].float().cpu(), "pooled": pooled[i].float().cpu()}
            with store.writing(keys[caption]) as tmp:
                (tmp / "text.safetensors").write_bytes(safetensors_bytes(tensors))
    return set(todo)


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
