"""The text encoder's inputs as ACE-Step 1.5 formats them, against diffusers' AceStepPipeline and
ACE-Step 1.5's constants; the trigger rules and the genre_ratio selection."""

from __future__ import annotations

import random

import pytest
from diffusers.pipelines.ace_step import pipeline_ace_step

from tunesmith.families.ace_step.text import (
    DEFAULT_DIT_INSTRUCTION,
    INSTRUMENTAL,
    SFT_GEN_PROMPT,
    Metas,
    apply_trigger,
    caption_text,
    genre_items,
    lyrics_text,
    metas_block,
    training_caption,
)


def test_the_templates_are_the_pipelines():
    assert SFT_GEN_PROMPT == pipeline_ace_step.SFT_GEN_PROMPT
    assert DEFAULT_DIT_INSTRUCTION == pipeline_ace_step.DEFAULT_DIT_INSTRUCTION


def test_a_caption_and_lyrics_read_as_the_pipeline_formats_them_at_inference(ace_pipe):
    cases = [
        dict(bpm=92, keyscale="A minor", timesignature="4", duration=20.7, lyrics="[Verse]\nhi"),
        dict(bpm=None, keyscale=None, timesignature=None, duration=9.0, lyrics="la la"),
    ]
    for case in cases:
        metas = Metas(case["bpm"], case["keyscale"], case["timesignature"], case["duration"])
        text, lyrics = ace_pipe._format_prompt(
            "lpzsong, warm lo-fi loop",
            lyrics=case["lyrics"],
            vocal_language="fr",
            audio_duration=case["duration"],
            bpm=case["bpm"],
            keyscale=case["keyscale"],
            timesignature=case["timesignature"],
        )
        assert caption_text("lpzsong, warm lo-fi loop", metas) == text
        assert lyrics_text(case["lyrics"], "fr") == lyrics


def test_the_exact_strings():
    metas = Metas(bpm=91.6, keyscale="F# minor", timesignature="3/4", duration=187.9)
    assert caption_text("dark techno", metas) == (
        "# Instruction\nFill the audio semantic mask based on the given conditions:\n\n"
        "# Caption\ndark techno\n\n"
        "# Metas\n- bpm: 92\n- timesignature: 3\n- keyscale: F# minor\n- duration: 187 seconds\n"
        "<|endoftext|>\n"
    )
    assert lyrics_text("  [Chorus]\nride on\n", "en") == (
        "# Languages\nen\n\n# Lyric\n[Chorus]\nride on<|endoftext|>"
    )
    assert metas_block(Metas()) == (
        "- bpm: N/A\n- timesignature: N/A\n- keyscale: N/A\n- duration: 0 seconds\n"
    )


def test_no_lyrics_is_instrumental_and_the_language_is_checked():
    for absent in (None, "", "  \n"):
        assert lyrics_text(absent, "en").endswith(f"# Lyric\n{INSTRUMENTAL}<|endoftext|>")
    with pytest.raises(ValueError, match="language 'english' is not one ACE-Step 1.5 knows"):
        lyrics_text("hi", "english")
    with pytest.raises(ValueError, match="timesignature 'waltz'"):
        metas_block(Metas(timesignature="waltz"))


def test_the_trigger_goes_where_tag_position_says():
    assert apply_trigger("warm loop", "lpz", "prepend") == "lpz, warm loop"
    assert apply_trigger("warm loop", "lpz", "append") == "warm loop, lpz"
    assert apply_trigger("warm loop", "lpz", "replace") == "lpz"
    assert apply_trigger("", "lpz", "append") == "lpz"
    assert apply_trigger("warm loop", "", "prepend") == "warm loop"
    with pytest.raises(ValueError, match="tag_position 'before': expected one of prepend, app"):
        apply_trigger("warm loop", "lpz", "before")


def test_genre_tags_replace_the_caption_where_chosen():
    assert training_caption("warm loop", "lo-fi", False, "lpz") == "lpz, warm loop"
    assert training_caption("warm loop", "lo-fi", True, "lpz") == "lpz, lo-fi"
    assert training_caption("warm loop", "", True, "lpz", "append") == "warm loop, lpz"
    assert training_caption("warm loop", "lo-fi", True, prompt_override="caption") == "warm loop"
    assert training_caption("warm loop", "lo-fi", False, prompt_override="genre") == "lo-fi"
    with pytest.raises(ValueError, match="prompt_override 'tags'"):
        training_caption("warm loop", "lo-fi", False, prompt_override="tags")


def _upstream_selection(count: int, ratio: float) -> set[int]:
    """ACE-Step 1.5's select_genre_indices, as written there: the global random module."""
    state = random.getstate()
    try:
        random.seed(42)
        indices = list(range(count))
        random.shuffle(indices)
        return set(indices[: int(count * ratio / 100)])
    finally:
        random.setstate(state)


@pytest.mark.parametrize("count", [1, 3, 10, 37])
@pytest.mark.parametrize("ratio", [0, 30, 55, 100])
def test_genre_ratio_picks_the_items_ace_step_picks(count, ratio):
    chosen = genre_items(count, ratio)
    assert len(chosen) == int(count * ratio / 100)
    assert chosen == _upstream_selection(count, ratio)


def test_genre_ratio_defaults_to_hot_steps_30_percent_and_is_checked():
    assert len(genre_items(10)) == 3
    with pytest.raises(ValueError, match="genre_ratio 130"):
        genre_items(10, 130)
