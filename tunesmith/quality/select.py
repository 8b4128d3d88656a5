"""Keeping a run's adapter by a measure of its renders (`train.select`), while it trains.

The training loop (`tunesmith.train.loop`) asks, after each validation has rendered its
samples, for that step's score; `StepScore` is that callable, made by the training process
(`pipelines/train_child.py`) from the same embedding models, items and store the adapters
stage measures with. It measures the step's renders with `Measurer`, the stage's own code,
into the run's `quality.json` (a step's row is kept by its own key), so the stage reads every
step back after training and measures nothing again.

The score of a step against the base model's renders (step 0), for `select` weights w_m:

    gain_m = (v_m - b_m) / (1 - b_m)   prompt, style, style_dino: the share of the gap between
                                       the base model's similarity b_m and a perfect 1 that
                                       the step closes
    gain_m = (b_m - v_m) / b_m         frechet: the share of the base model's distance to the
                                       dataset that the step removes
    score  = sum_m w_m gain_m / sum_m w_m

Each gain is 0 at the base model, 1 at a perfect value, negative where the step is worse, and
has no unit, so measures of different scales can be weighed. One measure (`select = "style"`)
orders the steps as its value does. A gain whose base is already perfect (b = 1, or a
distance of 0) is 0: nothing can be gained on it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tunesmith.quality.run import HIGHER_IS_BETTER, Measurer, Skip, drawn_samples, embedders_for
from tunesmith.train.config import ConfigError, select_text, select_weights


def gain(measure: str, value: float, base: float) -> float:
    """How far `value` goes from the base model's `base` toward a perfect value (above)."""
    if HIGHER_IS_BETTER[measure]:
        room = 1.0 - base
        return (value - base) / room if room > 0 else 0.0
    return (base - value) / base if base > 0 else 0.0


def selection_score(select: Any, base: dict[str, Any], row: dict[str, Any]) -> float | None:
    """The score of a step's measures `row` against the base model's `base` for the setting
    `select` (above); None where a measure it weighs is missing from either."""
    weights = select_weights(select)
    if not weights or any(m not in base or m not in row for m in weights):
        return None
    total = sum(weights.values())
    return sum(w * gain(m, row[m], base[m]) for m, w in weights.items()) / total


class StepScore:
    """`score(step)` for the training loop: the step's renders measured and scored against
    the base model's (None where either step rendered nothing). `inputs` is what the adapters
    stage hands the training process (`RunMeasures.select_inputs`)."""

    def __init__(self, run, family, run_dir: Path, inputs: dict, log: Callable[[str], None]):
        self.run, self.run_dir, self.log = run, Path(run_dir), log
        store = Path(inputs["store"])
        models, cache = Path(inputs["models_root"]), store / "fingerprints.json"
        embedders = embedders_for(family.media, inputs["models"], models, cache)
        if isinstance(embedders, Skip):  # the model went away since the stage checked it
            raise ConfigError(
                f"{run.name}: train.select = {select_text(run.train.select)}: {embedders.reason}"
            )
        self.measurer = Measurer(
            run, family.name, family.media, self.run_dir, Path(inputs["dataset_folder"]),
            inputs["items"], embedders, store,
        )  # fmt: skip

    def __call__(self, step: int) -> float | None:
        samples = {k: p for k, p in drawn_samples(self.run_dir / "samples").items() if k[1] <= step}
        drawn = {s for _, s in samples}
        if 0 not in drawn or step not in drawn:
            return None
        measured = self.measurer.measure(samples, self.log, record=False)
        rows = {row["step"]: row for row in measured["steps"]}
        score = selection_score(self.run.train.select, rows[0], rows[step])
        if step and score is not None:
            weights = select_weights(self.run.train.select)
            values = ", ".join(f"{m} {rows[step][m]:.4f} (base {rows[0][m]:.4f})" for m in weights)
            gained = f"; weighted gain {score:+.4f}" if len(weights) > 1 else ""
            self.log(f"{self.run.name}: step {step} {values}{gained}")
        return score

    def finish(self) -> dict[str, Any]:
        """Every step's renders measured (read back) into quality.json and the run's events,
        once the loop has closed them: the adapters stage then finds it all measured. {} where
        the trainer drew no samples (nothing to measure, nothing written)."""
        samples = drawn_samples(self.run_dir / "samples")
        return self.measurer.measure(samples, self.log, record=True) if samples else {}
