"""`tunesmith render`: a run's trained adapter on a person's prompts, without a build.

One short build of a dataset with a run of each family (Stable Audio 3 and ACE-Step on the
golden cases' clips, SDXL on their pictures, the tiny models), then the command: for a demo's
prompt, seed and strength it writes the files the renders stage wrote, byte for byte; several
prompts load the model once; a checkpoint of another step renders from its own file; and each
mistake is one line with exit status 1. (The build's tests are slow; the placement's and the
file names' are not.)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from pipelines import render as command
from pipelines.cli import main
from tests.conftest import make_storage, materialize
from tests.test_golden import _audio, _images
from tunesmith import family as families
from tunesmith.render.adhoc import slug

DATASET = "mixed"
TOML = """\
[dataset]
default_language = "en"

[[runs]]
name = "loops"
family = "stable-audio-3"
base_model = "tiny-stable-audio-3"
trigger = "gldn"
[runs.adapter]
type = "dora-rows"
rank = 4
[runs.train]
steps = 4
lr = 1e-3
eval_every = 2
checkpoint_every = 2
latent_crop_length = 32
[[runs.demos]]
prompt = "{trigger}, a loop"
seed = 7
duration = 1.0
steps = 2

[[runs]]
name = "songs"
family = "ace-step"
base_model = "tiny-ace-step"
trigger = "gldn"
[runs.adapter]
rank = 8
[runs.train]
epochs = 2
accumulation = 2
crop_frames = 24
eval_every = 2
checkpoint_every = 2
[[runs.demos]]
prompt = "{trigger}, a song"
lyrics = "[Verse]\\nla la"
seed = 7
duration = 1.0
steps = 2

[[runs]]
name = "pictures"
family = "sdxl"
base_model = "tiny-sdxl"
trigger = "gldn"
[runs.train]
size = 64
steps = 2
lr = 1e-3
eval_every = 2
checkpoint_every = 2
[[runs.demos]]
prompt = "{trigger}, a disc"
seed = 7
steps = 2
cfg = 5.0

