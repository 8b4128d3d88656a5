"""`tunesmith adapters [DATASET...] [--json]`: every trained adapter, and the file to hand each
tool, read from the datasets' last build reports (nothing is loaded or computed)."""

from __future__ import annotations

import json
from pathlib import Path

from pipelines.operations import _select
from tunesmith.config import Roots
from tunesmith.report import read_report


def adapters(names: list[str], as_json: bool = False) -> int:
    roots = Roots.from_env()
    found = []
    for key in _select(names):
        for run in (
            read_report(roots.dataset_out(key))
            .get("stages", {})
            .get("adapters", {})
            .get("runs", [])
        ):
            settings = run.get("settings") or {}
            found.append(
                {
                    "dataset": key,
                    "run": run["run"],
                    "family": run.get("family", ""),
                    "base_model": settings.get("base_model", ""),
                    "best_step": run.get("best_step"),
                    "best_loss": run.get("best_loss"),
                    "base_loss": run.get("base_loss"),
                    "files": [f for f in run.get("files", []) if Path(f["path"]).exists()],
                }
            )
    if as_json:
        print(json.dumps(found, indent=1, ensure_ascii=False))
        return 0
    if not found:
        print("no trained adapters yet: `tunesmith run` trains the runs of each tunesmith.toml")
        return 0
    for a in found:
        print(
            f"{a['dataset']} / {a['run']} ({a['family']}, base {a['base_model'] or '?'}): best "
            f"step {a['best_step']}, validation loss {a['best_loss']:.4f} (base "
            f"{a['base_loss']:.4f})"
        )
        for f in a["files"]:
            print(f"  {f['tool']}: {f['path']}")
    return 0
