"""Stage `encoded` for ACE-Step 1.5: per file its latents and audio codes, per text its encoding.

Two kinds of store entries, each keyed by everything that determines its bytes:

    item   item.safetensors   latents [T, C] float32 (25 Hz, frames first) and, where the
                              checkpoint has its audio tokenizer, audio_codes [ceil(T/5)] int64
           item.json          the layout `encode.read_item` reads (shape, rate, code count)
           value.json         frames, seconds, warnings (a file cut at 600 s)
           key: the file's content hash, the VAE's and the audio tokenizer's fingerprints
           (None without one), the encoding parameters, the placement
    text   text.safetensors   hidden_states [L, C] float32, the text and its token counts in
                              the metadata (`encode.write_text`'s layout)
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

With `workers` > 1 (the compute resource's `encode_workers`) the missing files are dealt out
over that many processes (the copies of one file, one entry, to one process), each loading the
model once and writing its entries into the store; then, once every file's length is known,
the strings the store lacks go to the same processes. Files and strings are encoded one at a
time, so an entry is the same bytes in any process. The stage's own process loads no model.
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from tunesmith.dataset.workers import deal, kept, pool, process_device
from tunesmith.families.ace_step import captions
from tunesmith.families.ace_step.checkpoint import (
    CHUNK_SECONDS,
    FAMILY,
    FORMAT,
    LATENT_RATE,
    OVERLAP_SECONDS,
    SAMPLE_RATE,
    check_checkpoint,
)
from tunesmith.media import audio as media_audio
from tunesmith.media.sniff import MediaError, ensure_unchanged
from tunesmith.report import Skipped, StageResult
from tunesmith.store import DamagedEntry, Store, canonical_json, content_key
from tunesmith.store.atomic import json_bytes, write_if_changed
from tunesmith.store.fingerprints import model_fingerprint
from tunesmith.store.tensors import safetensors_bytes

if TYPE_CHECKING:
    import torch

STAGE_VERSION = 1
POSTERIOR_SEED = 0  # the one draw from the VAE's posterior (encode.encode_latents)
PARAMS = {
    "sample_rate": SAMPLE_RATE,
    "max_seconds": media_audio.MAX_SECONDS,
    "chunk_seconds": CHUNK_SECONDS,
    "overlap_seconds": OVERLAP_SECONDS,
    "posterior": "sample",
    "posterior_seed": POSTERIOR_SEED,
    "format": FORMAT,
}
COLUMNS = [
    "model", "run", "path", "entry", "latents", "frames", "seconds", "codes", "caption",
    "caption_entry", "caption_states", "lyrics_entry", "lyrics_states", "use_genre",
    "instrumental", "language", "trigger", "tag_position", "planner_labels",
]  # fmt: skip


@dataclass
class Encoded:
    frame: pd.DataFrame  # one row per base model, run and encoded item (COLUMNS)
    result: StageResult
    keys: list[str]  # store entries used (gc roots)


@dataclass
class _Counts:
    cached: int = 0
    computed: int = 0
    texts_cached: int = 0
    texts_computed: int = 0


def build_encoded(request) -> Encoded:
    """Encode the audio items of `request.labels` for every base model and run."""
    start = time.perf_counter()
    r = request
    items = r.labels[r.labels["kind"] == "audio"].sort_values("path").to_dict("records")
    rows, keys, skipped, notes, counts = [], [], [], [], _Counts()
    stated = captions.dataset_genre_ratio(r.folder)
    for checkpoint in r.base_models:
        try:
            report = check_checkpoint(checkpoint)
        except ValueError as exc:
            skipped += [Skipped(item["path"], str(exc)) for item in items]
            continue
        if not report.codes:
            notes.append(report.codes_message)  # once per base model
        with pool(r.workers) as processes:  # None for one worker: all of it here
            base = _Base(checkpoint, report.codes, r, counts, processes)
            encoded = base.items(items, skipped, notes)
            usable = [i for i in items if i["path"] in encoded]
            planned = [(run, base.run_texts(run, usable, encoded, stated, skipped))
                       for run in r.runs]  # fmt: skip
            base.share_texts([texts for _, pairs in planned for _, texts in pairs])
        keys += [base.keys[path] for path in encoded]
        for run, pairs in planned:
            rows += base.run_rows(run, pairs, encoded)
        base.publish(usable, encoded)
        keys += list(base.text_keys.values())
    frame = pd.DataFrame(rows, columns=COLUMNS)
    result = StageResult(
        stage="encoded",
        data_version=content_key(
            stage="encoded",
            family=FAMILY,
            keys=sorted(set(keys)),
            rows=frame.to_dict("records"),
        ),  # fmt: skip
        items=len(items) * len(r.base_models),
        cached=counts.cached,
        computed=counts.computed,
        skipped=skipped,
        seconds=time.perf_counter() - start,
        extra={
            "texts_cached": counts.texts_cached,
            "texts_computed": counts.texts_computed,
            **({"warnings": "; ".join(notes)} if notes else {}),
        },  # fmt: skip
    )
    return Encoded(frame, result, sorted(set(keys)))


class _Base:
    """One base model's entries: its fingerprints, its pipeline (loaded on first use only), the
    worker `processes` (`workers.pool`; None: none)."""

    def __init__(self, checkpoint: Path, codes: bool, request, counts: _Counts, processes) -> None:
        cache, self.request, self.counts = request.fingerprint_cache, request, counts
        self.processes = processes
        self.checkpoint, self.codes = Path(checkpoint), codes
        self.vae_fp = model_fingerprint(self.checkpoint / "vae", cache)
        self.tokenizer_fp = (
            model_fingerprint(self.checkpoint / "audio_tokenizer", cache) if codes else None
        )
        self.text_fp = content_key(
            text_encoder=model_fingerprint(self.checkpoint / "text_encoder", cache),
            tokenizer=model_fingerprint(self.checkpoint / "tokenizer", cache),
        )
        self.pipe = _loader(self.checkpoint, request.placement.device)
        self.target = request.out / "encoded" / f"{self.checkpoint.name}-{self.vae_fp[:8]}"
        self.keys: dict[str, str] = {}  # path → item entry
        self.text_keys: dict[tuple[str, str], str] = {}  # (kind, string) → text entry
        self.texts: dict[str, dict[str, dict]] = {}  # path → run → its texts
        self.fresh_texts: set[str] = set()  # text entries the worker processes encoded

    def items(self, items: list[dict], skipped: list, notes: list) -> dict[str, dict]:
        """Path → the item entry's value, for every item that encodes (the missing ones on
        several processes where `workers` > 1)."""
        store, folder = self.request.store, self.request.folder
        keys = {item["path"]: self._item_key(item) for item in items}
        failed, fresh = self._share_items(items, keys) if self.processes else ({}, set())
        done = {}
        for item in items:
            key = keys[item["path"]]
            if item["path"] in failed:
                skipped.append(Skipped(item["path"], failed[item["path"]]))
                continue
            encode_item = functools.partial(_encode_item, self.pipe, folder, item, self.codes)
            try:
                built = store.make(key, encode_item) or item["path"] in fresh
            except MediaError as exc:
                skipped.append(Skipped(item["path"], str(exc)))
                continue
            self.counts.computed += built
            self.counts.cached += not built
            meta = store.read_json(key)
            if meta is None:
                raise DamagedEntry(f"{store.path(key)}: damaged; it is computed on the next run")
            notes += meta["warnings"]  # they name the file
            self.keys[item["path"]], done[item["path"]] = key, meta
        return done

    def _item_key(self, item: dict) -> str:
        return content_key(stage="encoded", family=FAMILY, version=STAGE_VERSION,
                           content=item["sha256"], vae=self.vae_fp,
                           audio_tokenizer=self.tokenizer_fp, params=PARAMS,
                           placement=self.request.placement.as_dict())  # fmt: skip

    def _share_items(self, items: list[dict], keys: dict[str, str]):
        """The items the store lacks encoded on up to `workers` processes, the copies of one
        file (one entry) in one process, as one process meets them: (path → reason for each
        that failed, the paths encoded)."""
        r, groups = self.request, {}
        for item in items:
            groups.setdefault(keys[item["path"]], []).append(item)
        shares = deal([group for key, group in groups.items() if not r.store.has(key)], r.workers)
        tasks = [(number, share, keys, r.folder, self.checkpoint, self.codes, r.store.root,
                  r.placement.device) for number, share in enumerate(shares)]  # fmt: skip
        failed, fresh = {}, set()
        for part_failed, part_fresh in self.processes(_encode_share, tasks):
            failed.update(part_failed)
            fresh |= part_fresh
        return failed, fresh

    def run_texts(self, run, items, encoded, stated, skipped) -> list[tuple[dict, object]]:
        """(item, its texts) for each item of `run` that has its strings; the others skipped."""
        pairs = []
        choice = captions.genre_choice(items, run, stated)
        for item in items:
            rel = item["path"]
            unreadable = captions.unreadable_lyrics(self.request.folder, rel)
            try:
                texts = captions.item_texts(item, run, encoded[rel]["frames"], choice[rel],
                                            unreadable)  # fmt: skip
            except captions.ItemError as exc:
                skipped.append(Skipped(rel, f"run {run.name}: {exc}"))
                continue
            pairs.append((item, texts))
        return pairs

    def share_texts(self, texts: list) -> None:
        """The strings of `texts` the store lacks, encoded first on up to `workers` processes,
        one at a time as `_text` encodes them (nothing without processes)."""
        if not self.processes:
            return
        r, strings = self.request, {}
        for t in texts:
            for kind, string in (("caption", t.caption_string), ("lyrics", t.lyrics_string)):
                strings[(kind, string, self._text_key(kind, string))] = None
        todo = [[text] for text in strings if not r.store.has(text[2])]
        tasks = [(number, share, self.checkpoint, r.store.root, r.placement.device)
                 for number, share in enumerate(deal(todo, r.workers))]  # fmt: skip
        for fresh in self.processes(_text_share, tasks):
            self.fresh_texts |= fresh

    def run_rows(self, run, pairs: list[tuple[dict, object]], encoded) -> list[dict]:
        """One row per (item, texts) of `run`: its entries and its texts, encoded where
        missing."""
        rows = []
        for item, texts in pairs:
            meta, rel = encoded[item["path"]], item["path"]
            caption_key = self._text("caption", texts.caption_string)
            lyrics_key = self._text("lyrics", texts.lyrics_string)
            self.texts.setdefault(rel, {})[run.name] = asdict(texts)
            row = self._row(run.name, rel, meta, texts, caption_key, lyrics_key)
            rows.append({**row, "planner_labels": _planner_labels(item, texts, meta)})
        return rows

    def _row(self, run: str, rel: str, meta: dict, texts, caption_key: str, lyrics_key: str):
        store, key = self.request.store, self.keys[rel]
        return {
            "model": self.checkpoint.name, "run": run, "path": rel, "entry": key,
            "latents": str(store.path(key) / "item.safetensors"), "frames": meta["frames"],
            "seconds": meta["seconds"], "codes": meta["codes"], "caption": texts.caption,
            "caption_entry": caption_key,
            "caption_states": str(store.path(caption_key) / "text.safetensors"),
            "lyrics_entry": lyrics_key,
            "lyrics_states": str(store.path(lyrics_key) / "text.safetensors"),
            "use_genre": texts.use_genre, "instrumental": texts.instrumental,
            "language": texts.language, "trigger": texts.trigger,
            "tag_position": texts.tag_position,
        }  # fmt: skip

    def _text_key(self, kind: str, string: str) -> str:
        return content_key(stage="text", family=FAMILY, version=STAGE_VERSION, kind=kind,
                           text=string, encoders=self.text_fp,
                           placement=self.request.placement.as_dict())  # fmt: skip

    def _text(self, kind: str, string: str) -> str:
        """The store key of one string's encoding, encoding it when missing."""
        if (kind, string) in self.text_keys:
            return self.text_keys[(kind, string)]
        key = self._text_key(kind, string)
        build = functools.partial(_encode_text, self.pipe, kind, string)
        built = self.request.store.make(key, build) or key in self.fresh_texts
        self.counts.texts_computed += built
        self.counts.texts_cached += not built
        self.text_keys[(kind, string)] = key
        return key

    def publish(self, items: list[dict], encoded: dict[str, dict]) -> None:
        """Each item as `<stem>.safetensors` + `<stem>.json` under the model's output folder:
        `encode.read_item` reads them; the sidecar adds each run's texts and the warnings."""
        store = self.request.store
        for item in items:
            key, rel = self.keys[item["path"]], item["path"]
            stem = self.target / Path(rel).with_suffix("")
            store.publish(key, "item.safetensors", stem.with_suffix(".safetensors"))
            sidecar = json.loads((store.path(key) / "item.json").read_text(encoding="utf-8"))
            sidecar.update(path=rel, texts=self.texts.get(rel, {}),
                           warnings=encoded[rel]["warnings"])  # fmt: skip
            write_if_changed(stem.with_suffix(".json"), json_bytes(sidecar))


