"""Where a run reads datasets and writes outputs, as a Dagster resource.

Each root may be set in run config; an empty value means the engine's default, read from
TUNESMITH_DATASETS / TUNESMITH_OUT / TUNESMITH_STORE / TUNESMITH_MODELS.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import dagster as dg
import pandas as pd

from tunesmith.config import Roots
from tunesmith.dataset.folders import resolve
from tunesmith.store import Store
from tunesmith.store.atomic import write_if_changed


class StorageResource(dg.ConfigurableResource):
    datasets_root: str = ""
    out_root: str = ""
    store_root: str = ""
    models_root: str = ""

    def roots(self) -> Roots:
        roots = Roots.from_env()
        pinned = {
            "datasets": self.datasets_root,
            "out": self.out_root,
            "store": self.store_root,
            "models": self.models_root,
        }
        return replace(roots, **{k: Path(v).absolute() for k, v in pinned.items() if v})

    def store(self) -> Store:
        return Store(self.roots().store)

    def dataset_folder(self, partition_key: str) -> Path:
        return resolve(self.roots().datasets, partition_key)

    def dataset_out(self, partition_key: str) -> Path:
        return self.roots().dataset_out(partition_key)


class ParquetIOManager(dg.ConfigurableIOManager):
    """DataFrames as `<out root>/<dataset>/<asset>.parquet`, written atomically."""

    storage: StorageResource

    def _path(self, context: dg.OutputContext | dg.InputContext) -> Path:
        out = self.storage.dataset_out(context.asset_partition_key)
        return out / f"{context.asset_key.path[-1]}.parquet"

    def handle_output(self, context: dg.OutputContext, obj: pd.DataFrame) -> None:
        path = self._path(context)
        write_if_changed(path, obj.to_parquet(index=False))  # unchanged: left untouched
        context.add_output_metadata({"table": dg.MetadataValue.path(str(path))})

    def load_input(self, context: dg.InputContext) -> pd.DataFrame:
        return pd.read_parquet(self._path(context))
