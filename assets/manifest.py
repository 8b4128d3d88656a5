"""Asset `manifest`: every file of the dataset with its hash, kind and size."""

import dagster as dg
import pandas as pd

from assets.common import log_capped, stage_asset, stage_output
from resources.compute import ComputeResource
from resources.storage import StorageResource
from tunesmith.dataset import manifest as engine
from tunesmith.train.config import dataset_runs


@stage_asset(
    "manifest",
    engine.STAGE_VERSION,
    "Every file of the dataset folder: sha256, kind (audio, image, sidecar, "
    "config) and size. The data version is the hash of this table.",
)
def manifest(
    context: dg.AssetExecutionContext, storage: StorageResource, compute: ComputeResource
) -> dg.Output:
    key = context.partition_key
    folder = storage.dataset_folder(key)
    dataset_runs(folder)  # a broken tunesmith.toml stops the build here, before any work
    hash_cache = storage.roots().store / "hashes" / f"{key}.json"
    result_manifest, result = engine.build_manifest(folder, hash_cache, compute.pool_size())
    log_capped(context.log.warning, [f"skipped {s.path}: {s.reason}" for s in result.skipped])
    frame: pd.DataFrame = result_manifest.to_frame()
    if not any(f.kind in ("audio", "image") for f in result_manifest.files):
        result.extra["note"] = f"empty dataset: no audio or picture files in {folder}"
        context.log.warning(result.extra["note"])
    return stage_output(
        frame,
        result,
        storage.dataset_out(key),
        folder=dg.MetadataValue.path(str(folder)),
        placement="cpu",
    )
