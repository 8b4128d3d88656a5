"""Stage `auditions`: one page per run from its validation history and its renders.

The page itself (HTML, blind mode, export) is `tunesmith.render.audition`; this module
gathers what goes on it: the demo pairs, the loss history, the resolved config, the lineage
written into the best adapter file, the run's quality measures per step (its folder's
`quality.json`, with the kept adapter's verdict), each pair's own measures
(`tunesmith.render.pair_measures`) and the blind choices handed back into the run's folder
(`tunesmith.render.ratings`), tallied per step.

The stage's data version covers the pages' text and the choices counted, so a ratings file
handed back changes this stage's version alone (no stage above reads it).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pandas as pd

from tunesmith import family as families
from tunesmith.quality.run import QUALITY_FILE, verdict
from tunesmith.render import ratings as handed_back
from tunesmith.render.audition import audition_html, page_fingerprint
from tunesmith.render.pair_measures import PairMeasures
from tunesmith.report import StageResult
from tunesmith.store import content_key
from tunesmith.store.atomic import write_if_changed
from tunesmith.train.config import RunConfig

STAGE_VERSION = 1


def build_auditions(
    out: Path,
    dataset: str,
    configs: dict[str, RunConfig],
    adapters: pd.DataFrame,
    renders: pd.DataFrame,
    notes: list[str],
    record: Path | None = None,
    measures: PairMeasures | None = None,
) -> tuple[list[Path], StageResult]:
    """Write `<out>/auditions/<run>.html` for every trained run; returns the pages. `record`:
    where the adapter files' lineage is remembered (`tunesmith.store.verdicts`); `measures`
    measures each pair's renders (none without it)."""
    start = time.perf_counter()
    pages, texts, written = [], [], 0
    tallies, counted, skipped = {}, {}, []
    for trained in adapters.to_dict("records"):
        run = configs[trained["run"]]
        path = out / "auditions" / f"{run.name}.html"
        rows = renders[renders["run"] == run.name].to_dict("records")
        spec = audition_spec(run, trained, rows, path.parent, dataset, notes, record)
        path.parent.mkdir(parents=True, exist_ok=True)  # "../renders/…" resolves through it
        run_dir = Path(trained["run_dir"])
        if quality := run_quality(run_dir, int(trained["best_step"])):
            spec["quality"] = quality
        if measures is not None:
            media = families.get(run.family).media
            pairs = {p["id"]: _pair_files(p, path.parent) for p in spec["prompts"]}
            texts_of = {p["id"]: p["prompt"] for p in spec["prompts"]}
            if measured := measures.run(run.name, media, run_dir, pairs, texts_of):
                spec["pair_measures"] = measured
        ratings = run_ratings(spec, run_dir, dataset, path.parent)
        tallies[run.name], counted[run.name] = ratings.as_report(), ratings.counted
        skipped += ratings.skipped
        text = audition_html(spec, path.parent)
        # The page is a function of its inputs: an unchanged one is left as it is (its bytes,
        # its mtime and the stage's data version), so nothing downstream fires for nothing.
        written += write_if_changed(path, text.encode("utf-8"))
        pages.append(path)
        texts.append(text)
    result = StageResult(
        stage="auditions",
        # The choices counted are named as well as the pages that show them: the key says
        # what the stage read, whatever the page makes of it.
        data_version=content_key(stage="auditions", pages=texts, ratings=counted),
        items=len(pages),
        computed=written,
        cached=len(pages) - written,
        skipped=skipped,
        seconds=time.perf_counter() - start,
        extra={"pages": [str(p) for p in pages], "ratings": tallies},
    )
    return pages, result


