"""`tunesmith run`, `verify` and `ui`: what the command does before and around a build.

Kept light: no model library and, on the way to a build, not Dagster either. The build runs in
a child process (`pipelines.build`) that imports Dagster, opens the instance and loads the
definitions; doing that twice, here and there, cost a no-change `tunesmith run` two seconds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from tunesmith.config import PROJECT_FILE, Roots
from tunesmith.dataset.folders import dataset_folders, renamed
from tunesmith.report import BUILT_WITH_SKIPS, read_report
from tunesmith.store import Store
from tunesmith.store.atomic import sweep_tree
from tunesmith.train.preflight import preflight


def _select(names: list[str]) -> dict[str, Path]:
    """The datasets asked for, by folder name, partition key or path (all when none); exits
    with one line, creating nothing, when there is no datasets folder or a name is unknown."""
    roots = Roots.from_env()
    root = roots.datasets
    if not root.is_dir():
        raise SystemExit(
            f"no datasets folder at {root} ({roots.origin('datasets')}): set TUNESMITH_DATASETS "
            f"to the folder that holds your dataset folders, or write a {PROJECT_FILE} with a "
            '[roots] table (datasets = "…") in your project folder, or run where data/datasets is'
        )
    folders = dataset_folders(root)
    if not names:
        return folders
    by_name = {path.name: key for key, path in folders.items()}
    by_path = {path.resolve(): key for key, path in folders.items()}
    chosen = {}
    for name in names:
        key = name if name in folders else by_name.get(name)
        path = Path(name).expanduser()
        if key is None and path.is_dir():
            key = by_path.get(path.resolve())
            if key is None:
                raise SystemExit(
                    f"{path.resolve()} is not a dataset folder under {root}: a dataset is a "
                    "folder directly under TUNESMITH_DATASETS"
                )
        if key is None:
            raise SystemExit(f"no dataset {name!r}; known: {', '.join(sorted(folders)) or 'none'}")
        chosen[key] = folders[key]
    return chosen


def run(names: list[str]) -> int:
    """Build the datasets in a child process (`pipelines.build`) and supervise it.

    Before anything runs, temporary store entries of dead writers are removed, and the child,
    before its first run, fails the runs a killed build left unfinished and frees their pool
    slots. SIGTERM and SIGINT reach the child and, if it has not stopped within a grace period,
    its whole process tree is killed; either way the run is closed and the command exits with
    128 + the signal.
    """
    folders = _select(names)
    roots = Roots.from_env()
    if not folders:
        print(f"no datasets under {roots.datasets}")
        return 1
    print(where(roots, list(folders)), flush=True)
    for name, key in renamed(folders).items():
        print(f"dataset folder {name!r} is partition {key!r}")
    # What the person must fix is said here, before any work: a build that cannot train its runs
    # would otherwise publish empty tables over the last good build's.
    checked = {key: preflight(folder, roots.models) for key, folder in folders.items()}
    bad = {key for key, found in checked.items() if found.problems}
    for key, found in checked.items():
        if found.stops:
            print(f"== {key}: not built:")
            for line in found.problems:
                print(_indented(line))
        elif found.bad_runs:  # the dataset's other runs are built
            print(f"== {key}: these runs are not trained:")
            for line in found.bad_runs.values():
                print(_indented(line))
        for line in found.warnings:
            print(f"{key}: warning: {line}")
    folders = {key: folder for key, folder in folders.items() if not checked[key].stops}
    if not folders:
        return 1
    swept = Store(roots.store).sweep()
    swept += [p for key in folders for p in sweep_tree(roots.dataset_out(key))]
    if swept:
        print(f"removed {len(swept)} temporary files left by a killed build")
    code = _supervise([sys.executable, "-m", "pipelines.build", *folders])
    pages = [p for key in folders for p in read_report(roots.dataset_out(key)).get("auditions", [])]
    if pages and code in (0, BUILT_WITH_SKIPS):
        print("audition pages (open in a browser):")
        for page in pages:
            print(f"  {page}")
    # Something skipped is work not done: the build went on without it and said what and why
    # (pipelines.build); the command says so in its exit status, as for a run it refused.
    return 1 if bad or code == BUILT_WITH_SKIPS else code


def where(roots: Roots, keys: list[str]) -> str:
    """A build's first line: where its record, reports and training logs are."""
    return (
        f"building {', '.join(keys)}: runs recorded in {roots.dagster_home} (see them with "
        f"`tunesmith ui`, http://127.0.0.1:3000); reports and training logs under {roots.out} "
        "(<dataset>/report.json, <dataset>/adapters/<run>/train.log)"
    )


def _indented(text: str) -> str:
    return "  " + text.replace("\n", "\n    ")


def check(names: list[str]) -> int:
    """Validate each dataset's runs and base models without building anything."""
    roots, failed = Roots.from_env(), 0
    for key, folder in _select(names).items():
        print(f"== {key} ({folder})")
        found = preflight(folder, roots.models)
        fits, refused = memory_estimates(folder, roots, found) if not found.stops else ([], [])
        lines = [*found.fine, *fits, *(f"warning: {w}" for w in found.warnings)]
        for line in [*lines, *found.problems, *refused]:
            print(_indented(line))
        failed += bool(found.problems or refused)
    return 1 if failed else 0


