"""What `tunesmith check` and `tunesmith run` both say before any work (`preflight`): each
mistake a person makes in a dataset folder is one line, and both commands refuse it alike."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import write_clip, write_image
from tunesmith.train.preflight import preflight

SA3 = """\
[[runs]]
name = "mine"
family = "stable-audio-3"
base_model = "{base}"
"""


@pytest.fixture
def roots(tmp_path, tiny_sa3, tiny_sdxl) -> tuple[Path, Path]:
    """(datasets root, models root) with the tiny Stable Audio 3 and SDXL base models."""
    models = tmp_path / "models"
    models.mkdir()
    (models / "tiny-sa3").symlink_to(tiny_sa3)
    (models / "tiny-sdxl").symlink_to(tiny_sdxl)
    (tmp_path / "datasets").mkdir()
    return tmp_path / "datasets", models


def clips(folder: Path, toml: str | None = None, name: str = "tunesmith.toml") -> Path:
    for i in range(2):
        write_clip(folder / f"clip{i}.wav", seconds=1.0)
    if toml is not None:
        (folder / name).write_text(toml)
    return folder


def pictures(folder: Path, toml: str | None = None) -> Path:
    for i in range(2):
        write_image(folder / f"pic{i}.png")
    if toml is not None:
        (folder / "tunesmith.toml").write_text(toml)
    return folder


# dataset name → (how the folder is made, words its one problem line holds, words it must not)
MISTAKES = {
    "missing-model": (
        lambda f: clips(f, SA3.format(base="no-such-model")),
        ["run mine: base model ", "no-such-model", 'set base_model = "tiny-sa3"'],
        [],
    ),
    "another-familys-model": (
        lambda f: clips(f, SA3.format(base="tiny-sdxl")),
        ["this is a SDXL base model, not a Stable Audio 3 one", 'set base_model = "tiny-sa3"'],
        ["put a Stable Audio 3 base model"],  # never over another family's model
    ),
    "empty": (
        lambda f: (f.mkdir(), (f / "notes.txt").write_text("to do"))[0],
        ["no audio files or pictures to train on"],
        ["SDXL", "base model"],
    ),
    "wrong-media": (
        lambda f: pictures(f, SA3.format(base="tiny-sa3")),
        ["run mine: Stable Audio 3 trains on audio files", "holds 2 pictures", "sdxl"],
        [],
    ),
    "select-without-clap": (
        lambda f: clips(
            f,
            SA3.format(base="tiny-sa3")
            + '[runs.train]\nselect = "style"\n[metrics]\nclap = "gone-clap"\n',
        ),
        ["run mine: train.select = style keeps the adapter by a measure", "gone-clap", "CLAP"],
        ["base model"],
    ),
    "typo": (
        lambda f: clips(f, SA3.format(base="tiny-sa3"), name="tunesmith.tml"),
        ["tunesmith.tml: not read: the settings file must be named tunesmith.toml"],
        [],
    ),
}


@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_each_mistake_is_one_problem_line(roots, mistake):
    datasets, models = roots
    make, said, unsaid = MISTAKES[mistake]
    make(datasets / mistake)
    found = preflight(datasets / mistake, models)
    assert len(found.problems) == 1, found.problems
    (line,) = found.problems
    assert "\n" not in line
    for words in said:
        assert words in line, line
    for words in unsaid:
        assert words not in line, line


def test_the_models_that_are_there_are_listed(roots):
    datasets, models = roots
    clips(datasets / "songs", SA3.format(base="no-such-model"))
    (line,) = preflight(datasets / "songs", models).problems
    assert f"base models under {models}: tiny-sa3 (Stable Audio 3), tiny-sdxl (SDXL)" in line


def test_a_good_folder_has_no_problem_and_a_warmup_past_the_run_is_a_warning(roots):
    datasets, models = roots
    toml = SA3.format(base="tiny-sa3") + "[runs.train]\nsteps = 100\n"
    found = preflight(clips(datasets / "songs", toml), models)
    assert found.problems == []
    assert found.fine == [f"run mine: stable-audio-3, base model {models / 'tiny-sa3'}: ok"]
    (warning,) = found.warnings
    assert warning.startswith("run mine: train.warmup 0.995 reaches 90% of train.lr at step 459")
    assert "the run ends at 39% of its learning rate" in warning
    long_enough = SA3.format(base="tiny-sa3") + "[runs.train]\nsteps = 2000\n"
    (datasets / "songs" / "tunesmith.toml").write_text(long_enough)
    assert preflight(datasets / "songs", models).warnings == []


def test_a_folder_without_settings_trains_its_media_by_default(roots):
    datasets, models = roots
    found = preflight(pictures(datasets / "pics"), models)
    # the default SDXL run's base model is "sdxl" under the models root: missing, and said so
    (line,) = found.problems
    assert line.startswith("run sdxl-default: base model ") and 'base_model = "tiny-sdxl"' in line


@pytest.mark.slow
def test_check_and_run_refuse_each_mistake_alike_and_write_nothing(roots, tmp_path):
    datasets, models = roots
    for mistake, (make, _, _) in MISTAKES.items():
        make(datasets / mistake)
    env = {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path / "home"),
        "TUNESMITH_DATASETS": str(datasets),
        "TUNESMITH_OUT": str(tmp_path / "out"),
        "TUNESMITH_STORE": str(tmp_path / "store"),
        "TUNESMITH_MODELS": str(models),
    }
    for mistake in MISTAKES:
        (line,) = preflight(datasets / mistake, models).problems
        for command in ("check", "run"):
            done = subprocess.run(
                [sys.executable, "-m", "pipelines.cli", command, mistake],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            said = done.stdout + done.stderr
            assert done.returncode == 1, (mistake, command, said)
            assert line in said and "Traceback" not in said, (mistake, command, said)
    assert not (tmp_path / "out").exists() and not (tmp_path / "store").exists()


@pytest.mark.slow
def test_commands_run_where_there_is_no_datasets_folder_say_so_and_create_nothing(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TUNESMITH_", "DAGSTER_"))}
    for command in ("check", "status", "run", "verify"):
        done = subprocess.run(
            [sys.executable, "-m", "pipelines.cli", command],
            cwd=tmp_path,
            env={**env, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
            capture_output=True,
            text=True,
            timeout=120,
        )
        said = (done.stdout + done.stderr).strip()
        assert done.returncode == 1 and "Traceback" not in said, (command, said)
        assert said == (
            f"no datasets folder at {tmp_path / 'data' / 'datasets'} (the default): set "
            "TUNESMITH_DATASETS to the folder that holds your dataset folders, or write a "
            'tunesmith-project.toml with a [roots] table (datasets = "…") in your project '
            "folder, or run where data/datasets is"
        ), said
    assert list(tmp_path.iterdir()) == []


def test_the_roots_come_from_a_project_file_in_the_folder_or_above(tmp_path, monkeypatch):
    from pipelines.operations import _select
    from tunesmith.config import Roots

    for var in ("TUNESMITH_DATASETS", "TUNESMITH_OUT", "TUNESMITH_STORE", "TUNESMITH_MODELS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    project = tmp_path / "album"
    (project / "songs" / "bedroom tapes").mkdir(parents=True)
    (project / "notes" / "deep").mkdir(parents=True)
    (project / "tunesmith-project.toml").write_text(
        '[roots]\ndatasets = "songs"\nstore = "cache"\nmodels = "/srv/models"\n'
    )
    monkeypatch.chdir(project / "notes" / "deep")
    roots = Roots.from_env()
    assert roots.datasets == project / "songs" and roots.store == project / "cache"
    assert roots.models == Path("/srv/models")
    assert roots.out == project / "notes" / "deep" / "data" / "out"  # not set: the default
    assert roots.origin("datasets") == str(project / "tunesmith-project.toml")
    assert list(_select(["bedroom tapes"]).values()) == [project / "songs" / "bedroom tapes"]
    monkeypatch.setenv("TUNESMITH_STORE", str(tmp_path / "elsewhere"))  # a variable wins
    assert Roots.from_env().store == tmp_path / "elsewhere"
    assert Roots.from_env().origin("store") == "TUNESMITH_STORE"


def test_a_project_file_that_is_wrong_is_one_line(tmp_path, monkeypatch):
    from tunesmith.config import Roots

    monkeypatch.delenv("TUNESMITH_DATASETS", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tunesmith-project.toml").write_text('[roots]\ndataset = "songs"\n')
    with pytest.raises(
        SystemExit,
        match=r"tunesmith-project.toml: \[roots\] takes paths .*"
        r"found dataset$",
    ):
        Roots.from_env()
    (tmp_path / "tunesmith-project.toml").write_text("[roots\n")
    with pytest.raises(SystemExit, match="tunesmith-project.toml: not a readable TOML file"):
        Roots.from_env()


def test_a_dataset_is_named_by_its_folder_name_key_or_path(tmp_path, monkeypatch):
    from pipelines.operations import _select

    (tmp_path / "datasets" / "bedroom tapes").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.setenv("TUNESMITH_DATASETS", str(tmp_path / "datasets"))
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "datasets" / "bedroom tapes"
    for name in (
        "bedroom tapes",
        "./datasets/bedroom tapes",
        str(folder),
        "datasets/bedroom tapes/",
    ):
        assert list(_select([name]).values()) == [folder], name
    with pytest.raises(SystemExit, match="is not a dataset folder under"):
        _select(["elsewhere"])
    with pytest.raises(SystemExit, match="no dataset 'nope'; known: bedroom tapes"):
        _select(["nope"])


@pytest.mark.slow
def test_one_runs_missing_base_model_does_not_stop_the_others(tmp_path, tiny_sa3):
    from tests.faults.test_faults import TOML, World

    models = tmp_path / "models"
    models.mkdir()
    (models / "tiny-stable-audio-3").symlink_to(tiny_sa3)
    (tmp_path / "world").mkdir()
    world = World(tmp_path / "world", models)
    other = TOML.split("[[runs.demos]]")[0].replace('name = "clips-lora"', 'name = "clips-gone"')
    other = other.replace('base_model = "tiny-stable-audio-3"', 'base_model = "sa3-medium"')
    (world.dataset / "tunesmith.toml").write_text(TOML + other)
    done = world.cli("run", "clips")
    said = done.stdout + done.stderr
    assert done.returncode == 1 and "Traceback" not in said, said
    assert "== clips: these runs are not trained:\n  run clips-gone: base model " in said, said
    assert "base models under " in said and "tiny-stable-audio-3 (Stable Audio 3)" in said
    report = json.loads((world.out / "clips" / "report.json").read_text())
    assert [r["run"] for r in report["stages"]["adapters"]["runs"]] == ["clips-lora"]
    assert "run clips-lora: validation loss" in said


@pytest.mark.slow
def test_a_file_that_cannot_be_used_is_named_the_rest_built_and_the_command_exits_1(
    tmp_path, tiny_sa3
):
    """Work not done is never exit status 0: the build goes on without the file, says which
    file and why, and the command exits 1 for as long as the file is there."""
    from tests.faults.test_faults import World

    models = tmp_path / "models"
    models.mkdir()
    (models / "tiny-stable-audio-3").symlink_to(tiny_sa3)
    (tmp_path / "world").mkdir()
    world = World(tmp_path / "world", models)
    (world.dataset / "notes.wav").write_text("not audio, saved with the wrong name")
    for attempt in ("first build", "second build"):
        done = world.cli("run", "clips")
        said = done.stdout + done.stderr
        assert done.returncode == 1 and "Traceback" not in said, (attempt, said)
        assert "skipped notes.wav: notes.wav: the extension says WAV" in said, said
        assert "clips: 1 skipped (notes.wav): everything else is built" in said, said
        report = json.loads((world.out / "clips" / "report.json").read_text())
        assert [r["run"] for r in report["stages"]["adapters"]["runs"]] == ["clips-lora"]
    assert "adapters   items    1  computed    0  cached    1" in said  # nothing done twice
    (world.dataset / "notes.wav").unlink()
    done = world.cli("run", "clips")
    assert done.returncode == 0, done.stdout + done.stderr
