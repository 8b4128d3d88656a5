"""Stage `encoded` for Stable Audio 3: underfit's pre-encoded layout, so underfit could train on it.

Per base model, under `<out>/<dataset>/encoded/<model>/`, as underfit's pre-encoder
(`dataset_processing/pre_encode.py`) writes them:

    <stem>.npy     latents [D, T], float32, unscaled
    <stem>.json    underfit's fields in its order: path (the source file, absolute), relpath
                   (the .npy under this folder: what underfit's path prompt template reads),
                   src_relpath (the source under the dataset), seconds_total (audio_samples /
                   rate, 3 dp), seconds_start 0, audio_samples (the file's length at 44.1 kHz,
                   capped at 600 s less a frame: underfit's `actual_samples`, not the aligned
                   length), latent_shape, padding_mask (latent rate, 1 = audio); then the tags
                   (`prompts.sidecar_tags`)
    details.json   sample_rate, downsampling_ratio, latent_dim, scale

Where the layout differs from underfit's, on purpose: a file's latents stop at its last whole
frame (the length aligned down) where underfit pads every file to the 600 s cap, so the
padding mask is all ones and `latent_shape` is the file's own (docs/conventions/stable-audio-3.md).

The latents of a file are cached in the store under its content hash, the VAE's
fingerprint, the encoding parameters and the placement; the `.json` beside them is rebuilt
from the labels each time (cheap), so editing a caption re-encodes no audio.

What is missing is encoded in batches (`tunesmith.backends.batches`): clips of exactly the same
length at 44.1 kHz (after alignment) share a batch, within the placement's memory budget
(`clip_cost` estimates a clip's activations from the VAE's config); clips of other lengths are
never padded to share one (the VAE's convolutions and attention would see the padding), and a
clip above 30 s is encoded alone, in chunks. Clips are decoded a batch at a time. A batch's
matrix products round differently from one clip's: an entry's latents equal the one-at-a-time
encoding within TOLERANCE, not bit for bit, and which clips shared its batch is part of what
decides its last bits. The T5Gemma output of each item's prompt is cached per distinct text
under the text encoder's fingerprint. The model is loaded only when something is missing from
the store.

The batches are planned before anything is decoded (`plan_clips`), from the length each file's
header gives at 44.1 kHz after alignment (`media.audio.model_length`); a clip whose header
gives none (a format only Essentia decodes) is encoded alone, and one that decodes to another
length than its header gave goes with the clips of its planned batch that share its length.

With `workers` > 1 (the compute resource's `encode_workers`) the missing clips are shared out
over that many processes, each loading the model once: every process plans the very batches
one process plans, and of n processes the k-th decodes and encodes batch j where j mod n is k
(`encode_clips`' `dealt`); so the entries are one process's bytes, and each clip is decoded
once, by the process that encodes it. Then the prompts the store lacks go to the same
processes, one at a time as the stage encodes them. The stage's own process loads no model.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from tunesmith.backends import batches
from tunesmith.backends.placement import Placement
from tunesmith.dataset.workers import deal, kept, pool, process_device
from tunesmith.families.stable_audio_3.checkpoint import (
    CHUNK_OVERLAP,
    CHUNK_SECONDS,
    FAMILY,
    SAMPLE_RATE,
    check_checkpoint,
)
from tunesmith.families.stable_audio_3.prompts import full_prompt, prompt_tags, sidecar_tags
from tunesmith.media import audio as media_audio
from tunesmith.media.sniff import MediaError, ensure_unchanged
from tunesmith.report import Skipped, StageResult
from tunesmith.store import DamagedEntry, Store, canonical_json, content_key
from tunesmith.store.atomic import json_bytes, write_if_changed
from tunesmith.store.fingerprints import model_fingerprint
from tunesmith.store.tensors import safetensors_bytes

if TYPE_CHECKING:
    import torch

STAGE_VERSION = 2  # 2: audio_samples and seconds_total are underfit's (before alignment)
PARAMS = {
    "sample_rate": SAMPLE_RATE,
    "max_seconds": media_audio.MAX_SECONDS,
    "chunk_seconds": CHUNK_SECONDS,
    "chunk_overlap": CHUNK_OVERLAP,
    "resampler": "sinc_interp_hann/6/0.99",
}
# A batched encoding against the same clip encoded alone, largest absolute difference over the
# largest latent, float32 on a CPU: measured ≤ 6.2e-7 on the tiny VAE (batches of 2 to 16,
# 1 to 29 s; often 0: bit for bit);
# tests/families/stable_audio_3/test_encode.py holds the stage to it.
TOLERANCE = 1e-5
# What the store keeps of an item beside its latents, in the sidecar's order.
SIDECAR_FIELDS = (
    "seconds_total", "seconds_start", "audio_samples", "latent_shape", "padding_mask",
)  # fmt: skip
COLUMNS = [
    "model", "path", "entry", "latents", "sidecar", "frames", "seconds_total", "prompt", "pieces",
]  # fmt: skip


@dataclass
class Encoded:
    frame: pd.DataFrame  # one row per encoded item and base model (COLUMNS)
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
    workers: int = 1,
) -> Encoded:
    """Encode the audio items of `labels` for every base model folder in `base_models`, on up
    to `workers` processes."""
    start = time.perf_counter()
    items = labels[labels["kind"] == "audio"].to_dict("records")
    rows, keys, skipped, warnings = [], [], [], []
    cached = computed = 0
    for checkpoint in base_models:
        name = checkpoint.name
        try:
            check_checkpoint(checkpoint)
        except ValueError as exc:
            skipped += [Skipped(item["path"], str(exc)) for item in items]
            continue
        vae_fp = model_fingerprint(checkpoint / "vae", fingerprint_cache)
        text_fp = content_key(
            encoder=model_fingerprint(checkpoint / "text_encoder", fingerprint_cache),
            tokenizer=model_fingerprint(checkpoint / "tokenizer", fingerprint_cache),
        )
        pipe = _loader(checkpoint, placement.device)
        target = out / "encoded" / f"{name}-{vae_fp[:8]}"
        entries = {item["path"]: _latents_key(item, vae_fp, placement) for item in items}
        todo = batches.missing(items, lambda i: entries[i["path"]], store.has)  # noqa: B023
        with pool(workers) as processes:  # None for one worker: all of it here
            vae_details = None  # model.encoder_details, where the processes loaded the model
            if processes and todo:
                failed, vae_details = _share_clips(processes, folder, todo, entries, checkpoint,
                                                   store, placement, workers)  # fmt: skip
            else:
                failed = encode_clips(folder, todo, entries, pipe, store, placement) if todo else {}
            encoded_now = {item["path"] for item in todo} - set(failed)
            encoded = []  # (entry, prompt, row, warnings) of each item that encodes
            for item in items:
                key = entries[item["path"]]
                if item["path"] in failed:
                    skipped.append(Skipped(item["path"], failed[item["path"]]))
                    continue
                pieces = prompt_tags(item["caption"], item["caption_source"],
                                     json.loads(item["tags"]))  # fmt: skip
                try:
                    (row, item_warnings), built = store.provide(
                        key,
                        lambda tmp: _encode_item(folder, item, pipe, tmp),  # noqa: B023
                        lambda k: _publish(folder, target, item, store, k, pieces, name),  # noqa: B023
                    )
                except MediaError as exc:
                    skipped.append(Skipped(item["path"], str(exc)))
                    continue
                built = built or item["path"] in encoded_now
                computed += built
                cached += not built
                encoded.append((key, full_prompt(pieces), row, item_warnings))
            if processes:
                prompts = [prompt for _, prompt, _, _ in encoded]
                _share_prompts(processes, prompts, checkpoint, store, placement, text_fp, workers)
        for key, prompt, row, item_warnings in encoded:
            keys += [key, cache_prompt(pipe, store, text_fp, prompt)]
            rows.append(row)
            warnings += item_warnings
        if encoded:
            details = content_key(stage="encoded-details", version=STAGE_VERSION, vae=vae_fp)
            if not store.has(details):
                from tunesmith.families.stable_audio_3 import model

                store.write_json(details, vae_details or model.encoder_details(pipe().vae))
            write_if_changed(target / "details.json", json_bytes(store.read_json(details)))
            keys.append(details)
    frame = pd.DataFrame(rows, columns=COLUMNS)
    sidecars = [Path(p).read_bytes().decode() for p in frame["sidecar"]]
    result = StageResult(
        stage="encoded",
        data_version=content_key(stage="encoded", keys=keys, sidecars=sidecars),
        items=len(items) * len(base_models),
        cached=cached,
        computed=computed,
        skipped=skipped,
        seconds=time.perf_counter() - start,
        extra={"warnings": "; ".join(warnings)} if warnings else {},
    )
    return Encoded(frame, result, keys)


def _loader(checkpoint: Path, device: str) -> Callable:
    """The pipeline, loaded on first call only: a no-change run loads (and imports) no model.
    The encoders run in float32 whatever the placement's dtype (underfit encodes fp32)."""

    def load():
        import torch

        from tunesmith.families.stable_audio_3 import model

        return model.load_pipeline(checkpoint, torch.float32, device)

    return functools.cache(load)