def _loader(checkpoint: Path, device: str):
    """The pipeline, loaded on first call only: a run that finds everything in the store loads
    (and imports) nothing. The encoders run in float32 whatever the placement's dtype, as
    ACE-Step 1.5 and Side-Step preprocess."""

    def load():
        import torch

        from tunesmith.families.ace_step import model

        return model.load_pipeline(checkpoint, torch.float32, device)

    return functools.cache(load)


def _kept_loader(checkpoint: Path, device: str, number: int):
    """In a worker process: the loader of its first task (on that task's device), for all its
    tasks, so the process loads the model once."""
    return kept((__name__, checkpoint), lambda: _loader(checkpoint, process_device(device, number)))


def _encode_item(load, folder: Path, item: dict, with_codes: bool, tmp: Path) -> None:
    """Encode one file into the store's temporary folder `tmp` (`load()`: the pipeline)."""
    import torch

    from tunesmith.families.ace_step import encode

    pipe, rel = load(), item["path"]
    path = folder / rel
    audio = encode.load_audio(path, pipe.vae, rel)
    ensure_unchanged(path, item["sha256"], rel)
    latents = encode.encode_latents(pipe.vae, audio.samples, "sample", POSTERIOR_SEED)
    codes = encode.audio_codes(pipe, latents) if with_codes else None
    tensors = {"latents": latents}
    if codes is not None:
        tensors["audio_codes"] = codes.to(torch.int64).contiguous()
    (tmp / "item.safetensors").write_bytes(safetensors_bytes(tensors))
    frames = int(latents.shape[0])
    sidecar = {"format": FORMAT, "family": FAMILY,
               "sample_rate": SAMPLE_RATE, "latent_shape": list(latents.shape),
               "audio_codes": None if codes is None else int(codes.shape[0])}  # fmt: skip
    (tmp / "item.json").write_text(canonical_json(sidecar), encoding="utf-8")
    value = {"frames": frames, "seconds": round(frames / LATENT_RATE, 3),
             "codes": sidecar["audio_codes"], "warnings": list(audio.warnings)}  # fmt: skip
    (tmp / "value.json").write_text(canonical_json(value), encoding="utf-8")


