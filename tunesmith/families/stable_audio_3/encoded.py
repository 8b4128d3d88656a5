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

This is the item encoder of the one loop (`tunesmith.encoding`). What is missing is encoded in
batches: clips of exactly the same length at 44.1 kHz (after alignment) share a batch, within
the placement's memory budget (`clip_cost` estimates a clip's activations from the VAE's
config); clips of other lengths are never padded to share one (the VAE's convolutions and
attention would see the padding), and a clip above 30 s is encoded alone, in chunks. A batch's
matrix products round differently from one clip's: an entry's latents equal the one-at-a-time
encoding within TOLERANCE, not bit for bit, and which clips shared its batch is part of what
decides its last bits. The T5Gemma output of each item's prompt is cached per distinct text
under the text encoder's fingerprint, one prompt at a time. The model is loaded only when
something is missing from the store.

The batches are planned before anything is decoded (`plan_clips`), from the length each file's
header gives at 44.1 kHz after alignment (`media.audio.model_length`) and the VAE's config.json;
a clip whose header gives none (a format only Essentia decodes) is encoded alone, and one that
decodes to another length than its header gave goes with the clips of its planned batch that
share its length (`together`). So with `encode_workers` > 1 the loop deals the planned batches
out and each clip is decoded once, by the process that encodes it; `details.json` comes from
the VAE's config too, and the stage's own process loads no model.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import numpy as np

from tunesmith.backends import batches
from tunesmith.encoding import BatchEncoder, ItemEncoder, Unit, Writer
from tunesmith.families.stable_audio_3.base_model import (
    CHUNK_OVERLAP,
    CHUNK_SECONDS,
    FAMILY,
    SAMPLE_RATE,
    check_base_model,
)
from tunesmith.families.stable_audio_3.prompts import full_prompt, prompt_tags, sidecar_tags
from tunesmith.media import audio as media_audio
from tunesmith.media.sniff import ensure_unchanged
from tunesmith.store import Store, canonical_json, content_key
from tunesmith.store.atomic import json_bytes, write_if_changed
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
    "seconds_total",
    "seconds_start",
    "audio_samples",
    "latent_shape",
    "padding_mask",
)
COLUMNS = (
    "model",
    "path",
    "entry",
    "latents",
    "sidecar",
    "frames",
    "seconds_total",
    "prompt",
    "pieces",
)


class Prompts(BatchEncoder):
    """Prompts into T5Gemma's output, one at a time (a prompt's encoding is then the same in
    any process and beside any other prompt)."""

    max_items = 1

    def encode(self, model: Callable[[], Any], decoded: list) -> list[Writer]:
        from tunesmith.families.stable_audio_3 import model as sa3

        embeds, mask = sa3.encode_prompts(model(), decoded)
        return [functools.partial(_write_prompt, embeds[0].float().cpu(), mask[0].cpu())]