def _kept_loader(checkpoint: Path, device: str, number: int) -> Callable:
    """In a worker process: the loader of its first task (on that task's device), for all its
    tasks, so the process loads the model once."""
    return kept((__name__, checkpoint), lambda: _loader(checkpoint, process_device(device, number)))


def _share_clips(
    processes: Callable,
    folder: Path,
    todo: list[dict],
    keys: dict[str, str],
    checkpoint: Path,
    store: Store,
    placement: Placement,
    workers: int,
) -> tuple[dict[str, str], dict]:
    """The clips `todo` encoded on up to `workers` `processes` (see the module's docstring):
    path → reason for each clip that failed, and the encoder's details."""
    count = min(workers, len(todo))
    tasks = [(folder, todo, keys, checkpoint, store.root, placement, batches.MAX_ITEMS,
              (number, count)) for number in range(count)]  # fmt: skip
    parts = processes(_encode_share, tasks)
    failed = {path: reason for part, _ in parts for path, reason in part.items()}
    return failed, parts[0][1]


def _encode_share(task) -> tuple[dict[str, str], dict]:
    """One process's batches of the clips into the store (`encode_clips`' `dealt`): path →
    reason for each clip that failed, and the encoder's details."""
    from tunesmith.families.stable_audio_3 import model

    folder, todo, keys, checkpoint, root, placement, max_items, dealt = task
    pipe = _kept_loader(checkpoint, placement.device, dealt[0])
    failed = encode_clips(folder, todo, keys, pipe, Store(root), placement, max_items, dealt)
    return failed, model.encoder_details(pipe().vae)


