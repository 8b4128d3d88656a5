"""What every stage asset shares: the partitions, the automation rule, the result shape."""

from __future__ import annotations

import functools
import inspect
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import dagster as dg

from resources.compute import GPU_POOL
from resources.k8s import gpu_step_tags
from tunesmith import progress
from tunesmith.report import StageResult, record_outputs, warning_lines, write_stage
from tunesmith.store import Store
from tunesmith.store.atomic import DiskFull
from tunesmith.train.config import ConfigError

# Output(data_version=...) is marked beta in 1.13; it is the documented way to report one.
warnings.filterwarnings("ignore", category=dg.BetaWarning, message=".*data_version.*")
# Dagster's own Pipes client calls a preview function of itself.
warnings.filterwarnings("ignore", category=dg.PreviewWarning, message=".*expected_writer_count.*")

datasets = dg.DynamicPartitionsDefinition(name="datasets")

AC = dg.AutomationCondition
# Fire on a real upstream change only: a cache-hit rematerialization keeps its data version
# and must not cascade (plain eager() fires on any upstream materialization).
ON_NEW_DATA = AC.eager().replace(
    "any_deps_updated", AC.any_deps_match(AC.data_version_changed())
) | (AC.code_version_changed() & ~AC.in_progress())


# What a person can fix (their config, their disk): reported as one line, not a traceback.
USER_ERRORS = (ConfigError, DiskFull)

# Per-item lists (skipped files, warnings, review rows, ignored files) are shown in the UI and
# logged up to this many rows, then one line says how many more there are and where the whole
# list is (report.json; the stage's parquet table). Metadata and log lines are stored in every
# run's event log: uncapped, 5,000 review rows would add half a megabyte to each run, and a
# person reads the first screenful anyway.
ROWS_SHOWN = 20
# Any text metadata value is cut at this many characters, for the same reason.
TEXT_SHOWN = 4000
WHOLE_LIST = "report.json"


def stage_asset(name: str, version: int, description: str, **kwargs: Any):
    """`@dg.asset` for a stage: partitioned by dataset, versioned, stored as parquet, and
    rematerialized by automation only when an upstream data version really changed (the
    first stage, with no upstream, is started by the sensor, the schedule or a person).
    A user error raised inside becomes a `dg.Failure` carrying its one-line message. A stage
    in the pool "gpu" also carries the Kubernetes GPU request (resources/k8s.py)."""
    if kwargs.get("pool") == GPU_POOL:
        kwargs["op_tags"] = {**gpu_step_tags(), **kwargs.get("op_tags", {})}
    decorate = dg.asset(
        name=name,
        partitions_def=datasets,
        code_version=f"{name}-{version}",
        io_manager_key="parquet_io",
        group_name="tunesmith",
        automation_condition=None if name == "manifest" else ON_NEW_DATA,
        description=description,
        **kwargs,
    )
    return lambda fn: decorate(_user_errors_as_failures(name, fn))


def _user_errors_as_failures(name: str, fn):
    """Also adds `asset_seconds` to the stage's Output: the time spent in the asset function,
    so a run's time splits into the stages' own and Dagster's (bench/scale.py reads it); and
    says to the build's display (`tunesmith.progress`) that the stage is at work."""
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def generator(*args, **kwargs):
            start = time.perf_counter()
            try:
                with progress.stage(name):
                    for event in fn(*args, **kwargs):
                        yield _timed(event, start)
            except USER_ERRORS as exc:
                raise dg.Failure(description=str(exc)) from None

        return generator

    @functools.wraps(fn)
    def function(*args, **kwargs):
        start = time.perf_counter()
        try:
            with progress.stage(name):
                return _timed(fn(*args, **kwargs), start)
        except USER_ERRORS as exc:
            raise dg.Failure(description=str(exc)) from None

    return function


def _timed(event: Any, start: float) -> Any:
    if not isinstance(event, dg.Output):
        return event
    seconds = round(time.perf_counter() - start, 3)
    return event.with_metadata({**event.metadata, "asset_seconds": seconds})


def shown(entries: Sequence[Any]) -> tuple[list[Any], int]:
    """The first ROWS_SHOWN entries, and how many are left out."""
    return list(entries[:ROWS_SHOWN]), max(0, len(entries) - ROWS_SHOWN)


def more_line(left_out: int, where: str = WHOLE_LIST) -> str:
    return f"… and {left_out} more: the whole list is in {where}" if left_out else ""


def capped_markdown(
    render: Callable[[list[Any]], str], entries: Sequence[Any], where: str = WHOLE_LIST
) -> dg.MetadataValue:
    """`render(first rows)` as Markdown, with a line saying how many rows were left out."""
    head, left_out = shown(entries)
    text = render(head)
    return dg.MetadataValue.md(f"{text}\n\n{more_line(left_out, where)}" if left_out else text)


def capped_text(lines: Sequence[str], where: str = WHOLE_LIST, empty: str = "none") -> str:
    head, left_out = shown(lines)
    return "\n".join([*head, more_line(left_out, where)] if left_out else head) or empty


def log_capped(log: Callable[[str], None], lines: Sequence[str], where: str = WHOLE_LIST) -> None:
    """Log the first ROWS_SHOWN lines one by one, then one line for the rest."""
    head, left_out = shown(lines)
    for line in head:
        log(line)
    if left_out:
        log(more_line(left_out, where))


def stage_output(
    value: Any, result: StageResult, dataset_out: Path, store: Store | None = None, **metadata: Any
) -> dg.Output:
    """The asset's Output: data version, report.json section, and the run's metadata (with the
    store entries found damaged and evicted while the stage ran, when given its store)."""
    if store is not None and store.evictions:
        result.extra["evicted"] = list(store.evictions)
    report = write_stage(dataset_out, result)
    record_outputs(dataset_out, result.stage, value)
    md: dict[str, Any] = {
        "items": result.items,
        "cached": result.cached,
        "computed": result.computed,
        "skipped": len(result.skipped),
        "seconds": round(result.seconds, 3),
        "report": dg.MetadataValue.path(str(report)),
        **{k: v for k, v in result.extra.items() if isinstance(v, int | float | str)},
        **metadata,
    }
    if result.skipped:
        md["skipped_items"] = capped_markdown(_skipped_table, result.skipped)
        md["skipped_list"] = dg.MetadataValue.json([asdict(s) for s in shown(result.skipped)[0]])
    if result.extra.get("evicted"):
        md["evicted"] = capped_text(result.extra["evicted"])
    if result.extra.get("warnings"):  # what the command line prints of them
        md["warning_lines"] = "\n".join(warning_lines(result.extra["warnings"]))
    md = {k: _cut(v) if isinstance(v, str) else v for k, v in md.items()}
    return dg.Output(value, data_version=dg.DataVersion(result.data_version), metadata=md)


def _skipped_table(skipped: list) -> str:
    rows = "\n".join(f"| `{s.path}` | {s.reason} |" for s in skipped)
    return f"| file | reason |\n|---|---|\n{rows}"


def _cut(text: str) -> str:
    if len(text) <= TEXT_SHOWN:
        return text
    return f"{text[:TEXT_SHOWN]}… ({len(text)} characters: the whole text is in {WHOLE_LIST})"
