"""Where tunesmith reads and writes: the roots, each set by an environment variable.

Defaults are relative to the working directory, so `make demo` in a checkout keeps
everything under `data/`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Roots:
    datasets: Path  # one folder per dataset; never written by tunesmith
    out: Path  # per-dataset outputs: tables, report.json, adapters, renders
    store: Path  # the content-addressed cache of every stage's items
    models: Path  # base models (the tiny example models are made here)

    @classmethod
    def from_env(cls) -> Roots:
        def root(var: str, default: str) -> Path:
            return Path(os.environ.get(var) or default).expanduser().absolute()

        return cls(
            datasets=root("TUNESMITH_DATASETS", "data/datasets"),
            out=root("TUNESMITH_OUT", "data/out"),
            store=root("TUNESMITH_STORE", "data/store"),
            models=root("TUNESMITH_MODELS", "data/models"),
        )

    def dataset_out(self, dataset: str) -> Path:
        return self.out / dataset
