"""Asset `auditions`: one self-contained HTML page per run to hear what the adapter learned."""

import base64
import json

import dagster as dg
import pandas as pd

from assets.common import stage_asset, stage_output
from resources.storage import StorageResource
from tunesmith.render import auditions as engine
from tunesmith.render.curve import loss_curve_png
from tunesmith.report import read_report, update_report
from tunesmith.store import verdicts
from tunesmith.train.config import read_plan


@stage_asset(
    "auditions",
    engine.STAGE_VERSION,
    "Per run: an HTML page (works from file://, no network) with base and adapter players "
    "side by side, spectrograms, the validation-loss curve, the resolved config and lineage, "
    "and a blind A/B mode whose choices export as JSON.",
)
def auditions(
    context: dg.AssetExecutionContext,
    storage: StorageResource,
    adapters: pd.DataFrame,
    renders: pd.DataFrame,
) -> dg.Output:
    key = context.partition_key
    out = storage.dataset_out(key)
    configs = {r.name: r for r in read_plan(out).runs}  # the build's plan
    notes = read_report(out).get("stages", {}).get("renders", {}).get("notes", [])
    record = storage.roots().store / verdicts.RECORD
    pages, result = engine.build_auditions(out, key, configs, adapters, renders, notes, record)
    metadata = {}
    for trained, page in zip(adapters.to_dict("records"), pages, strict=True):
        name, history = trained["run"], json.loads(trained["history"])
        png = base64.b64encode(loss_curve_png(history, int(trained["best_step"]))).decode()
        table = "\n".join(f"| {h['step']} | {h['loss']:.5f} |" for h in history)
        metadata[f"{name}_loss_curve"] = dg.MetadataValue.md(
            f"![validation loss](data:image/png;base64,{png})"
        )
        metadata[f"{name}_validation"] = dg.MetadataValue.md(
            f"| step | validation loss |\n|---|---|\n{table}"
        )
        metadata[f"{name}_page"] = dg.MetadataValue.path(str(page))
    frame = pd.DataFrame({"run": list(adapters["run"]), "page": [str(p) for p in pages]})
    output = stage_output(frame, result, out, **metadata)
    listed = json.loads(renders.to_json(orient="records"))
    update_report(
        out, lambda report: report.update(renders=listed, auditions=result.extra["pages"])
    )
    context.log.info(f"audition pages: {', '.join(map(str, pages)) or 'none'}")
    return output
