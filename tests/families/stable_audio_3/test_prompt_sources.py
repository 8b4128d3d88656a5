"""underfit's prompt sources (tags, paths, a fixed prompt) by weight, the display names, the
validation prompt, and the settings refused."""

import random
from collections import Counter
from dataclasses import replace

import pytest
import torch

from tunesmith.families.stable_audio_3.config import Sa3Train
from tunesmith.families.stable_audio_3.data import Item, collate, crop
from tunesmith.families.stable_audio_3.prompts import (
    PromptOptions,
    full_prompt,
    path_prompt,
    prompt_options,
    prompt_problems,
    training_prompt,
    training_prompts,
    validation_prompt,
)
from tunesmith.families.stable_audio_3.validation import Validation
from tunesmith.train.config import RunConfig
from tunesmith.train.schema import problems

PIECES = [
    "Title: Dusty",
    "Artist: Kay",
    "Genre: lo-fi, jazz",
    "Year: 2024",
    "BPM: 92",
    "Prompt: a warm loop",
]
# What training_prompt drew before the sources existed, for each seed: six draws from one
# generator (pieces[:2 + i % 5], the trigger "lpz" unless i % 3 == 0, 80 %), then the
# generator's next number (the same count of numbers drawn).
BEFORE = {
    0: (
        [
            "Title: Dusty, Artist: Kay",
            "Artist: Kay, Genre: lo-fi, jazz",
            "lpz, Artist: Kay, Genre: lo-fi, jazz, Title: Dusty, Year: 2024",
            "Genre: lo-fi, jazz, Artist: Kay, Year: 2024, Title: Dusty, BPM: 92",
            "lpz, Genre: lo-fi, jazz, Year: 2024, Title: Dusty, Artist: Kay, "
            "Prompt: a warm loop, BPM: 92",
            "lpz, Artist: Kay, Title: Dusty",
        ],
        0.918464895700658,
    ),
    1: (
        [
            "Title: Dusty, Artist: Kay",
            "lpz, Artist: Kay, Genre: lo-fi, jazz, Title: Dusty",
            "lpz, Title: Dusty, Artist: Kay, Genre: lo-fi, jazz, Year: 2024",
            "Artist: Kay, Title: Dusty, BPM: 92, Year: 2024, Genre: lo-fi, jazz",
            "lpz, BPM: 92, Title: Dusty, Year: 2024, Genre: lo-fi, jazz, "
            "Prompt: a warm loop, Artist: Kay",
            "lpz, Artist: Kay, Title: Dusty",
        ],
        0.6768485398499744,
    ),
    7: (
        [
            "Title: Dusty, Artist: Kay",
            "lpz, Genre: lo-fi, jazz",
            "lpz, Title: Dusty, Year: 2024",
            "Title: Dusty, Year: 2024, BPM: 92, Genre: lo-fi, jazz, Artist: Kay",
            "lpz, Title: Dusty, BPM: 92, Year: 2024, Prompt: a warm loop, Genre: lo-fi, jazz",
            "lpz, Artist: Kay, Title: Dusty",
        ],
        0.5709136896467344,
    ),
    42: (
        [
            "Artist: Kay",
            "lpz, Title: Dusty, Genre: lo-fi, jazz, Artist: Kay",
            "lpz, Title: Dusty, Year: 2024, Genre: lo-fi, jazz, Artist: Kay",
            "Year: 2024, Artist: Kay, BPM: 92, Genre: lo-fi, jazz, Title: Dusty",
            "lpz, Prompt: a warm loop, Year: 2024",
            "lpz, Artist: Kay, Title: Dusty",
        ],
        0.09671637683346401,
    ),
    1234: (
        [
            "Title: Dusty, Artist: Kay",
            "lpz, Genre: lo-fi, jazz, Title: Dusty, Artist: Kay",
            "lpz, Title: Dusty, Year: 2024, Genre: lo-fi, jazz, Artist: Kay",
            "Year: 2024, Artist: Kay, Title: Dusty, Genre: lo-fi, jazz, BPM: 92",
            "lpz, Year: 2024, Artist: Kay, Title: Dusty, Genre: lo-fi, jazz, BPM: 92",
            "Artist: Kay",
        ],
        0.06307768556948179,
    ),
}


# The same for one batch of six items (their pieces as above), the trigger on every item.
BATCH_BEFORE = (
    [
        "lpz, Artist: Kay",
        "lpz, Title: Dusty, Genre: lo-fi, jazz, Artist: Kay",
        "lpz, Artist: Kay, Genre: lo-fi, jazz, Title: Dusty, Year: 2024",
        "Artist: Kay, Year: 2024, Genre: lo-fi, jazz, BPM: 92",
        "Artist: Kay, Year: 2024, Genre: lo-fi, jazz, Prompt: a warm loop, Title: Dusty, BPM: 92",
        "lpz, Title: Dusty, Artist: Kay",
    ],
    0.8474943663474598,
)