class Clips(ItemEncoder):
    """Audio files into VAE latents and their prompts into T5Gemma's output, for one base
    model, in underfit's pre-encoded layout."""

    family, media, columns, places = FAMILY, "audio", COLUMNS, ("latents", "sidecar")
    text_encoder = Prompts()

    def __init__(self, base_model: Path, request) -> None:
        super().__init__(base_model, request)
        check_base_model(self.base_model)
        self.vae_fp = self.fingerprint("vae")
        self.text_fp = content_key(
            encoder=self.fingerprint("text_encoder"),
            tokenizer=self.fingerprint("tokenizer"),
        )
        vae = self.base_model / "vae" / "config.json"
        self.config = json.loads(vae.read_text(encoding="utf-8"))
        self.ratio = vae_ratio(self.config)
        frames = max(1, int(CHUNK_SECONDS * self.config["sampling_rate"]) // self.ratio)
        self.chunk = frames * self.ratio  # samples of the longest clip encoded in one pass
        self.target = request.out / "encoded" / f"{self.base_model.name}-{self.vae_fp[:8]}"

    def load(self, device: str):
        """The pipeline; the encoders run in float32 whatever the placement's dtype (underfit
        encodes fp32)."""
        import torch

        from tunesmith.families.stable_audio_3 import model

        return model.load_pipeline(self.base_model, torch.float32, device)

    def key(self, item: dict, setting: Hashable) -> str:
        return _latents_key(item, self.vae_fp, self.placement)

    def plan(self, todo: list[Unit], budget: int) -> list[list[Unit]]:
        cap = self.max_items or batches.MAX_ITEMS
        return plan_clips(self.folder, todo, self.config, self.ratio, self.chunk, budget, cap)

    def decode(self, model: Callable[[], Any], unit: Unit) -> _Clip:
        """The clip as the VAE takes it; raises MediaError where it cannot be used."""
        path, label = self.folder / unit.item["path"], unit.item["path"]
        audio = media_audio.for_model(path, SAMPLE_RATE, self.ratio, label)
        ensure_unchanged(path, unit.item["sha256"], label)
        return _Clip(unit.item, audio)

    def together(self, decoded: _Clip) -> Hashable:
        """The length a clip decoded to (a header may have given another); over the chunk,
        itself alone."""
        length = decoded.audio.samples.shape[-1]
        return length if length <= self.chunk else id(decoded)

    def encode(self, model: Callable[[], Any], decoded: list[_Clip]) -> list[Writer]:
        import torch

        from tunesmith.families.stable_audio_3 import model as sa3

        vae = model().vae
        if len(decoded) == 1:
            latents = [sa3.encode_audio(vae, decoded[0].audio.samples)]
        else:
            samples = torch.stack([c.audio.samples for c in decoded])
            latents = list(sa3.encode_audio_batch(vae, samples))
        return [
            functools.partial(_write_entry, clip.audio, clip_latents, self.ratio)
            for clip, clip_latents in zip(decoded, latents, strict=True)
        ]

    def texts(self, unit: Unit, value: Any, prepared: Any) -> dict[str, Hashable]:
        return {"prompt": full_prompt(_pieces(unit.item))}

    def text_key(self, text: Hashable) -> str:
        return prompt_key(self.text_fp, str(text))

    def _outputs(self, item: dict) -> tuple[Path, Path]:
        source = PurePosixPath(item["path"])
        return self.target / source.with_suffix(".npy"), self.target / source.with_suffix(".json")

    def publish(self, unit: Unit, value: Any, prepared: dict) -> str:
        """Copy the cached latents into the output view and write the sidecar (underfit's
        fields in underfit's order, then the tags)."""
        item, source = unit.item, PurePosixPath(unit.item["path"])
        latents, sidecar = self._outputs(item)
        self.store.publish(unit.key, "latents.npy", latents)
        fields = {
            "path": str(self.folder.absolute() / source),
            "relpath": str(source.with_suffix(".npy")),
            "src_relpath": str(source),
            **{k: value[k] for k in SIDECAR_FIELDS},
            **sidecar_tags(item["caption"], item["caption_source"], json.loads(item["tags"])),
        }
        text = json.dumps(fields, ensure_ascii=False) + "\n"
        write_if_changed(sidecar, text.encode())
        return text

    def row(self, unit: Unit, value: Any, run, prepared: Any, texts: dict[str, str]) -> dict:
        latents, sidecar = self._outputs(unit.item)
        pieces = _pieces(unit.item)
        return {
            "model": self.base_model.name,
            "path": unit.item["path"],
            "entry": unit.key,  # the store key of the latents
            "latents": str(latents),
            "sidecar": str(sidecar),
            "frames": value["latent_shape"][-1],
            "seconds_total": value["seconds_total"],
            "prompt": full_prompt(pieces),
            "pieces": json.dumps(pieces, ensure_ascii=False),
        }

    def finish(self, store: Store, out: Path, units: list[tuple[Unit, Any]]) -> tuple[list, str]:
        """underfit's details.json, from the VAE's config (no model loaded)."""
        details = content_key(stage="encoded-details", version=STAGE_VERSION, vae=self.vae_fp)
        if not store.has(details):
            store.write_json(details, encoder_details(self.config))
        text = json_bytes(store.read_json(details))
        write_if_changed(self.target / "details.json", text)
        return [details], text.decode()


def vae_ratio(config: dict) -> int:
    """Audio samples per latent frame of an `AutoencoderSAME` config, as diffusers computes its
    `downsampling_ratio`: the patch size times the encoder's strides."""
    return int(config["patch_size"]) * math.prod(int(s) for s in config["encoder_strides"])


def encoder_details(config: dict) -> dict:
    """underfit's `details.json` from the VAE's config (no model loaded): what a reader of the
    latents needs to know."""
    return {
        "sample_rate": int(config["sampling_rate"]),
        "downsampling_ratio": vae_ratio(config),
        "latent_dim": int(config["latent_dim"]),
        "scale": 1.0,  # latents are stored unscaled; the SA3 pretransform scale is 1.0
    }


def _pieces(item: dict) -> list[str]:
    return prompt_tags(item["caption"], item["caption_source"], json.loads(item["tags"]))


def _latents_key(item: dict, vae_fp: str, placement) -> str:
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


def plan_clips(
    folder: Path,
    todo: list[Unit],
    config: dict,
    ratio: int,
    chunk: int,
    budget: int,
    max_items: int,
) -> list[list[Unit]]:
    """The batches of `todo`, planned from the lengths the files' headers give
    (`media.audio.model_length`), decoding nothing: clips of one length up to `chunk` samples
    together within `budget` and `max_items`; a longer clip, or one whose header gives no
    length, alone. Clips in the order of the labels' durations, so that each length's batch
    fills and goes before the next starts (a stable sort: the same missing clips make the same
    batches)."""
    ordered = sorted(todo, key=lambda unit: unit.item.get("duration") or 0.0)
    lengths = [
        media_audio.model_length(folder / u.item["path"], SAMPLE_RATE, ratio) for u in ordered
    ]

    def shape(pair: tuple[Unit, int | None]):
        unit, length = pair
        return length if length and length <= chunk else ("alone", unit.item["path"])

    def cost(pair: tuple[Unit, int | None]) -> int:
        return clip_cost(config, pair[1] or chunk)

    planned = batches.plan(list(zip(ordered, lengths, strict=True)), shape, cost, budget, max_items)
    return [[unit for unit, _ in batch] for batch in planned]


def _write_entry(audio: media_audio.ModelAudio, latents: torch.Tensor, ratio: int, tmp: Path):
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


def _write_prompt(embeds: torch.Tensor, mask: torch.Tensor, tmp: Path) -> None:
    (tmp / "text.safetensors").write_bytes(safetensors_bytes({"embeds": embeds, "mask": mask}))


def audio_samples(resampled: int, ratio: int) -> int:
    """underfit's `actual_samples`: the length at 44.1 kHz, at most its cap, 600 s aligned down
    to the downsampling ratio (its `max_samples`), never aligned itself."""
    cap = int(media_audio.MAX_SECONDS * SAMPLE_RATE) // ratio * ratio
    return min(resampled, cap)


def prompt_key(text_fp: str, prompt: str) -> str:
    return content_key(stage="text", family=FAMILY, encoder=text_fp, prompt=prompt)