def _share_prompts(
    processes: Callable,
    prompts: list[str],
    checkpoint: Path,
    store: Store,
    placement: Placement,
    text_fp: str,
    workers: int,
) -> None:
    """The prompts the store lacks encoded on up to `workers` `processes`, one at a time as
    `cache_prompt` encodes them (so a prompt's encoding is the same in any process)."""
    todo = [p for p in dict.fromkeys(prompts) if not store.has(prompt_key(text_fp, p))]
    shares = deal([[prompt] for prompt in todo], workers)
    tasks = [(number, share, checkpoint, store.root, placement.device, text_fp)
             for number, share in enumerate(shares)]  # fmt: skip
    processes(_prompt_share, tasks)


def _prompt_share(task) -> None:
    """One process's share of the prompts into the store."""
    number, share, checkpoint, root, device, text_fp = task
    pipe, store = _kept_loader(checkpoint, device, number), Store(root)
    for prompt in share:
        cache_prompt(pipe, store, text_fp, prompt)


def _latents_key(item: dict, vae_fp: str, placement: Placement) -> str:
    return content_key(
        stage="encoded",
        family=FAMILY,
        version=STAGE_VERSION,
        content=item["sha256"],
        vae=vae_fp,
        params=PARAMS,
        placement=placement.as_dict(),
    )


def clip_cost(vae_config: dict, samples: int) -> int:
    """Bytes one more clip of `samples` adds to a batch in the SAME encoder, float32: the clip's
    audio (patches of it are the first layer's input) and, per token of its transformer (every
    patch plus one per latent frame), about eight width-sized vectors (input, normalised copy,
    the five differential q1/q2/k1/k2/v projections, output).

    Not counted: the attention scores and the band mask. PyTorch's attention on a CPU (a flash
    kernel) and on CUDA (memory-efficient attention, the kernel that takes a mask) never holds a
    whole scores matrix, and the T×T band mask is built once per call and shared by the batch,
    so one clip alone pays it too. Measured on the tiny VAE by peak RSS, one thread: 1.7 MB a
    clip at 4 s (this estimate: 1.8), 11 MB at 30 s (13.4); the mask's share, 535 MB for one
    30 s clip, was 568 MB for four."""
    patch, strides = int(vae_config["patch_size"]), vae_config["encoder_strides"]
    width = int(vae_config["encoder_channels"]) * int(vae_config["encoder_c_mults"][0])
    tokens = samples // patch // int(strides[0]) * (int(strides[0]) + 1)
    channels = int(vae_config["audio_channels"])
    return 4 * (samples * channels + 8 * tokens * width)


