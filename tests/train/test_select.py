"""`train.select`: the loop keeps the adapter a score prefers, with the base model's score as
the bar, and the loss's choice where no step beats it; the setting as a user writes it.

The loop's side runs the fake trainer of `test_loop.py` (no model) with a scripted score, so
the loss and the score disagree where the test says; the measures themselves are
`tests/quality/`'s, and a build that keeps by them is `tests/quality/test_select_build.py`.
"""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import pytest

from tests.train.test_loop import Fake, events, run_config
from tunesmith.dataset.metrics import MetricsSettings
from tunesmith.train import loop
from tunesmith.train.config import (
    ConfigError,
    Plan,
    computed,
    load_plan,
    select_problems,
    select_text,
    select_weights,
)

# A validation at steps 0, 2, 4, 6: the loss falls to the end, the score peaks at step 4.
LOSSES = [1.0, 0.8, 0.6, 0.4]
PEAKED = {0: 0.0, 2: 0.05, 4: 0.2, 6: 0.1}


def scripted(scores: dict[int, float | None], asked: list[int] | None = None):
    def score(step: int) -> float | None:
        if asked is not None:
            asked.append(step)
        return scores.get(step)

    return score


def fit(folder: Path, scores, lines=None, select="style", losses=LOSSES, **train):
    trainer = Fake(run_config(select=select, **train), folder, validation=list(losses))
    log = lines.append if lines is not None else (lambda _: None)
    return trainer, loop.train(trainer, folder, log=log, progress=io.StringIO(), score=scores)


def kept_step(folder: Path) -> int:
    return json.loads((folder / "fake" / "adapter.json").read_text())["step"]


def test_the_score_keeps_the_step_it_prefers_where_the_loss_prefers_another(tmp_path):
    lines: list[str] = []
    _, by_loss = fit(tmp_path / "loss", None, select="loss")
    assert by_loss.best_step == 6  # the lowest validation loss
    _, result = fit(tmp_path / "style", scripted(PEAKED), lines)
    assert (result.best_step, result.best_loss) == (4, 0.6)
    assert kept_step(tmp_path / "style") == 4 and Path(result.best_path).exists()
    assert json.loads(Path(result.last_path).read_text())["step"] == 6
    assert [h.get("score") for h in result.history] == [0.0, 0.05, 0.2, 0.1]
    assert result.extra["select"] == {
        "by": "score",
        "step": 4,
        "score": 0.2,
        "line": "kept step 4 by train.select = style (the base model's score beaten)",
    }
    validations = [e for e in events(tmp_path / "style") if e["event"] == "validation"]
    assert [(e["step"], e["score"]) for e in validations] == [(2, 0.05), (4, 0.2), (6, 0.1)]
    assert "fake: step 4 validation loss 0.600000 (kept)" in lines
    assert "fake: step 6 validation loss 0.400000" in lines


def test_the_loss_keeps_until_a_step_beats_the_base_then_the_score_decides(tmp_path):
    # step 2 is worse than the base on the score: the loss's choice is kept; step 4 beats the
    # base and is kept; step 6 has the lowest loss but a lower score than step 4.
    _, result = fit(tmp_path, scripted({0: 0.0, 2: -0.1, 4: 0.01, 6: 0.005}))
    assert result.best_step == 4 and result.extra["select"]["by"] == "score"
    # a tie with the best so far keeps the earlier step
    _, tie = fit(tmp_path / "tie", scripted({0: 0.0, 2: 0.3, 4: 0.3, 6: 0.3}))
    assert tie.best_step == 2


def test_where_no_step_beats_the_base_the_loss_choice_is_kept_in_one_line(tmp_path):
    lines: list[str] = []
    _, result = fit(tmp_path, scripted({0: 0.0, 2: -0.1, 4: -0.2, 6: 0.0}), lines)
    assert result.best_step == 6 and kept_step(tmp_path) == 6
    said = (
        "train.select = style: no step's renders beat the base model's on it; kept the adapter "
        "of the lowest validation loss (step 6)"
    )
    assert result.extra["select"] == {"by": "loss", "step": 6, "line": said}
    assert lines.count(f"fake: {said}") == 1
    assert not any(line.endswith("(kept)") for line in lines)
    # nothing measured at all (a trainer that renders no samples): the same, saying so
    _, unmeasured = fit(tmp_path / "none", scripted({}))
    assert unmeasured.best_step == 6
    assert "the base model's renders were not measured" in unmeasured.extra["select"]["line"]


def test_a_run_kept_by_the_loss_asks_for_no_score_and_keeps_as_before(tmp_path):
    asked: list[int] = []
    _, plain = fit(tmp_path / "plain", None, select="loss")
    _, given = fit(tmp_path / "given", scripted(PEAKED, asked), select="loss")
    assert asked == []  # never measured
    assert given.history == plain.history and "score" not in given.history[0]
    assert given.extra == {} and given.best_step == plain.best_step == 6
    state = json.loads((tmp_path / "given" / "state" / "step=6" / "state.json").read_text())
    assert state["best"] == {"step": 6, "loss": 0.4, "path": given.best_path}
    # asked to keep by a measure with nothing to measure: the loss, said once
    lines: list[str] = []
    _, alone = fit(tmp_path / "alone", None, lines)
    assert alone.best_step == 6 and "select" not in alone.extra
    assert lines[0] == (
        "fake: train.select = style, but nothing measures the renders here; the adapter of "
        "the lowest validation loss is kept"
    )


