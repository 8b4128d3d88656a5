"""Measured quality per checkpoint: a run's demo renders against its prompts and its dataset.

The training loop renders the run's demos (same seeds) at every validation, as
`samples/<demo>-<step>.<wav|png>`; step 0 is the base model (every adapter starts at zero).
After training, the adapters stage measures every step's renders with the dataset's embedding
models (`[metrics]`, `tunesmith.dataset.metrics`):

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
none of them reads it back and computes nothing. Each step's row is kept under a key of its
own (the same, with that step's renders only), so a step measured once is not measured again
when others are added: a run that keeps its adapter by a measure (`train.select`,
`tunesmith.quality.select`) measures each validation as it trains, and the stage then reads
them all back. Each measured step is also a `quality` line in the run's `events.jsonl`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tunesmith.dataset.manifest import file_hashes
from tunesmith.dataset.metrics import PUBLISHED, model_folder, read_metrics
from tunesmith.quality.embedders import load_audio, load_picture
from tunesmith.quality.measures import frechet, paired_similarity, similarity, split_half_floor
from tunesmith.store import content_key, sha256_file
from tunesmith.store.atomic import atomic_write_text
from tunesmith.train.config import SELECT_MEASURES, select_text
from tunesmith.train.holdout import BY_PATH_HASH, LAST_OF_SORTED, split_holdout

VERSION = 2  # 2: each step's row keyed on its own
QUALITY_FILE = "quality.json"
SAMPLE = re.compile(r"(?P<demo>\d+)-(?P<step>\d+)\.(?:wav|png)")
MEASURES = SELECT_MEASURES  # prompt, style, style_dino, frechet
HIGHER_IS_BETTER = {"prompt": True, "style": True, "style_dino": True, "frechet": False}
# Which items a family holds out (its trainer's policy, `tunesmith.train.holdout`).
HOLDOUT_POLICY = {"sdxl": LAST_OF_SORTED}
MAIN = {"audio": "clap", "image": "clip"}  # the model that measures each media
BOOKKEEPING = ("base", "step_keys", "recorded")  # quality.json's own, not the report's


@dataclass(frozen=True)
class Skip:
    """Nothing measured, and the one line that says why."""

    reason: str


def embedders_for(
    media: str, chosen: dict[str, str], models_root: Path, fingerprint_cache: Path | None = None
) -> dict | Skip:
    """The embedding models `chosen` names (kind → folder name), checked and not yet loaded;
    a `Skip` saying what to put where when the main one is missing or unusable (an optional
    DINOv2 that is missing is left out)."""
    from tunesmith.quality.embedders import ClapEmbedder, ClipEmbedder, DinoEmbedder

    classes = {"clap": ClapEmbedder, "clip": ClipEmbedder, "dino": DinoEmbedder}
    main = MAIN[media]
    if main not in chosen:
        return Skip("quality not measured: [metrics] enabled = false")
    ready = {}
    for kind, name in chosen.items():
        folder = model_folder(name, models_root)
        try:
            ready[kind] = classes[kind](folder, fingerprint_cache=fingerprint_cache)
        except ValueError as exc:  # the folder's problems, a line each
            if kind != main:  # the optional second opinion: measured without it
                continue
            first, *problems = str(exc).splitlines()
            return Skip(
                f"quality not measured: {first.rstrip(':')} "
                f"({'; '.join(p.strip(' -') for p in problems)}); put a {kind.upper()} folder "
                f"in the transformers layout there ({PUBLISHED[kind]}), or name one in "
                f'tunesmith.toml\'s [metrics] {kind} = "..."'
            )
    return ready


class RunMeasures:
    """The measures of a build's runs on one dataset: its `[metrics]` read once, its
    embedding models checked once per media (and loaded only where a run is measured), its
    items' hashes those the manifest stage remembered in `hash_cache` (`file_hashes`)."""

    def __init__(
        self,
        dataset_folder: Path,
        hash_cache: Path,
        models_root: Path,
        store: Path,
        log: Callable[[str], None],
        warn: Callable[[str], None],
    ) -> None:
        self.dataset_folder, self.hash_cache = dataset_folder, hash_cache
        self.models_root, self.store, self.log, self.warn = models_root, store, log, warn
        self.settings = read_metrics(dataset_folder)  # checked with the plan: it parses
        self.embedders: dict[str, dict | Skip] = {}

    def embedders_of(self, media: str) -> dict | Skip:
        """The embedding models of `media` (checked once, not loaded), or why there are none."""
        if media not in self.embedders:
            chosen = self.settings.for_media(media)
            cache = self.store / "fingerprints.json"
            self.embedders[media] = embedders_for(media, chosen, self.models_root, cache)
        return self.embedders[media]

    def judges(self, run, family) -> dict[str, str] | None:
        """kind → fingerprint of the models a run that keeps its adapter by a measure is
        judged with (they are in its key, `tunesmith.train.stage.plan`); None where it keeps
        by the loss. Call after `select_refusal` says ""."""
        if run.train.select == "loss":
            return None
        return {kind: e.fingerprint for kind, e in sorted(self.embedders_of(family.media).items())}

    def select_refusal(self, run, family) -> str:
        """Why a run that keeps its adapter by a measure (`train.select`) cannot train: its
        embedding model is missing or unusable; "" where it can (or keeps by the loss)."""
        if run.train.select == "loss":
            return ""
        embedders = self.embedders_of(family.media)
        if not isinstance(embedders, Skip):
            return ""
        reason = embedders.reason.removeprefix("quality not measured: ")
        return (
            f"not trained: train.select = {select_text(run.train.select)} keeps the adapter by "
            f"a measure of its renders, and {reason}"
        )

    def select_inputs(self, run, family, item_paths: list[str]) -> dict:
        """What the training process measures with where the run keeps its adapter by a
        measure (`tunesmith.quality.select.StepScore`): the same models, items and store as
        this stage's measures, so the stage reads back what the process measured."""
        embedders = self.embedders_of(family.media)
        if isinstance(embedders, Skip):  # refused before training (`select_refusal`)
            raise ValueError(self.select_refusal(run, family))
        return {
            "dataset_folder": str(self.dataset_folder),
            "items": file_hashes(self.dataset_folder, self.hash_cache, item_paths),
            "models": {kind: str(e.folder) for kind, e in sorted(embedders.items())},
            "models_root": str(self.models_root),
            "store": str(self.store),
        }

    def run(self, run, family, run_dir: Path, item_paths: list[str], best_step: int) -> dict:
        """The run's measures with the kept adapter's verdict, the reason none were taken,
        or {} where the run rendered no demos."""
        samples = drawn_samples(run_dir / "samples")
        if not samples:
            return {}
        media = family.media
        embedders = self.embedders_of(media)
        if isinstance(embedders, Skip):
            self.log(f"{run.name}: {embedders.reason}")
            return {"skipped": embedders.reason}
        items = file_hashes(self.dataset_folder, self.hash_cache, item_paths)
        measured = measure_run(
            run, family.name, media, run_dir, samples, self.dataset_folder, items, embedders,
            self.log, self.store,
        )  # fmt: skip
        measured = {k: v for k, v in measured.items() if k not in BOOKKEEPING}
        judged = verdict(measured, best_step)
        if judged["learned"] is False:
            self.warn(
                f"{run.name}: the kept adapter (step {best_step}) beats the base model on "
                "no measure of its renders (prompt, style, Fréchet distance); listen or look "
                "before using it"
            )
        return {**measured, "verdict": judged}


