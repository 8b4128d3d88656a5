"""Measured quality per checkpoint: a run's demo renders against its prompts and its dataset.

The training loop renders the run's demos (same seeds) at every validation, as
`samples/<demo>-<step>.<wav|png>`; step 0 is the base model (every adapter starts at zero).
After training, the adapters stage measures every step's renders with the dataset's embedding
models (`[metrics]`, `tunesmith.quality.settings`):

- `prompt`: the similarity of each render to its own prompt (CLAP text–audio, CLIP
  text–image), averaged over the demos: is the prompt still followed;
- `style`: the similarity of each render to each held-out item (CLAP audio–audio, CLIP
  image–image; `style_dino` with DINOv2 where one is named), averaged: does it sound or look
  like the user's material it was not trained on (the training items where none is held out,
  as the validation loss does);
- `frechet`: the Fréchet distance between the renders' embeddings and all the dataset's items'
  (lower is closer), beside `floor`, the dataset's split-half distance to itself, which a
  render set is not expected to beat.

Every step is measured against the same references, so two checkpoints differ by what the
adapter learned; the base model's numbers (step 0) are the bar. The result is
`<run folder>/quality.json`, keyed by what it measured (the embedding models' fingerprints,
the renders' and the items' bytes, the prompts, the held-out choice): a build that changed
none of them reads it back and computes nothing. Each measured step is also a `quality` line
in the run's `events.jsonl`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tunesmith.quality.measures import frechet, paired_similarity, similarity, split_half_floor
from tunesmith.quality.settings import PUBLISHED, model_folder
from tunesmith.store import content_key, sha256_file
from tunesmith.store.atomic import atomic_write_text
from tunesmith.train.holdout import BY_PATH_HASH, LAST_OF_SORTED, split_holdout

VERSION = 1
QUALITY_FILE = "quality.json"
SAMPLE = re.compile(r"(?P<demo>\d+)-(?P<step>\d+)\.(?:wav|png)")
MEASURES = ("prompt", "style", "style_dino", "frechet")
HIGHER_IS_BETTER = {"prompt": True, "style": True, "style_dino": True, "frechet": False}
# Which items a family holds out (its trainer's policy, `tunesmith.train.holdout`).
HOLDOUT_POLICY = {"sdxl": LAST_OF_SORTED}


@dataclass(frozen=True)
class Skip:
    """Nothing measured, and the one line that says why."""

    reason: str


class Lazy:
    """An embedding model named by its folder, loaded on first use: a build whose measures
    are cached reads the folder's fingerprint and never imports the model."""

    def __init__(self, folder: Path, kind: str) -> None:
        from tunesmith.store.fingerprints import model_fingerprint

        self.folder, self.kind = folder, kind
        self.fingerprint = model_fingerprint(folder)
        self._model = None

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        if self._model is None:
            from tunesmith.quality import embedders

            classes = {"clap": embedders.ClapEmbedder, "clip": embedders.ClipEmbedder}
            self._model = {**classes, "dino": embedders.DinoEmbedder}[self.kind](self.folder)
        return getattr(self._model, name)


def embedders_for(media: str, chosen: dict[str, str], models_root: Path) -> dict | Skip:
    """The embedding models `chosen` names (kind → folder name), ready to load; a `Skip`
    saying what to put where when the main one is missing or unusable (an optional DINOv2
    that is missing is left out)."""
    from tunesmith.quality.embedders import check_folder

    main = "clap" if media == "audio" else "clip"
    if main not in chosen:
        return Skip("quality not measured: [metrics] enabled = false")
    ready = {}
    for kind, name in chosen.items():
        folder = model_folder(name, models_root)
        problems = check_folder(folder, kind)
        if problems:
            if kind != main:  # the optional second opinion: measured without it
                continue
            return Skip(
                f"quality not measured: no usable {kind.upper()} model at {folder} "
                f"({'; '.join(problems)}); put a {kind.upper()} folder in the transformers "
                f"layout there ({PUBLISHED[kind]}), or name one in tunesmith.toml's "
                f'[metrics] {kind} = "..."'
            )
        ready[kind] = Lazy(folder, kind)
    return ready


