"""`tunesmith render`'s engine: a trained run's adapter on prompts of a person's own, no build.

Given the run (as the last build's plan resolved it) and its row of the adapters table, it
picks the adapter file (the best, or the one of a given training step in the run's folder),
makes each prompt's demo from the run's first demo with what the person set (seed, strength,
steps, duration), and renders every prompt with one renderer, made once, through the renders
stage's own write path (`tunesmith/render/demos.py`: `RunRenders.into`, then `publish`). So
the prompt, seed and strength of one of the run's demos give the files the renders stage
wrote for it, byte for byte. The files go to `<run folder>/renders/`, named
`<prompt>-seed<N>-s<strength>` (and `-step<S>` for the adapter of a step asked for): `.wav`,
`.mp3`, `.png` and `.json`, or `.png` and `.json` for a picture.

Not handled here: finding the dataset, the run's row and the placement (`pipelines/render.py`).
These renders are not cached in the store: each command renders what it is asked and writes
over a file of the same name.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import typing
from collections.abc import Callable, Iterator
from dataclasses import fields, replace
from pathlib import Path

from tunesmith import family as families
from tunesmith.render.demos import RunRenders, publish
from tunesmith.store import VALUE
from tunesmith.store.atomic import temporary_name, writer_lock
from tunesmith.train import schema
from tunesmith.train.config import RunConfig

FOLDER = "renders"  # inside the run's folder
SLUG_CHARS = 60  # of the prompt in a file name


class RenderError(ValueError):
    """What stops a render before any model is loaded, in one line naming what there is."""


def adapter_files(trained: dict) -> dict[int, Path]:
    """The adapter files in the run's folder by training step: the best and the last of the
    adapters table's row, and each periodic checkpoint the run's record (`events.jsonl`) names
    that is still there (a family that writes none names its state folder there instead)."""
    found = {}
    events = Path(trained["run_dir"]) / "events.jsonl"
    if events.exists():
        for line in events.read_text(encoding="utf-8").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a line a killed training left half-written
            if event.get("event") == "checkpoint" and Path(event.get("path", "")).is_file():
                found[int(event["step"])] = Path(event["path"])
    found[int(trained["steps"])] = Path(trained["last_path"])
    found[int(trained["best_step"])] = Path(trained["best_path"])
    return {step: path for step, path in sorted(found.items()) if path.is_file()}


def adapter_at(run: RunConfig, trained: dict, step: int | None) -> dict:
    """The adapter to render as `RunRenders` takes it (`best_path`, `best_step`): the best one,
    or that of `step`. RenderError when its file is not there."""
    files = adapter_files(trained)
    if step is None:
        best = Path(trained["best_path"])
        if not best.is_file():
            raise RenderError(
                f"run {run.name}: its best adapter {best} is missing; the next build writes it "
                "again from the run's saved state"
            )
        return {"best_path": str(best), "best_step": int(trained["best_step"])}
    if step not in files:
        steps = ", ".join(str(s) for s in files) or "none"
        raise RenderError(
            f"run {run.name}: no adapter file of step {step} in {trained['run_dir']}; steps "
            f"there: {steps} (best: {int(trained['best_step'])})"
        )
    return {"best_path": str(files[step]), "best_step": step}


def demo_for(run: RunConfig, prompt: str, **given):
    """The demo of `prompt` (its "{trigger}" replaced by the run's trigger word): the run's first
    demo (the family's defaults where it has none) with the settings in `given` that are not
    None, each checked against the demo's schema. RenderError names an option the family's
    demos lack or a value they do not allow."""
    family = families.get(run.family)
    first = run.demos[0] if run.demos else family.config.demo()
    cls, names = type(first), {f.name for f in fields(first)}
    hints = typing.get_type_hints(cls, include_extras=True)
    chosen = {key: value for key, value in given.items() if value is not None}
    for key, value in chosen.items():
        if key not in names:
            raise RenderError(f"--{key}: {family.title} renders have no {key}")
        if schema.problems(cls, {key: value}, "", key):
            raise RenderError(f"--{key} {value}: must be {schema.allowed(hints[key])}")
    return replace(first, prompt=prompt.replace("{trigger}", run.trigger), **chosen)


def stem(run_dir: Path, demo, step: int | None = None) -> Path:
    """Where a demo's files go, less their suffixes: `<run folder>/renders/<prompt>-seed<N>-
    s<strength>`, and `-step<S>` for the adapter of a step asked for."""
    name = f"{slug(demo.prompt)}-seed{demo.seed}-s{demo.strength:g}"
    return Path(run_dir) / FOLDER / (name + (f"-step{step}" if step is not None else ""))


def slug(prompt: str) -> str:
    """The prompt as a file name: lower-case letters and digits, runs of anything else one
    hyphen, cut at `SLUG_CHARS`; a prompt of none of those is named by its hash."""
    text = re.sub(r"[^a-z0-9]+", "-", prompt.lower()).strip("-")[:SLUG_CHARS].rstrip("-")
    if text or not prompt:
        return text or "empty"
    return "prompt-" + hashlib.sha256(prompt.encode()).hexdigest()[:8]


def render_prompts(
    run: RunConfig,
    adapter: dict,
    placement,
    renderer: Callable[[RunConfig, Path], object],
    demos: list,
    stems: list[Path],
    mp3_ok: bool,
) -> Iterator[list[str]]:
    """Render each demo with the adapter (`adapter_at`) at its strength (0: the base model, as
    the renders stage's base side) into its stem; yields the paths written, demo by demo.
    `renderer(run, adapter_path)` is called once, before the first render."""
    render = RunRenders(run, adapter, placement, renderer, mp3_ok)
    for demo, target in zip(demos, stems, strict=True):
        target.parent.mkdir(parents=True, exist_ok=True)
        # Rendered into a temporary folder beside it, locked while it fills: a killed command
        # leaves no half-written render under the final names, and the next build's sweep of
        # the outputs removes the folder.
        tmp = temporary_name(target)
        tmp.mkdir()
        try:
            with writer_lock(tmp):
                side = "adapter" if demo.strength else "base"
                render.into(tmp, demo, side, demo.strength)
                sidecar = json.loads((tmp / VALUE).read_text(encoding="utf-8"))
                paths = publish(tmp, target, sidecar, _mover(tmp))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        yield list(paths.values())


def _mover(folder: Path) -> Callable[[str, Path], None]:
    """`publish`'s copy for a render's own temporary folder: the file is moved, not copied."""

    def move(name: str, target: Path) -> None:
        os.replace(folder / name, target)

    return move
