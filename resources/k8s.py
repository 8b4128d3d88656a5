"""What a GPU stage asks Kubernetes for: the `dagster-k8s/config` op tag.

Only dagster-k8s's `k8s_job_executor` (pipelines/k8s.py), which runs every step in a pod of
its own, reads this tag; every other executor ignores it, so the same assets run unchanged
on one machine. The tag holds no compute setting: what a stage computes and its cache keys
never depend on it.
"""

from __future__ import annotations

from typing import Any

K8S_CONFIG_TAG = "dagster-k8s/config"
# The resource name NVIDIA's Kubernetes device plugin advertises; extended resources go in
# `limits` (Kubernetes copies them to `requests`), and a GPU is never shared between pods.
GPU_RESOURCE = "nvidia.com/gpu"
GPUS_PER_STEP = 1  # one step, one accelerator: the same rule as the Dagster pool "gpu"


def gpu_step_tags(gpus: int = GPUS_PER_STEP) -> dict[str, Any]:
    """Op tags for a stage in the pool "gpu": a pod with `gpus` GPUs, schedulable on nodes
    tainted for GPU work (the taint managed GPU node pools carry, `nvidia.com/gpu:NoSchedule`)."""
    if gpus < 1:
        raise ValueError(f"a GPU stage needs at least one GPU, got {gpus}")
    return {
        K8S_CONFIG_TAG: {
            "container_config": {"resources": {"limits": {GPU_RESOURCE: str(gpus)}}},
            "pod_spec_config": {
                "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]
            },
        }
    }
