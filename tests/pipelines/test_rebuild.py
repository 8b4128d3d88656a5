"""A second build of an unchanged dataset computes nothing in any stage, touches no output,
and keeps every data version; what it writes others can read (mode 0644 under umask 022).
Such a build, in the process `tunesmith run` starts, imports no model library."""

import os
import shutil
import time
from pathlib import Path

import pytest

from pipelines.definitions import ASSETS
from tests.conftest import build_in_a_process, data_version, materialize
from tests.test_golden import AUDIO_TOML, IMAGE_TOML, _audio, _images

pytestmark = pytest.mark.slow


def test_a_second_build_with_a_trained_run_of_each_family_computes_nothing(
    storage, instance, tiny_sa3, tiny_sdxl
):
    models = Path(storage.models_root)
    shutil.copytree(tiny_sa3, models / "tiny-stable-audio-3")
    shutil.copytree(tiny_sdxl, models / "tiny-sdxl")
    folder = Path(storage.datasets_root) / "both"
    _audio(folder)
    _images(folder / "pictures")
    (folder / "pictures" / "tunesmith.toml").unlink()
    (folder / "tunesmith.toml").write_text(AUDIO_TOML + "\n" + IMAGE_TOML)
    old = os.umask(0o022)
    try:
        first = materialize(instance, storage, "both")
        assert first["adapters"]["computed"] == 2 and first["renders"]["computed"] == 4
        assert first["checks"] == {
            "adapters_learned": True,  # nothing to measure with: no warning
            "underfit_contract": True,
            "sdxl_files": True,
            "ace_step_files": True,
            "ace_step_planner_files": True,
        }
        versions = {
            a.key.to_user_string(): data_version(instance, a.key.to_user_string(), "both")
            for a in ASSETS
        }
        out = Path(storage.out_root) / "both"
        files = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
        second = materialize(instance, storage, "both")
    finally:
        os.umask(old)
    for stage in (a.key.to_user_string() for a in ASSETS):
        assert second[stage]["computed"] == 0, (stage, second[stage])
        assert data_version(instance, stage, "both") == versions[stage], stage
    changed = [p for p, mtime in files.items() if p.stat().st_mtime_ns != mtime]
    assert sorted(p.name for p in changed) == ["report.json"], changed  # it records this build
    private = [p for p in files if p.stat().st_mode & 0o777 == 0o600]
    assert private == [], private
    # Then through the command's build process: the first such build remembers the adapter
    # files' checks (files written in the last two seconds are never remembered, hence the
    # wait), the next imports neither torch nor any library that needs it.
    time.sleep(2.1)
    for build in ("remembers", "light"):
        heavy = build_in_a_process(storage, folder.name, home=Path(storage.out_root).parent / build)
    assert heavy == [], heavy
