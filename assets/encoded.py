"""Asset `encoded`: latents and text conditioning per item, in each family's training layout."""

import dagster as dg
import pandas as pd

from assets.common import stage_asset, stage_output
from resources.compute import GPU_POOL, ComputeResource
from resources.storage import StorageResource
from tunesmith.families.sdxl import FAMILY as SDXL
from tunesmith.families.sdxl import encoded as sdxl
from tunesmith.families.stable_audio_3 import FAMILY as SA3
from tunesmith.families.stable_audio_3 import encoded as sa3
from tunesmith.report import Skipped, StageResult
from tunesmith.store import content_key
from tunesmith.train.config import ConfigError, base_model_folder, dataset_runs


@stage_asset(
    "encoded",
    sa3.STAGE_VERSION,
    "Pre-encoded latents with sidecars for each base model the dataset's runs "
    "train on (Stable Audio 3: underfit's <stem>.npy + <stem>.json + details.json), and the "
    "text encoder's output per distinct prompt.",
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
    try:
        runs = dataset_runs(folder)
    except ConfigError as exc:
        raise dg.Failure(str(exc)) from exc
    families = {SA3: sa3, SDXL: sdxl}
    frames, keys, skipped, results = [], [], [], []
    for family, engine in families.items():
        chosen = [r for r in runs if r.family == family]
        if not chosen:
            continue
        models = sorted({base_model_folder(r, roots.models) for r in chosen})
        placement = compute.placement("encoded", family, {"torch"})
        extra = {"size": chosen[0].train.size} if family == SDXL else {}
        built = engine.build_encoded(
            folder, labels, models, storage.dataset_out(key), store, placement,
            roots.store / "fingerprints.json", **extra,
        )  # fmt: skip
        frames.append(built.frame.assign(family=family))
        keys += built.keys
        results.append(built.result)
        context.log.info(f"{family}: encoded on {placement}")
    for run in runs:
        if run.family not in families:
            note = f"the {run.family} family has no encoded stage yet"
            skipped.append(Skipped(f"run {run.name}", note))
    result = StageResult(
        stage="encoded",
        data_version=content_key(stage="encoded", parts=[r.data_version for r in results]),
        items=sum(r.items for r in results),
        cached=sum(r.cached for r in results),
        computed=sum(r.computed for r in results),
        skipped=[s for r in results for s in r.skipped] + skipped,
        seconds=sum(r.seconds for r in results),
        extra={
            "warnings": "; ".join(
                str(r.extra["warnings"]) for r in results if r.extra.get("warnings")
            )
        },  # fmt: skip
    )
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame({"model": []})
    store.set_roots(f"{key}/encoded", keys)
    for item in result.skipped:
        context.log.warning(f"skipped {item.path}: {item.reason}")
    return stage_output(frame, result, storage.dataset_out(key), store=store)
