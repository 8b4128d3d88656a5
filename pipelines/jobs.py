"""The job that builds every stage of one dataset partition."""

import dagster as dg

build_dataset = dg.define_asset_job(
    "build_dataset",
    selection=dg.AssetSelection.groups("tunesmith"),
    description="Materialize every stage of one dataset; unchanged items come from the store.",
)
