"""How the pipeline's cost grows with the dataset: N clips and N pictures, N = 50, 200, 1,000.

For each N, on the datasets `bench/make_large.py N` writes (`songs`: Stable Audio 3, `pictures`:
SDXL, each with a two-step run on its tiny model), in fresh temporary roots:

1. First build, one Dagster run per stage and dataset, each in its own process: the stage's
   own seconds per item (report.json) and the process's peak RSS (with the training process it
   starts: `wait4`'s rusage covers the children a process waited for).
2. No-change rebuild: `tunesmith run songs pictures`, the command a person types. Its wall
   time; the share spent outside the runs (two process starts, imports, the command's own
   checks), in Dagster's machinery (the runs' duration less the time in the asset functions,
   `asset_seconds`), and in the stages; the event log each run writes.
3. 1 % edit: a hundredth of the captions edited and as many new files added (at least one of
   each, per dataset), then `tunesmith run`. The reference is the same change on datasets that
   hold only the touched items (built once before the change): the work of those items alone,
   with the same per-run costs (two training steps, the demos).

Then, per measure, the log-log slope over the sizes: 0 is flat, 1 grows like N. At the
largest N up to WORKERS_N it also times the analysis of the songs (the labels stage's pool)
with 1 and 2 workers: at 50 songs the pool's start (each process imports Essentia) is a large
share of two workers' 12 s, at 200 a small one, and 1,000 would add minutes for nothing new.
Absolute seconds on a shared machine are noise; ratios and slopes are what to read.

    .venv/bin/python bench/scale.py [--sizes 50,200,1000] [--json results.json] [--quick]

`--quick` (what tests/test_bench.py runs): N = QUICK_N, the pictures' first build only (one
Dagster run per stage; only the tiny SDXL is made), the analysis pool on QUICK_N songs: it
checks that the benchmark runs, it measures nothing worth reading.
"""

from __future__ import annotations

import argparse
import errno
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import make_large  # noqa: E402

STAGES = ["manifest", "labels", "encoded", "adapters", "renders", "auditions"]
DATASETS = ["songs", "pictures"]
QUICK_N = 2
WORKERS_N = 200  # the largest N the analysis pool is timed at


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="50,200,1000", help="comma-separated values of N")
    parser.add_argument("--json", type=Path, help="also write every measurement here")
    parser.add_argument("--quick", action="store_true", help="N = 2, one build: check only")
    args = parser.parse_args()
    sizes = [QUICK_N] if args.quick else sorted({int(s) for s in args.sizes.split(",")})
    if args.quick:
        DATASETS[:] = ["pictures"]
    with tempfile.TemporaryDirectory(prefix="tunesmith-scale-") as tmp:
        models = make_models(Path(tmp) / "models", args.quick)
        results = {n: measure(n, Path(tmp) / f"n{n}", models, args.quick) for n in sizes}
        workers_n = max([n for n in sizes if n <= WORKERS_N] or [min(sizes)])
        workers = analysis_workers(workers_n, Path(tmp) / "workers")
    report(results, workers)
    if args.json:
        args.json.write_text(json.dumps({"sizes": results, "workers": workers}, indent=1))


# --- one size --------------------------------------------------------------------------------


def measure(n: int, root: Path, models: Path, quick: bool = False) -> dict:
    cache = make_large.make_large(n, ROOT / "data" / "cache" / f"large-{n}")
    env = roots_env(root, models)
    for name, folder in cache.items():
        link_copy(folder, root / "datasets" / name)
    first = tunesmith_run(env, "first build")
    touched = max(1, round(n / 100))
    if quick:
        return {"n": n, "touched": touched, "first": first}
    rebuild = tunesmith_run(env, "no-change rebuild")
    reference = reference_edit(n, touched, root / "reference", models)
    edit_rebuild_datasets(root / "datasets", n, touched)
    edit = tunesmith_run(env, "1 % edit")
    return {
        "n": n,
        "touched": touched,
        "first": first,
        "rebuild": rebuild,
        "edit": edit,
        "reference": reference,
    }


def roots_env(root: Path, models: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), DAGSTER_HOME=str(root / "dagster_home"))
    for name in ("datasets", "out", "store"):
        (root / name).mkdir(parents=True, exist_ok=True)
        env[f"TUNESMITH_{name.upper()}"] = str(root / name)
    env["TUNESMITH_MODELS"] = str(models)
    return env