def measure_run(
    run,
    family_name: str,
    media: str,
    run_dir: Path,
    dataset_folder: Path,
    item_paths: list[str],
    embedders: dict,
    log: Callable[[str], None] = print,
    store: Path | None = None,
) -> dict[str, Any]:
    """The run's quality per sampled step (cached in `run_dir/quality.json`); the items'
    embeddings are kept under `store` (`ItemRows`), once per item's bytes and model."""
    samples = _samples(run_dir / "samples")
    prompts = [demo.prompt for demo in run.demos]
    split = split_holdout(
        sorted(item_paths),
        run.train.holdout,
        path=lambda p: p,
        policy=HOLDOUT_POLICY.get(family_name, BY_PATH_HASH),
    )
    items = [dataset_folder / p for p in sorted(item_paths)]
    key = content_key(
        version=VERSION,
        models={kind: e.fingerprint for kind, e in sorted(embedders.items())},
        samples={f"{d}-{s}": sha256_file(p) for (d, s), p in sorted(samples.items())},
        items={str(p.relative_to(dataset_folder)): sha256_file(p) for p in items},
        references=sorted(split.validation),
        prompts=prompts,
    )
    path = run_dir / QUALITY_FILE
    if path.is_file():
        saved = json.loads(path.read_text(encoding="utf-8"))
        if saved.get("key") == key:
            return saved
    steps = sorted({step for _, step in samples})
    if not steps:
        return {"key": key, "steps": [], "floor": None, "references": [], "note": "no renders"}
    read = _read_audio if media == "audio" else _read_picture
    main = "clap" if media == "audio" else "clip"
    held = [i for i, p in enumerate(sorted(item_paths)) if p in set(split.validation)]
    embed = {kind: _embed_media(e, media) for kind, e in embedders.items()}
    rows_of = {
        kind: ItemRows(store, kind, embedders[kind].fingerprint).rows(items, read, embed[kind])
        for kind in embed
    }
    item_rows = rows_of[main]
    references = {kind: rows[held] for kind, rows in rows_of.items()}
    texts = embedders[main].text(prompts) if prompts else np.zeros((0, item_rows.shape[1]))
    rows = []
    for step in steps:
        demos = sorted(d for d, s in samples if s == step)
        rendered = [read(samples[(d, step)]) for d in demos]
        renders = {kind: f(rendered) for kind, f in embed.items()}
        row: dict[str, Any] = {"step": step}
        row["prompt"] = float(paired_similarity(renders[main], texts[demos]).mean())
        row["style"] = float(similarity(renders[main], references[main]).mean())
        if "dino" in renders:
            row["style_dino"] = float(similarity(renders["dino"], references["dino"]).mean())
        row["frechet"] = frechet(renders[main], item_rows)
        rows.append(row)
    result = {
        "key": key,
        "version": VERSION,
        "models": {kind: e.fingerprint for kind, e in sorted(embedders.items())},
        "references": sorted(split.validation),
        "on_training_items": split.on_training_items,
        "floor": split_half_floor(item_rows),
        "steps": rows,
    }
    atomic_write_text(path, json.dumps(result, indent=1, sort_keys=True) + "\n")
    _record_events(run_dir / "events.jsonl", rows)
    log(f"{run.name}: quality measured at {len(rows)} step(s) with {', '.join(embedders)}")
    return result


def verdict(quality: dict[str, Any], best_step: int) -> dict[str, Any]:
    """The kept adapter's numbers against the base model's (step 0): which measures it beats.
    `learned` is False when it beats the base on none of them."""
    by_step = {row["step"]: row for row in quality.get("steps", [])}
    base, best = by_step.get(0), by_step.get(best_step)
    if base is None or best is None or best_step == 0:
        return {"best_step": best_step, "beats": [], "learned": None if base is None else False}
    beats = [
        m
        for m in MEASURES
        if m in base and (best[m] > base[m] if HIGHER_IS_BETTER[m] else best[m] < base[m])
    ]
    return {"best_step": best_step, "beats": beats, "learned": bool(beats)}


