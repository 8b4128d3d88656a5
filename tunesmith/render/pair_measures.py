"""The quality measures of each A/B pair's own two renders: which side each one prefers.

The adapters stage measures the renders the training loop drew at every validation, averaged
over the demos (`tunesmith.quality.run`). The audition page's pairs are the renders stage's
(the base model, and the kept adapter at the demo's strength), so they are measured here, one
render at a time, with the same embedding models and references: `prompt`, the render's
similarity to its prompt; `style` (and `style_dino` with DINOv2), its mean similarity to the
run's references (the items `quality.json` lists: the held-out ones, or the training items
where none is held out). The Fréchet distance is a measure of a set and has no value for
one render, so a pair shows none.

A run is measured here only where the adapters stage measured it (its `quality.json` is
there): a dataset whose measures are turned off, or whose embedding model is missing, loads
nothing. The result is `<run folder>/quality-pairs.json`, keyed by what it read (the models'
fingerprints, the renders' and the references' bytes, the prompts): a build that changed none
of them reads it back and loads no model. The references' embeddings come from the store,
where the adapters stage left them (`ItemRows`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tunesmith.dataset.manifest import file_hashes
from tunesmith.dataset.metrics import read_metrics
from tunesmith.quality.embedders import load_audio, load_picture
from tunesmith.quality.measures import paired_similarity, similarity
from tunesmith.quality.run import MAIN, QUALITY_FILE, ItemRows, Skip, embedders_for
from tunesmith.store import content_key, sha256_file
from tunesmith.store.atomic import atomic_write_text

VERSION = 1
PAIRS_FILE = "quality-pairs.json"  # in the run's folder, beside quality.json
SIDES = ("base", "adapter")
STYLE = {"clap": "style", "clip": "style", "dino": "style_dino"}  # the measure each model gives


class PairMeasures:
    """The pairs' measures of a build's runs on one dataset: `[metrics]` read once, the
    embedding models checked once per media and loaded only where something is measured."""

    def __init__(
        self,
        dataset_folder: Path,
        hash_cache: Path,
        models_root: Path,
        store: Path,
        log: Callable[[str], None] = print,
    ) -> None:
        self.dataset_folder, self.hash_cache = dataset_folder, hash_cache
        self.models_root, self.store, self.log = models_root, store, log
        self.embedders: dict[str, dict | Skip] = {}

    def run(
        self,
        name: str,
        media: str,
        run_dir: Path,
        pairs: dict[str, dict[str, Path]],
        prompts: dict[str, str],
    ) -> dict[str, dict[str, dict[str, float]]]:
        """{pair id: {measure: {"base": value, "adapter": value}}} for `pairs` (id → side →
        the render's audio or picture), `prompts` their texts; {} where the run was not
        measured."""
        quality = _read(run_dir / QUALITY_FILE)
        if not quality.get("steps") or not pairs:
            return {}
        embedders = self._embedders(media)
        if isinstance(embedders, Skip):
            return {}
        ids = sorted(pairs)
        references = sorted(quality.get("references") or [])
        try:
            digests = file_hashes(self.dataset_folder, self.hash_cache, references)
        except OSError as exc:  # the dataset changed since the run was measured
            self.log(f"{name}: pairs not measured: a reference is gone ({exc})")
            return {}
        key = content_key(
            version=VERSION,
            models={kind: e.fingerprint for kind, e in sorted(embedders.items())},
            renders={f"{i}/{s}": sha256_file(pairs[i][s]) for i in ids for s in SIDES},
            prompts={i: prompts[i] for i in ids},
            references=digests,
        )
        path = run_dir / PAIRS_FILE
        saved = _read(path)
        if saved.get("key") == key:
            return saved["pairs"]
        measured = self._measure(media, embedders, ids, pairs, prompts, references, digests)
        atomic_write_text(
            path, json.dumps({"key": key, "pairs": measured}, indent=1, sort_keys=True) + "\n"
        )
        self.log(f"{name}: measured {len(ids)} audition pair(s) with {', '.join(embedders)}")
        return measured

    def _embedders(self, media: str) -> dict | Skip:
        if media not in self.embedders:
            chosen = read_metrics(self.dataset_folder).for_media(media)
            cache = self.store / "fingerprints.json"
            self.embedders[media] = embedders_for(media, chosen, self.models_root, cache)
        return self.embedders[media]

    def _measure(self, media, embedders, ids, pairs, prompts, references, digests) -> dict:
        read = load_audio if media == "audio" else load_picture
        main = MAIN[media]
        texts = embedders[main].text([prompts[i] for i in ids])
        files = [self.dataset_folder / p for p in references]
        measured: dict[str, dict[str, dict[str, float]]] = {i: {} for i in ids}
        for kind, embedder in sorted(embedders.items()):
            embed = _embed(embedder, media)
            rows = {side: embed([read(pairs[i][side]) for i in ids]) for side in SIDES}
            if references:
                kept = ItemRows(self.store, kind, embedder.fingerprint)
                refs = kept.rows(files, [digests[p] for p in references], read, embed)
            for side in SIDES:
                if kind == main:
                    values = paired_similarity(rows[side], texts)
                    for i, value in zip(ids, values, strict=True):
                        measured[i].setdefault("prompt", {})[side] = float(value)
                if references:
                    values = similarity(rows[side], refs).mean(axis=1)
                    for i, value in zip(ids, values, strict=True):
                        measured[i].setdefault(STYLE[kind], {})[side] = float(value)
        return measured


def _embed(embedder, media: str) -> Callable[[list], np.ndarray]:
    """Rows of pictures, or of (samples, rate) clips: one call per clip, since clips may
    differ in rate (a 44.1 kHz item beside a 48 kHz render), as the adapters stage embeds
    them."""
    if media == "image":
        return embedder.images

    def audio(clips: list) -> np.ndarray:
        return np.concatenate([embedder.audio([samples], rate) for samples, rate in clips])

    return audio


def _read(path: Path) -> dict:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # not there yet, or cut short by a crash: measured again
        return {}
    return document if isinstance(document, dict) else {}