def _draws(seed, **kwargs):
    rng = random.Random(seed)
    prompts = [
        training_prompt(PIECES[: 2 + i % 5], rng, "lpz" if i % 3 else "", 0.8, **kwargs)
        for i in range(6)
    ]
    return prompts, rng.random()


def _items(paths):
    return [
        Item(
            path=path,
            latents=torch.zeros(2, 4),
            padding_mask=torch.ones(4, dtype=torch.bool),
            seconds_total=1.0,
            pieces=tuple(PIECES[: 2 + i % 5]),
        )
        for i, path in enumerate(paths)
    ]


def _run(trigger="lpz", **train):
    return RunConfig("r", "stable-audio-3", "b", trigger, None, Sa3Train(**train))


@pytest.mark.parametrize("seed", sorted(BEFORE))
def test_the_defaults_draw_the_prompts_drawn_before(seed):
    assert _draws(seed) == BEFORE[seed]
    assert _draws(seed, path="a/b.wav", options=prompt_options(Sa3Train())) == BEFORE[seed]
    # in use but weighing nothing: neither drawn nor drawing a number
    idle = Sa3Train(use_paths=True, use_fixed=True, balance_paths=0, fixed_text="x")
    assert _draws(seed, path="a/b.wav", options=prompt_options(idle)) == BEFORE[seed]


def test_a_batch_draws_what_the_draws_drew_before():
    items = _items([f"song{i}.wav" for i in range(6)])
    batch = collate(items, [crop(item, 4, 0) for item in items])
    rng = random.Random(42)
    assert training_prompts(batch, rng, _run()) == BATCH_BEFORE[0]
    assert rng.random() == BATCH_BEFORE[1]


def test_the_sources_are_drawn_by_their_weights():
    train = Sa3Train(
        use_paths=True,
        use_fixed=True,
        balance_tags=50,
        balance_paths=30,
        balance_fixed=20,
        fixed_text="FIXED",
    )
    options = prompt_options(train)
    counts = Counter()
    for seed in range(4000):
        prompt = training_prompt(PIECES, random.Random(seed), path="sub/a.wav", options=options)
        source = "paths" if prompt == "sub/a.npy" else "fixed" if prompt == "FIXED" else "tags"
        counts[source] += 1
    for source, weight in (("tags", 0.5), ("paths", 0.3), ("fixed", 0.2)):
        assert abs(counts[source] / 4000 - weight) < 0.03, counts  # ≥ 3.9 standard deviations


def test_underfits_balance_is_half_tags_half_paths_once_the_paths_are_in_use():
    options = prompt_options(Sa3Train(use_paths=True))
    assert options.weights == (("tags", 50.0), ("paths", 50.0))
    rng = random.Random(5)
    prompts = [training_prompt(PIECES, rng, path="a.flac", options=options) for _ in range(4000)]
    assert abs(prompts.count("a.npy") / 4000 - 0.5) < 0.03


def test_the_path_source_cuts_the_relpath_as_underfits_template_does():
    path = "drums/loops/kick one.wav"  # its relpath: drums/loops/kick one.npy
    cases = {
        (False, False, False): "drums/loops/kick one.npy",
        (True, False, False): "drums/loops/kick one",
        (False, True, False): "drums/kick one.npy",  # hide dirs keeps the topmost
        (False, True, True): "kick one.npy",
        (True, True, True): "kick one",
        (False, False, True): "loops/kick one.npy",
    }
    for (ext, dirs, top), expected in cases.items():
        options = PromptOptions(hide_ext=ext, hide_dirs=dirs, hide_topmost_dir=top)
        assert path_prompt(path, options) == expected
    assert path_prompt("top.wav", PromptOptions(hide_dirs=True)) == "top.npy"
    assert path_prompt(".hidden.wav", PromptOptions(hide_ext=True)) == ".hidden"


def test_a_path_or_fixed_prompt_takes_the_trigger_after_a_space():
    paths = prompt_options(Sa3Train(use_tags=False, use_paths=True, path_hide_ext=True))
    fixed = Sa3Train(use_tags=False, use_fixed=True, balance_fixed=1, fixed_text="Genre: dub")
    fixed = prompt_options(fixed)
    rng = random.Random(0)
    drawn = {
        training_prompt(PIECES, rng, "lpz", 0.5, path="a/b.wav", options=paths) for _ in range(40)
    }
    assert drawn == {"a/b", "lpz a/b"}
    drawn = {training_prompt([], rng, "lpz", 0.5, options=fixed) for _ in range(40)}
    assert drawn == {"Genre: dub", "lpz Genre: dub"}
    # a tag prompt of no tags is empty, and the trigger alone then
    assert {training_prompt([], rng, "lpz", 0.5) for _ in range(40)} == {"", "lpz"}


