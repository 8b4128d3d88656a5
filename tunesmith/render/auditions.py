"""Stage `auditions`: one page per run from its validation history and its renders.

The page itself (HTML, blind mode, export) is `tunesmith.render.audition`; this module
gathers what goes on it: the demo pairs, the loss history, the resolved config, and the
lineage written into the best adapter file.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pandas as pd

from tunesmith import family as families
from tunesmith.render.audition import audition_html
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
) -> tuple[list[Path], StageResult]:
    """Write `<out>/auditions/<run>.html` for every trained run; returns the pages. `record`:
    where the adapter files' lineage is remembered (`tunesmith.store.verdicts`)."""
    start = time.perf_counter()
    pages, texts, written = [], [], 0
    for trained in adapters.to_dict("records"):
        run = configs[trained["run"]]
        path = out / "auditions" / f"{run.name}.html"
        rows = renders[renders["run"] == run.name].to_dict("records")
        spec = audition_spec(run, trained, rows, path.parent, dataset, notes, record)
        path.parent.mkdir(parents=True, exist_ok=True)  # "../renders/…" resolves through it
        text = audition_html(spec, path.parent)
        # The page is a function of its inputs: an unchanged one is left as it is (its bytes,
        # its mtime and the stage's data version), so nothing downstream fires for nothing.
        written += write_if_changed(path, text.encode("utf-8"))
        pages.append(path)
        texts.append(text)
    result = StageResult(
        stage="auditions",
        data_version=content_key(stage="auditions", pages=texts),
        items=len(pages),
        computed=written,
        cached=len(pages) - written,
        seconds=time.perf_counter() - start,
        extra={"pages": [str(p) for p in pages]},
    )
    return pages, result


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
