"""Asset `encoded`: latents and text conditioning per item, in each family's training layout."""

import dagster as dg
import pandas as pd

from assets.common import stage_asset, stage_output
from resources.compute import GPU_POOL, ComputeResource
from resources.storage import StorageResource
from tunesmith.families.stable_audio_3 import FAMILY as SA3
from tunesmith.families.stable_audio_3 import encoded as sa3
from tunesmith.report import Skipped
from tunesmith.train.config import ConfigError, base_model_folder, load_runs, media_kind


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
        runs = load_runs(folder, media_kind(list(labels["kind"])))
    except ConfigError as exc:
        raise dg.Failure(str(exc)) from exc
    models = sorted({base_model_folder(r, roots.models) for r in runs if r.family == SA3})
    placement = compute.placement("encoded", SA3, {"torch"})
    result = sa3.build_encoded(
        folder, labels, models, storage.dataset_out(key), store, placement,
        roots.store / "fingerprints.json",
    )  # fmt: skip
    for run in runs:
        if run.family != SA3:
            note = f"run {run.name!r}: the {run.family} family has no encoded stage yet"
            result.result.skipped.append(Skipped(f"run {run.name}", note))
    store.set_roots(f"{key}/encoded", result.keys)
    for skipped in result.result.skipped:
        context.log.warning(f"skipped {skipped.path}: {skipped.reason}")
    return stage_output(
        result.frame, result.result, storage.dataset_out(key), placement=str(placement)
    )
