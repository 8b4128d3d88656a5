"""Asset `adapters`: one trained adapter per run, each trained in its own process (Pipes)."""

import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import dagster as dg
import pandas as pd
from dagster._core.errors import (
    DagsterPipesExecutionError,  # raised by the Pipes client; not re-exported
)

from assets.common import stage_asset, stage_output
from resources.compute import GPU_POOL, ComputeResource
from resources.storage import StorageResource
from tunesmith import family as families
from tunesmith import progress
from tunesmith.dataset.manifest import hash_cache_path
from tunesmith.quality import run as quality
from tunesmith.report import Skipped, StageResult, read_report
from tunesmith.store import content_key, verdicts
from tunesmith.train import stage as engine
from tunesmith.train.config import base_model_folder, read_plan, run_document

COLUMNS = [
    "run",
    "family",
    "placement",
    "steps",
    "steps_per_second",
    "base_loss",
    "best_loss",
    "best_step",
    "best_path",
    "last_path",
    "run_dir",
]
LEARNED_CHECK = "adapters_learned"  # the asset check that each kept adapter beats the base


@stage_asset(
    "adapters",
    engine.STAGE_VERSION,
    "One adapter per [[runs]] entry of tunesmith.toml (Stable Audio 3: underfit's conventions "
    "and files; SDXL: PEFT and kohya files; ACE-Step: PEFT folders), a validation loss on "
    "held-out items, the best "
    "and the last checkpoints.",
    pool=GPU_POOL,
    check_specs=[
        *(
            dg.AssetCheckSpec(family.files_check, asset="adapters")
            for family in families.all_families().values()
        ),
        dg.AssetCheckSpec(
            LEARNED_CHECK,
            asset="adapters",
            description="Each kept adapter beats the base model on at least one measure of "
            "its renders (prompt, style, Fréchet distance to the dataset); a warning, not a "
            "failure, where one does not.",
        ),
    ],
)
def adapters(
    context: dg.AssetExecutionContext,
    storage: StorageResource,
    compute: ComputeResource,
    encoded: pd.DataFrame,
):
    start = time.perf_counter()
    key = context.partition_key
    roots, out = storage.roots(), storage.dataset_out(key)
    runs = read_plan(out).runs  # the build's plan (the manifest stage's)
    manifest_version = (
        read_report(out).get("stages", {}).get("manifest", {}).get("data_version", "")
    )
    last_build = {  # each run's folder in the last build, to say why one changes
        r["run"]: Path(r["run_dir"])
        for r in read_report(out).get("stages", {}).get("adapters", {}).get("runs", [])
    }
    rows, skipped, keys = [], [], []
    cached = computed = 0
    measures = quality.RunMeasures(
        storage.dataset_folder(key),
        hash_cache_path(roots.store, key),  # the manifest stage's remembered hashes
        roots.models,
        roots.store,
        context.log.info,
        context.log.warning,
    )
    for run in runs:
        family = families.all_families().get(run.family)
        if family is None or not family.backends_for("adapters"):
            skipped.append(Skipped(f"run {run.name}", f"the {run.family} family has no trainer"))
            continue
        placement = compute.placement("adapters", run.family, family.backends_for("adapters"))
        if refused := engine.one_process_only(run, family, placement.backend):
            skipped.append(Skipped(f"run {run.name}", refused))
            continue
        # A run kept by a measure depends on its embedding model as on its base model.
        if refused := measures.select_refusal(run, family):
            skipped.append(Skipped(f"run {run.name}", refused))
            context.log.warning(f"{run.name}: {refused}")
            continue
        base_model = base_model_folder(run, roots.models)
        try:
            plan = engine.plan(
                run, base_model, encoded, out, placement, roots.store / "fingerprints.json",
                measures.judges(run, family),
            )  # fmt: skip
        except ValueError as exc:
            skipped.append(Skipped(f"run {run.name}", str(exc)))
            continue
        keys.append(plan.key)
        if memory := plan.fitted.line():
            context.log.info(f"{run.name}: {memory}")
        why = engine.why(plan, last_build.get(run.name))
        if why:
            context.log.info(f"{run.name}: {why}")
        engine.record_inputs(plan, why)  # a folder made before such records gets one too
        if plan.cached():
            cached += 1
            context.log.info(f"{run.name}: cached ({plan.result_path})")
        else:
            for path in plan.edited():  # as good as deleted: written again from the state
                Path(path).unlink()
            scoring = (
                measures.select_inputs(plan.run, family, list(plan.items["path"]))
                if plan.run.train.select != "loss"
                else None
            )
            _train(context, plan, placement, manifest_version, roots.store, scoring)
            computed += 1
        result = engine.read_result(plan)
        stopped = result.get("extra", {}).get("stopped", "")
        if stopped:
            context.log.warning(f"{run.name}: {stopped}")
        selected = result.get("extra", {}).get("select") or {}
        if selected.get("by") == "loss":  # asked to keep by a measure, and none beat the base
            context.log.warning(f"{run.name}: {selected['line']}")
        measured = measures.run(
            plan.run, family, plan.run_dir, list(plan.items["path"]), int(result["best_step"])
        )
        rows.append(
            {
                **{k: result[k] for k in COLUMNS if k in result},
                "run": run.name,
                "run_dir": str(plan.run_dir),
                "history": result["history"],
                "quality": measured,
                "validation_note": result["validation_note"],
                "stopped": stopped,
                "select": selected,
                "why": why,
                "settings": family.trained_settings(plan.run),
                "memory": plan.fitted.footprint.as_dict() if plan.fitted.footprint else {},
                "fitted": plan.fitted.changed,
                "files": [
                    {"tool": tool, "path": str(path)}
                    for tool, path in family.files_for_tools(run, Path(result["best_path"]))
                    if path.exists()
                ],
            }
        )
    frame = pd.DataFrame(rows, columns=[*COLUMNS, "history", "validation_note", "stopped"])
    # each run's measures per step, for the renders stage's page (not in the data version)
    frame["quality"] = [json.dumps(_measured(r.get("quality") or {})) for r in rows]
    extra = {"runs": rows, **engine.superseded_section(out / "adapters", rows)}
    engine.write_index(out / "adapters", rows)
    result = StageResult(
        stage="adapters",
        data_version=content_key(stage="adapters", keys=keys, rows=frame[COLUMNS].to_json()),
        items=len(runs),
        cached=cached,
        computed=computed,
        skipped=skipped,
        seconds=time.perf_counter() - start,
        extra=extra,
    )
    table = frame.drop(columns=["history"]).assign(history=frame["history"].map(json.dumps))
    yield stage_output(table, result, out, **_metadata(rows))
    record = roots.store / verdicts.RECORD
    for family in families.all_families().values():
        yield _check(family, rows, record)
    yield _learned_check(rows)


