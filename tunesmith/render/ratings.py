"""Blind choices handed back: the audition page's exported JSON, counted per run and step.

A listener exports their blind picks from the page (Export choices: `audition-<run>.json`,
format "tunesmith-audition-choices/1", `tunesmith.render.audition`). Handed back, the file lies
in the run's folder, `<out>/<dataset>/adapters/<run folder>/ratings/*.json`: put there by
`tunesmith ratings DATASET FILE` (as `<first 16 of its sha256>.json`, written atomically) or
by hand under any name ending in `.json`. The auditions stage reads every file there at each
build and counts, per adapter step, how often the adapter, the base model or neither was
preferred.

A choice is counted once however many files hold it: its identity is the page it was made on
(the fingerprint, the step), the listener's session and the prompt, and of several exports of
one session the latest (by `exported_at`) gives the choice, so a listener who changed a pick
and exported again is counted with the new pick. An export without a session (a page of an
earlier release) identifies a choice by its content instead (page, prompt, order, pick), so
importing the same file twice, or the same choices in another file, counts nothing twice.

A file that is not such an export, or names another run, dataset or run folder, or a step
the run never validated at, is skipped with one line naming it; the others are counted.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from tunesmith.render.audition import FORMAT
from tunesmith.report import Skipped

FOLDER = "ratings"  # in the run's folder
PICKS = ("adapter", "base", "same")


class RatingsError(ValueError):
    """A file that is not an audition page's exported choices; one line naming it."""


class _Row(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")

    id: str
    a: Literal["base", "adapter"]
    b: Literal["base", "adapter"]
    choice: Literal["A", "B", "same"] | None
    chosen: Literal["base", "adapter", "same"] | None


class _Export(BaseModel):
    # pydantic for the shape (strict: no string read as a number); the rules across fields
    # are checked in `read_choices`.
    model_config = ConfigDict(strict=True, extra="ignore")

    format: Literal["tunesmith-audition-choices/1"]
    run: str
    dataset: str
    fingerprint: str
    prompts: list[_Row]
    step: int | None = None
    run_folder: str | None = None
    session: str | None = None
    exported_at: str = ""


@dataclass(frozen=True)
class Choice:
    identity: str  # the same choice in any file has the same identity
    prompt: str
    chosen: str  # "adapter", "base" or "same"
    exported_at: str


@dataclass(frozen=True)
class Choices:
    """One exported file, checked."""

    path: Path
    sha256: str
    run: str
    dataset: str
    fingerprint: str
    step: int | None
    run_folder: str | None
    choices: list[Choice]


def read_choices(path: Path, data: bytes | None = None) -> Choices:
    """The checked choices of the exported file at `path` (whose bytes are `data` where the
    caller read them already); a `RatingsError` naming the file and what is wrong with it
    otherwise."""
    expected = f"expected the JSON an audition page's Export choices saves (format {FORMAT})"
    if data is None:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise RatingsError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RatingsError(f"{path}: not JSON ({exc}); {expected}") from None
    if not isinstance(document, dict):
        raise RatingsError(f"{path}: a JSON {type(document).__name__}, not an object; {expected}")
    if document.get("format") != FORMAT:
        raise RatingsError(f"{path}: format is {document.get('format')!r}; {expected}")
    try:
        export = _Export.model_validate(document)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']} (got {e.get('input')!r})"
            for e in exc.errors()
        )
        raise RatingsError(f"{path}: {problems}; {expected}") from None
    problems = []
    seen: set[str] = set()
    for i, row in enumerate(export.prompts):
        if row.id in seen:
            problems.append(f"prompts.{i}.id {row.id!r} repeats")
        seen.add(row.id)
        if row.a == row.b:
            problems.append(f"prompts.{i}: a and b are both {row.a!r}")
        by_choice = {"A": row.a, "B": row.b, "same": "same", None: None}
        if row.chosen != by_choice[row.choice]:
            problems.append(
                f"prompts.{i}: choice {row.choice!r} with A = {row.a!r} is "
                f"{by_choice[row.choice]!r}, but chosen says {row.chosen!r}"
            )
    if problems:
        raise RatingsError(f"{path}: {'; '.join(problems)}; {expected}")
    choices = [
        Choice(_identity(export, row), row.id, row.chosen, export.exported_at)
        for row in export.prompts
        if row.chosen is not None  # unanswered
    ]
    return Choices(
        path=path,
        sha256=hashlib.sha256(data).hexdigest(),
        run=export.run,
        dataset=export.dataset,
        fingerprint=export.fingerprint,
        step=export.step,
        run_folder=export.run_folder,
        choices=choices,
    )


def _identity(export: _Export, row: _Row) -> str:
    if export.session:  # one listener's pick on one prompt of one page
        parts = [export.fingerprint, export.step, export.session, row.id]
    else:  # no session to tell listeners apart: the choice's content
        parts = [export.fingerprint, export.step, row.id, row.a, row.choice]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]


