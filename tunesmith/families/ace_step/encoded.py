"""Stage `encoded` for ACE-Step 1.5: per file its latents and audio codes, per text its encoding.

The item encoder of the one loop (`tunesmith.encoding`).
Two kinds of store entries, each keyed by everything that determines its bytes:

    item   item.safetensors   latents [T, C] float32 (25 Hz, frames first) and, where the
                              base model has its audio tokenizer, audio_codes [ceil(T/5)] int64
           item.json          the layout `model.read_item` reads (shape, rate, code count)
           value.json         frames, seconds, warnings (a file cut at 600 s)
           key: the file's content hash, the VAE's and the audio tokenizer's fingerprints
           (None without one), the encoding parameters, the placement
    text   text.safetensors   hidden_states [L, C] float32, the text and its token counts in
                              the metadata (`model.write_text`'s layout)
           key: the string (caption template or lyrics header included), whether it is a
           caption or lyrics, the text encoder's and tokenizer's fingerprints, the placement

So editing one caption encodes one text and no audio, and a text shared by many items (the
lyrics `[Instrumental]`) is encoded once. The model is loaded only when something is missing.
Which strings an item trains on depends on the run (its trigger, genre ratio: `captions.py`),
so the stage's table has one row per base model, run and item (`run` column); a run trains
on its own rows. Each item is also published for people and the planner work under
`<out>/encoded/<model>-<vae fingerprint[:8]>/<stem>.safetensors` with a `<stem>.json` sidecar
(texts, metas, warnings).

A base folder without the audio tokenizer still encodes and trains: the codes are skipped and
the stage says so once per base model, not once per file.

Files and strings are encoded one at a time (batches of one), so an entry is the same bytes in
any process; with `encode_workers` > 1 the loop deals the missing files, then (once every
file's length is known) the missing strings, out to the worker processes, and the stage's own
process loads no model.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Hashable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tunesmith.encoding import BatchEncoder, ItemEncoder, Unit, Writer
from tunesmith.families.ace_step import captions
from tunesmith.families.ace_step.base_model import (
    CHUNK_SECONDS,
    FAMILY,
    FORMAT,
    LATENT_RATE,
    OVERLAP_SECONDS,
    SAMPLE_RATE,
    check_base_model,
)
from tunesmith.media import audio as media_audio
from tunesmith.media.sniff import ensure_unchanged
from tunesmith.report import Skipped
from tunesmith.store import canonical_json, content_key
from tunesmith.store.atomic import json_bytes, write_if_changed
from tunesmith.store.tensors import safetensors_bytes

if TYPE_CHECKING:
    import torch

STAGE_VERSION = 1
POSTERIOR_SEED = 0  # the one draw from the VAE's posterior (model.encode_latents)
PARAMS = {
    "sample_rate": SAMPLE_RATE,
    "max_seconds": media_audio.MAX_SECONDS,
    "chunk_seconds": CHUNK_SECONDS,
    "overlap_seconds": OVERLAP_SECONDS,
    "posterior": "sample",
    "posterior_seed": POSTERIOR_SEED,
    "format": FORMAT,
}
COLUMNS = (
    "model",
    "run",
    "path",
    "entry",
    "latents",
    "frames",
    "seconds",
    "codes",
    "caption",
    "caption_entry",
    "caption_states",
    "lyrics_entry",
    "lyrics_states",
    "use_genre",
    "instrumental",
    "language",
    "trigger",
    "tag_position",
    "planner_labels",
)


class Strings(BatchEncoder):
    """Caption and lyrics strings, each (kind, string), into their encodings, one at a time."""

    max_items = 1

    def encode(self, model: Callable[[], Any], decoded: list) -> list[Writer]:
        from tunesmith.families.ace_step import model as ace

        [(kind, string)] = decoded
        encoder = ace.encode_caption if kind == "caption" else ace.encode_lyrics
        return [functools.partial(_write_text, string, encoder(model(), string))]


class Songs(ItemEncoder):
    """Audio files into latents and audio codes, and each run's caption and lyrics strings into
    their encodings, for one base model."""

    family, media, columns = FAMILY, "audio", COLUMNS
    places = ("latents", "caption_states", "lyrics_states")
    by_path, per_run, texts_counted = True, True, "texts"
    text_encoder = Strings()
    max_items = 1  # one at a time: the posterior's draw is the file's own

    def __init__(self, base_model: Path, request) -> None:
        super().__init__(base_model, request)
        report = check_base_model(self.base_model)
        self.codes = report.codes
        if not report.codes:
            self.notes.append(report.codes_message)  # once per base model
        self.vae_fp = self.fingerprint("vae")
        self.tokenizer_fp = self.fingerprint("audio_tokenizer") if self.codes else None
        self.text_fp = content_key(
            text_encoder=self.fingerprint("text_encoder"),
            tokenizer=self.fingerprint("tokenizer"),
        )
        self.target = request.out / "encoded" / f"{self.base_model.name}-{self.vae_fp[:8]}"
        self.stated = captions.dataset_genre_ratio(self.folder)

    def load(self, device: str):
        """The pipeline; the encoders run in float32 whatever the placement's dtype, as
        ACE-Step 1.5 and Side-Step preprocess."""
        import torch

        from tunesmith.families.ace_step import model

        return model.load_pipeline(self.base_model, torch.float32, device)

    def key(self, item: dict, setting: Hashable) -> str:
        return content_key(
            stage="encoded",
            family=FAMILY,
            version=STAGE_VERSION,
            content=item["sha256"],
            vae=self.vae_fp,
            audio_tokenizer=self.tokenizer_fp,
            params=PARAMS,
            placement=self.placement.as_dict(),
        )

    def shape(self, unit: Unit) -> Hashable:
        return unit.key

    def decode(self, model: Callable[[], Any], unit: Unit):
        from tunesmith.families.ace_step import model as ace

        rel = unit.item["path"]
        path = self.folder / rel
        audio = ace.load_audio(path, model().vae, rel)
        ensure_unchanged(path, unit.item["sha256"], rel)
        return audio

    def encode(self, model: Callable[[], Any], decoded: list) -> list[Writer]:
        from tunesmith.families.ace_step import model as ace

        [audio], pipe = decoded, model()
        latents = ace.encode_latents(pipe.vae, audio.samples, "sample", POSTERIOR_SEED)
        codes = ace.audio_codes(pipe, latents) if self.codes else None
        return [functools.partial(_write_item, latents, codes, list(audio.warnings))]

    def prepare(self, run, units: list[tuple[Unit, Any]], skipped: list[Skipped]) -> dict:
        """Each item's texts in `run` (`captions.item_texts`); an item without them skipped."""
        items = [unit.item for unit, _ in units]
        choice = captions.genre_choice(items, run, self.stated)
        found = {}
        for unit, value in units:
            rel = unit.item["path"]
            unreadable = captions.unreadable_lyrics(self.folder, rel)
            try:
                found[rel] = captions.item_texts(
                    unit.item, run, value["frames"], choice[rel], unreadable
                )
            except captions.ItemError as exc:
                skipped.append(Skipped(rel, f"run {run.name}: {exc}"))
        return found

    def texts(self, unit: Unit, value: Any, prepared: Any) -> dict[str, Hashable]:
        return {
            "caption": ("caption", prepared.caption_string),
            "lyrics": ("lyrics", prepared.lyrics_string),
        }

    def text_key(self, text: Hashable) -> str:
        kind, string = text
        return content_key(
            stage="text",
            family=FAMILY,
            version=STAGE_VERSION,
            kind=kind,
            text=string,
            encoders=self.text_fp,
            placement=self.placement.as_dict(),
        )

    def publish(self, unit: Unit, value: Any, prepared: dict) -> str:
        """The item as `<stem>.safetensors` + `<stem>.json` under the model's output folder:
        `model.read_item` reads them; the sidecar adds each run's texts and the warnings."""
        rel = unit.item["path"]
        stem = self.target / Path(rel).with_suffix("")
        self.store.publish(unit.key, "item.safetensors", stem.with_suffix(".safetensors"))
        path = self.store.path(unit.key) / "item.json"
        sidecar = json.loads(path.read_text(encoding="utf-8"))
        texts = {run: asdict(texts) for run, texts in prepared.items()}
        sidecar.update(path=rel, texts=texts, warnings=value["warnings"])
        data = json_bytes(sidecar)
        write_if_changed(stem.with_suffix(".json"), data)
        return data.decode()

    def row(self, unit: Unit, value: Any, run, prepared: Any, texts: dict[str, str]) -> dict:
        caption_key, lyrics_key = texts["caption"], texts["lyrics"]
        t, store = prepared, self.store
        return {
            "model": self.base_model.name,
            "run": run.name,
            "path": unit.item["path"],
            "entry": unit.key,
            "latents": str(store.path(unit.key) / "item.safetensors"),
            "frames": value["frames"],
            "seconds": value["seconds"],
            "codes": value["codes"],
            "caption": t.caption,
            "caption_entry": caption_key,
            "caption_states": str(store.path(caption_key) / "text.safetensors"),
            "lyrics_entry": lyrics_key,
            "lyrics_states": str(store.path(lyrics_key) / "text.safetensors"),
            "use_genre": t.use_genre,
            "instrumental": t.instrumental,
            "language": t.language,
            "trigger": t.trigger,
            "tag_position": t.tag_position,
            "planner_labels": _planner_labels(unit.item, t, value),
        }


