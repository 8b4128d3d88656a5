"""The one holdout split: its two policies, `holdout = 0`, the refusal of a holdout that leaves
nothing to train on, and the line `tunesmith check` says for a run that holds nothing out."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import write_clip
from tunesmith.train.config import ConfigError, resolve_run
from tunesmith.train.holdout import (
    BY_PATH_HASH,
    LAST_OF_SORTED,
    on_training_items_note,
    split_holdout,
)


@dataclass(frozen=True)
class Item:
    path: str


def items(n: int) -> list[Item]:
    return [Item(f"song{i:02d}.wav") for i in range(n)]


def test_by_path_hash_holds_out_a_tenth_rounded_chosen_by_the_path():
    assert len(split_holdout(items(8)).validation) == 1
    assert len(split_holdout(items(15)).validation) == 2  # round(1.5) = 2
    assert len(split_holdout(items(40)).validation) == 4
    assert len(split_holdout(items(90)).validation) == 4  # at most 4
    split = split_holdout(items(20))
    assert sorted(split.train + split.validation, key=lambda i: i.path) == items(20)
    # a file more moves at most one held-out item (by hash it comes first, or it does not)
    assert len(set(split_holdout(items(21)).validation) & set(split.validation)) >= 1
    assert split.note("song") == "validation on 2 held-out song(s)"


def test_the_fixed_set_policy_holds_out_the_last_tenth_rounded_down():
    names = [f"p{i:02d}.png" for i in range(50)]
    shuffled = names[1::2] + names[::2]

    def split(n, holdout=None):
        return split_holdout(names[:n], holdout, str, LAST_OF_SORTED, "picture")

    assert split(12).validation == [names[11]] and split(12).train == names[:11]
    assert split(19).validation == [names[18]]  # ⌊1.9⌋ = 1 where rounding would hold 2 out
    assert split(50).validation == names[46:50]  # a tenth, at most 4
    assert split(12, holdout=3).validation == names[9:12]
    # the last of the sorted set, whatever order the items come in
    assert split_holdout(shuffled, None, str, LAST_OF_SORTED).validation == names[46:50]


@pytest.mark.parametrize("policy", [BY_PATH_HASH, LAST_OF_SORTED])
def test_under_five_items_or_holdout_zero_validate_on_the_training_items_and_say_why(policy):
    few = split_holdout(items(4), policy=policy)
    assert few.on_training_items and few.train == few.validation == items(4)
    assert few.note("song") == "validation on training songs: fewer than 5 songs, none held out"
    zero = split_holdout(items(30), 0, policy=policy)
    assert zero.on_training_items and zero.train == zero.validation == items(30)
    assert zero.note("song") == "validation on training songs: train.holdout = 0, none held out"
    assert split_holdout(items(1), 0, policy=policy).train == items(1)


@pytest.mark.parametrize("policy", [BY_PATH_HASH, LAST_OF_SORTED])
def test_a_holdout_that_leaves_no_training_item_is_refused_in_one_line(policy):
    assert len(split_holdout(items(6), 5, policy=policy).train) == 1  # the items less one
    with pytest.raises(ConfigError) as error:
        split_holdout(items(6), 6, policy=policy, what="picture")
    assert str(error.value) == "train.holdout 6 leaves no training pictures out of 6: at most 5"


def test_holdout_must_be_a_count_and_zero_has_a_note():
    raw = {"name": "r", "family": "stable-audio-3", "base_model": "m"}
    for bad in (-1, "2", True, 1.5):
        with pytest.raises(ConfigError, match="train.holdout = .*: must be an integer ≥ 0"):
            resolve_run({**raw, "train": {"holdout": bad}}, Path("tunesmith.toml"), 0)
    run = resolve_run({**raw, "train": {"holdout": 0}}, Path("tunesmith.toml"), 0)
    assert on_training_items_note(run.train.holdout) == (
        "validation on training items: train.holdout = 0, none held out"
    )
    assert on_training_items_note(None) == on_training_items_note(2) == ""


def test_tunesmith_check_says_a_run_with_holdout_zero_validates_on_training_items(
    tmp_path, monkeypatch, capsys
):
    from pipelines import operations

    folder = tmp_path / "datasets" / "loops"
    write_clip(folder / "loop.wav", seconds=1.0)
    (folder / "tunesmith.toml").write_text(
        '[[runs]]\nname = "all"\nfamily = "stable-audio-3"\nbase_model = "none"\n'
        "[runs.train]\nholdout = 0\n"
    )
    monkeypatch.setenv("TUNESMITH_DATASETS", str(tmp_path / "datasets"))
    monkeypatch.setenv("TUNESMITH_MODELS", str(tmp_path / "models"))
    operations.check([])
    lines = capsys.readouterr().out.splitlines()
    assert "  run all: validation on training items: train.holdout = 0, none held out" in lines
