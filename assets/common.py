"""What every stage asset shares: the partitions, the automation rule, the result shape."""

from __future__ import annotations

import functools
import inspect
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any

import dagster as dg

from resources.compute import GPU_POOL
from resources.k8s import gpu_step_tags
from tunesmith.report import StageResult, write_stage
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
    return lambda fn: decorate(_user_errors_as_failures(fn))


def _user_errors_as_failures(fn):
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def generator(*args, **kwargs):
            try:
                yield from fn(*args, **kwargs)
            except USER_ERRORS as exc:
                raise dg.Failure(description=str(exc)) from None

        return generator

    @functools.wraps(fn)
    def function(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except USER_ERRORS as exc:
            raise dg.Failure(description=str(exc)) from None

    return function


def stage_output(
    value: Any, result: StageResult, dataset_out: Path, store: Store | None = None, **metadata: Any
) -> dg.Output:
    """The asset's Output: data version, report.json section, and the run's metadata (with the
    store entries found damaged and evicted while the stage ran, when given its store)."""
    if store is not None and store.evictions:
        result.extra["evicted"] = list(store.evictions)
    report = write_stage(dataset_out, result)
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
        rows = "\n".join(f"| `{s.path}` | {s.reason} |" for s in result.skipped)
        md["skipped_items"] = dg.MetadataValue.md(f"| file | reason |\n|---|---|\n{rows}")
        md["skipped_list"] = dg.MetadataValue.json([asdict(s) for s in result.skipped])
    if result.extra.get("evicted"):
        md["evicted"] = "\n".join(result.extra["evicted"])
    return dg.Output(value, data_version=dg.DataVersion(result.data_version), metadata=md)
