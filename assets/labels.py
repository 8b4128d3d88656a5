"""Asset `labels`: caption, tags, label fields and analysis (Essentia, Pillow) per item."""

import dagster as dg
import pandas as pd

from assets.common import capped_markdown, capped_text, log_capped, stage_asset, stage_output
from resources.compute import ComputeResource
from resources.storage import StorageResource
from tunesmith.dataset import labels as engine
from tunesmith.dataset import review
from tunesmith.dataset.manifest import Manifest
from tunesmith.store.atomic import json_bytes, write_if_changed


@stage_asset(
    "labels",
    engine.STAGE_VERSION,
    "Per item: caption, tags, lyrics, language, bpm, key and time signature, each with its "
    "source (underfit .json > ACE-Step .caption.txt / .lyrics.txt > .txt > Side-Step "
    "dataset.json > embedded tags > analysis > file name > assumed) and, where measured, "
    "a confidence; loudness by Essentia for audio; size and mode for images. Values under "
    "the confidence floor or contradicting the analysis are listed for review.",
)
def labels(
    context: dg.AssetExecutionContext,
    storage: StorageResource,
    compute: ComputeResource,
    manifest: pd.DataFrame,
) -> dg.Output:
    key = context.partition_key
    store = storage.store()
    folder = storage.dataset_folder(key)
    result = engine.build_labels(
        folder, Manifest.from_frame(manifest), store, workers=compute.pool_size()
    )
    store.set_roots(f"{key}/labels", result.keys)
    extra = result.result.extra
    log_capped(
        context.log.warning, [f"skipped {s.path}: {s.reason}" for s in result.result.skipped]
    )
    log_capped(context.log.warning, extra.get("warnings", []))
    log_capped(
        context.log.info, [f"ignored {i['path']}: {i['reason']}" for i in extra.get("ignored", [])]
    )
    out = storage.dataset_out(key)
    side_step = out / "dataset.json"
    exported = engine.side_step_dataset(result, folder, key)
    if exported["samples"]:
        write_if_changed(side_step, json_bytes(exported))
        shown = dg.MetadataValue.path(str(side_step))
    else:  # Side-Step trains on songs: a folder of pictures has no dataset.json for it
        side_step.unlink(missing_ok=True)
        shown = "none (no audio)"
    return stage_output(
        result.frame,
        result.result,
        out,
        store=store,
        side_step_dataset=shown,
        placement="cpu",
        workers=compute.pool_size(),
        warnings=capped_text(extra.get("warnings", [])),
        review=capped_markdown(review.markdown, extra["review"]),
        ignored=capped_markdown(review.ignored_markdown, extra.get("ignored", [])),
    )