def _write_item(latents: torch.Tensor, codes: torch.Tensor | None, warnings: list, tmp: Path):
    """One file's entry: item.safetensors, item.json (its layout), value.json."""
    import torch

    tensors = {"latents": latents}
    if codes is not None:
        tensors["audio_codes"] = codes.to(torch.int64).contiguous()
    (tmp / "item.safetensors").write_bytes(safetensors_bytes(tensors))
    frames = int(latents.shape[0])
    sidecar = {
        "format": FORMAT,
        "family": FAMILY,
        "sample_rate": SAMPLE_RATE,
        "latent_shape": list(latents.shape),
        "audio_codes": None if codes is None else int(codes.shape[0]),
    }
    (tmp / "item.json").write_text(canonical_json(sidecar), encoding="utf-8")
    value = {
        "frames": frames,
        "seconds": round(frames / LATENT_RATE, 3),
        "codes": sidecar["audio_codes"],
        "warnings": warnings,
    }
    (tmp / "value.json").write_text(canonical_json(value), encoding="utf-8")


def _write_text(string: str, encoding, tmp: Path) -> None:
    """One caption or lyrics string's entry: its hidden states, the text and token counts in
    the metadata."""
    metadata = {
        "text": string,
        "tokens": str(encoding.tokens),
        "cut_tokens": str(encoding.cut_tokens),
    }
    data = safetensors_bytes({"hidden_states": encoding.hidden_states}, metadata)
    (tmp / "text.safetensors").write_bytes(data)


def _planner_labels(item: dict, texts, meta: dict) -> str:
    """What the planner's answer states about an item (its `<think>` metas) and its lyrics,
    as JSON: the run's caption (trigger applied), the labels' facts, the encoded duration."""
    tags = json.loads(item.get("tags") or "{}") if isinstance(item.get("tags"), str) else {}
    labels = {
        "caption": texts.caption,
        "lyrics": "" if texts.instrumental else captions._text(item.get("lyrics")),
        "bpm": captions._number(item.get("bpm")),
        "keyscale": captions._text(item.get("keyscale")) or None,
        "timesignature": captions._text(item.get("timesignature")) or None,
        "genres": captions._text(tags.get("genre")) or None,
        "language": texts.language,
        "duration": meta["seconds"],
    }
    return canonical_json(labels)


def load_item(row: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(latents [T, C], caption states [L, C'], lyrics embeddings [L', C']) of a table row."""
    from safetensors.torch import load_file

    latents = load_file(row["latents"])["latents"]
    caption = load_file(row["caption_states"])["hidden_states"]
    lyrics = load_file(row["lyrics_states"])["hidden_states"]
    return latents, caption, lyrics
