"""Every family at its published size: a training step's measured peak against the estimate
made before it, and our step's time against a bare diffusers / transformers + PEFT loop's.

Each family's rows are in `bench/full_size/<family>.py` (`rows(work, reduced)`): the published
architecture built with random bfloat16 weights and saved as a base-model folder in the
published layout, then one or two steps in a child process per side. Per row:

    estimate   the family's `MemoryModel` estimate, made in the child before loading (its
               runtime: the child's resident set then)
    peak       the child's peak: its resident set on the CPU (ru_maxrss), CUDA's peak
               allocated on a GPU
    ours, bare a step's seconds: the family's trainer, and the bare loop on the same model,
               the same shapes and adapter

Goals: every estimate within ±15 % of its peak; ours ≤ 1.05 × bare. A row that would not fit
this machine's memory is skipped with its estimate. Printed as a table; `--json PATH` writes
the rows too. `make bench-real` runs it at full size (within 30 minutes on a 24 GB, 2-core
CPU); `--reduced` runs each row on the same architecture at a much smaller width and depth, in
seconds (`make test` does, so the bench keeps working); `bench/gpu.sh` runs it on CUDA.

    .venv/bin/python bench/real_size.py [--reduced] [--families sdxl,ace-step]
        [--checkpointing both|on|off] [--json out.json]
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

FAMILIES = ("sdxl", "stable_audio_3", "ace_step", "ace_step_planner")
GOAL_ESTIMATE, GOAL_TIME = 0.15, 1.05
MODES = {"both": (True, False), "on": (True,), "off": (False,)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reduced", action="store_true", help="small widths, for the tests")
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument(
        "--checkpointing",
        choices=("both", "on", "off"),
        default="both",
        help="the rows with gradient checkpointing on, off, or both (the default)",
    )
    parser.add_argument("--json", type=Path, help="write the rows here too")
    args = parser.parse_args()
    chosen = [f.strip().replace("-", "_") for f in args.families.split(",") if f.strip()]
    unknown = sorted(set(chosen) - set(FAMILIES))
    if unknown:
        parser.error(f"unknown families {unknown}; these have rows: {', '.join(FAMILIES)}")
    rows, start = [], time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tunesmith-real-size-") as work:
        for name in chosen:
            module = importlib.import_module(f"bench.full_size.{name}")
            folder = Path(work) / name
            folder.mkdir()
            for row in module.rows(folder, args.reduced, MODES[args.checkpointing]):
                rows.append({"family": name.replace("_", "-"), **row})
                print(_line(rows[-1]), flush=True)
    print(f"{len(rows)} rows in {time.perf_counter() - start:.0f} s")
    summary = _summary(rows)
    print(summary)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "summary": summary}, indent=2) + "\n")
    return 0


def _line(row: dict) -> str:
    if "skipped" in row:
        return f"{row['family']:<17} {row.get('setting', ''):<40} skipped: {row['skipped']}"
    estimate, peak = row["estimate_gb"], row["peak_gb"]
    on = "on " if row["checkpointing"] else "off"
    return (
        f"{row['family']:<17} {row['setting']:<40} checkpointing {on} "
        f"estimate {estimate:6.2f} GB  peak {peak:6.2f} GB ({_off(estimate, peak):+.0%})  "
        f"ours {row['ours_s']:7.2f} s  bare {row['bare_s']:7.2f} s "
        f"({row['ours_s'] / row['bare_s']:.2f}×)"
    )


def _off(estimate: float, peak: float) -> float:
    return estimate / peak - 1


def _summary(rows: list[dict]) -> str:
    measured = [r for r in rows if "skipped" not in r]
    if not measured:
        return "no row measured"
    worst = max(measured, key=lambda r: abs(_off(r["estimate_gb"], r["peak_gb"])))
    slowest = max(measured, key=lambda r: r["ours_s"] / r["bare_s"])
    within = sum(abs(_off(r["estimate_gb"], r["peak_gb"])) <= GOAL_ESTIMATE for r in measured)
    fast = sum(r["ours_s"] / r["bare_s"] <= GOAL_TIME for r in measured)
    return (
        f"estimate within ±{GOAL_ESTIMATE:.0%} of the peak: {within} of {len(measured)} rows "
        f"(worst {_off(worst['estimate_gb'], worst['peak_gb']):+.0%}, {worst['family']} "
        f"{worst['setting']}); ours ≤ {GOAL_TIME}× bare: {fast} of {len(measured)} (slowest "
        f"{slowest['ours_s'] / slowest['bare_s']:.2f}×, {slowest['family']} {slowest['setting']})"
    )


if __name__ == "__main__":
    sys.exit(main())