def _encode_text(load, kind: str, string: str, tmp: Path) -> None:
    """Encode one caption or lyrics string into the store's temporary folder `tmp`."""
    from tunesmith.families.ace_step import encode

    encoder = encode.encode_caption if kind == "caption" else encode.encode_lyrics
    encoding = encoder(load(), string)
    metadata = {"text": string, "tokens": str(encoding.tokens),
                "cut_tokens": str(encoding.cut_tokens)}  # fmt: skip
    data = safetensors_bytes({"hidden_states": encoding.hidden_states}, metadata)
    (tmp / "text.safetensors").write_bytes(data)


def _encode_share(task) -> tuple[dict[str, str], set[str]]:
    """One process's share of the items into the store: (path → reason for each that failed,
    the paths it encoded)."""
    number, share, keys, folder, checkpoint, codes, root, device = task
    pipe, store = _kept_loader(checkpoint, device, number), Store(root)
    failed, fresh = {}, set()
    for item in share:
        build = functools.partial(_encode_item, pipe, folder, item, codes)
        try:
            if store.make(keys[item["path"]], build):
                fresh.add(item["path"])
        except MediaError as exc:
            failed[item["path"]] = str(exc)
    return failed, fresh


def _text_share(task) -> set[str]:
    """One process's share of the strings into the store: the entries it encoded."""
    number, share, checkpoint, root, device = task
    pipe, store = _kept_loader(checkpoint, device, number), Store(root)
    fresh = set()
    for kind, string, key in share:
        if store.make(key, functools.partial(_encode_text, pipe, kind, string)):
            fresh.add(key)
    return fresh


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
