import dagster as dg

from pipelines.definitions import defs


def test_definitions_load_with_every_stage():
    dg.Definitions.validate_loadable(defs)
    keys = {k.to_user_string() for k in defs.resolve_all_asset_keys()}
    assert keys == {"manifest", "labels", "encoded", "adapters", "renders", "auditions"}
    assert defs.resolve_job_def("build_dataset")
    assert defs.resolve_sensor_def("dataset_folder_sensor").default_status == (
        dg.DefaultSensorStatus.RUNNING
    )
    assert defs.resolve_schedule_def("nightly_rebuild").cron_schedule == "0 3 * * *"


def test_every_stage_is_partitioned_by_dataset():
    graph = defs.resolve_asset_graph()
    for key in graph.get_all_asset_keys():
        partitions = graph.get(key).partitions_def
        assert isinstance(partitions, dg.DynamicPartitionsDefinition)
        assert partitions.name == "datasets"
