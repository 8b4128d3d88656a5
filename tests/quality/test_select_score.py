"""The score a run keeps its adapter by (`train.select`): the formula against numbers worked by
hand, and the training process's scorer measuring each validation's renders with the tiny CLAP
into the run's quality.json, each step once, as the adapters stage then reads it back."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from tests.conftest import write_clip
from tunesmith import family as families
from tunesmith.quality.run import QUALITY_FILE, drawn_samples, embedders_for, measure_run
from tunesmith.quality.select import StepScore, gain, selection_score
from tunesmith.quality.tiny import make_tiny_clap
from tunesmith.store import sha256_file
from tunesmith.train.config import DemoConfig, RunConfig, TrainConfig

BASE = {"step": 0, "prompt": 0.2, "style": 0.5, "frechet": 2.0}
ROW = {"step": 4, "prompt": 0.28, "style": 0.6, "frechet": 1.5}


def test_each_gain_is_the_share_of_the_way_from_the_base_to_a_perfect_value():
    assert gain("prompt", 0.28, 0.2) == pytest.approx(0.1)  # 0.08 of the 0.8 left to 1
    assert gain("style", 0.6, 0.5) == pytest.approx(0.2)
    assert gain("frechet", 1.5, 2.0) == pytest.approx(0.25)  # a quarter of the distance gone
    assert gain("style", 0.4, 0.5) == pytest.approx(-0.2)  # worse than the base: below 0
    assert gain("frechet", 3.0, 2.0) == pytest.approx(-0.5)
    assert gain("style", 1.0, 1.0) == 0.0 and gain("frechet", 0.0, 0.0) == 0.0  # nothing left


def test_the_score_weighs_the_gains_and_is_zero_at_the_base():
    weighted = selection_score({"style": 0.7, "prompt": 0.3}, BASE, ROW)
    assert weighted == pytest.approx(0.7 * 0.2 + 0.3 * 0.1)
    assert selection_score({"style": 2, "frechet": 2}, BASE, ROW) == pytest.approx(0.225)
    assert selection_score("frechet", BASE, ROW) == pytest.approx(0.25)
    assert selection_score({"style": 0.7, "prompt": 0.3}, BASE, BASE) == 0.0
    assert selection_score("style_dino", BASE, ROW) is None  # not measured
    assert selection_score("loss", BASE, ROW) is None
    # one measure orders the steps as its own values do
    rng = np.random.default_rng(0)
    rows = [{"style": v, "frechet": f} for v, f in rng.uniform(0.1, 0.9, (20, 2))]
    for measure, best in (("style", max), ("frechet", min)):
        scores = [selection_score(measure, rows[0], r) for r in rows]
        assert rows[int(np.argmax(scores))][measure] == best(r[measure] for r in rows)


# --- the scorer with the tiny CLAP ------------------------------------------------------------


def tone(path: Path, freq: float, seconds: float = 1.0, rate: int = 48000) -> None:
    t = np.arange(int(seconds * rate)) / rate
    samples = (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(path, np.stack([samples, samples], axis=1), rate, subtype="FLOAT")


@pytest.fixture
def setting(tmp_path):
    dataset = tmp_path / "songs"
    for i in range(5):
        write_clip(dataset / f"clip{i}.wav", seconds=1.0, bpm=90 + 10 * i, freq=200.0 + 50 * i)
    items = {p.name: sha256_file(p) for p in sorted(dataset.glob("*.wav"))}
    clap = make_tiny_clap(tmp_path / "models" / "tiny-clap")
    run = RunConfig(
        name="scored",
        family="stable-audio-3",
        base_model="tiny",
        train=TrainConfig(select={"style": 0.7, "prompt": 0.3}),
        demos=(DemoConfig(prompt="a loop"), DemoConfig(prompt="a bell", seed=7)),
    )
    inputs = {
        "dataset_folder": str(dataset),
        "items": items,
        "models": {"clap": str(clap)},
        "models_root": str(tmp_path / "models"),
        "store": str(tmp_path / "store"),
    }
    return run, inputs, tmp_path / "run"


def draw(run_dir: Path, step: int, freqs: tuple[float, float]) -> None:
    for demo, freq in enumerate(freqs):
        tone(run_dir / "samples" / f"{demo}-{step}.wav", freq)


def test_the_scorer_measures_each_validation_once_and_the_stage_reads_them_back(setting):
    run, inputs, run_dir = setting
    lines: list[str] = []
    score = StepScore(run, families.get(run.family), run_dir, inputs, lines.append)
    draw(run_dir, 0, (300.0, 500.0))
    assert score(0) == 0.0
    draw(run_dir, 2, (250.0, 450.0))
    draw(run_dir, 4, (220.0, 400.0))
    draw(run_dir, 6, (990.0, 990.0))  # a longer run's sample left from before: not read yet
    scored = {step: score(step) for step in (2, 4)}
    measured = [line for line in lines if "quality measured" in line]
    assert measured == ["scored: quality measured at 1 step(s) with clap"] * 3  # one at a time
    saved = json.loads((run_dir / QUALITY_FILE).read_text())
    assert [row["step"] for row in saved["steps"]] == [0, 2, 4]
    rows = {row["step"]: row for row in saved["steps"]}
    for step, value in scored.items():
        assert value == selection_score(run.train.select, rows[0], rows[step])
    said = [line for line in lines if line.startswith("scored: step 4 style ")]
    assert len(said) == 1 and ", prompt " in said[0] and "; weighted gain " in said[0]
    assert not (run_dir / "events.jsonl").exists()  # the loop holds it while training

    # After training: every drawn step into quality.json and the events, step 6 measured now
    (run_dir / "samples" / "0-6.wav").unlink()
    (run_dir / "samples" / "1-6.wav").unlink()
    lines.clear()
    final = score.finish()
    assert [row["step"] for row in final["steps"]] == [0, 2, 4] and final["steps"] == saved["steps"]
    assert not any("quality measured" in line for line in lines)
    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["step"] for e in events if e["event"] == "quality"] == [0, 2, 4]

    # The adapters stage's measure of the same run: read back, nothing loaded or written
    store = Path(inputs["store"])
    models = Path(inputs["models_root"])
    embedders = embedders_for("audio", inputs["models"], models, store / "fingerprints.json")
    written = (run_dir / QUALITY_FILE).stat().st_mtime_ns
    samples = drawn_samples(run_dir / "samples")
    args = (run, "stable-audio-3", "audio", run_dir, samples, Path(inputs["dataset_folder"]))
    again = measure_run(*args, inputs["items"], embedders, lines.append, store)
    assert again == final and (run_dir / QUALITY_FILE).stat().st_mtime_ns == written
    assert "model" not in embedders["clap"].__dict__ and "_loaded" not in embedders["clap"].__dict__

    # Measured from nothing (no quality.json, no stored item rows): the same numbers
    fresh = run_dir.parent / "fresh"
    shutil.copytree(run_dir / "samples", fresh / "samples")
    shutil.rmtree(store)
    scratch = measure_run(
        run, "stable-audio-3", "audio", fresh, drawn_samples(fresh / "samples"),
        Path(inputs["dataset_folder"]), inputs["items"], embedders, lines.append, None,
    )  # fmt: skip
    assert scratch["steps"] == final["steps"] and scratch["floor"] == final["floor"]

    # One step's renders changed: that step alone is measured again
    draw(run_dir, 2, (260.0, 460.0))
    lines.clear()
    changed = measure_run(*args, inputs["items"], embedders, lines.append, store)
    assert lines == ["scored: quality measured at 1 step(s) with clap"]
    assert changed["steps"][0] == final["steps"][0] and changed["steps"][2] == final["steps"][2]
    assert changed["steps"][1] != final["steps"][1]


def test_a_step_without_renders_or_without_the_base_models_has_no_score(setting):
    run, inputs, run_dir = setting
    score = StepScore(run, families.get(run.family), run_dir, inputs, lambda _: None)
    draw(run_dir, 2, (250.0, 450.0))
    assert score(2) is None  # no base model's renders to measure against
    draw(run_dir, 0, (300.0, 500.0))
    assert score(4) is None  # nothing drawn at step 4
    assert score(2) is not None


def test_the_scorer_stops_in_one_line_where_the_model_went_away(setting):
    from tunesmith.train.config import ConfigError

    run, inputs, run_dir = setting
    shutil.rmtree(inputs["models"]["clap"])
    with pytest.raises(ConfigError) as error:
        StepScore(run, families.get(run.family), run_dir, inputs, lambda _: None)
    text = str(error.value)
    assert "\n" not in text and text.startswith("scored: train.select = 0.7 style + 0.3 prompt:")
    assert "tiny-clap" in text


def test_the_summary_line_says_how_the_kept_adapter_was_chosen():
    from tunesmith.quality.run import summary_line, verdict

    measured = {"steps": [BASE, ROW], "floor": 0.5}
    measured["verdict"] = verdict(measured, 4)
    plain = summary_line(measured)
    assert plain.startswith("quality at step 4: prompt 0.280 (base 0.200), style 0.600")
    assert summary_line(measured, {"by": "score", "step": 4}).startswith(
        "quality at step 4 (kept by train.select): prompt 0.280"
    )
    said = "train.select = style: no step's renders beat the base model's on it; kept ..."
    assert summary_line(measured, {"by": "loss", "line": said}) == f"{plain}; {said}"
