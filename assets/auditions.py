"""Asset `auditions`: one self-contained HTML page per run to hear what the adapter learned."""

import base64
import json
import os
import time
from dataclasses import asdict
from pathlib import Path

import dagster as dg
import pandas as pd
from tunesmith.render.audition import write_audition_page

from assets.common import stage_asset, stage_output
from resources.storage import StorageResource
from tunesmith.adapters.underfit_format import validate_file
from tunesmith.render.curve import loss_curve_png
from tunesmith.report import StageResult, read_report, update_report
from tunesmith.store import content_key
from tunesmith.train.config import load_runs

STAGE_VERSION = 1


@stage_asset(
    "auditions",
    STAGE_VERSION,
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
    start = time.perf_counter()
    key = context.partition_key
    out = storage.dataset_out(key)
    configs = {r.name: r for r in load_runs(storage.dataset_folder(key), "audio")}
    pages, rows, md = [], [], {}
    notes = read_report(out).get("stages", {}).get("renders", {}).get("notes", [])
    for trained in adapters.to_dict("records"):
        run = configs[trained["run"]]
        path = out / "auditions" / f"{run.name}.html"
        page = _page(run, trained, renders[renders["run"] == run.name], path.parent, key, notes)
        write_audition_page(path, page)
        pages.append(str(path))
        rows.append({"run": run.name, "page": str(path)})
        history = json.loads(trained["history"])
        png = base64.b64encode(loss_curve_png(history, int(trained["best_step"]))).decode()
        md[f"{run.name}_loss_curve"] = dg.MetadataValue.md(f"![loss](data:image/png;base64,{png})")
        md[f"{run.name}_page"] = dg.MetadataValue.path(str(path))
        table = "\n".join(f"| {h['step']} | {h['loss']:.5f} |" for h in history)
        md[f"{run.name}_validation"] = dg.MetadataValue.md(
            f"| step | validation loss |\n|---|---|\n{table}"
        )
    frame = pd.DataFrame(rows, columns=["run", "page"])
    result = StageResult(
        stage="auditions",
        data_version=content_key(stage="auditions", pages=[Path(p).read_text() for p in pages]),
        items=len(pages),
        computed=len(pages),
        seconds=time.perf_counter() - start,
        extra={"pages": pages},
    )
    output = stage_output(frame, result, out, **md)
    listed = json.loads(renders.to_json(orient="records"))
    update_report(out, lambda report: report.update(renders=listed, auditions=pages))
    context.log.info(f"audition pages: {', '.join(pages) or 'none'}")
    return output


def _page(run, trained, renders, folder: Path, dataset: str, notes: list[str]) -> dict:
    def rel(path):
        return os.path.relpath(path, folder) if isinstance(path, str) and path else None

    prompts = []
    for index, demo in enumerate(run.demos):
        pair = {r["side"]: r for r in renders.to_dict("records") if r["demo"] == f"demo{index}"}
        if set(pair) != {"base", "adapter"}:
            continue
        sides = {
            side: {"audio": rel(pair[side]["wav"]), "spectrogram": rel(pair[side]["spectrogram"])}
            for side in pair
        }
        sides["adapter"].update(strength=demo.strength, step=int(trained["best_step"]))
        prompts.append({"id": f"demo{index}", "prompt": demo.prompt, "seed": demo.seed,
                        "duration": demo.duration, "steps": demo.steps, "cfg": demo.cfg,
                        **sides})  # fmt: skip
    lineage = validate_file(trained["best_path"]).metadata
    return {
        "title": f"{run.name} — auditions",
        "run": run.name,
        "family": run.family,
        "dataset": dataset,
        "prompts": prompts,
        "validation": json.loads(trained["history"]),
        "best_step": int(trained["best_step"]),
        "base_loss": float(trained["base_loss"]),
        "best_loss": float(trained["best_loss"]),
        "validation_note": trained.get("validation_note", ""),
        "config": asdict(run),
        "lineage": {k: v for k, v in lineage.items() if k != "tunesmith.training_config"},
        "notes": list(notes),
    }
