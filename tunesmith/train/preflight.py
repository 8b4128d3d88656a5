"""What can be known of a dataset's runs before any work, for `tunesmith check` and
`tunesmith run` alike (one code path, so the two never disagree).

`preflight(folder, models_root)` reads the folder's `tunesmith.toml`, its file names and
the base models' folders, and sorts what it finds into three lists of one line each:

- `problems`: a settings file that does not parse or check, a file name that is nearly
  `tunesmith.toml` (the only name read), a folder with no media stop the dataset; a run whose
  family trains on media the folder does not hold, or whose base model is missing, not whole
  or another family's, stops that run (`bad_runs`), and the dataset's other runs are built.
  Lines about a base model list the models that are there.
- `warnings` do not stop it but say what the run will do that a person would not guess
  (a learning-rate warmup longer than the run, `Family.warnings`).
- `fine` says what was found in order (a line per run, notes of older forms).
"""

from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tunesmith import family as families
from tunesmith.dataset.metrics import PUBLISHED, MetricsError, model_folder, read_metrics
from tunesmith.train.config import (
    ConfigError,
    base_model_folder,
    load_plan,
    media_kind,
    select_text,
)
from tunesmith.train.holdout import on_training_items_note

CONFIG_NAME = "tunesmith.toml"
MEDIA_WORDS = {"audio": "audio files", "image": "pictures"}


@dataclass
class Preflight:
    fine: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # every problem, the runs' included
    runs: list[str] = field(default_factory=list)  # the runs asked for
    bad_runs: dict[str, str] = field(default_factory=dict)  # a run's own problem, by name

    @property
    def stops(self) -> bool:
        """Whether nothing of the dataset can be built: a problem of the folder or its
        settings, or every run has one. Otherwise its good runs are built and the bad ones
        skipped (one run's problem never stops another's)."""
        folder_problem = len(self.problems) > len(self.bad_runs)
        return folder_problem or (bool(self.runs) and set(self.runs) <= set(self.bad_runs))


def preflight(folder: Path, models_root: Path) -> Preflight:
    found = Preflight()
    if near := near_miss_config(folder):
        found.problems.append(
            f"{near}: not read: the settings file must be named {CONFIG_NAME} (rename it)"
        )
        return found  # what the folder's runs are is not known until then
    try:
        plan = load_plan(folder)
    except ConfigError as exc:
        found.problems += exc.problems
        return found
    counts = media_counts(folder)
    if not counts["audio"] and not counts["image"]:
        from tunesmith.dataset.manifest import AUDIO, IMAGE  # see media_counts

        found.problems.append(
            f"{folder}: no audio files or pictures to train on (audio: "
            f"{', '.join(sorted(AUDIO))}; pictures: {', '.join(sorted(IMAGE))})"
        )
        return found
    plan = plan.with_default(media_kind([k for k, n in counts.items() if n]))
    found.fine += [f"note: {note}" for note in plan.notes]
    found.runs = [run.name for run in plan.runs]
    for run in plan.runs:
        family = families.get(run.family)
        if not counts[family.media]:
            other = "image" if family.media == "audio" else "audio"
            found.bad_runs[run.name] = (
                f"run {run.name}: {family.title} trains on {MEDIA_WORDS[family.media]}, and "
                f"{folder} holds {counts[other]} {MEDIA_WORDS[other]} and none of those; "
                f"choose a family for {MEDIA_WORDS[other]} ({_families_for(other)}) in "
                f"[[runs]] family"
            )
            found.problems.append(found.bad_runs[run.name])
            continue
        problem = base_model_problem(run, models_root) or judge_problem(
            run, family.media, folder, models_root
        )
        if problem:
            found.bad_runs[run.name] = problem
            found.problems.append(problem)
        else:
            base = base_model_folder(run, models_root)
            found.fine.append(f"run {run.name}: {run.family}, base model {base}: ok")
        if note := on_training_items_note(run.train.holdout):
            found.fine.append(f"run {run.name}: {note}")
        found.warnings += [f"run {run.name}: {w}" for w in family.warnings(run)]
    return found


