"""The Kubernetes variant, checked without a cluster by dagster-k8s's own code: the executor
config against its schema, the GPU stages' `dagster-k8s/config` tags against the tag schema,
and the Kubernetes Job a GPU step would be launched as, built by dagster-k8s itself."""

from __future__ import annotations

import dagster as dg
import pytest

pytest.importorskip("dagster_k8s", reason="dagster-k8s is in the `deploy` extra")

from dagster_k8s import k8s_job_executor  # noqa: E402
from dagster_k8s.container_context import K8sContainerContext  # noqa: E402
from dagster_k8s.job import (  # noqa: E402
    DagsterK8sJobConfig,
    UserDefinedDagsterK8sConfig,
    construct_dagster_k8s_job,
    get_user_defined_k8s_config,
)

from pipelines.definitions import ASSETS, resources  # noqa: E402
from pipelines.k8s import EXECUTOR_CONFIG, STEP_DEFAULTS, defs  # noqa: E402
from resources.compute import GPU_POOL  # noqa: E402
from resources.k8s import GPU_RESOURCE, K8S_CONFIG_TAG, gpu_step_tags  # noqa: E402

GPU_STAGES = {"encoded", "adapters", "renders"}


def test_the_k8s_definitions_load_with_the_k8s_executor_on_every_job():
    dg.Definitions.validate_loadable(defs)
    jobs = defs.resolve_all_job_defs()
    assert {job.name for job in jobs} >= {"build_dataset", "__ASSET_JOB"}
    for job in jobs:
        assert job.executor_def.name == "tunesmith_k8s", job.name
    # what the local Definitions run stays unchanged
    from pipelines.definitions import defs as local

    assert local.resolve_job_def("build_dataset").executor_def.name != "tunesmith_k8s"
    assert [s.name for s in defs.sensors] == [
        "dataset_folder_sensor",
        "default_automation_condition_sensor",
    ]
    assert [s.name for s in defs.schedules] == ["nightly_rebuild"]


def probe_job() -> dg.JobDefinition:
    """The stage assets under the unconfigured k8s_job_executor, whose run config carries the
    executor config and is validated against dagster-k8s's schema."""
    job = dg.define_asset_job("probe", selection=dg.AssetSelection.groups("tunesmith"))
    probe = dg.Definitions(
        assets=ASSETS, jobs=[job], executor=k8s_job_executor, resources=resources()
    )
    return probe.resolve_job_def("probe")


def test_the_executor_config_passes_dagster_k8s_validation():
    job = probe_job()
    assert dg.validate_run_config(job, {"execution": {"config": EXECUTOR_CONFIG}})
    # the check is live: a misspelt key and a wrong type are refused by the same schema
    with pytest.raises(dg.DagsterInvalidConfigError, match="step_k8s_confg"):
        dg.validate_run_config(job, {"execution": {"config": {"step_k8s_confg": {}}}})
    with pytest.raises(dg.DagsterInvalidConfigError, match="max_concurrent"):
        dg.validate_run_config(job, {"execution": {"config": {"max_concurrent": "two"}}})


def test_gpu_stages_carry_a_gpu_request_that_dagster_k8s_reads():
    seen = set()
    for asset in ASSETS:
        name = asset.key.to_user_string()
        # dagster-k8s's own reader: validates the tag against its schema, raises if invalid
        config = get_user_defined_k8s_config(asset.op.tags)
        if asset.op.pool == GPU_POOL:
            seen.add(name)
            assert config.container_config["resources"]["limits"] == {GPU_RESOURCE: "1"}
            assert config.pod_spec_config["tolerations"][0]["key"] == GPU_RESOURCE
        else:
            assert config == UserDefinedDagsterK8sConfig(), name
    assert seen == GPU_STAGES
    with pytest.raises(dg.DagsterInvalidConfigError):
        bad = {K8S_CONFIG_TAG: '{"container_confg": {}}'}
        get_user_defined_k8s_config(bad)
    with pytest.raises(ValueError, match="at least one GPU"):
        gpu_step_tags(0)


def step_job(stage: str):
    """The Kubernetes Job a step of `stage` is launched as: the executor's step defaults
    merged with the stage's tags the way dagster-k8s's step handler merges them, then built
    by dagster-k8s into kubernetes-client objects (which refuse unknown fields)."""
    (asset,) = [a for a in ASSETS if a.key.to_user_string() == stage]
    context = K8sContainerContext(
        run_k8s_config=UserDefinedDagsterK8sConfig.from_dict(STEP_DEFAULTS)
    ).merge(K8sContainerContext(run_k8s_config=get_user_defined_k8s_config(asset.op.tags)))
    config = DagsterK8sJobConfig(job_image="tunesmith:latest", dagster_home="/opt/dagster/home")
    return construct_dagster_k8s_job(
        job_config=config,
        args=["dagster", "api", "execute_step"],
        job_name=f"dagster-step-{stage}",
        user_defined_k8s_config=context.run_k8s_config,
        component="step_worker",
    )


def test_a_gpu_step_pod_asks_for_a_gpu_and_a_cpu_step_pod_does_not():
    training = step_job("adapters").spec.template.spec
    (container,) = training.containers
    print(container.resources, training.tolerations)
    assert container.resources.limits == {GPU_RESOURCE: "1"}
    assert container.resources.requests == {"cpu": "1", "memory": "2Gi"}
    assert [t.key for t in training.tolerations] == [GPU_RESOURCE]

    labels = step_job("labels").spec.template.spec
    (container,) = labels.containers
    assert not container.resources.limits
    assert container.resources.requests == {"cpu": "1", "memory": "2Gi"}
    assert not labels.tolerations
