"""`tunesmith import-kohya`: kohya sd-scripts' files on disk into a dataset's tunesmith.toml.

A kohya project as its users lay it out (pictures with `.txt` captions in `img/10_mychar`, a
training config, a dataset config, a sample prompts file), the dataset linked under the
datasets root: the command writes the file tunesmith's loader reads, prints its report, counts
the pictures for the epochs, refuses to replace a file without --force, and refuses files that
are not kohya's in one line naming them, writing nothing.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from pipelines.cli import main
from tests.conftest import write_image
from tests.formats.test_kohya_config import still_pending
from tunesmith.train.config import load_plan

CONFIG = """
[model_arguments]
pretrained_model_name_or_path = "stabilityai/stable-diffusion-xl-base-1.0"

[additional_network_arguments]
network_module = "networks.lora"
network_dim = 8
network_alpha = 4
network_train_unet_only = true

[optimizer_arguments]
optimizer_type = "AdamW8bit"
learning_rate = 1e-4
lr_scheduler = "cosine"

[training_arguments]
output_dir = "out"
output_name = "mychar-v1"
max_train_epochs = 2
save_every_n_epochs = 1
seed = 7
sample_prompts = "prompts.txt"
sample_every_n_steps = 10
xformers = true
"""
DATASET = """
[general]
caption_extension = ".txt"

[[datasets]]
resolution = 512
batch_size = 1

  [[datasets.subsets]]
  image_dir = "img/10_mychar"
  num_repeats = 10
"""
PROMPTS = "mychar, a portrait --d 3 --s 20 --l 5\n"


@pytest.fixture()
def project(tmp_path, monkeypatch):
    """A kohya project in tmp/kohya, its picture folder linked as the dataset `10_mychar`
    under the datasets root tmp/datasets; the working folder elsewhere."""
    kohya = tmp_path / "kohya"
    pictures = kohya / "img" / "10_mychar"
    for i in range(3):
        write_image(pictures / f"pic{i}.png")
        (pictures / f"pic{i}.txt").write_text(f"mychar, picture {i}", encoding="utf-8")
    (kohya / "config.toml").write_text(CONFIG, encoding="utf-8")
    (kohya / "dataset.toml").write_text(DATASET, encoding="utf-8")
    (kohya / "prompts.txt").write_text(PROMPTS, encoding="utf-8")
    datasets = tmp_path / "datasets"
    datasets.mkdir()
    (datasets / "10_mychar").symlink_to(pictures)
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("TUNESMITH_DATASETS", str(datasets))
    return kohya


def command(*argv: str | Path) -> int:
    """`tunesmith import-kohya ARGV...` through the command's own entry point."""
    return main(["import-kohya", *map(str, argv)])


def test_the_command_writes_the_run_tunesmith_loads(project, capsys):
    assert command(project / "config.toml", project / "dataset.toml") == 0
    target = project.parent / "datasets" / "10_mychar" / "tunesmith.toml"
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"wrote {target}"
    (run,) = load_plan(target.parent).runs
    # 3 pictures x 10 repeats / batch 1 = 30 steps an epoch, counted in img/10_mychar
    t = run.train
    assert (run.name, run.base_model) == ("mychar-v1", "stable-diffusion-xl-base-1.0")
    assert (run.adapter.type, run.adapter.rank, run.adapter.alpha) == ("lora", 8, 4)
    assert (t.steps, t.checkpoint_every, t.eval_every, t.size, t.batch_size) == (60, 30, 10, 512, 1)
    assert (t.lr, t.seed, t.grad_clip, t.optimizer, t.lr_scheduler) == (
        1e-4,
        7,
        1.0,
        "AdamW8bit",
        "cosine",
    )
    assert [(d.prompt, d.seed, d.steps, d.cfg) for d in run.demos] == [
        ("mychar, a portrait", 3, 20, 5.0)
    ]
    assert "set train.steps = 60 (max_train_epochs; 2 epochs of 30 steps)" in out
    assert (
        "not honoured: datasets[0].subsets[0].num_repeats = 10 (tunesmith draws every picture "
        "once a pass; its steps are kohya's (an epoch's counted with the repeats), so the "
        "pictures are seen as often)"
    ) in out
    assert "ignored: xformers = true (how it computes, not what: the same training)" in out
    assert not any("does not take" in line for line in out)


