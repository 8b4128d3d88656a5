"""Asset `manifest`: every file of the dataset with its hash, kind and size; and the build's plan
(the dataset's runs resolved once, `<out>/plan.json`), which the later stages read."""

import dagster as dg
import pandas as pd

from assets.common import log_capped, stage_asset, stage_output
from resources.compute import ComputeResource
from resources.storage import StorageResource
from tunesmith.dataset import manifest as engine
from tunesmith.train.config import load_plan, media_kind, write_plan


@stage_asset(
    "manifest",
    engine.STAGE_VERSION,
    "Every file of the dataset folder: sha256, kind (audio, image, sidecar, "
    "config) and size. The data version is the hash of this table. Writes the build's plan: "
    "the runs of tunesmith.toml, resolved once for the later stages.",
)
def manifest(
    context: dg.AssetExecutionContext, storage: StorageResource, compute: ComputeResource
) -> dg.Output:
    key = context.partition_key
    folder = storage.dataset_folder(key)
    plan = load_plan(folder)  # a broken tunesmith.toml stops the build here, before any work
    hash_cache = engine.hash_cache_path(storage.roots().store, key)
    result_manifest, result = engine.build_manifest(folder, hash_cache, compute.pool_size())
    log_capped(context.log.warning, [f"skipped {s.path}: {s.reason}" for s in result.skipped])
    frame: pd.DataFrame = result_manifest.to_frame()
    notes = list(plan.notes)  # a run in an older form, read as what it is now
    if not any(f.kind in ("audio", "image") for f in result_manifest.files):
        notes.append(f"empty dataset: no audio or picture files in {folder}")
    plan = plan.with_default(media_kind([f.kind for f in result_manifest.files]))
    plan_path = write_plan(storage.dataset_out(key), plan)
    for note in notes:
        context.log.warning(note)
    if notes:
        result.extra["note"] = "; ".join(notes)
    return stage_output(
        frame,
        result,
        storage.dataset_out(key),
        folder=dg.MetadataValue.path(str(folder)),
        plan=dg.MetadataValue.path(str(plan_path)),
        placement="cpu",
    )
