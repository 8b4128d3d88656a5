"""Blind choices handed back: counted per run and step, each choice once, bad files skipped
with their name (`tunesmith.render.ratings`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tunesmith.render.ratings import FOLDER, RatingsError, read_choices, stored_name, tally

RUN, DATASET, FINGERPRINT = "my-style", "loops", "3f9a1c0d2b4e6f70"
STEPS = {0, 50, 100, 150, 200}


def export(picks: dict[str, str | None], order: dict[str, str] | None = None, **head) -> dict:
    """What the page's Export choices writes: `picks` maps a prompt id to "A", "B", "same" or
    None, `order` a prompt id to the side played as A (the adapter where not given)."""
    rows = []
    for pid, choice in picks.items():
        a = (order or {}).get(pid, "adapter")
        b = "base" if a == "adapter" else "adapter"
        chosen = {"A": a, "B": b, "same": "same", None: None}[choice]
        rows.append({"id": pid, "prompt": f"prompt of {pid}", "a": a, "b": b,
                     "choice": choice, "chosen": chosen})  # fmt: skip
    counts = {"adapter": 0, "base": 0, "same": 0, "unanswered": 0}
    for row in rows:
        counts[row["chosen"] or "unanswered"] += 1
    return {
        "format": "tunesmith-audition-choices/1",
        "title": f"{RUN} — auditions",
        "run": RUN,
        "dataset": DATASET,
        "family": "stable-audio-3",
        "fingerprint": FINGERPRINT,
        "step": 200,
        "run_folder": "my-style-0123456789",
        "session": "a1b2c3d4e5f60718",
        "exported_at": "2025-03-01T10:00:00.000Z",
        "revealed": False,
        "summary": counts,
        "prompts": rows,
    } | head


def run_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "adapters" / "my-style-0123456789"
    (folder / FOLDER).mkdir(parents=True)
    return folder


def drop(folder: Path, name: str, document: dict | str) -> Path:
    path = folder / FOLDER / name
    text = document if isinstance(document, str) else json.dumps(document, indent=2)
    path.write_text(text, encoding="utf-8")
    return path


def counts(folder: Path, current=None) -> list[dict]:
    return tally(folder, RUN, DATASET, STEPS, current).checkpoints


def test_picks_are_counted_per_step_with_the_share_preferring_the_adapter(tmp_path):
    folder = run_dir(tmp_path)
    # listener 1: A is the adapter on demo0 and demo2, the base on demo1
    order = {"demo1": "base"}
    drop(folder, "one.json", export({"demo0": "A", "demo1": "A", "demo2": "same"}, order))
    # listener 2, another session: prefers the base twice, leaves demo2 unanswered
    drop(folder, "two.json", export({"demo0": "B", "demo1": "B", "demo2": None}, order,
                                    session="ffffeeeeddddcccc"))  # fmt: skip
    # listener 3 judged the page of step 100
    drop(folder, "three.json", export({"demo0": "A"}, step=100, session="0000111122223333"))
    result = tally(folder, RUN, DATASET, STEPS)
    assert result.skipped == [] and result.files == 3
    at_100, at_200 = result.checkpoints
    assert at_100 == {"step": 100, "adapter": 1, "base": 0, "same": 0, "choices": 1,
                      "adapter_share": 1.0, "files": 1,
                      "prompts": {"demo0": {"adapter": 1, "base": 0, "same": 0}}}  # fmt: skip
    # step 200: demo0 adapter (1) + base (2); demo1 base (1) + adapter (2); demo2 same (1)
    assert (at_200["adapter"], at_200["base"], at_200["same"]) == (2, 2, 1)
    assert at_200["choices"] == 5 and at_200["adapter_share"] == pytest.approx(2 / 5)
    assert at_200["files"] == 2
    assert at_200["prompts"]["demo1"] == {"adapter": 1, "base": 1, "same": 0}
    assert at_200["prompts"]["demo2"] == {"adapter": 0, "base": 0, "same": 1}


def test_the_same_file_handed_back_twice_counts_once(tmp_path):
    folder = run_dir(tmp_path)
    first = drop(folder, "audition-my-style.json", export({"demo0": "A", "demo1": "B"}))
    once = counts(folder)
    shutil.copy(first, folder / FOLDER / stored_name(read_choices(first)))
    shutil.copy(first, folder / FOLDER / "audition-my-style (1).json")
    assert counts(folder) == [{**once[0], "files": 1}]  # three files of the same bytes
    assert once[0]["choices"] == 2


def test_a_later_export_of_a_session_replaces_its_choices(tmp_path):
    folder = run_dir(tmp_path)
    drop(folder, "early.json", export({"demo0": "A", "demo1": None}))
    later = export({"demo0": "B", "demo1": "same"}, exported_at="2025-03-01T11:00:00.000Z")
    drop(folder, "later.json", later)
    (step,) = counts(folder)
    assert (step["adapter"], step["base"], step["same"], step["choices"]) == (0, 1, 1, 2)
    assert step["files"] == 2


def test_without_a_session_the_same_choices_count_once(tmp_path):
    folder = run_dir(tmp_path)
    old = export({"demo0": "A", "demo1": "B"}, session=None)
    drop(folder, "first.json", old)
    drop(folder, "again.json", old | {"exported_at": "2025-03-02T09:00:00.000Z"})
    (step,) = counts(folder)
    assert (step["adapter"], step["base"], step["choices"]) == (1, 1, 2)


@pytest.mark.parametrize(
    "document, reason",
    [
        ("{not json", r"not JSON \(Expecting property name"),
        ("[1, 2]", r"a JSON list, not an object"),
        (export({"demo0": "A"}, format="something-else/2"), r"format is 'something-else/2'"),
        (
            export({"demo0": "A"})
            | {
                "prompts": [
                    {"id": "demo0", "a": "adapter", "b": "base", "choice": "C", "chosen": "adapter"}
                ]
            },
            r"prompts\.0\.choice: Input should be 'A', 'B' or 'same' \(got 'C'\)",
        ),  # fmt: skip
        (export({"demo0": "A"}, step="200"), r"step: Input should be a valid integer"),
        (
            export({"demo0": "A"})
            | {
                "prompts": [
                    {"id": "demo0", "a": "adapter", "b": "base", "choice": "A", "chosen": "base"}
                ]
            },
            r"choice 'A' with A = 'adapter' is 'adapter', but chosen says 'base'",
        ),  # fmt: skip
        (export({"demo0": "A"}, run=None), r"run: Input should be a valid string"),
    ],
    ids=["not-json", "list", "format", "choice", "step-string", "chosen", "no-run"],
)
def test_a_malformed_file_is_refused_naming_it_and_the_others_count(tmp_path, document, reason):
    folder = run_dir(tmp_path)
    bad = drop(folder, "bad.json", document)
    drop(folder, "good.json", export({"demo0": "A"}))
    with pytest.raises(RatingsError, match=rf"^{bad}: .*{reason}") as caught:
        read_choices(bad)
    assert "\n" not in str(caught.value)
    result = tally(folder, RUN, DATASET, STEPS)
    (skipped,) = result.skipped
    assert skipped.path == str(bad) and "expected the JSON an audition page" in skipped.reason
    assert [(c["step"], c["adapter"]) for c in result.checkpoints] == [(200, 1)]


@pytest.mark.parametrize(
    "head, reason",
    [
        ({"run": "other-run"}, "choices on run 'other-run', and this is run 'my-style'"),
        ({"dataset": "faces"}, "choices on dataset 'faces', and this run is of 'loops'"),
        ({"step": 175}, "step 175 is not a checkpoint of this run (validated at steps 0, 50,"),
        ({"run_folder": "my-style-ffffffffff"}, "the run was trained again since"),
        ({"step": None}, "the file names no step and was not made on the current page"),
    ],
    ids=["run", "dataset", "step", "folder", "no-step"],
)
def test_a_file_of_an_unknown_run_or_step_is_reported_and_skipped(tmp_path, head, reason):
    folder = run_dir(tmp_path)
    path = drop(folder, "elsewhere.json", export({"demo0": "A"}, **head))
    result = tally(folder, RUN, DATASET, STEPS, current=(200, "a-newer-page"))
    assert result.checkpoints == [] and result.counted == {}
    (skipped,) = result.skipped
    assert skipped.path == str(path) and reason in skipped.reason
    assert skipped.reason.endswith("; skipped")


def test_a_file_without_a_step_counts_at_the_step_of_the_page_it_was_made_on(tmp_path):
    folder = run_dir(tmp_path)
    drop(folder, "older.json", export({"demo0": "A"}, step=None, run_folder=None))
    (step,) = counts(folder, current=(150, FINGERPRINT))
    assert step["step"] == 150 and step["adapter"] == 1


def test_no_folder_no_ratings(tmp_path):
    result = tally(tmp_path / "nothing", RUN, DATASET, STEPS)
    assert (result.checkpoints, result.skipped, result.files) == ([], [], 0)