def link_copy(source: Path, target: Path) -> None:
    """A copy of a dataset folder made of hard links: instant, and safe to edit, because every
    edit here writes a new file and renames it into place (`write_if_changed`). Where the two
    folders are on different filesystems (the temporary roots in memory, the cache on disk: the
    tests run so), the files are copied."""

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
            shutil.copy2(src, dst)

    shutil.copytree(source, target, copy_function=link, dirs_exist_ok=True)


def make_models(folder: Path, quick: bool = False) -> Path:
    from tunesmith.families.sdxl.tiny import make_tiny_sdxl
    from tunesmith.families.stable_audio_3.tiny import make_tiny_stable_audio_3

    make_tiny_sdxl(folder / "tiny-sdxl")
    if not quick:  # --quick builds the pictures alone
        make_tiny_stable_audio_3(folder / "tiny-stable-audio-3")
    return folder


# --- builds through the command ---------------------------------------------------------------


def tunesmith_run(env: dict[str, str], what: str) -> dict:
    """`tunesmith run songs pictures`, the command a person types, with the RSS of its process
    tree sampled meanwhile: wall time, and from the runs it made (`runs_since`) their duration,
    the time in asset functions, per stage its metadata and peak RSS, events and event log."""
    since = time.time()
    start = time.perf_counter()
    command = [sys.executable, "-m", "pipelines.cli", "run", *DATASETS]
    with tempfile.TemporaryFile() as out:
        child = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        samples = sample_rss(child)
        wall = time.perf_counter() - start
        out.seek(0)
        text = out.read().decode(errors="replace")
    if child.returncode != 0:
        raise SystemExit(f"{what} failed:\n{text[-4000:]}")
    return {"wall": wall, **runs_since(Path(env["DAGSTER_HOME"]), since, samples)}


def sample_rss(child: subprocess.Popen, every: float = 0.05) -> list[tuple[float, float]]:
    """(time, MB) of the summed RSS of `child` and its descendants until it exits."""
    import psutil

    samples, parent = [], psutil.Process(child.pid)
    while child.poll() is None:
        total = 0
        try:
            for proc in [parent, *parent.children(recursive=True)]:
                total += proc.memory_info().rss
        except psutil.Error:
            pass  # a process ended between listing and reading: the next sample counts it
        samples.append((time.time(), total / 2**20))
        time.sleep(every)
    return samples


def runs_since(home: Path, since: float, samples: list[tuple[float, float]]) -> dict:
    """Totals over the runs created after `since` in the instance at `home`, and per dataset
    and stage: the stage's metadata and the peak of `samples` while its step ran."""
    import dagster as dg

    totals = {
        "runs": 0,
        "run_seconds": 0.0,
        "asset_seconds": 0.0,
        "stage_seconds": 0.0,
        "events": 0,
        "event_log_kb": 0.0,
        "computed": 0,
        "stages": {},
    }
    instance = dg.DagsterInstance.from_config(str(home))
    try:
        for record in instance.get_run_records(
            dg.RunsFilter(created_after=datetime.fromtimestamp(since, tz=UTC))
        ):
            run = record.dagster_run
            stats, logs = instance.get_run_stats(run.run_id), instance.all_logs(run.run_id)
            totals["runs"] += 1
            totals["run_seconds"] += stats.end_time - stats.start_time
            totals["events"] += len(logs)
            database = home / "history" / "runs" / f"{run.run_id}.db"
            totals["event_log_kb"] += database.stat().st_size / 1024 if database.exists() else 0
            stages = totals["stages"].setdefault(run.tags["dagster/partition"], {})
            for stage, values in step_records(logs, samples).items():
                stages[stage] = values
                for key in ("asset_seconds", "computed"):
                    totals[key] += values.get(key, 0)
                totals["stage_seconds"] += values.get("seconds", 0.0)
    finally:
        instance.dispose()
    return totals


