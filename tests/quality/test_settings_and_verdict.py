"""`[metrics]` as a user writes it, and the kept adapter judged against the base model."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunesmith.dataset.metrics import MetricsError, model_folder, read_metrics
from tunesmith.quality.run import verdict
from tunesmith.train.config import ConfigError, load_plan


def _toml(folder: Path, text: str) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "tunesmith.toml").write_text(text)
    return folder


def test_defaults_per_media_and_what_a_dataset_names(tmp_path):
    none = read_metrics(tmp_path)
    assert none.for_media("audio") == {"clap": "larger_clap_music"}
    assert none.for_media("image") == {"clip": "clip-vit-large-patch14"}
    named = read_metrics(_toml(tmp_path / "d", '[metrics]\nclap = "mine"\ndino = "dinov2-small"\n'))
    assert named.for_media("audio") == {"clap": "mine"}
    assert named.for_media("image") == {"clip": "clip-vit-large-patch14", "dino": "dinov2-small"}
    off = read_metrics(_toml(tmp_path / "off", "[metrics]\nenabled = false\n"))
    assert off.for_media("audio") == {}
    assert model_folder("clap", tmp_path) == tmp_path / "clap"
    assert model_folder("/abs/clap", tmp_path) == Path("/abs/clap")


def test_a_bad_metrics_table_is_refused_with_the_file_and_key(tmp_path):
    folder = _toml(tmp_path / "bad", '[metrics]\nclapp = "x"\nenabled = "yes"\n\n[[runs]]\n'
                   'name = "a"\nfamily = "sdxl"\n')  # fmt: skip
    with pytest.raises(MetricsError) as error:
        read_metrics(folder)
    text = str(error.value)
    assert "tunesmith.toml [metrics]" in text and "'clapp'" in text and "enabled" in text
    with pytest.raises(ConfigError, match="clapp"):
        load_plan(folder)  # found with the plan, before any work


def test_verdict_beats_the_base_on_a_measure_or_warns():
    steps = [
        {"step": 0, "prompt": 0.30, "style": 0.20, "frechet": 1.0},
        {"step": 5, "prompt": 0.25, "style": 0.35, "frechet": 1.2},
        {"step": 10, "prompt": 0.20, "style": 0.10, "frechet": 1.5},
    ]
    assert verdict({"steps": steps}, 5) == {"best_step": 5, "beats": ["style"], "learned": True}
    assert verdict({"steps": steps}, 10)["learned"] is False
    assert verdict({"steps": steps}, 0)["learned"] is False  # the base kept: nothing learned
    assert verdict({"steps": []}, 5)["learned"] is None  # not measured
