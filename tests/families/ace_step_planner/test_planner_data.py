"""Training examples in ACE-Step 1.5's planner format, the prompt masked."""

from __future__ import annotations

import torch

from tests.families.ace_step_planner.conftest import LABELS
from tunesmith.families.ace_step_planner.data import (
    IGNORE,
    build_example,
    caption_dropped,
    prompt_text,
    think_text,
)

# The bytes ACE-Step 1.5's build_formatted_prompt / build_formatted_prompt_with_cot produce
# (and Side-Step's prompts.py documents), written out by hand.
PROMPT = (
    "<|im_start|>system\n# Instruction\n"
    "Generate audio semantic tokens based on the given conditions:\n\n<|im_end|>\n"
    "<|im_start|>user\n# Caption\nzqx, warm lo-fi hip hop, dusty drums\n\n"
    "# Lyric\n[Verse]\nwe ride the night\n[Chorus]\nlight the city\n<|im_end|>\n"
    "<|im_start|>assistant\n"
)
THINK = (
    "<think>\nbpm: 92\ncaption: zqx, warm lo-fi hip hop, dusty drums\nduration: 3\n"
    "genres: lo-fi, hip hop\nkeyscale: A minor\nlanguage: en\ntimesignature: 4\n</think>\n\n"
)


def test_prompt_and_answer_bytes(planner, examples):
    example = examples[0]  # 16 codes
    text = planner.tokenizer.decode(list(example.input_ids))
    assert text.startswith(PROMPT + THINK)
    codes = text[len(PROMPT + THINK) :]
    assert codes.endswith("<|im_end|>") and codes.count("<|audio_code_") == 16
    assert planner.tokenizer.decode(list(example.input_ids[: example.prompt_tokens])) == PROMPT


def test_the_prompt_is_masked_and_the_answer_trained(planner, examples):
    for example in examples:
        n = example.prompt_tokens
        assert all(label == IGNORE for label in example.labels[:n])
        assert list(example.labels[n:]) == list(example.input_ids[n:])
        assert example.input_ids[n] == planner.vocab.think  # the first trained token
        assert example.input_ids[-1] == planner.vocab.im_end


def test_instrumental_and_missing_metas(planner):
    labels = {"caption": "ambient pad", "duration": 0, "bpm": None, "timesignature": ""}
    text = prompt_text(planner.tokenizer, "ambient pad", "  ")
    assert "# Lyric\n[Instrumental]\n<|im_end|>" in text
    assert think_text(labels, "ambient pad") == "<think>\ncaption: ambient pad\n</think>"


def test_long_captions_wrap_as_pyyaml_writes_them():
    caption = " ".join(["warm"] * 30)
    think = think_text({}, caption)
    lines = think.splitlines()[1:-1]
    # PyYAML folds past column 80 with a two-space indent, as in ACE-Step's metas
    assert len(lines) > 1 and all(line.startswith("  ") for line in lines[1:])
    assert " ".join(line.strip() for line in lines) == "caption: " + caption


def test_codes_from_the_checkpoints_tokenizer_fit_the_planner(ace_pipe, planner):
    from tunesmith.families.ace_step.model import audio_codes
    from tunesmith.families.ace_step_planner.model import check_codes

    latents = torch.randn(40, 8, generator=torch.Generator().manual_seed(3))
    codes = audio_codes(ace_pipe, latents)
    assert ace_pipe.audio_tokenizer.quantizer.codebook_size == planner.vocab.codebook_size
    good, problems = check_codes({"song": codes}, planner.vocab)
    assert good == ["song"] and not problems
    example = build_example(planner.tokenizer, planner.vocab, "song", LABELS, codes, 4096)
    ids = list(example.input_ids)
    assert ids[-len(codes) - 1 : -1] == planner.vocab.code_ids[codes].tolist()


def test_caption_dropout_is_seeded_and_trains_the_trigger_alone(planner):
    draws = [caption_dropped(0.3, seed=7, epoch=e, index=i) for e in range(20) for i in range(10)]
    assert draws == [caption_dropped(0.3, 7, e, i) for e in range(20) for i in range(10)]
    assert 0.2 < sum(draws) / len(draws) < 0.4
    assert not any(caption_dropped(0.0, 7, e, 0) for e in range(50))
    assert [caption_dropped(0.5, 1, 0, i) for i in range(8)] != [
        caption_dropped(0.5, 2, 0, i) for i in range(8)
    ]
    dropped = build_example(
        planner.tokenizer, planner.vocab, "s", LABELS, [1, 2], 4096, "zqx", drop_caption=True
    )
    text = planner.tokenizer.decode(list(dropped.input_ids))
    assert dropped.caption == "zqx"
    assert "# Caption\nzqx\n\n# Lyric" in text and "caption: zqx\n" in text


def test_an_answer_past_the_context_is_cut_with_a_warning(planner):
    full = build_example(planner.tokenizer, planner.vocab, "long", LABELS, list(range(60)), 4096)
    context = len(full.input_ids) - 25
    cut = build_example(planner.tokenizer, planner.vocab, "long", LABELS, list(range(60)), context)
    assert len(cut.input_ids) == context
    assert cut.input_ids == full.input_ids[:context]  # no <|im_end|>: the song goes on
    assert any("long: " in w and "25 more than the planner's context" in w for w in cut.warnings)


def test_lyrics_in_another_script_train_with_a_warning(planner):
    labels = dict(LABELS, lyrics="[Verse]\nмы едем ночью по городу", language="en")
    example = build_example(planner.tokenizer, planner.vocab, "ru-song", labels, [1, 2], 4096)
    assert example.answer_tokens > 0
    assert any("Cyrillic script" in w and "'en'" in w for w in example.warnings)
    ok = dict(LABELS, lyrics="[Verse]\nмы едем ночью", language="ru")
    assert not build_example(planner.tokenizer, planner.vocab, "s", ok, [1], 4096).warnings
