"""Stage `adapters`: which runs to train, where their files go, and whether they are cached.

A run's folder is `<out>/<dataset>/adapters/<run>-<key>`, where the key covers everything
that determines its training except the step count: the family and stage version, the
encoded items it trains on (their latents and prompts), the base model's fingerprint, the
resolved config (less where it trains: `train.devices`, `nodes`, `master_addr`) and the
placement. Asking for more steps of an unchanged run therefore resumes from its saved state;
a finished run (`result-steps=N.json`) is not trained again.

A change to any of those (an edited caption, another learning rate) trains into a new folder
and leaves the old one as it was: its adapters are the user's, and the settings may come back.
The stage lists such folders of a run that now trains elsewhere (`superseded`; folders of runs
no longer configured are not listed), and `tunesmith gc --runs` removes what the last build
listed (`remove_superseded`).
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

import tunesmith
from tunesmith import family as families
from tunesmith.backends.placement import Placement
from tunesmith.report import edited_outputs
from tunesmith.store import bytes_on_disk, content_key
from tunesmith.store.atomic import write_if_changed
from tunesmith.store.fingerprints import model_fingerprint
from tunesmith.train.config import RunConfig, computed, world_size
from tunesmith.train.footprint import Fitted, fit_run

STAGE_VERSION = 1
RUN_FOLDER = re.compile(r"(?P<run>.+)-[0-9a-f]{10}")  # <run>-<the first 10 of its key>


@dataclass(frozen=True)
class RunPlan:
    run: RunConfig
    base_model: Path  # base model folder
    run_dir: Path
    key: str
    base_fingerprint: str
    items: pd.DataFrame  # the encoded rows this run trains on
    inputs: dict[str, Any] = field(default_factory=dict)  # what the key covers, readable
    fitted: Fitted | None = None  # its memory estimate and what the fit chose

    @property
    def result_path(self) -> Path:
        steps = self.run.train.steps  # None: the trainer's own count (an epoch horizon)
        return self.run_dir / (f"result-steps={steps}.json" if steps else "result.json")

    def cached(self) -> bool:
        if not self.result_path.exists():
            return False
        result = json.loads(self.result_path.read_text(encoding="utf-8"))
        files = [result["best_path"], result["last_path"]]
        return all(Path(p).exists() for p in files) and not self.edited()

    def edited(self) -> list[str]:
        """The run's adapter files edited by hand since the stage published them: the next
        training removes them and writes them again from the run's state, as deleted ones."""
        if not self.result_path.exists():
            return []
        result = json.loads(self.result_path.read_text(encoding="utf-8"))
        out = self.run_dir.parent.parent  # <out>/adapters/<run folder>
        return edited_outputs(out, "adapters", [result["best_path"], result["last_path"]])

    def metadata(self, manifest_version: str) -> dict[str, str]:
        """Lineage written into every adapter file (docs/design.md, "Adapter files")."""
        return {
            "tunesmith.version": tunesmith.__version__,
            "tunesmith.dataset_manifest": manifest_version,
            "tunesmith.base_model_fingerprint": self.base_fingerprint,
            "tunesmith.training_config": json.dumps(_shared(computed(self.run)), sort_keys=True),
            "tunesmith.run_key": self.key,
        }


