from dataclasses import replace

import pytest

from tunesmith.train.config import ConfigError, load_runs


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
        (
            '[[runs]]\nfamily = "stable-audio-3"\nrnak = 3',
            "rnak is not a setting of a run; a run has adapter, base_model",
        ),
        (
            '[[runs]]\nfamily = "stable-audio-3"\n[runs.adapter]\nrank = 0',
            "adapter.rank = 0: must be an integer ≥ 1",
        ),
        (
            '[[runs]]\nfamily = "stable-audio-3"\n[runs.train]\nlr = 0.0',
            "train.lr = 0.0: must be a number > 0",
        ),
        ('[[runs]]\nfamily = "stable-audio-3"\n[runs.train]\nlrr = 1', "did you mean lr\\?"),
        ('[[runs]]\nfamily = "midi"', 'family = "midi": must be one of "ace-step"'),
        ("runs = 3", "runs must be one or more \\[\\[runs\\]\\] tables"),
        ("[[runs]\n", "not valid TOML"),
        (
            '[[runs]]\nfamily = "sdxl"\n[runs.train]\nsize = 100',
            "train.size = 100: must be an integer ≥ 8 and a multiple of 8",
        ),
        ('[[runs]]\nfamily = "sdxl"\n[runs.train]\ncap = 0', "train.cap = 0: must be a number > 0"),
        (
            '[[runs]]\nfamily = "sdxl"\n[runs.train]\ncfg_dropout = 0.2',
            r"train.cfg_dropout is not a setting; the train settings are .*batch_size",
        ),
        (
            '[[runs]]\nfamily = "stable-audio-3"\n[runs.train]\nsize = 512',
            r"train.size is not a setting; the train settings are arc_model, .*batch_size",
        ),
        (
            '[[runs]]\nfamily = "sdxl"\n[runs.adapter]\ntype = "dora-rows"',
            'adapter.type = "dora-rows": must be one of "lora", "dora", "locon", "lokr", "loha"',
        ),
    ],
)
def test_bad_config_names_the_file_and_what_was_expected(tmp_path, text, message):
    write(tmp_path, text)
    with pytest.raises(ConfigError, match=message) as error:
        load_runs(tmp_path, "audio")
    assert "tunesmith.toml" in str(error.value)


def test_default_demos_are_an_empty_prompt_and_the_trigger(tmp_path):
    write(tmp_path, '[[runs]]\nfamily = "stable-audio-3"\ntrigger = "zq"\n')
    (run,) = load_runs(tmp_path, "audio")
    assert [(d.prompt, d.seed) for d in run.demos] == [("", 42), ("zq", 43)]
    assert (run.demos[0].steps, run.demos[0].cfg, run.demos[0].duration) == (50, 7.0, 10.0)


@pytest.mark.parametrize(
    "demo,message",
    [
        ("duration = 0", "duration = 0: must be a number > 0 and ≤ 600"),
        ("duration = 601", "duration = 601: must be a number > 0 and ≤ 600"),
        ("steps = 0", "steps = 0: must be an integer ≥ 1"),
        ('seed = "x"', 'seed = "x": must be an integer ≥ 0'),
        ("seed = 1.5", "seed = 1.5: must be an integer ≥ 0"),
        ("tempo = 3", "tempo is not a setting; did you mean steps\\? the demo settings"),
    ],
)
def test_a_bad_demo_names_its_entry(tmp_path, demo, message):
    write(
        tmp_path,
        f'[[runs]]\nfamily = "stable-audio-3"\n[[runs.demos]]\nprompt = "a"\n'
        f"[[runs.demos]]\n{demo}\n",
    )
    with pytest.raises(ConfigError, match=f"demos\\[2\\]\\.{message}"):
        load_runs(tmp_path, "audio")


def test_a_run_asking_for_processes_its_trainer_lacks_is_refused_before_any_starts(tmp_path):
    """The planner trains on several processes on MLX (under mlx.launch), not on torch; the
    DiT and the other families' trainers do on torch. The adapters stage asks this before it
    starts a process (a rank used to load the model first, then refuse)."""
    from tunesmith import family as families
    from tunesmith.train.stage import one_process_only

    write(
        tmp_path,
        """
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
""",
    )
    plan, dit, sdxl = load_runs(tmp_path, "audio")
    planner, ace = families.get("ace-step-planner"), families.get("ace-step")
    assert one_process_only(plan, planner, "torch") == (
        "the ACE-Step 1.5 planner trainer on torch trains on one process: set train.devices and "
        "train.nodes to 1 (they ask for 2)"
    )
    assert one_process_only(plan, planner, "mlx") == ""
    assert one_process_only(dit, ace, "torch") == ""
    assert one_process_only(sdxl, families.get("sdxl"), "torch") == ""
    alone = replace(plan, train=replace(plan.train, devices=1))
    assert one_process_only(alone, planner, "torch") == ""


