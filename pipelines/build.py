"""The building process of `tunesmith run`: `python -m pipelines.build DATASET...`.

First it fails the runs a killed build left unfinished (freeing their pool slots) and
registers the datasets as partitions; then it materializes the `build_dataset` job for each
dataset in this process (the code path the UI's runs take), tagging each run with this
process's id so a later build can tell a killed run from a live one, and prints a summary made
from the run's own events: two builds at once each report what they did, not what the other
did.

`tunesmith run` starts it as a child and stays responsive to SIGTERM and SIGINT itself (Dagster
defers interrupts inside a run to its own checkpoints); see `pipelines.operations`.
"""

from __future__ import annotations

import gc
import logging
import sys

import dagster as dg

from assets.common import datasets as datasets_partitions
from pipelines.definitions import ASSETS, defs
from pipelines.instance import launcher_tags, open_instance, reap_dead_runs, watch_pool
from resources.storage import StorageResource
from tunesmith import progress
from tunesmith.report import BUILT_WITH_SKIPS

# Dagster's console logger prints every engine event, and a failed step's whole stack; the
# summary says what failed in one line, and `tunesmith ui` keeps the full logs.
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
STAGES = [a.key.to_user_string() for a in ASSETS]  # in dependency order


def build(keys: list[str]) -> int:
    instance = open_instance()
    storage = StorageResource()
    reap_dead_runs(instance, say=lambda line: print(line, flush=True))
    instance.add_dynamic_partitions(datasets_partitions.name, keys)
    job = defs.resolve_job_def("build_dataset")
    codes = [build_one(instance, job, storage, key) for key in keys]
    if 1 in codes:
        return 1
    return BUILT_WITH_SKIPS if BUILT_WITH_SKIPS in codes else 0


def build_one(instance, job, storage: StorageResource, key: str) -> int:
    """0: built; 1: failed; BUILT_WITH_SKIPS: built without something a stage skipped."""
    print(f"== {key}", flush=True)
    with progress.shown(), watch_pool(instance, say=lambda line: print(line, flush=True)):
        result = job.execute_in_process(
            instance=instance,
            partition_key=key,
            raise_on_error=False,
            run_config=QUIET,
            tags=launcher_tags(),
        )
    print("\n".join(summary(result)), flush=True)
    print(f"  report: {storage.dataset_out(key) / 'report.json'}", flush=True)
    if not result.success:
        return 1
    count, named = skipped_items(result)
    if count:
        shown = ", ".join(named[:3]) + (", …" if count > 3 else "")
        print(
            f"{key}: {count} skipped ({shown}): everything else is built; the reasons are "
            "above and in report.json",
            flush=True,
        )
    return BUILT_WITH_SKIPS if count else 0


def skipped_items(result: dg.ExecuteInProcessResult) -> tuple[int, list[str]]:
    """How many things this run's stages skipped, and the ones their metadata lists, each
    once (a file two runs' encodings skip is one file)."""
    named, unlisted = [], 0
    for event in result.get_asset_materialization_events():
        md = event.materialization.metadata
        listed = [item["path"] for item in getattr(md.get("skipped_list"), "value", None) or []]
        named += listed
        unlisted += max(0, (getattr(md.get("skipped"), "value", 0) or 0) - len(listed))
    named = list(dict.fromkeys(named))
    return len(named) + unlisted, named


def summary(result: dg.ExecuteInProcessResult) -> list[str]:
    """What this run did, stage by stage, from its own materializations and checks."""
    lines = []
    stages = {
        event.asset_key.to_user_string(): {
            k: getattr(v, "value", v) for k, v in event.materialization.metadata.items()
        }
        for event in result.get_asset_materialization_events()
    }
    for stage in (s for s in STAGES if s in stages):
        md = stages[stage]
        lines.append(
            f"  {stage:<10} items {md['items']:>4}  computed {md['computed']:>4}  "
            f"cached {md['cached']:>4}  skipped {md['skipped']:>3}  {md['seconds']:>8.2f} s"
        )
        if md.get("note"):
            lines.append(f"      {md['note']}")
        listed = md.get("skipped_list") or []
        for item in listed:
            lines.append(f"      skipped {item['path']}: {item['reason']}")
        if md["skipped"] > len(listed):
            lines.append(f"      … and {md['skipped'] - len(listed)} more skipped: see the report")
        for line in (md.get("evicted") or "").splitlines():
            lines.append(f"      {line}")
        for line in (md.get("warning_lines") or "").splitlines():
            lines.append(f"      warning: {line}")
        for run in md.get("runs_summary") or []:
            lines.append(
                f"      run {run['run']}: validation loss {run['base_loss']:.4f} (base) → "
                f"{run['best_loss']:.4f} (best, step {run['best_step']}); {run['best_path']}"
            )
            for file in run.get("files") or []:
                lines.append(f"        for {file['tool']}: {file['path']}")
            if run.get("why"):
                lines.append(f"      run {run['run']}: {run['why']}")
            if run.get("stopped"):
                lines.append(f"      run {run['run']}: {run['stopped']}")
            if run.get("quality"):
                lines.append(f"      run {run['run']}: {run['quality']}")
    for check in result.get_asset_check_evaluations():
        if not check.passed and check.severity == dg.AssetCheckSeverity.WARN:
            lines.append(f"  warning: check {check.check_name}: {_check_detail(check)}")
        elif not check.passed:
            problems = check.metadata.get("problems")
            detail = getattr(problems, "value", problems) or ""
            lines.append(f"  check {check.check_name} FAILED: {detail}")
    for event in result.get_step_failure_events():
        lines.append(f"  failed: {event.step_key}: {failure_reason(event)}")
    return lines


def _check_detail(check) -> str:
    """A check's own words: the metadata values it gave, a line each joined."""
    values = {k: getattr(v, "value", v) for k, v in check.metadata.items()}
    return "; ".join(f"{k}: {v}" for k, v in values.items())


def failure_reason(event: dg.DagsterEvent) -> str:
    """One line: a user error's own words (a dg.Failure, wherever Dagster wrapped it), else
    the innermost exception's message."""
    data = event.step_failure_data
    if data.user_failure_data and data.user_failure_data.description:
        return data.user_failure_data.description
    error, innermost = data.error, None
    while error is not None:
        if error.cls_name == "Failure":
            return error.message.split(": ", 1)[-1].strip()
        innermost, error = error, error.cause or error.context
    lines = (innermost.message if innermost else "unknown error").strip().splitlines()
    return lines[-1] if lines else "unknown error"


def main() -> int:
    # The process holds Dagster's, pandas' and pydantic's objects, half a million: the
    # collector's full passes walk them all, during the runs and again two or three times as
    # the interpreter tears down at exit. Frozen after the imports and before exit, they are
    # left out of those passes (each is still freed by its reference count; only what sits in
    # a cycle is left to the operating system, and every file is written and closed by then).
    # A no-change `tunesmith run` of 1,000 songs and 1,000 pictures: 15.2 s → 13.5 s.
    gc.freeze()
    code = build(sys.argv[1:])
    logging.shutdown()
    gc.freeze()
    return code


if __name__ == "__main__":
    sys.exit(main())