def _shared(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings as a file that travels carries them: a base model written as a path in
    tunesmith.toml is named by its folder (the path says nothing on another machine)."""
    return {**settings, "base_model": Path(settings["base_model"]).name}


def plan(
    run: RunConfig,
    base_model: Path,
    encoded: pd.DataFrame,
    out: Path,
    placement: Placement,
    fingerprint_cache: Path,
    judges: dict[str, str] | None = None,
) -> RunPlan:
    """The run's folder and key. `judges` (embedding model kind → fingerprint) are the
    models a run that keeps its adapter by a measure (`train.select`) is judged with: the
    adapter kept depends on them as on the base model, so they are in the key."""
    family = families.get(run.family)
    mine = encoded["model"] == base_model.name
    if "family" in encoded:  # the rows of the family that encodes this one's runs
        mine &= encoded["family"] == family.encoder
    if "run" in encoded:  # a family whose rows depend on the run names it; others leave it empty
        mine &= encoded["run"].isna() | (encoded["run"] == run.name)
    if not mine.any():
        raise ValueError(f"run {run.name!r}: nothing was encoded for {base_model}")
    items = encoded[mine].dropna(axis=1, how="all").sort_values("path")  # this family's columns
    fingerprint = model_fingerprint(base_model, fingerprint_cache)
    inputs = family.other_models(run, base_model, fingerprint_cache, items)  # ValueError: skip
    rows = items.to_dict("records")
    entries = [[r[k] for k in family.item_keys] for r in rows]
    # Fitted to the memory where it trains before its key is made: a crop the fit shortens
    # trains other numbers, so into another folder (DoesNotFit, a ValueError: skip).
    cache = footprints(fingerprint_cache)
    fitted = fit_run(run, base_model, placement, fingerprint, cache, items, content_key(e=entries))
    run = fitted.run
    # The step count and the demos do not change what is trained up to a step.
    without_steps = replace(run, train=replace(run.train, steps=0), demos=())
    key = content_key(
        stage="adapters",
        version=STAGE_VERSION,
        family=run.family,
        run=computed(without_steps),
        items=entries,
        base=fingerprint,
        placement=placement.as_dict(),
        **({"inputs": inputs} if inputs else {}),
        **({"judges": judges} if judges else {}),
    )
    run_dir = out / "adapters" / f"{run.name}-{key[:10]}"
    readable = {
        "settings": computed(without_steps),
        "items": {r["path"]: {k: r[k] for k in family.item_keys if k != "path"} for r in rows},
        "base_model": fingerprint,
        "placement": placement.as_dict(),
        "other_models": inputs or {},
        **({"judges": judges} if judges else {}),
    }
    return RunPlan(run, base_model, run_dir, key, fingerprint, items, readable, fitted)


def footprints(fingerprint_cache: Path) -> Path:
    """Where the traced footprints are kept: beside the base models' fingerprints."""
    return Path(fingerprint_cache).with_name("footprints.json")


def kept(plan: RunPlan) -> str:
    """What a failed or killed run leaves for the next build, in words."""
    steps = [int(p.name.split("=", 1)[1]) for p in (plan.run_dir / "state").glob("step=*")]
    if not steps:
        return "no training state was saved yet; the next build starts this run over"
    return (
        f"the state at step {max(steps)} is kept in {plan.run_dir / 'state'}; the next build "
        "resumes from it"
    )


def read_result(plan: RunPlan) -> dict[str, Any]:
    return json.loads(plan.result_path.read_text(encoding="utf-8"))


def one_process_only(run: RunConfig, family, backend: str) -> str:
    """Why `run` cannot train on the processes it asks for on `backend`; "" when it can. The
    adapters stage skips such a run before any process starts."""
    world = world_size(run.train)
    if world > 1 and not family.trains_on_ranks(backend):
        return (
            f"the {family.title} trainer on {backend} trains on one process: set train.devices "
            f"and train.nodes to 1 (they ask for {world})"
        )
    return ""


def superseded(adapters: Path, current: dict[str, Path]) -> list[Path]:
    """The run folders under `adapters` of a run that now trains into another folder
    (`current`: run name → its folder)."""
    if not adapters.is_dir():
        return []
    older = []
    for folder in sorted(adapters.iterdir()):
        named = RUN_FOLDER.fullmatch(folder.name)
        if named and folder.is_dir() and not folder.name.startswith("."):
            mine = current.get(named["run"])
            if mine is not None and folder != mine:
                older.append(folder)
    return older


def superseded_section(adapters: Path, rows: list[dict]) -> dict[str, Any]:
    """What the adapters stage adds to its report section about the folders `superseded` finds
    beside the runs it trained (`rows`, each with its `run` and `run_dir`): each folder with
    its size, and a line for the build's summary; nothing when there are none."""
    older = superseded(adapters, {r["run"]: Path(r["run_dir"]) for r in rows})
    if not older:
        return {}
    listed = [{"path": str(folder), "bytes": bytes_on_disk(folder)} for folder in older]
    names = ", ".join(folder.name for folder in older[:5]) + (" …" if len(older) > 5 else "")
    megabytes = sum(entry["bytes"] for entry in listed) / 1e6
    return {
        "superseded": listed,
        "note": f"{len(older)} run folder(s) of earlier settings kept ({megabytes:.1f} MB: "
        f"{names}); `tunesmith gc --runs` removes them",
    }


def remove_superseded(out_root: Path, dry_run: bool = False) -> list[tuple[Path, int]]:
    """Remove the run folders each dataset's last build listed as superseded (report.json),
    checking each again first: it must still be a run folder of that dataset's adapters whose
    run now trains into another folder. Returns (folder, bytes) of each removed (or, with
    `dry_run`, of each that would be)."""
    from tunesmith.report import read_report, update_report

    removed = []
    for report_file in sorted(out_root.glob("*/report.json")):
        out = report_file.parent
        adapters = read_report(out).get("stages", {}).get("adapters", {})
        current = {r["run"]: Path(r["run_dir"]) for r in adapters.get("runs", [])}
        still = set(superseded(out / "adapters", current))
        for entry in adapters.get("superseded", []):
            folder = Path(entry["path"])
            if folder in still:
                removed.append((folder, bytes_on_disk(folder)))
                if not dry_run:
                    shutil.rmtree(folder)
        if adapters.get("superseded") and not dry_run:  # a build may have rewritten it since
            update_report(
                out, lambda r: r.get("stages", {}).get("adapters", {}).pop("superseded", None)
            )
    return removed


INPUTS = "inputs.json"  # in each run folder: what its key covers, and why it was made
# What a change in an item's column is, in a person's words (each family's `item_keys`).
ITEM_PARTS = {"entry": "latents", "pieces": "caption", "caption_entry": "caption"}
ITEM_PARTS |= {"lyrics_entry": "lyrics", "run": "run"}


def why(plan: RunPlan, previous: Path | None) -> str:
    """Why this build trains `plan` (or uses its folder), against the run's folder of the last
    build (`previous`), in one line: "retrained into songs-lora-…: 1 caption changed
    (dusty_keys.wav)", "… train.lr 0.0001 → 0.0002", "train.steps 200 → 400: training
    continues in its folder"; "" when the run is cached in the same folder."""
    if previous == plan.run_dir:
        done = sorted(plan.run_dir.glob("result-steps=*.json"))
        if plan.cached():
            return ""
        if done:
            before = max(int(p.stem.split("=", 1)[1]) for p in done)
            return (
                f"train.steps {before} → {plan.run.train.steps}: training continues in its folder"
            )
        return "an unfinished training continues from its saved state"
    if previous is None:
        return "first training of this run"
    record = previous / INPUTS
    if plan.cached():  # settings that had been trained before, then changed, are back
        earlier = _changes(json.loads(record.read_text(encoding="utf-8"))["inputs"], plan.inputs)
        return (
            f"back to the earlier folder {plan.run_dir.name}, trained before, its adapter used "
            f"again ({'; '.join(earlier) or 'the same inputs'})"
            if record.exists()
            else f"back to the earlier folder {plan.run_dir.name}: its adapter is used again"
        )
    if not record.exists():
        return (
            f"retrained into {plan.run_dir.name}: settings or data changed since "
            f"{previous.name} (which holds no record of its inputs)"
        )
    changes = _changes(json.loads(record.read_text(encoding="utf-8"))["inputs"], plan.inputs)
    text = "; ".join(changes) or "the training code changed"
    return f"retrained into {plan.run_dir.name}: {text} (the last build's {previous.name} is kept)"


def _changes(before: dict, now: dict) -> list[str]:
    now = json.loads(json.dumps(now))  # as the record reads back (a tuple is a list there)
    said = []
    old_items, new_items = before.get("items", {}), now["items"]
    changed: dict[str, list[str]] = {}
    for path in sorted(set(old_items) & set(new_items)):
        for column, value in new_items[path].items():
            if old_items[path].get(column) != value:
                changed.setdefault(ITEM_PARTS.get(column, column), []).append(path)
    for word, paths in changed.items():
        said.append(f"{_count(len(paths), word)} changed ({_names(paths)})")
    added, removed = (
        sorted(set(new_items) - set(old_items)),
        sorted(set(old_items) - set(new_items)),
    )
    if added:
        said.append(f"{_count(len(added), 'item')} added ({_names(added)})")
    if removed:
        said.append(f"{_count(len(removed), 'item')} removed ({_names(removed)})")
    settings = _flat_changes(before.get("settings", {}), now["settings"])
    if settings:
        more = f" and {len(settings) - 4} more" if len(settings) > 4 else ""
        said.append(", ".join(settings[:4]) + more)
    if before.get("base_model") != now["base_model"]:
        said.append("the base model's files changed")
    if before.get("other_models") != now["other_models"]:
        said.append("another model the run reads changed")
    if before.get("judges") != now.get("judges") and "judges" in before and "judges" in now:
        said.append("the embedding model its adapter is kept by changed")
    if before.get("placement") != now["placement"]:
        said.append(
            f"placement {_placement(before.get('placement'))} → {_placement(now['placement'])}"
        )
    return said


def _flat_changes(before: Any, now: Any, prefix: str = "") -> list[str]:
    """`key.sub old → new` for each leaf that differs."""
    if isinstance(before, dict) and isinstance(now, dict):
        found = []
        for key in sorted(set(before) | set(now)):
            found += _flat_changes(before.get(key), now.get(key), f"{prefix}{key}.")
        return found
    if before == now:
        return []
    return [f"{prefix[:-1]} {json.dumps(before)} → {json.dumps(now)}"]


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 or word.endswith("s") else f"{n} {word}s"


def _names(paths: list[str], shown: int = 3) -> str:
    names = ", ".join(Path(p).name for p in paths[:shown])
    return names + (f" and {len(paths) - shown} more" if len(paths) > shown else "")


def _placement(placement: dict | None) -> str:
    if not placement:
        return "unknown"
    return "/".join(str(placement.get(k)) for k in ("backend", "device", "dtype") if k in placement)


def record_inputs(plan: RunPlan, cause: str) -> None:
    """Write the run folder's `inputs.json` when the folder is new (a resumed folder keeps the
    record of what made it)."""
    path = plan.run_dir / INPUTS
    if path.exists():
        return
    plan.run_dir.mkdir(parents=True, exist_ok=True)
    document = {"run": plan.run.name, "key": plan.key, "made_because": cause, "inputs": plan.inputs}
    write_if_changed(path, (json.dumps(document, indent=1, sort_keys=True) + "\n").encode())


def write_index(adapters: Path, rows: list[dict]) -> None:
    """`adapters/index.json`: per run, its current folder and why that folder was made, and
    the run's earlier folders still there, each with why it was made. A build that keeps
    every folder writes the same bytes (nothing is rewritten)."""
    index = {}
    for row in rows:
        current = Path(row["run_dir"])
        earlier = superseded(adapters, {row["run"]: current})
        index[row["run"]] = {
            "current": current.name,
            "made_because": _made_because(current),  # the same in every build that keeps it
            "earlier": [{"folder": f.name, "made_because": _made_because(f)} for f in earlier],
        }
    if index:
        text = json.dumps(index, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
        write_if_changed(adapters / "index.json", text.encode("utf-8"))


def _made_because(folder: Path) -> str:
    record = folder / INPUTS
    if not record.exists():
        return ""
    return json.loads(record.read_text(encoding="utf-8")).get("made_because", "")