def measure_run(
    run,
    family_name: str,
    media: str,
    run_dir: Path,
    samples: dict[tuple[int, int], Path],
    dataset_folder: Path,
    items: dict[str, str],
    embedders: dict,
    log: Callable[[str], None] = print,
    store: Path | None = None,
    record: bool = True,
) -> dict[str, Any]:
    """The run's quality at every step of `samples` ((demo, step) → render), cached in
    `run_dir/quality.json`; `items` is the run's items (path → sha256), whose embeddings are
    kept under `store` (`ItemRows`) once per item's bytes and model. `record`: the measured
    steps as `quality` lines of the run's events.jsonl (not while the run trains: the loop
    holds that file open)."""
    measurer = Measurer(run, family_name, media, run_dir, dataset_folder, items, embedders, store)
    return measurer.measure(samples, log, record)


class Measurer:
    """One run's measures: its references fixed (the held-out items, the prompts, the
    models), the embedding models and the items' rows loaded only when a step needs
    measuring, and kept for the next call (a run measured at each validation)."""

    def __init__(
        self,
        run,
        family_name: str,
        media: str,
        run_dir: Path,
        dataset_folder: Path,
        items: dict[str, str],
        embedders: dict,
        store: Path | None = None,
    ) -> None:
        self.run, self.media, self.run_dir = run, media, run_dir
        self.dataset_folder, self.items, self.embedders, self.store = (
            dataset_folder, items, embedders, store,
        )  # fmt: skip
        self.prompts = [demo.prompt for demo in run.demos]
        self.paths = sorted(items)
        policy = HOLDOUT_POLICY.get(family_name, BY_PATH_HASH)
        self.split = split_holdout(self.paths, run.train.holdout, path=lambda p: p, policy=policy)
        self.models = {kind: e.fingerprint for kind, e in sorted(embedders.items())}
        # What every step is measured against: a step's own key adds its renders to it.
        self.base_key = content_key(
            version=VERSION,
            models=self.models,
            items=items,
            references=sorted(self.split.validation),
            prompts=self.prompts,
        )
        self.read = load_audio if media == "audio" else load_picture
        self.main = MAIN[media]
        self._references: tuple | None = None

    @property
    def path(self) -> Path:
        return self.run_dir / QUALITY_FILE

    def measure(
        self,
        samples: dict[tuple[int, int], Path],
        log: Callable[[str], None] = print,
        record: bool = True,
    ) -> dict[str, Any]:
        """The quality of every step of `samples`, written to quality.json: a step whose
        renders were measured before (the same key) is read back, the others measured."""
        hashes = {(d, s): sha256_file(p) for (d, s), p in sorted(samples.items())}
        steps = sorted({step for _, step in samples})
        step_keys = {step: self._step_key(hashes, step) for step in steps}
        key = content_key(base=self.base_key, steps=[step_keys[s] for s in steps])
        saved = self._saved()
        if saved.get("key") == key and (saved.get("recorded") or not record):
            return saved
        # a step's key names its step, its renders and everything it is measured against
        kept = dict(zip(saved.get("step_keys", []), saved.get("steps", []), strict=False))
        rows, fresh = [], []
        for step in steps:
            row = kept.get(step_keys[step])
            if row is None:
                row = self._row(step, samples)
                fresh.append(step)
            rows.append(row)
        if saved.get("base") == self.base_key and "floor" in saved:
            floor = saved["floor"]  # the items and the models as they were
        else:
            floor = split_half_floor(self._item_rows())
        result = {
            "key": key,
            "base": self.base_key,
            "version": VERSION,
            "models": self.models,
            "references": sorted(self.split.validation),
            "on_training_items": self.split.on_training_items,
            "floor": floor,
            "steps": rows,
            "step_keys": [step_keys[s] for s in steps],
            "recorded": record,  # in the events too (not while the run trains)
        }
        atomic_write_text(self.path, json.dumps(result, indent=1, sort_keys=True) + "\n")
        if record:
            _record_events(self.run_dir / "events.jsonl", rows)
        if fresh:
            log(
                f"{self.run.name}: quality measured at {len(fresh)} step(s) with "
                f"{', '.join(self.embedders)}"
            )
        return result

    def _saved(self) -> dict[str, Any]:
        if not self.path.is_file():
            return {}
        try:
            saved = json.loads(self.path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            return {}  # a damaged file: measured again
        return saved if isinstance(saved, dict) and saved.get("version") == VERSION else {}

    def _step_key(self, hashes: dict[tuple[int, int], str], step: int) -> str:
        renders = {str(d): h for (d, s), h in hashes.items() if s == step}
        return content_key(base=self.base_key, step=step, renders=renders)

    def _row(self, step: int, samples: dict[tuple[int, int], Path]) -> dict[str, Any]:
        """The measures of one step's renders."""
        references, item_rows, texts, embed = self._loaded()
        main = self.main
        demos = sorted(d for d, s in samples if s == step)
        rendered = [self.read(samples[(d, step)]) for d in demos]
        renders = {kind: f(rendered) for kind, f in embed.items()}
        row: dict[str, Any] = {"step": step}
        row["prompt"] = float(paired_similarity(renders[main], texts[demos]).mean())
        row["style"] = float(similarity(renders[main], references[main]).mean())
        if "dino" in renders:
            row["style_dino"] = float(similarity(renders["dino"], references["dino"]).mean())
        row["frechet"] = frechet(renders[main], item_rows)
        return row

    def _item_rows(self) -> np.ndarray:
        return self._loaded()[1]

    def _loaded(self) -> tuple:
        """(the held-out items' rows by model, all the items' rows of the main model, the
        prompts' rows, the embedding functions), made once."""
        if self._references is None:
            embed = {kind: _embed_media(e, self.media) for kind, e in self.embedders.items()}
            files = [self.dataset_folder / p for p in self.paths]
            digests = [self.items[p] for p in self.paths]
            rows_of = {
                kind: ItemRows(self.store, kind, self.embedders[kind].fingerprint).rows(
                    files, digests, self.read, embed[kind]
                )
                for kind in embed
            }
            validation = set(self.split.validation)
            held = [i for i, p in enumerate(self.paths) if p in validation]
            references = {kind: rows[held] for kind, rows in rows_of.items()}
            texts = self.embedders[self.main].text(self.prompts)
            self._references = (references, rows_of[self.main], texts, embed)
        return self._references


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


def summary_line(measured: dict[str, Any], selected: dict[str, Any] | None = None) -> str:
    """One line for the build's summary: the kept adapter's measures against the base's, or
    why nothing was measured; "" where the run has no renders. `selected`: how the kept
    adapter was chosen where the run keeps by a measure (the training result's `select`)."""
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
    kept = " (kept by train.select)" if (selected or {}).get("by") == "score" else ""
    line = f"quality at step {best['step']}{kept}: " + ", ".join(parts)
    line += f"; Fréchet floor {floor:.3f}" if floor is not None else ""
    if judged.get("learned") is False:
        line += "; WARNING: beats the base model on no measure"
    if (selected or {}).get("by") == "loss":  # asked to keep by a measure; none beat the base
        line += f"; {selected['line']}"
    return line


class ItemRows:
    """The embeddings of a dataset's items, one `.safetensors` a file's bytes and model under
    `<store>/embeddings/<kind>-<model fingerprint>/<sha256 of the file>.safetensors`: a run
    trained again, another run of the dataset or a dataset sharing the file embeds nothing
    again. Without a store, nothing is kept."""

    def __init__(self, store: Path | None, kind: str, fingerprint: str) -> None:
        self.folder = store / "embeddings" / f"{kind}-{fingerprint[:16]}" if store else None

    def rows(self, paths: list[Path], digests: list[str], read, embed) -> np.ndarray:
        """Rows of the files at `paths` (their sha256 `digests`), embedding only those not
        kept yet."""
        from safetensors.numpy import load_file

        from tunesmith.store.tensors import write_safetensors

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
        return np.stack([found[i] for i in range(len(paths))])


def drawn_samples(folder: Path) -> dict[tuple[int, int], Path]:
    """The samples the loop drew in `folder` (`<demo>-<step>.<wav|png>`): (demo, step) → path."""
    found = {}
    for path in folder.glob("*-*.*") if folder.is_dir() else ():
        match = SAMPLE.fullmatch(path.name)
        if match:
            found[(int(match["demo"]), int(match["step"]))] = path
    return found


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