[[runs]]
name = "later"
family = "sdxl"
base_model = "tiny-sdxl-not-downloaded"
"""
# Each run's demo prompt as the plan holds it, and the name its render's files take.
RUNS = {
    "loops": ("gldn, a loop", "gldn-a-loop-seed7-s1"),
    "songs": ("gldn, a song", "gldn-a-song-seed7-s1"),
    "pictures": ("gldn, a disc", "gldn-a-disc-seed7-s1"),
}


@pytest.fixture(scope="module")
def built(tmp_path_factory, tiny_sa3, tiny_sdxl, tiny_ace_step):
    """The dataset built once through every stage; the run `later`, whose base model is not
    there, is skipped and has no adapter. Beside it, `fresh`, a dataset never built."""
    root = tmp_path_factory.mktemp("render")
    storage = make_storage(root)
    models = Path(storage.models_root)
    for tiny, name in ((tiny_sa3, "tiny-stable-audio-3"), (tiny_sdxl, "tiny-sdxl")):
        shutil.copytree(tiny, models / name)
    shutil.copytree(tiny_ace_step, models / "tiny-ace-step")
    folder = Path(storage.datasets_root) / DATASET
    _audio(folder)
    (folder / "clip0.lyrics.txt").write_text("[Verse]\nla la la\n")
    _images(folder / "pictures")
    (folder / "pictures" / "tunesmith.toml").unlink()
    (folder / "tunesmith.toml").write_text(TOML)
    (Path(storage.datasets_root) / "fresh").mkdir()
    with dg.instance_for_test() as instance:
        md = materialize(instance, storage, DATASET)
    assert md["adapters"]["computed"] == 3 and md["renders"]["computed"] == 6
    return storage


@pytest.fixture
def roots(built, monkeypatch):
    env = {"DATASETS": built.datasets_root, "OUT": built.out_root}
    env |= {"STORE": built.store_root, "MODELS": built.models_root}
    for name, value in env.items():
        monkeypatch.setenv(f"TUNESMITH_{name}", value)
    return built


def render(capsys, run: str, *options: str) -> list[Path]:
    """`tunesmith render mixed RUN OPTIONS…`; the files it printed."""
    assert main(["render", DATASET, run, *options]) == 0
    return [Path(line) for line in capsys.readouterr().out.splitlines()]


def stage_files(roots, run: str, side: str) -> dict[str, bytes]:
    folder = Path(roots.out_root) / DATASET / "renders" / run / side
    return {p.name.replace("demo0", ""): p.read_bytes() for p in folder.glob("demo0.*")}


def files(paths: list[Path]) -> dict[str, bytes]:
    return {"." + p.name.split(".", 1)[1]: p.read_bytes() for p in paths}


@pytest.mark.slow
@pytest.mark.parametrize("run", sorted(RUNS))
def test_a_demo_s_prompt_seed_and_strength_give_the_renders_stage_s_files_byte_for_byte(
    roots, capsys, run
):
    prompt, name = RUNS[run]
    written = render(capsys, run, "--prompt", prompt.replace("gldn", "{trigger}"))
    assert {p.parent.name for p in written} == {"renders"}
    assert {p.name.split(".", 1)[0] for p in written} == {name}
    expected = stage_files(roots, run, "adapter")
    assert set(files(written)) == set(expected)  # .wav .mp3 .png .json, or .png .json
    assert files(written) == expected
    # strength 0 is the base model, as the stage's base side
    base = render(capsys, run, "--prompt", prompt, "--strength", "0")
    assert files(base) == stage_files(roots, run, "base")


@pytest.mark.slow
def test_several_prompts_load_the_model_once_and_take_the_run_s_settings(
    roots, capsys, monkeypatch
):
    family = type(families.get("stable-audio-3"))
    made = []

    def counted(self, *args):
        made.append(args)
        return original(self, *args)

    original = family.renderer
    monkeypatch.setattr(family, "renderer", counted)
    prompts = ["a first loop", "a second loop", "{trigger} at last"]
    options = [x for prompt in prompts for x in ("--prompt", prompt)]
    written = render(capsys, "loops", *options, "--seed", "11", "--strength", "0.5")
    assert len(made) == 1
    sidecars = [json.loads(p.read_text()) for p in written if p.suffix == ".json"]
    assert [s["prompt"] for s in sidecars] == ["a first loop", "a second loop", "gldn at last"]
    assert [p.name for p in written if p.suffix == ".json"] == [
        "a-first-loop-seed11-s0.5.json",
        "a-second-loop-seed11-s0.5.json",
        "gldn-at-last-seed11-s0.5.json",
    ]
    first = sidecars[0]
    assert (first["seed"], first["strength"], first["side"]) == (11, 0.5, "adapter")
    assert (first["duration"], first["steps"], first["cfg"]) == (1.0, 2, 7.0)  # the demo's
    wavs = [p.read_bytes() for p in written if p.suffix == ".wav"]
    assert len(set(wavs)) == 3


@pytest.mark.slow
def test_a_step_renders_its_checkpoint_and_a_step_with_no_file_lists_those_there(roots, capsys):
    best = render(capsys, "loops", "--prompt", "{trigger}, a loop")
    earlier = render(capsys, "loops", "--prompt", "{trigger}, a loop", "--step", "2")
    sidecar = json.loads(next(p for p in earlier if p.suffix == ".json").read_text())
    assert sidecar["training_step"] == 2 and "step=2-epoch" in sidecar["adapter"]
    assert earlier[0].name == "gldn-a-loop-seed7-s1-step2.wav"
    assert earlier[0].read_bytes() != best[0].read_bytes()
    with pytest.raises(SystemExit) as stop:
        main(["render", DATASET, "loops", "--prompt", "x", "--step", "3"])
    run_dir = best[0].parent.parent
    assert stop.value.code == (
        f"run loops: no adapter file of step 3 in {run_dir}; steps there: 2, 4 (best: 4)"
    )


MISTAKES = {
    ("nowhere", "loops"): "no dataset 'nowhere'; known: fresh, mixed",
    ("fresh", "loops"): "dataset 'fresh' was never built: `tunesmith run fresh` builds it",
    (DATASET, "nope"): "no run 'nope' in dataset 'mixed'; its runs: later, loops, pictures, songs",
    (DATASET, "later"): "run 'later' of dataset 'mixed' has no trained adapter yet: "
    "`tunesmith run mixed` trains it (runs with one: loops, pictures, songs)",
    (DATASET, "loops", "--steps", "0"): "--steps 0: must be an integer ≥ 1",
    (DATASET, "pictures", "--duration", "5"): "--duration: SDXL renders have no duration",
}


@pytest.mark.slow
def test_each_mistake_is_one_line_naming_what_there_is(roots):
    for (dataset, run, *options), line in MISTAKES.items():
        with pytest.raises(SystemExit) as stop:
            main(["render", dataset, run, "--prompt", "x", *options])
        assert stop.value.code == line
    # As a person meets it: that line alone, exit status 1, no traceback.
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "render", DATASET, "nope", "--prompt", "x"],
        env={**os.environ},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == MISTAKES[(DATASET, "nope")] + "\n"


def test_without_a_pin_the_placement_is_the_compute_resource_s_and_a_pin_is_read_alike(
    monkeypatch,
):
    from resources.compute import ENV_BACKEND, ENV_DEVICE, ENV_DTYPE, ComputeResource

    assert set(command.PINS) == {ENV_BACKEND, ENV_DEVICE, ENV_DTYPE}
    for name in command.PINS:
        monkeypatch.delenv(name, raising=False)
    for family in families.all_families().values():
        stage = ComputeResource().placement("renders", family.name, family.backends_for("renders"))
        assert command._placement(family) == stage, family.name
    monkeypatch.setenv(ENV_DTYPE, "bfloat16")
    assert str(command._placement(families.get("sdxl"))) == "torch/cpu/bfloat16"


def test_a_prompt_names_its_files_by_its_words_or_by_its_hash():
    assert slug("gldn, Genre: lo-fi hip hop!") == "gldn-genre-lo-fi-hip-hop"
    assert slug("") == "empty"
    assert slug("夜のバス") != slug("朝のバス")
    assert slug("夜のバス").startswith("prompt-")
    assert len(slug("a very long prompt " * 10)) <= 60
