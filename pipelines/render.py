"""`tunesmith render DATASET RUN --prompt …`: a trained run's adapter on prompts, no build.

Finds the dataset (`operations._select`: by folder name, partition key or path), the run as
its last build's plan resolved it, the run's row of the adapters table (its current adapter),
and the placement the renders stage renders that family at; then `tunesmith.render.adhoc`
renders every prompt with one renderer and this prints each file written. Each mistake (an
unknown dataset or run, a dataset never built, a run with no adapter yet, a step with no file,
an option the family's demos do not allow) is one line naming what there is, exit status 1,
before any model library is imported.

Not handled: building or training (`tunesmith run` does); the renders stage's cache (these
renders are written straight into the run's folder).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from pipelines.operations import _select
from tunesmith import family as families
from tunesmith.backends.placement import place
from tunesmith.config import Roots
from tunesmith.render import adhoc
from tunesmith.render.demos import NO_FFMPEG
from tunesmith.report import read_report
from tunesmith.train.config import base_model_folder, read_plan

TABLE = "adapters.parquet"  # the adapters stage's table, as the IO manager writes it
# The environment's placement pins, as the compute resource reads them (resources/compute.py).
PINS = ("TUNESMITH_BACKEND", "TUNESMITH_DEVICE", "TUNESMITH_DTYPE")


def render(
    dataset: str,
    run_name: str,
    prompts: list[str],
    *,
    strength: float | None = None,
    seed: int | None = None,
    steps: int | None = None,
    duration: float | None = None,
    step: int | None = None,
) -> int:
    """Render `prompts` with the run's best adapter (or the one of training step `step`);
    settings not given are the run's first demo's. Exits with one line on a mistake."""
    ((key, _folder),) = _select([dataset]).items()
    roots = Roots.from_env()
    try:
        run, trained = _run(roots.dataset_out(key), key, run_name)
        adapter = adhoc.adapter_at(run, trained, step)
        given = {"strength": strength, "seed": seed, "steps": steps, "duration": duration}
        demos = [adhoc.demo_for(run, prompt, **given) for prompt in prompts]
        family = families.get(run.family)
        placement = _placement(family)
    except ValueError as exc:  # RenderError, a plan to build again, a pin this machine lacks
        raise SystemExit(str(exc)) from None
    stems = [adhoc.stem(Path(trained["run_dir"]), demo, step) for demo in demos]
    mp3_ok = shutil.which("ffmpeg") is not None
    if not mp3_ok and family.media == "audio":
        print(NO_FFMPEG)
    base_model = base_model_folder(run, roots.models)

    def renderer(run, adapter_path):  # made as the renders stage makes it (assets/renders.py)
        return family.renderer(run, base_model, placement, adapter_path)

    for paths in adhoc.render_prompts(run, adapter, placement, renderer, demos, stems, mp3_ok):
        for path in paths:
            print(path)
    return 0


def _run(out: Path, key: str, name: str) -> tuple:
    """The run as the last build's plan holds it, and its row of the adapters table."""
    table = out / TABLE
    if not table.exists():
        if not read_report(out):
            raise adhoc.RenderError(
                f"dataset {key!r} was never built: `tunesmith run {key}` builds it"
            )
        raise adhoc.RenderError(
            f"dataset {key!r} has no trained adapters yet (its last build stopped before "
            f"training): `tunesmith run {key}` trains them"
        )
    import pyarrow.parquet as pq  # pandas would add 0.4 s to the command's start

    # `ParquetFile`, not `read_table`: that one imports pyarrow.dataset and with it pandas.
    rows = {r["run"]: r for r in pq.ParquetFile(table).read().to_pylist()}
    configs = {r.name: r for r in read_plan(out).runs}
    if name not in configs:
        known = ", ".join(sorted(set(configs) | set(rows))) or "none"
        raise adhoc.RenderError(f"no run {name!r} in dataset {key!r}; its runs: {known}")
    if name not in rows:
        trained = ", ".join(sorted(rows)) or "none"
        raise adhoc.RenderError(
            f"run {name!r} of dataset {key!r} has no trained adapter yet: `tunesmith run {key}` "
            f"trains it (runs with one: {trained})"
        )
    return configs[name], rows[name]


def _placement(family):
    """Where the renders stage renders this family: the compute resource's answer, from the
    environment's pins (`PINS`) as a build reads them. Without a pin that answer is `place`'s
    with every choice automatic, asked here directly: the resource is a Dagster class, and
    importing Dagster is a second of the command's start."""
    backends = family.backends_for("renders")
    if not any(os.environ.get(name, "").strip() for name in PINS):
        return place("renders", family.name, backends)
    from resources.compute import ComputeResource

    return ComputeResource().placement("renders", family.name, backends)
