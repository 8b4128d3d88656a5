"""Stable Audio 3 settings as a user writes them: the legacy type name, the dashboard's layer
preset, the ARC demos' own defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunesmith.families.stable_audio_3 import names as sa3_names
from tunesmith.families.stable_audio_3.config import INCLUDE_PRESETS, include_and_exclude
from tunesmith.train.config import ConfigError, resolve_run


def resolve(adapter=None, demos=()):
    table = {"name": "r", "family": "stable-audio-3", "base_model": "m"}
    return resolve_run({**table, "adapter": adapter or {}, "demos": list(demos)}, Path(), 0)


def test_dora_is_read_as_dora_rows_and_an_unknown_type_is_refused():
    assert resolve({"type": "dora"}).adapter.type == "dora-rows"
    assert resolve({"type": "bora-xs"}).adapter.type == "bora-xs"
    with pytest.raises(ConfigError, match="adapter.type"):
        resolve({"type": "lokr"})


def test_the_dashboard_preset_selects_what_the_dashboard_selects(pipe):
    run = resolve({"include_preset": "dashboard"})
    include, exclude = include_and_exclude(run.adapter)
    assert include == () and exclude == INCLUDE_PRESETS["dashboard"][1]
    from tunesmith.adapters.targets import select_targets

    candidates = sa3_names.adapter_targets(pipe.transformer, pipe.duration_embedder)
    pairs = [(underfit, name) for name, underfit in candidates.items()]
    chosen = [underfit for underfit, _ in select_targets(pairs, include, exclude)]
    # The blocks and the duration conditioner stay; the DiT's conditioning and "other"
    # modules (embedders, projections, convolutions) go.
    assert any(".transformer.layers.0.self_attn." in u for u in chosen)
    assert any(u.startswith("conditioners.") for u in chosen)
    assert not any(p in u for u in chosen for p in exclude)
    # A run's own filters win over the preset; no preset keeps the default.
    own = resolve({"include_preset": "dashboard", "include": ["layers.0."]})
    assert include_and_exclude(own.adapter) == (("layers.0.",), ())
    assert include_and_exclude(resolve().adapter) == (("model.transformer.layers.",), ())


def test_arc_demos_default_to_eight_steps_at_cfg_one_and_keep_what_is_set():
    run = resolve(
        demos=[
            {"prompt": "a", "arc": True},
            {"prompt": "b"},
            {"prompt": "c", "arc": True, "steps": 12, "cfg": 2.5},
        ]
    )
    assert [(d.steps, d.cfg) for d in run.demos] == [(8, 1.0), (50, 7.0), (12, 2.5)]


def test_the_later_settings_are_left_out_of_the_key_only_at_their_own_defaults():
    from dataclasses import fields

    from tunesmith.families.stable_audio_3.config import LATER, Sa3Adapter, Sa3Demo, Sa3Train
    from tunesmith.train.config import computed

    sections = {"adapter": Sa3Adapter, "train": Sa3Train, "demo": Sa3Demo}
    for section, defaults in LATER.items():
        declared = {f.name: f.default for f in fields(sections[section])}
        for name, value in defaults.items():
            assert declared[name] == value, f"{section}.{name}"
    plain = computed(resolve(demos=[{"prompt": "a"}]))
    assert "loss_normalization" not in plain["train"] and "arc" not in plain["demos"][0]
    assert "include_preset" not in plain["adapter"]
    changed = resolve({"include_preset": "dashboard"}, demos=[{"prompt": "a", "arc": True}])
    assert computed(changed)["adapter"]["include_preset"] == "dashboard"
    assert computed(changed)["demos"][0]["arc"] is True
