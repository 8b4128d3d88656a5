"""`tunesmith ratings DATASET FILE`: hand back the blind choices an audition page exported.

Checks the file (`tunesmith.render.ratings.read_choices`), finds the run it names among the
dataset's last build's runs, and copies it, atomically, into that run's folder as
`ratings/<first 16 of its sha256>.json`, where the auditions stage counts it at the next
build. A second import of the same file writes nothing. Each refusal (a file that is not an
export, another dataset's choices, an unknown run or step, a run trained again since the
choices were made) is one line naming the file, exit status 1, nothing written.
"""

from __future__ import annotations

from pathlib import Path

from pipelines.operations import _select
from tunesmith.config import Roots
from tunesmith.render.ratings import FOLDER, RatingsError, read_choices, stored_name
from tunesmith.report import read_report
from tunesmith.store.atomic import atomic_write_bytes


def ratings(dataset: str, file: str) -> int:
    ((key, _folder),) = _select([dataset]).items()
    path = Path(file).expanduser()
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SystemExit(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        choices = read_choices(path, data)
    except RatingsError as exc:
        raise SystemExit(str(exc)) from None
    out = Roots.from_env().dataset_out(key)
    runs = {
        run["run"]: run
        for run in read_report(out).get("stages", {}).get("adapters", {}).get("runs", [])
    }
    if choices.dataset != key:
        raise SystemExit(
            f"{path}: choices on dataset {choices.dataset!r}, not {key!r}: "
            f"`tunesmith ratings {choices.dataset} {path}` hands them back there"
        )
    run = runs.get(choices.run)
    if run is None:
        known = ", ".join(sorted(runs)) or f"none yet: `tunesmith run {key}` trains them"
        raise SystemExit(
            f"{path}: choices on run {choices.run!r}, which dataset {key!r} has no trained "
            f"run of (its runs: {known})"
        )
    run_dir = Path(run["run_dir"])
    if choices.run_folder is not None and choices.run_folder != run_dir.name:
        raise SystemExit(
            f"{path}: choices on the adapter trained in {choices.run_folder!r}; run "
            f"{choices.run!r} was trained again since, into {run_dir.name!r}: not handed back"
        )
    steps = sorted(int(point["step"]) for point in run.get("history") or [])
    if choices.step is not None and choices.step not in steps:
        raise SystemExit(
            f"{path}: choices on step {choices.step}, which run {choices.run!r} has no "
            f"checkpoint at (validated at steps {', '.join(map(str, steps)) or 'none'})"
        )
    target = run_dir / FOLDER / stored_name(choices)
    if target.is_file() and target.read_bytes() == data:
        print(f"{path}: already handed back as {target}; nothing is counted twice")
        return 0
    atomic_write_bytes(target, data)
    at = f"step {choices.step}" if choices.step is not None else "the page's step"
    print(
        f"{path}: {len(choices.choices)} choice(s) on run {choices.run!r} at {at} handed back "
        f"as {target}; the next build counts them (`tunesmith run {key}`)"
    )
    return 0