def summary_line(measured: dict[str, Any]) -> str:
    """One line for the build's summary: the kept adapter's measures against the base's, or
    why nothing was measured; "" where the run has no renders."""
    if not measured:
        return ""
    if "skipped" in measured:
        return measured["skipped"]
    judged = measured.get("verdict") or {}
    by_step = {row["step"]: row for row in measured.get("steps", [])}
    base, best = by_step.get(0), by_step.get(judged.get("best_step"))
    if base is None or best is None:
        return "quality: no renders measured"
    parts = [f"{m} {best[m]:.3f} (base {base[m]:.3f})" for m in MEASURES if m in best and m in base]
    floor = measured.get("floor")
    line = f"quality at step {best['step']}: " + ", ".join(parts)
    line += f"; Fréchet floor {floor:.3f}" if floor is not None else ""
    if judged.get("learned") is False:
        line += "; WARNING: beats the base model on no measure"
    return line


def has_renders(run_dir: Path) -> bool:
    """Whether the run's loop rendered demos to measure (a run with no demos renders none)."""
    return bool(_samples(run_dir / "samples"))


class ItemRows:
    """The embeddings of a dataset's items, one `.safetensors` a file's bytes and model under
    `<store>/embeddings/<kind>-<model fingerprint>/<sha256 of the file>.safetensors`: a run
    trained again, another run of the dataset or a dataset sharing the file embeds nothing
    again. Without a store, nothing is kept."""

    def __init__(self, store: Path | None, kind: str, fingerprint: str) -> None:
        self.folder = store / "embeddings" / f"{kind}-{fingerprint[:16]}" if store else None

    def rows(self, paths: list[Path], read, embed) -> np.ndarray:
        from safetensors.numpy import load_file

        from tunesmith.store.tensors import write_safetensors

        digests = [sha256_file(p) for p in paths]
        found: dict[int, np.ndarray] = {}
        if self.folder is not None:
            for i, digest in enumerate(digests):
                entry = self.folder / f"{digest}.safetensors"
                if entry.is_file():
                    found[i] = load_file(entry)["row"]
        missing = [i for i in range(len(paths)) if i not in found]
        if missing:
            computed = embed([read(paths[i]) for i in missing])
            for i, row in zip(missing, computed, strict=True):
                found[i] = row
                if self.folder is not None:
                    import torch

                    entry = self.folder / f"{digests[i]}.safetensors"
                    entry.parent.mkdir(parents=True, exist_ok=True)
                    write_safetensors(entry, {"row": torch.from_numpy(np.ascontiguousarray(row))})
        return np.stack([found[i] for i in range(len(paths))]) if paths else np.zeros((0, 0))


def _samples(folder: Path) -> dict[tuple[int, int], Path]:
    found = {}
    for path in folder.glob("*-*.*") if folder.is_dir() else ():
        match = SAMPLE.fullmatch(path.name)
        if match:
            found[(int(match["demo"]), int(match["step"]))] = path
    return found


def _read_audio(path: Path):
    from tunesmith.quality.embedders import load_audio

    return load_audio(path)


def _read_picture(path: Path):
    from tunesmith.quality.embedders import load_picture

    return load_picture(path)


def _embed_media(embedder, media: str) -> Callable[[list], np.ndarray]:
    if media == "image":
        return embedder.images

    def audio(clips: list) -> np.ndarray:
        # Clips may differ in rate (a user's 44.1 kHz file, a 48 kHz render): one call each rate
        rows = [embedder.audio([samples], rate) for samples, rate in clips]
        return np.concatenate(rows) if rows else np.zeros((0, 0))

    return audio


def _record_events(events: Path, rows: list[dict[str, Any]]) -> None:
    """The run's history gets one `quality` line a measured step; lines of an earlier
    measurement are replaced, so a history holds one measurement."""
    kept = []
    if events.is_file():
        for line in events.read_text(encoding="utf-8").splitlines():
            try:
                if json.loads(line).get("event") == "quality":
                    continue
            except ValueError:
                pass
            kept.append(line)
    kept += [json.dumps({"event": "quality", **row}) for row in rows]
    atomic_write_text(events, "\n".join(kept) + "\n")
