import pytest

from tunesmith.train.config import ConfigError, load_runs, with_overrides


def write(folder, text):
    (folder / "tunesmith.toml").write_text(text)
    return folder


def test_no_toml_gives_one_default_run_for_the_media(tmp_path):
    (audio,) = load_runs(tmp_path, "audio")
    assert (audio.family, audio.adapter.type, audio.adapter.rank) == (
        "stable-audio-3",
        "dora-rows",
        16,
    )
    assert audio.adapter.scale_alpha == 16.0  # alpha = rank
    assert (audio.train.lr, audio.train.seed, audio.train.batch_size) == (1e-4, 42, 1)
    assert audio.train.latent_crop_length == 1300 and audio.train.cfg_dropout == 0.1
    (image,) = load_runs(tmp_path, "image")
    assert image.family == "sdxl" and image.adapter.type == "lora"


def test_runs_take_family_defaults_under_the_users_keys(tmp_path):
    write(
        tmp_path,
        """
[[runs]]
name = "a"
family = "stable-audio-3"
base_model = "tiny"
trigger = "lpz"
[runs.adapter]
type = "lora"
rank = 4
include = ["transformer.layers.[0-1]"]
[runs.train]
steps = 20

[[runs]]
name = "b"
family = "stable-audio-3"
""",
    )
    a, b = load_runs(tmp_path, "audio")
    assert (a.adapter.type, a.adapter.rank, a.adapter.include) == (
        "lora",
        4,
        ("transformer.layers.[0-1]",),
    )
    assert a.train.steps == 20 and a.train.lr == 1e-4 and a.trigger == "lpz"
    assert b.adapter.type == "dora-rows" and b.base_model == "stable-audio-3"


@pytest.mark.parametrize(
    "text,message",
    [
        ('[[runs]]\nfamily = "stable-audio-3"\nrnak = 3', "unknown key\\(s\\) rnak; allowed: "),
        ('[[runs]]\nfamily = "stable-audio-3"\n[runs.adapter]\nrank = 0', "rank must be"),
        ('[[runs]]\nfamily = "stable-audio-3"\n[runs.train]\nlr = 0.0', "lr must be > 0"),
        ('[[runs]]\nfamily = "stable-audio-3"\n[runs.train]\nlrr = 1', "allowed: .*lr"),
        ('[[runs]]\nfamily = "midi"', "family must be one of"),
        ("runs = 3", "expected one or more"),
        ("[[runs]\n", "not valid TOML"),
        ('[[runs]]\nfamily = "sdxl"\n[runs.train]\nsize = 100', "size must be a positive multiple"),
        ('[[runs]]\nfamily = "sdxl"\n[runs.train]\ncap = 0', "cap must be a number of gigabytes"),
        (
            '[[runs]]\nfamily = "sdxl"\n[runs.train]\ncfg_dropout = 0.2',
            r"train: unknown key\(s\) cfg_dropout; allowed: ",
        ),
        (
            '[[runs]]\nfamily = "stable-audio-3"\n[runs.train]\nsize = 512',
            r"train: unknown key\(s\) size; allowed: ",
        ),
        ('[[runs]]\nfamily = "sdxl"\n[runs.adapter]\ntype = "dora-rows"', "sdxl family trains"),
    ],
)
def test_bad_config_names_the_file_and_what_was_expected(tmp_path, text, message):
    write(tmp_path, text)
    with pytest.raises(ConfigError, match=message) as error:
        load_runs(tmp_path, "audio")
    assert "tunesmith.toml" in str(error.value)


def test_overrides_are_validated(tmp_path):
    (run,) = load_runs(tmp_path, "audio")
    assert with_overrides(run, {"train": {"steps": 7}}).train.steps == 7
    with pytest.raises(ConfigError, match="steps must be"):
        with_overrides(run, {"train": {"steps": 0}})


def test_default_demos_are_an_empty_prompt_and_the_trigger(tmp_path):
    write(tmp_path, '[[runs]]\nfamily = "stable-audio-3"\ntrigger = "zq"\n')
    (run,) = load_runs(tmp_path, "audio")
    assert [(d.prompt, d.seed) for d in run.demos] == [("", 42), ("zq", 43)]
    assert (run.demos[0].steps, run.demos[0].cfg, run.demos[0].duration) == (50, 7.0, 10.0)


@pytest.mark.parametrize(
    "demo,message",
    [
        ("duration = 0", "duration must be in"),
        ("duration = 601", "duration must be in"),
        ("steps = 0", "steps must be an integer"),
        ('seed = "x"', "seed must be an integer"),
        ("seed = 1.5", "seed must be an integer"),
        ("tempo = 3", "unknown key\\(s\\) tempo"),
    ],
)
def test_a_bad_demo_names_its_entry(tmp_path, demo, message):
    write(tmp_path, f'[[runs]]\nfamily = "stable-audio-3"\n[[runs.demos]]\nprompt = "a"\n'
                    f'[[runs.demos]]\n{demo}\n')  # fmt: skip
    with pytest.raises(ConfigError, match=f"demos #2: .*{message}"):
        load_runs(tmp_path, "audio")


def test_a_run_asking_for_processes_its_trainer_lacks_is_refused_before_any_starts(tmp_path):
    """The planner trains on several processes on MLX (under mlx.launch), not on torch; the
    DiT and the other families' trainers do on torch. The adapters stage asks this before it
    starts a process (a rank used to load the model first, then refuse)."""
    from tunesmith import family as families
    from tunesmith.train.stage import one_process_only

    write(tmp_path, """
[[runs]]
name = "plan"
family = "ace-step-planner"
[runs.train]
devices = 2
accumulation = 2

[[runs]]
name = "dit"
family = "ace-step"
[runs.train]
devices = 2
accumulation = 2

[[runs]]
name = "sdxl"
family = "sdxl"
[runs.train]
devices = 2
batch_size = 2
""")  # fmt: skip
    plan, dit, sdxl = load_runs(tmp_path, "audio")
    planner, ace = families.get("ace-step-planner"), families.get("ace-step")
    assert one_process_only(plan, planner, "torch") == (
        "the ACE-Step 1.5 planner trainer on torch trains on one process: set train.devices and "
        "train.nodes to 1 (they ask for 2)"
    )
    assert one_process_only(plan, planner, "mlx") == ""
    assert one_process_only(dit, ace, "torch") == ""
    assert one_process_only(sdxl, families.get("sdxl"), "torch") == ""
    alone = with_overrides(plan, {"train": {"devices": 1}})
    assert one_process_only(alone, planner, "torch") == ""
