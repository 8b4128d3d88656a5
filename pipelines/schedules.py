"""A nightly build of every dataset, for changes the sensor could not see (a new base
model file, a new tunesmith version). Unchanged items come from the store, so a quiet
night costs a scan."""

import dagster as dg

from assets.common import datasets
from pipelines.jobs import build_dataset


@dg.schedule(
    job=build_dataset,
    cron_schedule="0 3 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
)
def nightly_rebuild(context: dg.ScheduleEvaluationContext) -> list[dg.RunRequest]:
    day = context.scheduled_execution_time.strftime("%Y-%m-%d")
    return [
        dg.RunRequest(partition_key=k, run_key=f"{k}:{day}")
        for k in context.instance.get_dynamic_partitions(datasets.name)
    ]
