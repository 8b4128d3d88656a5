"""The dagster.yaml tunesmith writes keeps the UI quiet: no telemetry and no community dialog,
also in a home an earlier release wrote; a dagster.yaml of a person's own is left alone."""

import pytest

from pipelines.instance import DAGSTER_YAML, open_instance

# What tunesmith wrote before the community dialog was turned off: the header, no `nux`.
EARLIER = DAGSTER_YAML[: DAGSTER_YAML.index("nux:")]
OWN = "telemetry:\n  enabled: false\n"


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    return tmp_path


def test_a_new_home_has_telemetry_and_the_community_dialog_off(home):
    with open_instance() as instance:
        assert not instance.telemetry_enabled and not instance.nux_enabled
    assert (home / "dagster.yaml").read_text() == DAGSTER_YAML


def test_a_home_an_earlier_release_wrote_gets_the_dialog_turned_off_once(home):
    (home / "dagster.yaml").write_text(EARLIER)
    with open_instance() as instance:
        assert not instance.nux_enabled
    text = (home / "dagster.yaml").read_text()
    assert text.startswith(EARLIER) and text.count("nux:") == 1
    with open_instance():
        pass
    assert (home / "dagster.yaml").read_text() == text


def test_a_dagster_yaml_of_a_persons_own_is_left_as_it_is(home):
    (home / "dagster.yaml").write_text(OWN)
    with open_instance() as instance:
        assert instance.nux_enabled  # theirs to set
    assert (home / "dagster.yaml").read_text() == OWN
