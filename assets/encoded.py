"""Asset `encoded`: latents and text conditioning per item, in each family's training layout."""

import dagster as dg
import pandas as pd

from assets.common import capped_text, log_capped, stage_asset, stage_output
from resources.compute import GPU_POOL, ComputeResource
from resources.storage import StorageResource
from tunesmith import family as families
from tunesmith.report import Skipped, StageResult
from tunesmith.store import content_key
from tunesmith.train.config import base_model_folder, read_plan
from tunesmith.train.preflight import base_model_problem

STAGE_VERSION = 1  # the asset's own; each family's encoder versions its cache keys itself


@stage_asset(
    "encoded",
    STAGE_VERSION,
    "Pre-encoded latents with sidecars for each base model the dataset's runs train on, in "
    "the family's training layout (Stable Audio 3: underfit's <stem>.npy + <stem>.json + "
    "details.json), and the text encoders' output per distinct prompt.",
    pool=GPU_POOL,
)
def encoded(
    context: dg.AssetExecutionContext,
    storage: StorageResource,
    compute: ComputeResource,
    labels: pd.DataFrame,
) -> dg.Output:
    key = context.partition_key
    folder, roots, store = storage.dataset_folder(key), storage.roots(), storage.store()
    runs = read_plan(storage.dataset_out(key)).runs  # the build's plan (the manifest stage's)
    frames, keys, skipped, results, lacking = [], [], [], [], []
    for family in families.all_families().values():
        chosen = [r for r in runs if families.get(r.family).encoder == family.name]
        usable, missing = _base_models(chosen, roots.models)
        skipped += missing
        lacking += _lacking(chosen, usable, roots.models)
        chosen = [r for r in chosen if base_model_folder(r, roots.models) in usable]
        if not chosen:
            continue
        placement = compute.placement("encoded", family.name, family.backends_for("encoded"))
        request = families.EncodeRequest(
            folder=folder,
            labels=labels,
            runs=chosen,
            base_models=sorted(usable),
            out=storage.dataset_out(key),
            store=store,
            placement=placement,
            fingerprint_cache=roots.store / "fingerprints.json",
            workers=compute.encode_workers,
        )
        built = family.encode(request)
        frames.append(built.frame.assign(family=family.name))
        keys += built.keys
        results.append(built.result)
        context.log.info(f"{family.name}: encoded on {placement}")
    for run in runs:
        if not families.all_families().get(run.family):
            skipped.append(Skipped(f"run {run.name}", f"the {run.family} family is not built in"))
    result = StageResult(
        stage="encoded",
        data_version=content_key(stage="encoded", parts=[r.data_version for r in results]),
        items=sum(r.items for r in results),
        cached=sum(r.cached for r in results),
        computed=sum(r.computed for r in results),
        skipped=[s for r in results for s in r.skipped] + skipped,
        seconds=sum(r.seconds for r in results),
        extra={"warnings": _warnings(results)},
    )
    buckets = {run: n for r in results for run, n in r.extra.get("buckets", {}).items()}
    for run, counts in buckets.items():  # kohya's listing of a bucketed dataset
        listed = ", ".join(f"{bucket} {n}" for bucket, n in counts.items())
        context.log.info(f"{run}: {sum(counts.values())} pictures in buckets: {listed}")
    if buckets:
        result.extra["buckets"] = buckets
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame({"model": []})
    store.set_roots(f"{key}/encoded", keys)
    log_capped(context.log.warning, [f"skipped {s.path}: {s.reason}" for s in result.skipped])
    return stage_output(
        frame,
        result,
        storage.dataset_out(key),
        store=store,
        warnings=capped_text(_warnings(results), empty=""),
        # `tunesmith status` calls the stage stale once one of these is whole (freshness.py)
        missing_base_models=dg.MetadataValue.json(lacking),
        **({"buckets": dg.MetadataValue.json(buckets)} if buckets else {}),
    )


def _warnings(results: list[StageResult]) -> list[str]:
    """Every family's encoder's warnings, one line each."""
    return [line for r in results for line in r.extra.get("warnings", [])]


def _lacking(runs, usable: set, models_root) -> list[dict]:
    """Each base model folder that is not whole, with the runs it leaves out."""
    folders = sorted({base_model_folder(r, models_root) for r in runs} - usable)
    return [
        {
            "base_model": str(folder),
            "runs": [r.name for r in runs if base_model_folder(r, models_root) == folder],
        }
        for folder in folders
    ]


def _base_models(runs, models_root) -> tuple[set, list[Skipped]]:
    """The runs' base model folders that are whole, and one message per one that is not (not
    one per item), worded as `tunesmith check` words it."""
    usable, missing = set(), []
    for folder in sorted({base_model_folder(r, models_root) for r in runs}):
        users = [r for r in runs if base_model_folder(r, models_root) == folder]
        problem = base_model_problem(users[0], models_root)
        if not problem:
            usable.add(folder)
            continue
        names = ", ".join(r.name for r in users)
        reason = f"{problem}. Run(s) {names} are not trained."
        missing.append(Skipped(f"base model {folder.name}", reason))
    return usable, missing
