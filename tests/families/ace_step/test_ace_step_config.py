"""An ace-step run's settings: HOT-Step's defaults per adapter type, each overridable, and the
settings refused with the reason (the LoKr lr/accumulation pair, tag_position, batch size)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tunesmith.train.config import ConfigError, load_runs, resolve_run

WHERE = Path("tunesmith.toml")


def run(adapter: dict | None = None, **train):
    raw = {"name": "r", "family": "ace-step", "adapter": adapter or {}, "train": train}
    return resolve_run(raw, WHERE, 0)


def test_lora_and_lokr_take_hot_steps_defaults():
    lora = run()
    assert (lora.adapter.type, lora.adapter.rank, lora.adapter.alpha) == ("lora", 128, 256.0)
    t = lora.train
    assert (t.lr, t.epochs, t.accumulation, t.steps, t.target_loss) == (5e-4, 400, 4, None, 0.0)
    assert (t.optimizer, t.muon_min_dim, t.muon_lr_scale) == ("muon", 16, 20.0)
    assert (t.grad_clip, t.warmup, t.lr_floor, t.cfg_dropout) == (1.0, 0.05, 0.1, 0.15)
    assert t.loss_weighting == "flow_snr" and lora.adapter.target_mlp
    lokr = run({"type": "lokr"})
    a, t = lokr.adapter, lokr.train
    assert (a.rank, a.alpha, a.factor) == (512, 512.0, 6)
    assert (t.lr, t.epochs, t.accumulation, t.target_loss, t.loss_weighting) == (
        2e-3,
        250,
        4,
        0.6,
        "none",
    )
    assert lokr.base_model == "ace-step-1.5" and lokr.demos[0].steps == 32


def test_every_default_can_be_overridden():
    r = run(
        {"rank": 16, "alpha": 8, "attention": "self", "target_mlp": False},
        lr=1e-4,
        epochs=3,
        steps=7,
        optimizer="adamw",
        loss_weighting="min_snr",
    )
    assert (r.adapter.rank, r.adapter.alpha, r.train.lr, r.train.epochs) == (16, 8, 1e-4, 3)
    assert r.train.steps == 7 and r.train.loss_weighting == "min_snr"
    assert run({"rank": 16}).adapter.alpha == 32.0  # 2 x rank, HOT-Step's ratio


def test_lokr_lr_and_accumulation_move_together():
    with pytest.raises(
        ConfigError,
        match="a LoKr run's lr and accumulation move together: lr 0.001 with accumulation 4",
    ):
        run({"type": "lokr"}, lr=1e-3)
    with pytest.raises(ConfigError, match="lr 0.002 with accumulation 20.*2e-3 at 4"):
        run({"type": "lokr"}, accumulation=20)
    moved = run({"type": "lokr"}, lr=1e-2, accumulation=20)  # HOT-Step's other measured pair
    assert (moved.train.lr, moved.train.accumulation) == (1e-2, 20)
    assert run(accumulation=8).train.accumulation == 8  # a LoRA's are independent


def test_bad_settings_are_named():
    cases = [
        (
            {},
            {"tag_position": "middle"},
            'train.tag_position = "middle": must be one of "prepend", "append"',
        ),
        ({}, {"batch_size": 2}, "train.batch_size must be 1 for ace-step"),
        ({"type": "loha"}, {}, 'adapter.type = "loha": must be one of "lora", "lokr"'),
        ({"factor": 1}, {}, "adapter.factor = 1: must be -1 or an integer ≥ 2"),
        (
            {},
            {"loss_weighting": "snr"},
            'train.loss_weighting = "snr": must be one of "none", "flow_snr"',
        ),
        (
            {},
            {"unreadable_lyrics": "drop"},
            'train.unreadable_lyrics = "drop": must be one of "skip"',
        ),
        ({}, {"genre_ratio": 130}, "train.genre_ratio = 130: must be an integer in [0, 100]"),
        ({}, {"cfg_dropout": 1.0}, "train.cfg_dropout = 1.0: must be a number in [0, 1)"),
        ({}, {"optimizer": "sgd"}, 'train.optimizer = "sgd": must be one of "adamw", "muon"'),
    ]
    for adapter, train, message in cases:
        with pytest.raises(ConfigError) as caught:
            run(adapter, **train)
        assert message in str(caught.value), (message, str(caught.value))
    with pytest.raises(
        ConfigError,
        match="train.latent_crop_length is not a setting;.* the train settings are .*crop_frames",
    ):
        run(latent_crop_length=100)
    raw = {"name": "r", "family": "ace-step", "demos": [{"prompt": "x", "language": "klingon"}]}
    with pytest.raises(ConfigError, match='language = .*: must be one of "ar", "az"'):
        resolve_run(raw, WHERE, 0)


def test_a_toml_resolves_as_the_defaults_with_the_same_keys(tmp_path):
    (tmp_path / "tunesmith.toml").write_text(
        '[[runs]]\nname = "a"\nfamily = "ace-step"\n[runs.adapter]\ntype = "lokr"\n'
    )
    [loaded] = load_runs(tmp_path, "audio")
    expected = run({"type": "lokr"})
    assert (loaded.adapter, loaded.train) == (expected.adapter, expected.train)


def test_listing_the_families_loads_no_model_library():
    code = (
        "import sys; from tunesmith import family; family.all_families(); "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[3])