def step_records(logs: list, samples: list[tuple[float, float]]) -> dict[str, dict]:
    """Per step of one run: its materialization's numbers and the RSS peak in its window."""
    found: dict[str, dict] = {}
    for entry in logs:
        step = found.setdefault(entry.step_key, {}) if entry.step_key else None
        event = entry.dagster_event
        if step is None or event is None:
            continue
        if event.event_type_value == "STEP_START":
            step["start"] = entry.timestamp
        elif event.event_type_value in ("STEP_SUCCESS", "STEP_FAILURE"):
            step["end"] = entry.timestamp
        elif entry.asset_materialization is not None:
            md = entry.asset_materialization.metadata
            for key in ("seconds", "items", "computed", "asset_seconds"):
                step[key] = getattr(md.get(key), "value", md.get(key))
    for step in found.values():
        window = [mb for t, mb in samples if step.get("start", 0) <= t <= step.get("end", 0)]
        before = [mb for t, mb in samples if t <= step.get("start", 0)]
        step["peak_mb"] = max(window, default=float("nan"))
        step["start_mb"] = before[-1] if before else float("nan")
    return found


# --- 1 % edit -----------------------------------------------------------------------------------


def touched_items(n: int, count: int) -> tuple[list[int], list[int]]:
    """(songs with a .txt caption, pictures) to edit: `count` of each, spread over the set."""
    songs = list(range(0, n, 3))
    return [songs[i * len(songs) // count] for i in range(count)], [
        i * n // count for i in range(count)
    ]


def edit_rebuild_datasets(datasets: Path, n: int, count: int, new_from: int | None = None) -> None:
    """Edit `count` captions in each dataset and add `count` new items (indices from
    `new_from`, default n)."""
    songs, pictures = touched_items(n, count)
    write = make_large.write_if_changed
    for i in songs:
        caption = f"{make_large.song_caption(i)}, edited\n"
        write(datasets / "songs" / f"{make_large.song_name(i)}.txt", caption.encode())
    for i in pictures:
        caption = f"{make_large.picture_caption(i)}, edited\n"
        write(datasets / "pictures" / f"{make_large.picture_name(i)}.txt", caption.encode())
    start = n if new_from is None else new_from
    for i in range(start, start + count):
        make_large.write_song(datasets / "songs", i)
        make_large.write_picture(datasets / "pictures", i)


def reference_edit(n: int, count: int, root: Path, models: Path) -> dict:
    """The same edit on datasets holding only the touched items: built once, then changed."""
    env = roots_env(root, models)
    datasets = root / "datasets"
    songs, pictures = touched_items(n, count)
    for name, folder in (("songs", datasets / "songs"), ("pictures", datasets / "pictures")):
        folder.mkdir(parents=True, exist_ok=True)
        toml = make_large.SONGS_TOML if name == "songs" else make_large.PICTURES_TOML
        make_large.write_if_changed(folder / "tunesmith.toml", toml.encode())
    for i in songs:
        make_large.write_song(datasets / "songs", i)
    for i in pictures:
        make_large.write_picture(datasets / "pictures", i)
    tunesmith_run(env, "reference build")
    edit_rebuild_datasets(datasets, n, count)
    return tunesmith_run(env, "reference edit")


# --- the analysis pool --------------------------------------------------------------------------


def analysis_workers(n: int, root: Path) -> dict:
    """Seconds to analyse n songs (the labels stage's pool) with 1 and with 2 workers."""
    from tunesmith.dataset.analyse import analyse_items
    from tunesmith.dataset.manifest import build_manifest
    from tunesmith.store import Store

    folder = ROOT / "data" / "cache" / f"large-{n}" / "songs"
    manifest, _ = build_manifest(folder, root / "hashes.json")
    items = [f for f in manifest.files if f.kind == "audio"]
    seconds = {}
    for workers in (1, 2):
        start = time.perf_counter()
        analyse_items(folder, items, Store(root / f"store{workers}"), workers, pool_min_bytes=0)
        seconds[workers] = time.perf_counter() - start
    return {"n": n, "seconds": seconds, "speedup": seconds[1] / seconds[2]}


# --- the printout --------------------------------------------------------------------------------


def slope(sizes: list[int], values: list[float]) -> float:
    """Least-squares slope of log(value) against log(N)."""
    if len(sizes) < 2 or min(values) <= 0:
        return float("nan")
    xs, ys = [math.log(n) for n in sizes], [math.log(v) for v in values]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )


def stage(result: dict, dataset: str, name: str) -> dict:
    return result["first"]["stages"][dataset][name]


