"""The Definitions for Kubernetes: the assets, job, sensor and schedule of
`pipelines.definitions`, each step run as a Kubernetes Job by dagster-k8s's
`k8s_job_executor`.

The code location in deploy/k8s/values.yaml loads this module (`-m pipelines.k8s`). The
stages in the pool "gpu" (encoded, adapters, renders) ask for a GPU through their
`dagster-k8s/config` op tags (resources/k8s.py); the other stages get STEP_DEFAULTS. Image,
namespace, volumes and environment come from the Helm chart's run launcher and code location
(`includeConfigInLaunchedRuns`), so they are written once, in the values file.
"""

from __future__ import annotations

from typing import Any

import dagster as dg
from dagster_k8s import k8s_job_executor

from pipelines.definitions import defs as local_defs

# What a step without its own tag asks for: the CPU stages (file scan, Essentia analysis,
# the audition page). A starting point, not a measurement: size it to your datasets.
STEP_DEFAULTS: dict[str, Any] = {
    "container_config": {"resources": {"requests": {"cpu": "1", "memory": "2Gi"}}},
}

# Per-stage sizes (more memory for training, say) go in "per_step_k8s_config", keyed by stage
# name; dagster-k8s merges them over the stage's tags and STEP_DEFAULTS.
EXECUTOR_CONFIG: dict[str, Any] = {"step_k8s_config": STEP_DEFAULTS}

k8s_executor = k8s_job_executor.configured(EXECUTOR_CONFIG, name="tunesmith_k8s")

defs = dg.Definitions.merge(local_defs, dg.Definitions(executor=k8s_executor))
