"""What a stage did, and `report.json`, the per-dataset record of every stage.

`data/out/<dataset>/report.json` holds, per stage: its data version, items, cached,
computed, skipped (each with its file and reason) and seconds. Stages write their own
section; later stages add theirs beside it.
"""

from __future__ import annotations

import fcntl
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tunesmith.store.atomic import atomic_write_json


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
    return dataset_out / "report.json"


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


def read_report(dataset_out: Path) -> dict[str, Any]:
    path = report_path(dataset_out)
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