# --- the plan: each dataset's runs resolved once, as a document that reads back ------------

OVERRIDDEN = """
[[runs]]
name = "loops"
family = "stable-audio-3"
trigger = "lpz"
[runs.adapter]
type = "lora"
rank = 4
include = ["transformer.layers.[0-1]"]
[runs.train]
steps = 20
cap = 1.5
[[runs.demos]]
prompt = "{trigger}, a loop"
seed = 3

[[runs]]
name = "pictures"
family = "sdxl"
[runs.train]
size = 64
lr = 1e-3

[[runs]]
name = "songs"
family = "ace-step"
[runs.adapter]
type = "lokr"
[runs.train]
epochs = 3
genre_ratio = 50

[[runs]]
name = "plans"
family = "ace-step-planner"
[runs.adapter]
planner = "my-planner"
[runs.train]
caption_dropout = 0.25
"""


def test_a_plan_reads_back_from_json_as_equal_runs_for_every_family(tmp_path):
    import json

    from tunesmith import family as families
    from tunesmith.train.config import Plan, load_plan, run_key

    defaults = "".join(
        f'[[runs]]\nname = "{name}"\nfamily = "{name}"\n' for name in families.all_families()
    )
    for text in (defaults, OVERRIDDEN):
        plan = load_plan(write(tmp_path, text))
        again = Plan.from_document(json.loads(json.dumps(plan.as_document())))
        assert again == plan and len(plan.runs) >= 4
        assert [run_key(r) for r in again.runs] == [e["key"] for e in plan.as_document()["runs"]]
    (plan_run,) = [r for r in again.runs if r.family == "ace-step-planner"]
    assert plan_run.adapter.planner == "my-planner" and plan_run.train.caption_dropout == 0.25
    (loops,) = [r for r in again.runs if r.name == "loops"]
    assert loops.adapter.include == ("transformer.layers.[0-1]",) and loops.train.cap == 1.5
    overridden = replace(loops, train=replace(loops.train, steps=5))
    document = Plan((overridden,)).as_document()
    assert Plan.from_document(json.loads(json.dumps(document))).runs == (overridden,)
    (default,) = load_plan(tmp_path / "none").with_default("image").runs
    assert Plan.from_document(Plan((default,)).as_document()).runs == (default,)


def test_a_plan_whose_config_does_not_give_its_key_is_refused(tmp_path):
    from tunesmith.train.config import Plan, load_plan

    document = load_plan(write(tmp_path, OVERRIDDEN)).as_document()
    document["runs"][0]["config"]["train"]["steps"] = 21
    with pytest.raises(ConfigError, match="run loops: the plan's config does not give its key"):
        Plan.from_document(document)


def test_a_planner_run_in_the_ace_step_familys_older_form_is_read_with_a_note(tmp_path):
    """`family = "ace-step"` with `adapter.target = "planner"` (before the planner was a family
    of its own) is the planner family's run; the DiT keys it carried, unused, are named."""
    from tunesmith.train.config import load_plan

    write(
        tmp_path,
        """
[[runs]]
name = "plan"
family = "ace-step"
[runs.adapter]
target = "planner"
planner = "my-planner"
attention = "self"
[runs.train]
epochs = 5
crop_frames = 128
""",
    )
    plan = load_plan(tmp_path)
    (run,) = plan.runs
    assert run.family == "ace-step-planner" and run.adapter.planner == "my-planner"
    assert (run.train.epochs, run.train.lr, run.adapter.scale_alpha) == (5, 1e-4, 32.0)
    (note,) = plan.notes
    assert 'read as family = "ace-step-planner"' in note and "run plan" in note
    assert "adapter.attention, train.crop_frames: left out" in note
    dit = write(tmp_path, '[[runs]]\nfamily = "ace-step"\n[runs.adapter]\ntarget = "dit"\n')
    with pytest.raises(ConfigError, match="adapter.target is not a setting"):
        load_plan(dit)