def test_display_names_apply_to_training_and_validation():
    train = Sa3Train(tag_display=("date=Date", "bpm = Tempo"))
    options = prompt_options(train)
    assert options.display["date"] == "Date" and options.display["title"] == "Title"
    rng = random.Random(3)
    drawn = [training_prompt(PIECES, rng, options=options) for _ in range(200)]
    assert any("Date: 2024" in p for p in drawn) and any("Tempo: 92" in p for p in drawn)
    assert not any("Year:" in p or "BPM:" in p for p in drawn)
    assert validation_prompt(PIECES, "a.wav", options, "lpz") == (
        "lpz, Title: Dusty, Artist: Kay, Genre: lo-fi, jazz, Date: 2024, Tempo: 92, "
        "Prompt: a warm loop"
    )


def test_validation_keeps_the_full_ordered_prompt_or_the_heaviest_source():
    assert validation_prompt(PIECES, "a/b.wav", None, "lpz") == full_prompt(PIECES, "lpz")
    both = prompt_options(Sa3Train(use_paths=True, balance_tags=10, balance_paths=90))
    assert validation_prompt(PIECES, "a/b.wav", both, "lpz") == full_prompt(PIECES, "lpz")
    paths = prompt_options(Sa3Train(use_tags=False, use_paths=True, use_fixed=True, fixed_text="x"))
    assert validation_prompt(PIECES, "a/b.wav", paths, "lpz") == "lpz a/b.npy"
    fixed = prompt_options(
        Sa3Train(use_tags=False, use_paths=True, use_fixed=True, balance_fixed=60, fixed_text="x")
    )
    assert validation_prompt(PIECES, "a/b.wav", fixed, "") == "x"
    items = _items(["a/b.wav", "c.wav"])
    assert Validation(items, 4, 0, "lpz").prompts == [
        full_prompt(list(i.pieces), "lpz") for i in items
    ]
    assert Validation(items, 4, 0, "lpz", paths).prompts == ["lpz a/b.npy", "lpz c.npy"]


def test_a_resumed_generator_draws_the_same_prompts():
    options = prompt_options(
        Sa3Train(use_paths=True, use_fixed=True, balance_fixed=10, fixed_text="f")
    )
    rng = random.Random(9)
    for _ in range(7):
        training_prompt(PIECES, rng, "lpz", path="x/y.wav", options=options)
    state = rng.getstate()
    after = [
        training_prompt(PIECES, rng, "lpz", path="x/y.wav", options=options) for _ in range(20)
    ]
    rng.setstate(state)
    again = [
        training_prompt(PIECES, rng, "lpz", path="x/y.wav", options=options) for _ in range(20)
    ]
    assert again == after and len(set(after)) > 3


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        (dict(balance_tags=-1), "train.balance_tags = -1: must be a number ≥ 0"),
        (dict(balance_tags=0), "train.balance_tags (the weights of the sources in use) are all 0"),
        (
            dict(use_paths=True, balance_tags=0, balance_paths=0),
            "train.balance_tags and train.balance_paths (the weights of the sources in use) are "
            "all 0",
        ),
        (dict(use_tags=False), "train.use_tags, train.use_paths and train.use_fixed are all false"),
        (
            dict(use_fixed=True, balance_fixed=20, fixed_text="  "),
            "train.use_fixed with train.balance_fixed = 20 needs train.fixed_text",
        ),
        (dict(tag_display=("date",)), 'train.tag_display: "date" is not key=Name'),
        (dict(tag_display=("date=",)), 'train.tag_display: "date=" is not key=Name'),
        (dict(tag_display=("mood=Mood",)), 'train.tag_display: "mood" is not a tag of the prompt'),
        (dict(tag_display=("lyrics=Lyrics",)), '"lyrics" is not a tag of the prompt'),
        (dict(tag_display=("date=A", "date=B")), 'train.tag_display: "date" is named twice'),
    ],
)
def test_bad_prompt_settings_are_refused_naming_the_setting(settings, says):
    train = replace(Sa3Train(), **settings)
    found = prompt_problems(_run(**settings))
    assert len(found) == 1 and says in found[0], found
    with pytest.raises(ValueError, match=r"train\.(balance|use|tag)"):
        prompt_options(train)


def test_good_prompt_settings_pass():
    good = [
        {},
        dict(use_fixed=True, fixed_text=""),  # weighs nothing: never drawn
        dict(use_tags=False, use_fixed=True, balance_fixed=1, fixed_text="Genre: dub"),
        dict(balance_paths=0, balance_tags=0.5),
    ]
    for settings in good:
        assert prompt_problems(_run(**settings)) == []


def test_the_settings_are_run_settings():
    table = {
        "use_paths": True,
        "balance_paths": 25,
        "balance_fixed": 0.5,
        "fixed_text": "Genre: dub",
        "path_hide_ext": True,
        "tag_display": ["date=Date"],
    }
    assert problems(Sa3Train, table, "f", "train") == []
    found = problems(Sa3Train, {"balance_tags": -2, "tag_display": "date=Date"}, "f", "train")
    assert found == [
        "f: train.balance_tags = -2: must be a number ≥ 0",
        'f: train.tag_display = "date=Date": must be a list of strings',
    ]