def test_settings_tunesmith_does_not_take_yet_are_named(project, capsys):
    config = project / "config.toml"
    config.write_text(CONFIG + "shuffle_caption = true\nflip_aug = true\n", encoding="utf-8")
    assert command(config, project / "dataset.toml") == 0
    out = capsys.readouterr().out
    target = project.parent / "datasets" / "10_mychar" / "tunesmith.toml"
    train = tomllib.loads(target.read_text(encoding="utf-8"))["runs"][0]["train"]
    assert train["shuffle_caption"] is True and train["flip_aug"] is True
    pending = sorted({"shuffle_caption", "flip_aug"} & still_pending()[0])
    if pending:
        assert f"{target}: this tunesmith does not take " in out
        for key in pending:
            assert f"train.{key}" in out.split("does not take ")[1].split(" yet")[0]
    else:
        load_plan(target.parent)
        assert "does not take" not in out


def test_the_dataset_config_the_config_names_is_read(project, capsys):
    config = project / "config.toml"
    config.write_text('dataset_config = "dataset.toml"\n' + CONFIG, encoding="utf-8")
    assert command(config) == 0
    out = capsys.readouterr().out.splitlines()
    assert "set train.size = 512 (datasets[0].resolution)" in out
    assert 'ignored: dataset_config = "dataset.toml" (the dataset config)' in out


def test_an_existing_file_is_replaced_only_with_force(project, capsys):
    target = project.parent / "datasets" / "10_mychar" / "tunesmith.toml"
    target.write_text("# mine\n", encoding="utf-8")
    assert command(project / "config.toml", project / "dataset.toml") == 1
    err = capsys.readouterr().err
    assert err == f"{target}: exists; not replaced (--force replaces it)\n"
    assert target.read_text(encoding="utf-8") == "# mine\n"
    assert command(project / "config.toml", project / "dataset.toml", "--force") == 0
    assert "[[runs]]" in target.read_text(encoding="utf-8")
    assert [p.name for p in target.parent.iterdir() if p.name.startswith(".tmp-")] == []


@pytest.mark.parametrize(
    "which,text,expected",
    [
        ("config.toml", "max_train_steps = = 3\n", "not a TOML file (kohya's training config"),
        ("config.toml", "[tool]\nfoo = 1\n", "not a kohya sd-scripts training config"),
        ("config.toml", DATASET, "a kohya dataset config ([[datasets]]), not a training config"),
        ("config.toml", b"\xff\xfe\x00bad", "not a TOML file"),
        ("dataset.toml", "[[datasets]\n", "not a TOML file (kohya's dataset config"),
        ("dataset.toml", "[general]\nresolution = 512\n", "not a kohya dataset config"),
    ],
)
def test_a_file_that_is_not_kohyas_is_one_line_and_nothing_is_written(
    project, capsys, which, text, expected
):
    path = project / which
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    assert command(project / "config.toml", project / "dataset.toml") == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{path}: ") and expected in err
    assert len(err.splitlines()) == 1
    assert not (project.parent / "datasets" / "10_mychar" / "tunesmith.toml").exists()


def test_a_missing_file_is_one_line(project, capsys):
    assert command(project / "nope.toml", project / "dataset.toml") == 1
    err = capsys.readouterr().err
    assert err == f"{project / 'nope.toml'}: no such file (kohya's training config was expected)\n"


def test_without_the_dataset_folder_it_says_where_to_link_it(project, capsys):
    (project.parent / "datasets" / "10_mychar").unlink()
    assert command(project / "config.toml", project / "dataset.toml") == 1
    err = capsys.readouterr().err
    folder = project.parent / "datasets" / "10_mychar"
    assert err.startswith(f"{folder}: no such dataset folder")
    assert f"ln -s {project / 'img' / '10_mychar'} {folder}" in err
    assert len(err.splitlines()) == 1
    assert not folder.exists()


def test_out_writes_where_it_is_told(project, tmp_path):
    out = tmp_path / "elsewhere"
    out.mkdir()
    assert command(project / "config.toml", project / "dataset.toml", "--out", out) == 0
    (run,) = load_plan(out).runs
    assert run.name == "mychar-v1"


def test_a_train_data_dir_is_the_dataset(project, capsys):
    (project / "img" / "3_style").mkdir()
    write_image(project / "img" / "3_style" / "s.png")
    config = project / "config.toml"
    config.write_text(CONFIG + 'train_data_dir = "img"\nresolution = "512,512"\n', "utf-8")
    datasets = project.parent / "datasets"
    (datasets / "img").symlink_to(project / "img")
    assert command(config) == 0
    out = capsys.readouterr().out.splitlines()
    # (3 x 10 + 1 x 3) / batch 1 = 33 steps an epoch, two epochs
    (run,) = load_plan(datasets / "img").runs
    assert (run.train.steps, run.train.size) == (66, 512)
    assert "dataset img: kohya's img" in out
    assert any(line.startswith("not honoured: img/3_style: num_repeats = 3 (") for line in out)