def stored_name(choices: Choices) -> str:
    """The name `tunesmith ratings` gives a file in the ratings folder: a second import of the
    same bytes finds it there."""
    return f"{choices.sha256[:16]}.json"


def folders_fingerprint(run_dirs: list[Path]) -> str:
    """What lies in the runs' ratings folders (each file's path, size and time), hashed: the
    auditions stage records it, and `tunesmith status` calls the stage stale when a file was
    dropped, changed or removed since."""
    seen = []
    for run_dir in sorted(Path(d) for d in run_dirs):
        folder = run_dir / FOLDER
        paths = sorted(folder.glob("*.json")) if folder.is_dir() else []
        seen += [(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in paths if p.is_file()]
    return hashlib.sha256(json.dumps(seen).encode()).hexdigest()[:16]


@dataclass
class RunRatings:
    """A run's choices handed back: per step the tallies, and the files skipped."""

    folder: Path
    checkpoints: list[dict] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    files: int = 0
    counted: dict[str, str] = field(default_factory=dict)  # identity → chosen

    def as_page(self, step: int, drop: str, command: str) -> dict:
        """The page's `ratings` (`tunesmith.render.audition`)."""
        return {
            "step": step,
            "drop": drop,
            "command": command,
            "checkpoints": self.checkpoints,
            "skipped": [f"{Path(s.path).name}: {s.reason}" for s in self.skipped],
        }

    def as_report(self) -> dict:
        return {
            "folder": str(self.folder),
            "files": self.files,
            "checkpoints": self.checkpoints,
            "skipped": [{"path": s.path, "reason": s.reason} for s in self.skipped],
        }


def tally(
    run_dir: Path,
    run: str,
    dataset: str,
    steps: set[int],
    current: tuple[int, str] | None = None,
) -> RunRatings:
    """Count the choices in `run_dir/ratings/*.json` for the run `run` of `dataset`, validated
    at `steps`. `current` is the page's (step, fingerprint): an export that names no step is
    counted at that step when it was made on that page."""
    folder = run_dir / FOLDER
    result = RunRatings(folder)
    latest: dict[str, tuple[str, str, int, Choice]] = {}  # identity → (time, file, step, choice)
    files_at: dict[int, set[str]] = {}
    paths = sorted(p for p in folder.glob("*.json") if p.is_file()) if folder.is_dir() else []
    for path in paths:
        try:
            found = read_choices(path)
        except RatingsError as exc:
            result.skipped.append(Skipped(str(path), str(exc).removeprefix(f"{path}: ")))
            continue
        reason, step = _misplaced(found, run, dataset, run_dir.name, steps, current)
        if reason:
            result.skipped.append(Skipped(str(path), f"{reason}; skipped"))
            continue
        result.files += 1
        files_at.setdefault(step, set()).add(found.sha256)
        for choice in found.choices:
            order = (choice.exported_at, path.name)
            held = latest.get(choice.identity)
            if held is None or order > held[:2]:
                latest[choice.identity] = (*order, step, choice)
    by_step: dict[int, dict] = {}
    for identity, (_, _, step, choice) in sorted(latest.items()):
        entry = by_step.setdefault(step, {"step": step, "prompts": {}, **dict.fromkeys(PICKS, 0)})
        entry[choice.chosen] += 1
        prompt = entry["prompts"].setdefault(choice.prompt, dict.fromkeys(PICKS, 0))
        prompt[choice.chosen] += 1
        result.counted[identity] = f"{step}:{choice.chosen}"
    for step in sorted(set(by_step) | set(files_at)):
        entry = by_step.get(step) or {"step": step, "prompts": {}, **dict.fromkeys(PICKS, 0)}
        total = sum(entry[p] for p in PICKS)
        entry["choices"] = total
        # Of every answered pick, "no difference" included (the page shows all three counts).
        entry["adapter_share"] = entry["adapter"] / total if total else None
        entry["files"] = len(files_at.get(step, ()))
        entry["prompts"] = dict(sorted(entry["prompts"].items()))
        result.checkpoints.append(entry)
    return result


def _misplaced(
    found: Choices,
    run: str,
    dataset: str,
    folder: str,
    steps: set[int],
    current: tuple[int, str] | None,
) -> tuple[str, int]:
    """Why the file's choices do not belong to this run's folder ("" where they do), and the
    step they were made at."""
    if found.run != run:
        return f"choices on run {found.run!r}, and this is run {run!r}'s folder", -1
    if found.dataset != dataset:
        return f"choices on dataset {found.dataset!r}, and this run is of {dataset!r}", -1
    if found.run_folder is not None and found.run_folder != folder:
        return (
            f"choices on the adapter trained in {found.run_folder!r}, not on this folder's "
            f"({folder!r}): the run was trained again since",
            -1,
        )
    step = found.step
    if step is None:
        if current is None or found.fingerprint != current[1]:
            return "the file names no step and was not made on the current page", -1
        step = current[0]
    if step not in steps:
        shown = ", ".join(map(str, sorted(steps))) or "none"
        return f"step {step} is not a checkpoint of this run (validated at steps {shown})", -1
    return "", step