def run_quality(run_dir: Path, best_step: int) -> dict | None:
    """The run's measures per step as the page takes them (its `quality.json`, the kept
    adapter's verdict and step), or None where the run was not measured."""
    try:
        quality = json.loads((run_dir / QUALITY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # not measured ([metrics] off, no model), or unreadable
        return None
    if not isinstance(quality, dict) or not quality.get("steps"):
        return None
    return {**quality, "verdict": verdict(quality, best_step), "kept_step": best_step}


def run_ratings(spec: dict, run_dir: Path, dataset: str, folder: Path) -> handed_back.RunRatings:
    """The choices handed back into the run's folder, tallied; put on the page (`spec`)."""
    step = int(spec["best_step"])
    spec.update(step=step, run_folder=run_dir.name)
    steps = {int(point["step"]) for point in spec["validation"]}
    current = (step, page_fingerprint(spec, folder))
    ratings = handed_back.tally(run_dir, spec["run"], dataset, steps, current)
    drop = os.path.relpath(run_dir / handed_back.FOLDER, folder) + "/"
    spec["ratings"] = ratings.as_page(step, drop, f"tunesmith ratings {dataset} FILE")
    return ratings


def _pair_files(prompt: dict, folder: Path) -> dict[str, Path]:
    """The audio or picture of each side of a page's pair (paths relative to `folder`)."""
    return {s: folder / (prompt[s].get("audio") or prompt[s]["image"]) for s in ("base", "adapter")}


def audition_spec(
    run: RunConfig,
    trained: dict,
    renders: list[dict],
    folder: Path,
    dataset: str,
    notes: list[str],
    record: Path | None = None,
) -> dict:
    """The page's content (see `tunesmith.render.audition`), media paths relative to `folder`."""

    def rel(path: str) -> str:
        return os.path.relpath(path, folder)

    prompts = []
    for index, demo in enumerate(run.demos):
        pair = {r["side"]: r for r in renders if r["demo"] == f"demo{index}"}
        if set(pair) != {"base", "adapter"}:
            continue
        sides = {s: {**_media(r, rel), **_plan(r, rel)} for s, r in pair.items()}
        sides["adapter"].update(strength=demo.strength, step=int(trained["best_step"]))
        prompts.append(
            {
                "id": f"demo{index}",
                "prompt": demo.prompt,
                "seed": demo.seed,
                "duration": getattr(demo, "duration", None),
                "steps": demo.steps,
                "cfg": demo.cfg,
                **sides,
            }
        )
        if getattr(demo, "lyrics", ""):  # a family whose demos sing
            prompts[-1]["lyrics"] = demo.lyrics
    lineage = _lineage(run.family, trained["best_path"], record)
    heading = families.get(run.family).prompts_heading
    return {
        **({"prompts_heading": heading} if heading else {}),
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
        "config": families.get(run.family).trained_settings(run),
        "lineage": {k: lineage[k] for k in sorted(lineage) if k != "tunesmith.training_config"},
        "notes": list(notes),
    }


def _plan(render: dict, rel) -> dict:
    """A planner render's plan (code count, seconds, metas) from its sidecar, and its codes
    rendered through the DiT where there are some; {} otherwise."""
    sidecar = render.get("sidecar")
    if not isinstance(sidecar, str) or not Path(sidecar).is_file():
        return {}
    document = json.loads(Path(sidecar).read_text(encoding="utf-8"))
    if document.get("plan") is None:
        return {}
    plan = dict(document["plan"])
    if "dit" in document.get("extra_audio", []):
        plan["dit_audio"] = rel(str(Path(sidecar).with_suffix(".dit.wav")))
    return {"plan": plan}


def _media(render: dict, rel) -> dict:
    """One side of a pair: the picture, or the audio and its spectrogram."""
    if isinstance(render.get("image"), str):  # a table of both kinds holds NaN for the other
        return {"image": rel(render["image"])}
    return {"audio": rel(render["wav"]), "spectrogram": rel(render["spectrogram"])}


def _lineage(family: str, path: str, record: Path | None) -> dict[str, str]:
    """The metadata written into the best adapter file, read through its format's check."""
    return families.get(family).validated_files(path, record)