def report(results: dict[int, dict], workers: dict) -> None:
    sizes = sorted(results)
    for n in sizes:
        r = results[n]
        edit = (
            f"; the 1 % edit changes {r['touched']} caption(s) and adds {r['touched']} "
            f"file(s) per dataset"
            if "edit" in r
            else " (--quick: the pictures' first build)"
        )
        print(f"\nN = {n}: {n} clips and {n} pictures{edit}")
        print(
            "  first build  "
            + "".join(f"{d + ' s/item':>17}{'peak MB':>9}{'added':>7}" for d in DATASETS)
        )
        for name in STAGES:
            cells = [stage(r, d, name) for d in DATASETS]
            print(
                f"  {name:<12} "
                + "".join(
                    f"{c['seconds'] / n:>17.4f}{c['peak_mb']:>9.0f}"
                    f"{c['peak_mb'] - c['start_mb']:>7.0f}"
                    for c in cells
                )
            )
        first = r["first"]
        print(
            f"  first build: {first['wall']:.1f} s (the command; runs {first['run_seconds']:.1f} s)"
        )
        if "rebuild" not in r:  # --quick
            continue
        rb, ed, ref = r["rebuild"], r["edit"], r["reference"]
        print_build("no-change rebuild", rb, first)
        print_build("1 % edit", ed, first)
        print(
            f"    the same change on datasets of the touched items alone: {ref['wall']:.2f} s; "
            f"ratio {ed['wall'] / ref['wall']:.2f} (goal ≤ 2)"
        )
    if len(sizes) > 1:
        print_slopes(results, sizes)
    sec = workers["seconds"]
    print(
        f"\nanalysis of {workers['n']} songs (labels stage's pool): 1 worker {sec[1]:.1f} s, "
        f"2 workers {sec[2]:.1f} s, {workers['speedup']:.2f}x (goal ≥ 1.7x)"
    )


def print_build(what: str, build: dict, first: dict) -> None:
    outside = build["wall"] - build["run_seconds"]
    dagster = build["run_seconds"] - build["asset_seconds"]
    print(
        f"  {what}: {build['wall']:.2f} s = outside the runs {outside:.2f} + Dagster "
        f"{dagster:.2f} + asset functions {build['asset_seconds']:.2f} (the stages' own "
        f"{build['stage_seconds']:.2f}); {build['computed']} items computed"
    )
    print(
        f"    against the first build {build['wall'] / first['wall']:.4f} (runs only "
        f"{build['run_seconds'] / first['run_seconds']:.4f}); Dagster's share "
        f"{dagster / build['wall']:.2f}; per run {build['events'] / build['runs']:.0f} events, "
        f"{build['event_log_kb'] / build['runs']:.0f} KB of event log"
    )


def print_slopes(results: dict[int, dict], sizes: list[int]) -> None:
    print(
        f"\nslopes of log(value) against log(N) over N = {', '.join(map(str, sizes))} "
        "(0: flat, 1: grows like N)"
    )
    for d in DATASETS:
        for name in STAGES:
            per_item = [stage(results[n], d, name)["seconds"] / n for n in sizes]
            peak = [stage(results[n], d, name)["peak_mb"] for n in sizes]
            print(
                f"  first build {d:<9}{name:<10} s/item {slope(sizes, per_item):+.2f}  "
                f"peak RSS {slope(sizes, peak):+.2f}"
            )
    for what, key in (("no-change rebuild", "rebuild"), ("1 % edit", "edit")):
        keys = ("wall", "run_seconds", "asset_seconds", "events", "event_log_kb")
        series = {k: [results[n][key][k] for n in sizes] for k in keys}
        dagster = [
            a - b for a, b in zip(series["run_seconds"], series["asset_seconds"], strict=True)
        ]
        print(
            f"  {what:<18} wall {slope(sizes, series['wall']):+.2f}  Dagster "
            f"{slope(sizes, dagster):+.2f}  asset functions "
            f"{slope(sizes, series['asset_seconds']):+.2f}  events "
            f"{slope(sizes, series['events']):+.2f}  event log "
            f"{slope(sizes, series['event_log_kb']):+.2f}"
        )
    ratio = [results[n]["edit"]["wall"] / results[n]["reference"]["wall"] for n in sizes]
    print(f"  1 % edit against the touched items alone: {slope(sizes, ratio):+.2f}")


if __name__ == "__main__":
    main()
