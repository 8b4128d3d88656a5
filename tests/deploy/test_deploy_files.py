"""The files under deploy/ agree with Dagster's schemas and with this code, without a
server: the instance config, the PostgreSQL connection it builds from the environment, and
the Helm values (parsed and checked against the code; see the last test's docstring)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import dagster as dg
import pytest
import yaml

from tunesmith.config import Roots

REPO = Path(__file__).resolve().parents[2]
PG_ENV = {
    "DAGSTER_PG_HOST": "db.internal",
    "DAGSTER_PG_PORT": "6543",
    "DAGSTER_PG_DB": "dagster",
    "DAGSTER_PG_USERNAME": "team",
    "DAGSTER_PG_PASSWORD": "p@ss:w0rd",
}


def test_the_team_dagster_yaml_passes_the_instance_schema(tmp_path):
    from dagster._core.instance.config import dagster_instance_config

    shutil.copy(REPO / "deploy" / "dagster.yaml", tmp_path / "dagster.yaml")
    config, _ = dagster_instance_config(str(tmp_path))
    assert config["run_coordinator"]["class"] == "QueuedRunCoordinator"
    assert config["concurrency"]["pools"]["default_limit"] == 1
    assert config["run_monitoring"]["free_slots_after_run_end_seconds"] > 0
    text = (REPO / "deploy" / "dagster.yaml").read_text()
    assert not re.search(r"password:\s*[^{\s]", text)  # only {env: ...}


def test_the_connection_comes_from_the_environment(monkeypatch):
    pytest.importorskip("dagster_postgres", reason="dagster-postgres is in the `deploy` extra")
    from dagster._config import process_config, resolve_to_config_type
    from dagster_postgres import DagsterPostgresStorage
    from dagster_postgres.utils import pg_url_from_config
    from sqlalchemy.engine import make_url

    for key, value in PG_ENV.items():
        monkeypatch.setenv(key, value)
    raw = yaml.safe_load((REPO / "deploy" / "dagster.yaml").read_text())["storage"]["postgres"]
    result = process_config(resolve_to_config_type(DagsterPostgresStorage.config_type()), raw)
    assert result.success, result.errors
    # The URL dagster-postgres builds, read back by SQLAlchemy as its engine will read it.
    url = make_url(pg_url_from_config(result.value))
    assert (url.drivername, url.host, url.port, url.database) == (
        "postgresql+psycopg2",
        "db.internal",
        6543,
        "dagster",
    )
    assert (url.username, url.password) == ("team", "p@ss:w0rd")
    monkeypatch.delenv("DAGSTER_PG_PASSWORD")
    missing = process_config(resolve_to_config_type(DagsterPostgresStorage.config_type()), raw)
    assert not missing.success and "DAGSTER_PG_PASSWORD" in str(missing.errors)


def test_the_helm_values_agree_with_the_code():
    """Parsed and compared with this code only. The chart's published values.schema.json for
    the chart version matching dagster was not available offline, so the values are not
    validated against it (docs/deploy.md says so)."""
    values = yaml.safe_load((REPO / "deploy" / "k8s" / "values.yaml").read_text())
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    args = deployment["dagsterApiGrpcArgs"]
    assert args[args.index("-m") + 1] == "pipelines.k8s"
    assert deployment["includeConfigInLaunchedRuns"] == {"enabled": True}
    # The roots every pod gets are the ones the engine reads, all on the shared volume.
    env = {item["name"]: item["value"] for item in deployment["env"]}
    (mount,) = deployment["volumeMounts"]
    with pytest.MonkeyPatch.context() as mp:
        for name, value in env.items():
            mp.setenv(name, value)
        roots = Roots.from_env()
    for root in (roots.datasets, roots.out, roots.store, roots.models):
        assert root.is_relative_to(mount["mountPath"]), root
    (volume,) = deployment["volumes"]
    assert volume["name"] == mount["name"]
    pvc = yaml.safe_load((REPO / "deploy" / "k8s" / "pvc.yaml").read_text())
    assert pvc["metadata"]["name"] == volume["persistentVolumeClaim"]["claimName"]
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    team = yaml.safe_load((REPO / "deploy" / "dagster.yaml").read_text())
    assert (
        values["postgresql"]["postgresqlScheme"]
        == team["storage"]["postgres"]["postgres_db"]["scheme"]
    )
    # the chart version in the install commands is the dagster version installed
    for path in ("deploy/k8s/values.yaml", "docs/deploy.md", "README.md"):
        versions = set(re.findall(r"--version (\S+)", (REPO / path).read_text()))
        assert versions == {dg.__version__}, path


def test_start_sh_kills_what_does_not_stop_within_its_grace(tmp_path):
    """deploy/start.sh on SIGTERM stops the daemon and the webserver; one that outlasts
    TUNESMITH_STOP_GRACE is killed with its children, and the script still exits 0 (here with
    stand-ins: a daemon that ignores SIGTERM, with a child, and a webserver that obeys)."""
    bin_ = tmp_path / "venv" / "bin"
    bin_.mkdir(parents=True)
    ready = tmp_path / "daemon-ready"
    tools = {
        "dagster": "#!/bin/sh\nexit 0\n",
        "dagster-daemon": f"#!/bin/bash\ntrap '' TERM\ntouch {ready}\nsleep 1000\n",
        "dagster-webserver": "#!/bin/sh\nexec sleep 1000\n",
    }
    for name, text in tools.items():
        (bin_ / name).write_text(text)
        (bin_ / name).chmod(0o755)
    env = {**os.environ, **PG_ENV, "DAGSTER_HOME": str(tmp_path / "home")}
    env |= {"TUNESMITH_VENV": str(tmp_path / "venv"), "TUNESMITH_STOP_GRACE": "2"}
    script = subprocess.Popen(
        ["bash", str(REPO / "deploy" / "start.sh"), "--gpus", "1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), script.stderr.read() if script.poll() is not None else "no daemon"
        script.send_signal(signal.SIGTERM)
        out, err = script.communicate(timeout=30)
        assert script.returncode == 0, err
        assert "daemon pid" in out
        assert "did not stop within 2 s of SIGTERM; killing it" in err
        deadline = time.monotonic() + 10
        while _group_alive(script.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _group_alive(script.pid)  # the daemon's child too
    finally:
        if _group_alive(script.pid):
            os.killpg(script.pid, signal.SIGKILL)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
