"""Asset `labels`: caption, tags and analysis (Essentia, Pillow) per item."""

import dagster as dg
import pandas as pd

from assets.common import stage_asset, stage_output
from resources.storage import StorageResource
from tunesmith.dataset import labels as engine
from tunesmith.dataset.manifest import Manifest
from tunesmith.store.atomic import atomic_write_json


@stage_asset(
    "labels",
    engine.STAGE_VERSION,
    "Per item: caption and tags from the sidecars (underfit .json > .txt > "
    "dataset.json > embedded tags > file name); BPM, key and loudness by Essentia for "
    "audio; size and mode for images.",
)
def labels(
    context: dg.AssetExecutionContext, storage: StorageResource, manifest: pd.DataFrame
) -> dg.Output:
    key = context.partition_key
    store = storage.store()
    result = engine.build_labels(storage.dataset_folder(key), Manifest.from_frame(manifest), store)
    store.set_roots(f"{key}/labels", result.keys)
    for skipped in result.result.skipped:
        context.log.warning(f"skipped {skipped.path}: {skipped.reason}")
    for warning in result.result.extra.get("warnings", []):
        context.log.warning(warning)
    out = storage.dataset_out(key)
    side_step = out / "dataset.json"
    atomic_write_json(side_step, engine.side_step_dataset(result.frame, key))
    return stage_output(
        result.frame,
        result.result,
        out,
        store=store,
        side_step_dataset=dg.MetadataValue.path(str(side_step)),
        placement="cpu",
        warnings="\n".join(result.result.extra.get("warnings", [])) or "none",
    )