def judge_problem(run, media: str, folder: Path, models_root: Path) -> str:
    """Why a run that keeps its adapter by a measure (`train.select`) cannot train here: the
    embedding model that measures its media is not there; "" where it is (or it keeps by the
    loss). The folder's contents are checked where the model is loaded."""
    if run.train.select == "loss":
        return ""
    try:
        chosen = read_metrics(folder).for_media(media)
    except MetricsError:  # said with the plan's problems
        return ""
    for kind, name in chosen.items():
        path = model_folder(name, models_root)
        if kind in ("clap", "clip") and not (path / "config.json").is_file():
            return (
                f"run {run.name}: train.select = {select_text(run.train.select)} keeps the "
                f"adapter by a measure of its renders, and the {kind.upper()} model {path} is "
                f"not there; put a {kind.upper()} folder in the transformers layout there "
                f"({PUBLISHED[kind]}), or name one in tunesmith.toml's [metrics] {kind}"
            )
    return ""


def near_miss_config(folder: Path) -> Path | None:
    """A file beside the dataset named nearly `tunesmith.toml` (another case, a letter off),
    where `tunesmith.toml` itself is missing."""
    if (folder / CONFIG_NAME).exists() or not folder.is_dir():
        return None
    names = {p.name.lower(): p for p in folder.iterdir() if p.is_file()}
    close = difflib.get_close_matches(CONFIG_NAME, list(names), n=1, cutoff=0.85)
    return names[close[0]] if close else None


def media_counts(folder: Path) -> Counter:
    """How many audio files and pictures the folder holds (hidden files left out)."""
    # here, not at the top: the manifest module loads pandas, which `tunesmith run` and
    # `check` need not
    from tunesmith.dataset.manifest import kind_of

    counts: Counter = Counter()
    for path in folder.rglob("*"):
        rel = path.relative_to(folder)
        if path.is_file() and not any(part.startswith(".") for part in rel.parts):
            counts[kind_of(path)] += 1
    return counts


def _families_for(media: str) -> str:
    return ", ".join(f.name for f in families.all_families().values() if f.media == media)


def base_model_problem(run, models_root: Path) -> str:
    """ "" when the run's base model is whole and its family's; else one line (its first words
    `run NAME: base model FOLDER`) listing the base models that are there."""
    base = base_model_folder(run, models_root)
    family = families.get(run.family)
    try:
        family.check_base_model(base)
        return ""
    except ValueError as exc:
        reason = "no such folder" if not base.exists() else _one_line(str(exc))
    there = models_by_family(models_root)
    listed = (
        f"base models under {models_root}: "
        + ", ".join(f"{name} ({_title(names[0])})" for name, names in there.items())
        if there
        else f"no base models under {models_root}"
    )
    owners = _families_taking(base)
    if owners:  # never suggest putting another model where this one is
        reason = f"this is a {_title(owners[0])} base model, not a {family.title} one"
    fits = [name for name, names in there.items() if run.family in names]
    hint = (
        f'set base_model = "{fits[0]}" in the run'
        if fits
        else f"put a {family.title} base model in a folder under {models_root} in diffusers' "
        'layout (README, "Base models") and name that folder in base_model'
    )
    return f"run {run.name}: base model {base}: {reason}. {listed}; {hint}"


def _one_line(message: str) -> str:
    """A family's multi-line base-model message (a head, `- part` lines, an explanation) on one
    line: the parts joined by "; "."""
    head, *rest = message.splitlines()
    parts = [line.strip()[2:] for line in rest if line.strip().startswith("- ")]
    other = [line.strip() for line in rest if line.strip() and not line.strip().startswith("- ")]
    return " ".join([head, "; ".join(parts) + ("." if parts else ""), *other]).strip()


def models_by_family(models_root: Path) -> dict[str, list[str]]:
    """Folder name → the families that take it as their base model, for every folder under
    the models root that some family takes whole."""
    if not models_root.is_dir():
        return {}
    found = {}
    for folder in sorted(p for p in models_root.iterdir() if p.is_dir()):
        if not folder.name.startswith(".") and (names := _families_taking(folder)):
            found[folder.name] = names
    return found


def _families_taking(folder: Path) -> list[str]:
    if not folder.is_dir():
        return []
    taking = []
    for family in families.all_families().values():
        try:
            family.check_base_model(folder)
        except (ValueError, OSError):
            continue
        taking.append(family.name)
    return taking


def _title(name: str) -> str:
    return families.get(name).title
