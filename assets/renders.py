"""Asset `renders`: each run's demo prompts, base and best adapter, same seed."""

import json

import dagster as dg
import pandas as pd

from assets.adapters import quality_table
from assets.common import stage_asset, stage_output
from resources.compute import GPU_POOL, ComputeResource
from resources.storage import StorageResource
from tunesmith import family as families
from tunesmith.render import demos as engine
from tunesmith.store import content_key
from tunesmith.store.fingerprints import model_fingerprint
from tunesmith.train.config import base_model_folder, read_plan


@stage_asset(
    "renders",
    engine.STAGE_VERSION,
    "Per run and demo prompt: the base model and the best adapter rendered with the same "
    "seed through the family's diffusers pipeline (audio: WAV, MP3 where ffmpeg is present, "
    "spectrogram; images: PNG; a JSON sidecar each).",
    pool=GPU_POOL,
)
def renders(
    context: dg.AssetExecutionContext,
    storage: StorageResource,
    compute: ComputeResource,
    adapters: pd.DataFrame,
) -> dg.Output:
    key = context.partition_key
    roots, out = storage.roots(), storage.dataset_out(key)
    configs = {r.name: r for r in read_plan(out).runs}  # the build's plan
    runs = [(configs[row["run"]], row) for row in adapters.to_dict("records")]
    cache = roots.store / "fingerprints.json"
    fingerprints = {run.name: _base_fingerprint(run, roots.models, cache) for run, _ in runs}
    placements = {
        name: compute.placement("renders", name, families.get(name).backends_for("renders"))
        for name in {r.family for r, _ in runs}
    }

    def renderer(run, adapter):
        base_model, placement = base_model_folder(run, roots.models), placements[run.family]
        return families.get(run.family).renderer(run, base_model, placement, adapter)

    store = storage.store()
    result = engine.build_renders(runs, fingerprints, out, store, placements, renderer)
    store.set_roots(f"{key}/renders", result.keys)
    for note in result.result.extra.get("notes", []):
        context.log.warning(note)
    return stage_output(
        result.frame,
        result.result,
        out,
        store=store,
        placement=_placement_text(placements),
        renders_folder=dg.MetadataValue.path(str(out / "renders")),
        notes="; ".join(result.result.extra.get("notes", [])) or "none",
        demos=dg.MetadataValue.json(json.loads(result.frame.to_json(orient="records"))),
        **_measures(adapters),
    )


def _measures(adapters: pd.DataFrame) -> dict:
    """The measures of each run's renders drawn in training (the adapters stage's), a table a
    run: what the kept adapter's renders, rendered here beside the base model's, scored."""
    if "quality" not in adapters:  # a table written before the measures were kept in it
        return {}
    tables = {}
    for row in adapters.to_dict("records"):
        measured = json.loads(row["quality"] or "{}")
        run = {"run": row["run"], "best_step": row["best_step"], "quality": measured}
        table = quality_table([run])
        if table is not None:
            tables[f"quality {row['run']}"] = table
        elif measured.get("skipped"):
            tables[f"quality {row['run']}"] = measured["skipped"]
    return tables


def _base_fingerprint(run, models, cache) -> str:
    """What the base side renders from: the base model, and any other model the family's
    renderer reads for the run (a planner LM)."""
    folder = base_model_folder(run, models)
    fingerprint = model_fingerprint(folder, cache)
    inputs = families.get(run.family).other_models(run, folder, cache)
    return content_key(base=fingerprint, **inputs) if inputs else fingerprint


def _placement_text(placements: dict) -> str:
    """One placement as itself; several as `family: placement; …`."""
    if len(set(placements.values())) <= 1:
        return str(next(iter(placements.values()), "none"))
    return "; ".join(f"{family}: {p}" for family, p in sorted(placements.items()))
