"""Asset `auditions`: one self-contained HTML page per run to hear what the adapter learned."""

import base64
import json
import math
from pathlib import Path

import dagster as dg
import pandas as pd

from assets.common import stage_asset, stage_output
from resources.storage import StorageResource
from tunesmith.dataset.manifest import hash_cache_path
from tunesmith.render import auditions as engine
from tunesmith.render.audition import MEASURE_NAMES
from tunesmith.render.curve import curve_png, loss_curve_png
from tunesmith.render.pair_measures import PairMeasures
from tunesmith.render.ratings import folders_fingerprint
from tunesmith.report import read_report, update_report
from tunesmith.store import verdicts
from tunesmith.train.config import read_plan


@stage_asset(
    "auditions",
    engine.STAGE_VERSION,
    "Per run: an HTML page (works from file://, no network) with base and adapter players "
    "side by side, spectrograms, the validation-loss curve and each quality measure per step, "
    "which side each pair's measures prefer, the resolved config and lineage, and a blind A/B "
    "mode whose choices export as JSON; exported choices handed back into the run's folder "
    "(ratings/*.json, `tunesmith ratings`) are counted per adapter step.",
)
def auditions(
    context: dg.AssetExecutionContext,
    storage: StorageResource,
    adapters: pd.DataFrame,
    renders: pd.DataFrame,
) -> dg.Output:
    key = context.partition_key
    roots, out = storage.roots(), storage.dataset_out(key)
    configs = {r.name: r for r in read_plan(out).runs}  # the build's plan
    notes = read_report(out).get("stages", {}).get("renders", {}).get("notes", [])
    record = roots.store / verdicts.RECORD
    measures = PairMeasures(
        storage.dataset_folder(key),
        hash_cache_path(roots.store, key),  # the manifest stage's remembered hashes
        roots.models,
        roots.store,
        context.log.info,
    )
    pages, result = engine.build_auditions(
        out, key, configs, adapters, renders, notes, record, measures
    )
    metadata = {}
    tallies = result.extra["ratings"]
    for trained, page in zip(adapters.to_dict("records"), pages, strict=True):
        name, history = trained["run"], json.loads(trained["history"])
        best_step = int(trained["best_step"])
        png = base64.b64encode(loss_curve_png(history, best_step)).decode()
        table = "\n".join(f"| {h['step']} | {h['loss']:.5f} |" for h in history)
        metadata[f"{name}_loss_curve"] = dg.MetadataValue.md(
            f"![validation loss](data:image/png;base64,{png})"
        )
        metadata[f"{name}_validation"] = dg.MetadataValue.md(
            f"| step | validation loss |\n|---|---|\n{table}"
        )
        if curves := _quality_curves(engine.run_quality(Path(trained["run_dir"]), best_step)):
            metadata[f"{name}_quality_curves"] = dg.MetadataValue.md(curves)
        metadata[f"{name}_ratings"] = dg.MetadataValue.md(_ratings_table(tallies.get(name)))
        metadata[f"{name}_page"] = dg.MetadataValue.path(str(page))
    for name, tally in tallies.items():
        for checkpoint in tally["checkpoints"]:
            metadata[f"{name}_choices_step_{checkpoint['step']}"] = checkpoint["choices"]
    metadata["ratings_files"] = folders_fingerprint([Path(d) for d in adapters["run_dir"]])
    metadata["ratings_choices"] = sum(
        c["choices"] for tally in tallies.values() for c in tally["checkpoints"]
    )
    for skipped in result.skipped:
        context.log.warning(f"{skipped.path}: {skipped.reason}")
    frame = pd.DataFrame({"run": list(adapters["run"]), "page": [str(p) for p in pages]})
    output = stage_output(frame, result, out, **metadata)
    listed = json.loads(renders.to_json(orient="records"))
    update_report(
        out, lambda report: report.update(renders=listed, auditions=result.extra["pages"])
    )
    context.log.info(f"audition pages: {', '.join(map(str, pages)) or 'none'}")
    return output


def _quality_curves(quality: dict | None) -> str:
    """Each measure per step as a small picture (Markdown), the kept step in red; "" where the
    run was not measured."""
    if not quality:
        return ""
    rows, kept = quality["steps"], quality["kept_step"]
    parts = []
    for measure, words in MEASURE_NAMES.items():
        points = [
            (int(r["step"]), float(r[measure]))
            for r in rows
            if isinstance(r.get(measure), int | float) and math.isfinite(r[measure])
        ]
        if not points:
            continue
        by_step = dict(points)
        title = f"{words}: base {points[0][1]:.4f}"
        title += f", kept (step {kept}) {by_step[kept]:.4f}" if kept in by_step else ""
        png = base64.b64encode(curve_png(points, kept, title)).decode()
        parts.append(f"![{words}](data:image/png;base64,{png})")
    return "\n\n".join(parts)


def _ratings_table(tally: dict | None) -> str:
    """The run's blind choices handed back, per adapter step, as Markdown."""
    checkpoints = (tally or {}).get("checkpoints") or []
    if not checkpoints:
        return "no blind choices handed back (ratings/*.json in the run's folder)"
    rows = "\n".join(
        f"| {c['step']} | {c['adapter']} | {c['base']} | {c['same']} | {c['choices']} | "
        f"{_share(c['adapter_share'])} | {c['files']} |"
        for c in checkpoints
    )
    return (
        "| step | adapter | base | no difference | choices | prefer the adapter | files |\n"
        f"|---|---|---|---|---|---|---|\n{rows}"
    )


def _share(share: float | None) -> str:
    return "–" if share is None else f"{share:.0%}"
