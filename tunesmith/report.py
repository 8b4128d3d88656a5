"""What a stage did, and `report.json`, the per-dataset record of every stage.

`data/out/<dataset>/report.json` holds, per stage: its data version, items, cached,
computed, skipped (each with its file and reason) and seconds. Stages write their own
section; later stages add theirs beside it.
"""

from __future__ import annotations

import fcntl
import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tunesmith.store.atomic import atomic_write_json, json_bytes, write_if_changed

REPORT_NAME = "report.json"


@dataclass(frozen=True)
class Skipped:
    path: str  # relative to the dataset folder
    reason: str  # what was wrong and what was expected


@dataclass
class StageResult:
    stage: str
    data_version: str
    items: int = 0
    cached: int = 0
    computed: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)  # stage-specific numbers

    def as_dict(self) -> dict[str, Any]:
        entry = asdict(self)
        entry.pop("stage")
        entry["seconds"] = round(self.seconds, 3)
        entry.update(entry.pop("extra"))
        return entry


def report_path(dataset_out: Path) -> Path:
    return dataset_out / REPORT_NAME


def write_stage(dataset_out: Path, result: StageResult) -> Path:
    """Put one stage's section into report.json, keeping the other stages' sections."""
    return update_report(
        dataset_out, lambda r: r.setdefault("stages", {}).update({result.stage: result.as_dict()})
    )


def update_report(dataset_out: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    """Apply `change` to report.json in place (read, change, write whole, under a lock)."""
    path = report_path(dataset_out)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Stages of one dataset may finish in parallel processes: serialise read-modify-write.
    with open(path.parent / ".report.lock", "a") as lock:  # "a": the lock file is never rewritten
        fcntl.flock(lock, fcntl.LOCK_EX)
        report = read_report(dataset_out)
        change(report)
        atomic_write_json(path, report)
    return path


# The exit status of a build that finished without something a stage skipped (a file it could
# not use, a run, a base model): `tunesmith run` reports it as 1, work not done.
BUILT_WITH_SKIPS = 2


def read_report(dataset_out: Path) -> dict[str, Any]:
    path = report_path(dataset_out)
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


GROUPED_FROM = 4  # this many warnings of one kind or more: one line for them all


def warning_lines(warnings: list[str], shown: int = 3) -> list[str]:
    """The console's lines for a stage's warnings: one a file, and one for a kind of problem
    that many files share ("not UTF-8 (12 files): a.txt, b.txt, c.txt, … (see report.json)").
    A warning reads "<file>: <what is wrong>"; its kind is what is wrong, with quoted values
    and details in parentheses left out."""
    kinds: dict[str, list[str]] = {}
    for line in warnings:
        path, _, what = line.partition(": ")
        kinds.setdefault(_kind(what), []).append(line)
    lines = []
    for kind, group in kinds.items():
        if len(group) < GROUPED_FROM:
            lines += group
            continue
        files = [line.partition(": ")[0] for line in group]
        lines.append(
            f"{kind} ({len(group)} files): {', '.join(files[:shown])}, … (see {REPORT_NAME})"
        )
    return lines


def _kind(what: str) -> str:
    what = re.sub(r"\s*\([^)]*\)", "", what.split(";")[0])
    return re.sub(r"'[^']*'|\"[^\"]*\"", "…", what).strip()


# Columns of the stage tables that name files a build wrote.
OUTPUT_COLUMNS = (
    "latents",
    "sidecar",
    "best_path",
    "last_path",
    "wav",
    "mp3",
    "spectrogram",
    "image",
    "page",
)
OUTPUTS_FOLDER = ".outputs"  # per stage, the size and time of each file its table names


def output_files(frame) -> list[str]:
    """The files a stage's table (a pandas DataFrame) names, sorted."""
    columns = [c for c in OUTPUT_COLUMNS if c in getattr(frame, "columns", ())]
    return sorted({str(p) for c in columns for p in frame[c].dropna() if p})


def record_outputs(dataset_out: Path, stage: str, frame) -> None:
    """Keep each named file's size and modification time as the stage left them
    (`edited_outputs` compares them)."""
    found = {}
    for path in output_files(frame):
        try:
            st = Path(path).stat()
        except FileNotFoundError:
            continue
        found[path] = [st.st_size, st.st_mtime_ns]
    record = dataset_out / OUTPUTS_FOLDER / f"{stage}.json"
    record.parent.mkdir(parents=True, exist_ok=True)
    write_if_changed(record, json_bytes(found))


def edited_outputs(dataset_out: Path, stage: str, paths: list[str] | None = None) -> list[str]:
    """The files the stage left (of `paths`, default all) whose size or modification time
    has changed since: edited by hand (a gone file is not counted here)."""
    record = dataset_out / OUTPUTS_FOLDER / f"{stage}.json"
    try:
        kept = json.loads(record.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return []
    edited = []
    for path in paths if paths is not None else sorted(kept):
        if path not in kept:
            continue
        try:
            st = Path(path).stat()
        except FileNotFoundError:
            continue
        if [st.st_size, st.st_mtime_ns] != kept[path]:
            edited.append(path)
    return edited
