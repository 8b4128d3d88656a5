"""Where tunesmith reads and writes: the roots.

Each root is, first found first: its environment variable; the `[roots]` table of a project
file `tunesmith-project.toml` in the working directory or the nearest folder above it (paths
in it are relative to its own folder, so the commands work from anywhere inside the project);
else a default relative to the working directory, so `make demo` in a checkout keeps
everything under `data/`.

    # tunesmith-project.toml
    [roots]
    datasets = "songs"        # one folder per dataset
    out = "out"
    store = "cache"
    models = "/srv/models"
    dagster_home = "runs"
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

PROJECT_FILE = "tunesmith-project.toml"
# root → (its variable, its default)
ROOTS = {
    "datasets": ("TUNESMITH_DATASETS", "data/datasets"),
    "out": ("TUNESMITH_OUT", "data/out"),
    "store": ("TUNESMITH_STORE", "data/store"),
    "models": ("TUNESMITH_MODELS", "data/models"),
    "dagster_home": ("DAGSTER_HOME", "data/dagster_home"),
}


class ProjectFileError(SystemExit):
    """A project file that does not parse or names an unknown root: the command stops with
    this one line (a SystemExit, so no traceback)."""


@dataclass(frozen=True)
class Roots:
    datasets: Path  # one folder per dataset; never written by tunesmith
    out: Path  # per-dataset outputs: tables, report.json, adapters, renders
    store: Path  # the content-addressed cache of every stage's items
    models: Path  # base models (the tiny example models are made here)
    dagster_home: Path  # Dagster's run history
    project: Path | None = None  # the project file the roots came from, if any

    @classmethod
    def from_env(cls) -> Roots:
        project = find_project_file(Path.cwd())
        table = _roots_table(project) if project else {}
        found = {}
        for name, (var, default) in ROOTS.items():
            if os.environ.get(var):
                path = Path(os.environ[var]).expanduser()
            elif name in table:
                path = project.parent / Path(table[name]).expanduser()
            else:
                path = Path(default)
            found[name] = path.absolute()
        return cls(**found, project=project)

    def dataset_out(self, dataset: str) -> Path:
        return self.out / dataset

    def origin(self, name: str) -> str:
        """Where root `name` came from, for a message: its variable, the project file or the
        default."""
        var, _ = ROOTS[name]
        if os.environ.get(var):
            return var
        if self.project and name in _roots_table(self.project):
            return str(self.project)
        return "the default"


def find_project_file(start: Path) -> Path | None:
    """`tunesmith-project.toml` in `start` or the nearest folder above it."""
    for folder in [start, *start.parents]:
        candidate = folder / PROJECT_FILE
        if candidate.is_file():
            return candidate
    return None


def _roots_table(project: Path) -> dict[str, str]:
    try:
        document = tomllib.loads(project.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ProjectFileError(f"{project}: not a readable TOML file ({exc})") from None
    table = document.get("roots", {})
    unknown = sorted(set(table) - set(ROOTS)) if isinstance(table, dict) else ["roots"]
    if unknown or not all(isinstance(v, str) for v in table.values()):
        raise ProjectFileError(
            f"{project}: [roots] takes paths (strings) for {', '.join(ROOTS)}; "
            f"found {', '.join(unknown) or 'a value that is not a string'}"
        )
    return table
