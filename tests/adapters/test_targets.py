"""Layer selection by underfit's include/exclude patterns (stable-audio-3 `_expand`, `add_lora`)."""

from __future__ import annotations

import pytest

from tunesmith.adapters.targets import TargetSelectionError, expand_pattern, select_targets

LAYERS = [f"model.transformer.layers.{i}.self_attn.to_qkv" for i in range(12)] + [
    f"model.transformer.layers.{i}.ff.ff.2" for i in range(12)
]
NAMES = [
    *LAYERS,
    "model.to_cond_embed.0",
    "model.preprocess_conv",
    "conditioners.seconds_total.embedder.embedding.1",
]
CANDIDATES = [(name, index) for index, name in enumerate(NAMES)]


def selected(include=None, exclude=None):
    return [name for name, _ in select_targets(CANDIDATES, include, exclude)]


def test_a_range_expands_to_one_pattern_per_number():
    assert expand_pattern("transformer.layers.[0-3].self_attn") == [
        "transformer.layers.0.self_attn",
        "transformer.layers.1.self_attn",
        "transformer.layers.2.self_attn",
        "transformer.layers.3.self_attn",
    ]


def test_a_descending_range_counts_down_and_two_ranges_give_every_combination():
    assert expand_pattern("l[2-0]") == ["l2", "l1", "l0"]
    assert expand_pattern("a[0-1].b[5-6]") == ["a0.b5", "a0.b6", "a1.b5", "a1.b6"]


def test_a_pattern_without_range_is_itself_stripped_of_blanks():
    assert expand_pattern("  self_attn ") == ["self_attn"]


@pytest.mark.parametrize("pattern", ["layers.[0-3", "layers.[a-b]", "layers.[3-]", "layers.]"])
def test_a_malformed_range_is_an_error_naming_the_pattern(pattern):
    with pytest.raises(TargetSelectionError, match=r"malformed range.*\[i-j\]") as error:
        expand_pattern(pattern)
    assert repr(pattern.strip()) in str(error.value)


def test_no_include_selects_every_layer_in_order():
    assert selected() == NAMES
    assert selected(include=[]) == NAMES


def test_include_is_a_substring_match_with_ranges():
    assert selected(include=["layers.[0-1].self_attn"]) == LAYERS[:2]
    # A substring: "layers.1." does not match layers.10 / 11, "layers.1" would.
    assert selected(include=["layers.1.self_attn"]) == [LAYERS[1]]
    assert selected(include=["layers.1"]) == [LAYERS[1], LAYERS[10], LAYERS[11]] + [
        LAYERS[12 + 1],
        LAYERS[12 + 10],
        LAYERS[12 + 11],
    ]


def test_exclude_wins_over_include():
    chosen = selected(include=["transformer.layers"], exclude=["ff.ff", "layers.[2-11]."])
    assert chosen == LAYERS[:2]


def test_dashboard_style_exclusion_of_conditioner_and_other_modules():
    chosen = selected(exclude=["conditioners.", "to_cond_embed", "preprocess_conv"])
    assert chosen == LAYERS


def test_the_items_travel_with_their_names():
    pairs = select_targets(CANDIDATES, include=["seconds_total"])
    assert pairs == [("conditioners.seconds_total.embedder.embedding.1", len(NAMES) - 1)]


def test_nothing_selected_is_an_error_listing_available_names():
    with pytest.raises(TargetSelectionError, match="no layer selected") as error:
        selected(include=["transformer.blocks"])
    message = str(error.value)
    assert "model.transformer.layers.0.self_attn.to_qkv" in message
    assert f"({len(NAMES)} in all)" in message


def test_a_malformed_exclude_pattern_is_an_error_too():
    with pytest.raises(TargetSelectionError, match="malformed range"):
        selected(exclude=["layers.[0-"])