@dataclass
class _Clip:
    item: dict
    audio: media_audio.ModelAudio


def encode_clips(
    folder: Path,
    todo: list[dict],
    keys: dict[str, str],
    pipe: Callable,
    store: Store,
    placement: Placement,
    max_items: int | None = None,
    dealt: tuple[int, int] = (0, 1),
) -> dict[str, str]:
    """Encode the clips `todo` into their store entries (`keys` by path), in batches of clips
    of one length, each of at most `max_items` (None: batches.MAX_ITEMS); returns path →
    reason for each clip that could not be used. With `dealt` = (k, n) only batch j where j mod n
    is k is decoded and encoded (the k-th of n processes)."""
    import torch

    from tunesmith.families.stable_audio_3 import model

    vae = pipe().vae
    ratio, config = vae.downsampling_ratio, dict(vae.config)
    chunk = max(1, int(model.CHUNK_SECONDS * config["sampling_rate"]) // ratio) * ratio
    budget, (k, n) = batches.memory_budget(placement), dealt
    planned = plan_clips(folder, todo, config, ratio, chunk, budget, max_items or batches.MAX_ITEMS)
    failed: dict[str, str] = {}
    encode = functools.partial(_encode_batch, vae)
    for batch in planned[k::n]:
        clips = [clip for item in batch if (clip := _decode(folder, item, ratio, failed))]
        for group in _by_length(clips, chunk):
            for part, latents in batches.halving(encode, group, torch.OutOfMemoryError):
                for clip, clip_latents in zip(part, latents, strict=True):
                    with store.writing(keys[clip.item["path"]]) as tmp:
                        _write_entry(tmp, clip.audio, clip_latents, ratio)
    return failed


def plan_clips(
    folder: Path,
    todo: list[dict],
    config: dict,
    ratio: int,
    chunk: int,
    budget: int,
    max_items: int,
) -> list[list[dict]]:
    """The batches of `todo`, planned from the lengths the files' headers give
    (`media.audio.model_length`), decoding nothing: clips of one length up to `chunk` samples
    together within `budget` and `max_items`; a longer clip, or one whose header gives no
    length, alone. Clips in the order of the labels' durations, so that each length's batch
    fills and goes before the next starts (a stable sort: the same missing clips make the same
    batches, in any number of processes)."""
    ordered = sorted(todo, key=lambda item: item.get("duration") or 0.0)
    lengths = [media_audio.model_length(folder / i["path"], SAMPLE_RATE, ratio) for i in ordered]

    def shape(pair: tuple[dict, int | None]):
        item, length = pair
        return length if length and length <= chunk else ("alone", item["path"])

    def cost(pair: tuple[dict, int | None]) -> int:
        return clip_cost(config, pair[1] or chunk)

    planned = batches.plan(list(zip(ordered, lengths, strict=True)), shape, cost, budget, max_items)
    return [[item for item, _ in batch] for batch in planned]


def _decode(folder: Path, item: dict, ratio: int, failed: dict[str, str]) -> _Clip | None:
    """The clip as the VAE takes it; None (and the reason in `failed`) where it cannot be used."""
    path, label = folder / item["path"], item["path"]
    try:
        audio = media_audio.for_model(path, SAMPLE_RATE, ratio, label)
        ensure_unchanged(path, item["sha256"], label)
    except MediaError as exc:
        failed[item["path"]] = str(exc)
        return None
    return _Clip(item, audio)


def _by_length(clips: list[_Clip], chunk: int) -> list[list[_Clip]]:
    """A planned batch's clips by the length they decoded to: one group, unless a header gave
    a length the decoder did not (each group then goes on its own); a clip over `chunk` alone."""
    groups: dict[object, list[_Clip]] = {}
    for clip in clips:
        length = clip.audio.samples.shape[-1]
        groups.setdefault(length if length <= chunk else id(clip), []).append(clip)
    return list(groups.values())


def _encode_batch(vae, part: list[_Clip]) -> list[torch.Tensor]:
    import torch

    from tunesmith.families.stable_audio_3 import model

    if len(part) == 1:
        return [model.encode_audio(vae, part[0].audio.samples)]
    return list(model.encode_audio_batch(vae, torch.stack([c.audio.samples for c in part])))


def _encode_item(folder: Path, item: dict, pipe: Callable, tmp: Path) -> None:
    """Encode one file into the store's temporary folder `tmp` (an entry found damaged when
    published)."""
    from tunesmith.families.stable_audio_3 import model

    vae, path, label = pipe().vae, folder / item["path"], item["path"]
    audio = media_audio.for_model(path, SAMPLE_RATE, vae.downsampling_ratio, label)
    ensure_unchanged(path, item["sha256"], label)
    _write_entry(tmp, audio, model.encode_audio(vae, audio.samples), vae.downsampling_ratio)


def _write_entry(tmp: Path, audio: media_audio.ModelAudio, latents: torch.Tensor, ratio: int):
    frames = latents.shape[-1]
    samples = audio_samples(audio.resampled_samples, ratio)
    meta = {
        "seconds_total": round(samples / SAMPLE_RATE, 3),
        "seconds_start": 0,
        "audio_samples": samples,
        "latent_shape": list(latents.shape),
        "padding_mask": [1] * frames,  # whole files: every frame is audio
        "warnings": list(audio.warnings),
    }
    np.save(tmp / "latents.npy", latents.numpy().astype(np.float32))
    (tmp / "value.json").write_text(canonical_json(meta), encoding="utf-8")


def audio_samples(resampled: int, ratio: int) -> int:
    """underfit's `actual_samples`: the length at 44.1 kHz, at most its cap, 600 s aligned down
    to the downsampling ratio (its `max_samples`), never aligned itself."""
    cap = int(media_audio.MAX_SECONDS * SAMPLE_RATE) // ratio * ratio
    return min(resampled, cap)


def cache_prompt(pipe, store: Store, text_fp: str, prompt: str) -> str:
    """The store key of `prompt`'s T5Gemma output, computing it if the store lacks it."""
    key = prompt_key(text_fp, prompt)

    def encode(tmp: Path) -> None:
        from tunesmith.families.stable_audio_3 import model

        embeds, mask = model.encode_prompts(pipe(), [prompt])
        tensors = {"embeds": embeds[0].float().cpu(), "mask": mask[0].cpu()}
        (tmp / "text.safetensors").write_bytes(safetensors_bytes(tensors))

    store.make(key, encode)
    return key


def prompt_key(text_fp: str, prompt: str) -> str:
    return content_key(stage="text", family=FAMILY, encoder=text_fp, prompt=prompt)


def load_prompt(store: Store, key: str) -> tuple[torch.Tensor, torch.Tensor]:
    from safetensors.torch import load_file

    tensors = load_file(store.path(key) / "text.safetensors")
    return tensors["embeds"], tensors["mask"]


def _publish(
    folder: Path, target: Path, item: dict, store: Store, key: str, pieces: list[str], name: str
):
    """Copy the cached latents into the output view and write the sidecar (underfit's fields
    in underfit's order, then the tags)."""
    source = PurePosixPath(item["path"])
    latents, sidecar = target / source.with_suffix(".npy"), target / source.with_suffix(".json")
    store.publish(key, "latents.npy", latents)
    meta = store.read_json(key)
    if meta is None:
        raise DamagedEntry(f"{store.path(key)}: damaged; evicted, it is computed again")
    warnings = meta.pop("warnings", [])
    fields = {
        "path": str(Path(folder).absolute() / source),
        "relpath": str(source.with_suffix(".npy")),
        "src_relpath": str(source),
        **{k: meta[k] for k in SIDECAR_FIELDS},
        **sidecar_tags(item["caption"], item["caption_source"], json.loads(item["tags"])),
    }
    write_if_changed(sidecar, (json.dumps(fields, ensure_ascii=False) + "\n").encode())
    prompt = full_prompt(pieces)
    row = {
        "model": name,
        "path": item["path"],
        "entry": key,  # the store key of the latents
        "latents": str(latents),
        "sidecar": str(sidecar),
        "frames": meta["latent_shape"][-1],
        "seconds_total": meta["seconds_total"],
        "prompt": prompt,
        "pieces": json.dumps(pieces, ensure_ascii=False),
    }
    return row, warnings