def _train(
    context,
    plan: engine.RunPlan,
    placement,
    manifest_version: str,
    store: Path,
    scoring: dict | None = None,
) -> None:
    """Train one run in a child process; its log streams into this run. The child takes the
    resolved run as the plan holds it (`run_document`) and resolves nothing again; `scoring`:
    what it measures each validation's renders with, where the run keeps its adapter by a
    measure (`quality.RunMeasures.select_inputs`)."""
    extras = {
        "run": run_document(plan.run),
        "base_model": str(plan.base_model),
        "items": json.loads(plan.items.to_json(orient="records")),
        "run_dir": str(plan.run_dir),
        "result_path": str(plan.result_path),
        "placement": placement.as_dict(),
        "metadata": plan.metadata(manifest_version),
        "store": str(store),  # a trainer's own cache entries (Stable Audio 3's SVD bases)
        **({"quality": scoring} if scoring else {}),
    }
    # The child's one-line reason goes to memory-backed temporary storage where there is one:
    # a full disk must not also swallow the message that says so.
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="tunesmith-", dir=shm) as folder:
        error_path = Path(folder) / "error.json"
        extras["error_path"] = str(error_path)
        events, steps = plan.run_dir / "events.jsonl", plan.run.train.steps
        with progress.training(plan.run.name, events, steps, plan.fitted.line()):
            _run_child(context, plan, extras, error_path)


def _run_child(context, plan: engine.RunPlan, extras: dict, error_path: Path) -> None:
    try:
        dg.PipesSubprocessClient().run(
            command=[sys.executable, "-m", "pipelines.train_child"], context=context, extras=extras
        )
    except DagsterPipesExecutionError as exc:  # the process failed or was killed
        # One line for a person: the child's own reason when it could write one, else what
        # is known from outside (it was killed), and what was kept either way.
        reason = (
            json.loads(error_path.read_text(encoding="utf-8"))["error"]
            if error_path.exists()
            else f"the training process ended without finishing ({_exit_detail(exc)})"
        )
        raise dg.Failure(description=f"{plan.run.name}: {reason}; {engine.kept(plan)}") from None


def _exit_detail(exc: Exception) -> str:
    text = str(exc)
    for line in text.splitlines():
        if "return code" in line.lower() or "exit" in line.lower():
            return line.strip()
    return text.splitlines()[0] if text else "no detail"


def _metadata(rows: list[dict]) -> dict:
    """What the asset's page shows without a click: the runs and every validation loss as
    tables, each run's best adapter file as a path; and the values other code reads
    (`runs_summary`: the command's summary; the first run's losses and placement)."""
    if not rows:
        return {}
    first = rows[0]
    return {
        "runs": _table(RUN_COLUMNS, rows),
        "validation_losses": _table(
            LOSS_COLUMNS, [{"run": r["run"], **point} for r in rows for point in r["history"]]
        ),
        **_quality_metadata(rows),
        **{f"adapter {r['run']}": dg.MetadataValue.path(r["best_path"]) for r in rows},
        "best_loss": float(first["best_loss"]),
        "base_loss": float(first["base_loss"]),
        "placement": first.get("placement", ""),
        "runs_summary": dg.MetadataValue.json(
            [
                {
                    k: r[k]
                    for k in (
                        "run",
                        "base_loss",
                        "best_loss",
                        "best_step",
                        "best_path",
                        "stopped",
                        "why",
                        "files",
                    )
                }
                | {"quality": quality.summary_line(r.get("quality") or {}, r.get("select"))}
                for r in rows
            ]
        ),
    }