def memory_estimates(folder: Path, roots: Roots, found) -> tuple[list[str], list[str]]:
    """Each good run's memory estimate where it would train, as the adapters stage fits it:
    a line per run that fits, and a line per run that does not (a problem)."""
    from resources.compute import ComputeResource  # Dagster and torch: only `check` needs them
    from tunesmith import family as families
    from tunesmith.store.fingerprints import model_fingerprint
    from tunesmith.train.config import base_model_folder, load_plan, media_kind
    from tunesmith.train.footprint import DoesNotFit, fit_run
    from tunesmith.train.preflight import media_counts
    from tunesmith.train.stage import footprints

    counts = media_counts(folder)
    runs = load_plan(folder).with_default(media_kind([k for k, n in counts.items() if n])).runs
    cache = roots.store / "fingerprints.json"
    fits, refused = [], []
    for run in (r for r in runs if r.name not in found.bad_runs):
        family = families.get(run.family)
        placement = ComputeResource().placement(
            "adapters", run.family, family.backends_for("adapters")
        )
        base = base_model_folder(run, roots.models)
        try:
            fitted = fit_run(
                run, base, placement, model_fingerprint(base, cache), footprints(cache)
            )
        except DoesNotFit as exc:
            refused.append(f"run {run.name}: {exc}")
            continue
        if line := fitted.line():
            fits.append(f"run {run.name} on {placement}: {line}")
    return fits, refused


GRACE_SECONDS = 20.0  # how long a signalled build may take to close its run before a kill


def _supervise(command: list[str]) -> int:
    child = subprocess.Popen(command)
    received: list[tuple[int, float]] = []  # (signal, when)

    def forward(signum: int, _frame) -> None:
        received.append((signum, time.monotonic()))
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        while True:
            try:
                code = child.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if received and time.monotonic() - received[0][1] > GRACE_SECONDS:
                    _kill_tree(child.pid)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if received:
        _kill_tree(child.pid)  # a training child the build left behind
        _reap_dead_runs()
        signum = received[0][0]
        print(
            f"stopped by {signal.Signals(signum).name}: finished items are kept in the store "
            "and saved training state in its run folder; the next `tunesmith run` continues "
            "from them"
        )
        return 128 + signum
    if code < 0:  # the build itself was killed
        _reap_dead_runs()
    return code if code in (0, BUILT_WITH_SKIPS) else 1


def _reap_dead_runs() -> None:
    """Close the runs of the build just stopped (Dagster is imported here only then)."""
    from pipelines.instance import open_instance, reap_dead_runs

    reap_dead_runs(open_instance())


def _kill_tree(pid: int) -> None:
    try:
        parent = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    for proc in [*parent.children(recursive=True), parent]:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()


def verify(names: list[str]) -> int:
    """Check the sha256 of every store file the datasets' last builds used; damaged entries are
    removed (the next build computes them again). Exit 1 when anything was damaged."""
    selected = _select(names)
    store = Store(Roots.from_env().store)
    damaged = 0
    for key, folder in selected.items():
        keys = store.root_keys(key)
        problems = store.verify(keys)
        damaged += len(problems)
        print(f"== {key} ({folder}): {len(keys)} cached entries, {len(problems)} damaged")
        for line in problems:
            print(f"  {line}")
    return 1 if damaged else 0


def review(names: list[str]) -> int:
    """Per dataset, the review table its last labels build wrote to report.json."""
    from tunesmith.dataset.review import text

    for key, folder in _select(names).items():
        stage = read_report(Roots.from_env().dataset_out(key)).get("stages", {}).get("labels")
        print(f"== {key} ({folder})")
        if stage is None:
            print("  labels not built yet: run `tunesmith run` first")
            continue
        print("\n".join(f"  {line}" for line in text(stage.get("review", [])).splitlines()))
    return 0


UI_GRACE_SECONDS = 8.0  # how long the webserver and daemon get to close before a kill


def ui(port: int) -> int:
    """`dagster dev` on 127.0.0.1:port in its own process group, stopped (with its webserver
    and daemon) on SIGTERM or SIGINT — also when started in the background, where a shell
    leaves SIGINT ignored."""
    from pipelines.instance import open_instance

    open_instance()
    command = [
        sys.executable,
        "-m",
        "dagster",
        "dev",
        "-h",
        "127.0.0.1",
        "-p",
        str(port),
        "-m",
        "pipelines.definitions",
    ]
    child = subprocess.Popen(command, start_new_session=True)
    stopping: list[int] = []

    def stop(signum: int, _frame) -> None:
        stopping.append(signum)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGTERM)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stop)
    deadline = None
    while (code := child.poll()) is None:
        if stopping and deadline is None:
            deadline = time.monotonic() + UI_GRACE_SECONDS
        if deadline is not None and time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)  # anything of the UI's still running
    return 128 + stopping[0] if stopping else code