def test_a_resumed_run_keeps_the_chosen_best_as_if_never_stopped(tmp_path):
    scores = {0: 0.0, 2: 0.05, 4: 0.2, 6: 0.1, 8: 0.15}
    losses = [*LOSSES, 0.3]
    _, straight = fit(tmp_path / "straight", scripted(scores), losses=losses, steps=8)
    asked: list[int] = []
    fit(tmp_path / "resumed", scripted(scores, asked), losses=LOSSES, steps=6)
    best = (tmp_path / "resumed" / "fake" / "adapter.json").read_bytes()
    # the next process measures only the steps it trains; the best comes from the state
    _, resumed = fit(tmp_path / "resumed", scripted(scores, asked), losses=[0.3], steps=8)
    assert asked == [0, 2, 4, 6, 8]
    assert resumed.resumed_from == 6 and resumed.history == straight.history
    assert resumed.best_step == straight.best_step == 4
    assert (tmp_path / "resumed" / "fake" / "adapter.json").read_bytes() == best
    assert resumed.extra["select"] == straight.extra["select"]
    # a kept adapter deleted since is written again from the state's copy
    (tmp_path / "resumed" / "fake" / "adapter.json").unlink()
    _, again = fit(tmp_path / "resumed", scripted(scores), losses=[0.2], steps=10)
    assert (tmp_path / "resumed" / "fake" / "adapter.json").read_bytes() == best
    assert again.best_step == 4  # step 10 is not measured by the script: not kept


# --- the setting -----------------------------------------------------------------------------


RUN = """\
[[runs]]
name = "{name}"
family = "{family}"
[runs.train]
{train}
"""


def plan_of(folder: Path, train: str, family="stable-audio-3", metrics="", name="a") -> Plan:
    folder.mkdir(parents=True, exist_ok=True)
    text = metrics + RUN.format(name=name, family=family, train=train)
    (folder / "tunesmith.toml").write_text(text, encoding="utf-8")
    return load_plan(folder)


def test_select_as_written_a_measure_or_a_table_of_weights(tmp_path):
    (run,) = plan_of(tmp_path / "a", "select = {style = 0.7, prompt = 0.3}").runs
    assert run.train.select == {"style": 0.7, "prompt": 0.3}
    assert select_text(run.train.select) == "0.7 style + 0.3 prompt"
    assert select_weights(run.train.select) == {"style": 0.7, "prompt": 0.3}
    assert select_weights("frechet") == {"frechet": 1.0} and select_weights("loss") == {}
    plan = plan_of(tmp_path / "b", 'select = "frechet"')
    assert Plan.from_document(json.loads(json.dumps(plan.as_document()))) == plan
    table = plan_of(tmp_path / "c", "select = {style = 2}")
    assert Plan.from_document(json.loads(json.dumps(table.as_document()))) == table


@pytest.mark.parametrize(
    "value",
    ['"styl"', "{}", "{style = -1}", "{colour = 1}", "{style = true}", "3", '["style"]'],
)
def test_a_select_that_is_not_allowed_is_one_line_naming_it(tmp_path, value):
    with pytest.raises(ConfigError) as error:
        plan_of(tmp_path, f"select = {value}")
    (line,) = error.value.problems
    assert 'run "a": train.select = ' in line
    assert 'one of "loss", "prompt", "style", "style_dino", "frechet" or a table of weights' in line


def test_select_stays_out_of_the_key_at_its_default_and_in_it_otherwise(tmp_path):
    (plain,) = plan_of(tmp_path / "plain", "steps = 10").runs
    (loss,) = plan_of(tmp_path / "loss", 'steps = 10\nselect = "loss"').runs
    (style,) = plan_of(tmp_path / "style", 'steps = 10\nselect = "style"').runs
    assert "select" not in computed(plain)["train"] and computed(loss) == computed(plain)
    assert computed(style)["train"]["select"] == "style"
    assert computed(replace(style, train=replace(style.train, select="loss"))) == computed(plain)


def test_a_select_the_datasets_metrics_cannot_measure_is_refused_with_the_plan(tmp_path):
    off = "[metrics]\nenabled = false\n\n"
    with pytest.raises(ConfigError) as error:
        plan_of(tmp_path / "off", 'select = "style"', metrics=off)
    (line,) = error.value.problems
    assert line.endswith(
        'run "a": train.select = "style" keeps the adapter by a measure of its renders, and '
        '[metrics] enabled = false measures none: enable [metrics], or set train.select = "loss"'
    )
    assert plan_of(tmp_path / "off-loss", 'select = "loss"', metrics=off).runs  # fine
    with pytest.raises(ConfigError, match="style_dino measures pictures"):
        plan_of(tmp_path / "audio", "select = {style_dino = 1, style = 1}")
    with pytest.raises(ConfigError, match=r"style_dino needs a DINOv2 model: name one in"):
        plan_of(tmp_path / "pictures", 'select = "style_dino"', family="sdxl")
    with_dino = '[metrics]\ndino = "dinov2-small"\n\n'
    assert plan_of(tmp_path / "dino", 'select = "style_dino"', family="sdxl", metrics=with_dino)
    (run,) = plan_of(tmp_path / "fine", 'select = "prompt"').runs
    assert select_problems(run, MetricsSettings()) == []