# The tables' columns: (heading, the row's key, type). The UI draws a table metadata value as
# a table on the asset's page, where markdown is one more block of text to read.
RUN_COLUMNS = [
    ("run", "run", "string"),
    ("base loss", "base_loss", "float"),
    ("best loss", "best_loss", "float"),
    ("best step", "best_step", "int"),
    ("steps", "steps", "int"),
    ("steps/s", "steps_per_second", "float"),
]
LOSS_COLUMNS = [("run", "run", "string"), ("step", "step", "int"), ("loss", "loss", "float")]
CAST = {"string": str, "int": int, "float": float}


def _table(columns: list[tuple[str, str, str]], rows: list[dict]) -> dg.TableMetadataValue:
    schema = dg.TableSchema(columns=[dg.TableColumn(name, kind) for name, _, kind in columns])
    records = [
        dg.TableRecord({name: _cell(CAST[kind], row[key]) for name, key, kind in columns})
        for row in rows
    ]
    return dg.MetadataValue.table(records, schema=schema)


def _cell(cast, value):
    """A cell as a person reads it: a float to six significant digits; a loss that is not
    finite (a run that diverged) left empty, since NaN is not JSON."""
    value = cast(value)
    if not isinstance(value, float):
        return value
    return float(f"{value:.6g}") if math.isfinite(value) else None


QUALITY_COLUMNS = [
    ("run", "run", "string"),
    ("step", "step", "int"),
    ("prompt", "prompt", "float"),
    ("style", "style", "float"),
    ("frechet", "frechet", "float"),
    ("floor", "floor", "float"),
]


def _measured(quality_section: dict) -> dict:
    """What the renders stage shows of a run's measures: each step's numbers, the floor."""
    keys = ("steps", "floor", "verdict", "skipped")
    return {k: quality_section[k] for k in keys if k in quality_section}


def _quality_metadata(rows: list[dict]) -> dict:
    """Each run's measures per sampled step as one table (step 0 is the base model), and the
    kept adapter's numbers as values the UI plots across builds."""
    values = {}
    for row in rows:
        measured = row.get("quality") or {}
        best = {p["step"]: p for p in measured.get("steps", [])}.get(row.get("best_step"))
        for name in ("prompt", "style", "frechet"):
            if best is not None:
                values[f"quality {row['run']} {name}"] = float(f"{best[name]:.6g}")
    table = quality_table(rows)
    return {"quality": table, **values} if table is not None else {}


def quality_table(rows: list[dict]) -> dg.TableMetadataValue | None:
    """The measures of the runs `rows` (each with its `run`, `best_step` and `quality`
    section) per sampled step as one table: step 0 is the base model, `kept` marks the kept
    adapter's step; None where nothing was measured. The renders stage shows it too."""
    points = []
    for row in rows:
        measured = row.get("quality") or {}
        for point in measured.get("steps", []):
            kept = point["step"] == row.get("best_step")
            floor = measured.get("floor")
            points.append(
                {"run": row["run"], "floor": math.nan if floor is None else floor, **point}
                | {"kept": "kept" if kept else ""}
            )
    if not points:
        return None
    columns = QUALITY_COLUMNS
    if any("style_dino" in p for p in points):
        columns = [*columns, ("style (DINOv2)", "style_dino", "float")]
        points = [{"style_dino": math.nan, **p} for p in points]
    return _table([*columns, ("kept", "kept", "string")], points)


def _learned_check(rows: list[dict]) -> dg.AssetCheckResult:
    """A warning for each kept adapter that beats the base model on no measure."""
    lines, measured = [], 0
    for row in rows:
        judged = (row.get("quality") or {}).get("verdict")
        if not judged or judged["learned"] is None:
            continue
        measured += 1
        if not judged["learned"]:
            lines.append(f"{row['run']}: step {judged['best_step']} beats the base on nothing")
    return dg.AssetCheckResult(
        check_name=LEARNED_CHECK,
        passed=not lines,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "runs measured": measured,
            "not better than the base": "\n".join(lines) or "none",
        },
    )


def _check(family: families.Family, rows: list[dict], record: Path) -> dg.AssetCheckResult:
    """The family's file contract on every adapter file this stage points to (underfit's for
    Stable Audio 3; for SDXL the PEFT file, its kohya twin and the lineage), remembered once
    passed (`Family.validated_files`)."""
    problems, checked = [], 0
    for row in rows:
        if row["family"] != family.name:
            continue
        for path in dict.fromkeys((row["best_path"], row["last_path"])):
            checked += 1
            try:
                family.validated_files(path, record)
            except ValueError as exc:  # the format's own error, naming the file and the rule
                problems.append(str(exc))
    return dg.AssetCheckResult(
        check_name=family.files_check,
        passed=not problems,
        metadata={"files": checked, "problems": "\n".join(problems) or "none"},
    )
