"""Captions as kohya trains SDXL on them: long captions in chunks of 75 tokens through both
text encoders (checked against the chunks built by hand from kohya's rules), the pipeline's
own encoding at 77 without its warnings, and the caption variants and dropout."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from tunesmith.families.sdxl import captions, model
from tunesmith.families.sdxl.captions import Prompt, pick_caption, process_caption, variants
from tunesmith.families.sdxl.data_options import SdxlDataOptions

BOS, EOS, X, X_END = 512, 513, 87, 343  # the tiny tokenizers' ids: "x" and "x</w>"


@pytest.fixture(scope="module")
def pipe(tiny_sdxl: Path):
    return model.load_pipeline(tiny_sdxl, skip=("unet",))


def encoded_by_hand(pipe, chunks1: list[list[int]], chunks2: list[list[int]]):
    """kohya's strategy_sdxl: each chunk through its encoder (penultimate states), then the
    first chunk's <BOS>, every chunk's 75 inner positions, the last chunk's last position;
    pooled: text_encoder_2's projected embedding of the first chunk."""
    states = []
    for chunks, encoder in ((chunks1, pipe.text_encoder), (chunks2, pipe.text_encoder_2)):
        with torch.no_grad():
            out = encoder(torch.tensor(chunks), output_hidden_states=True)
        h = out.hidden_states[-2]
        states.append(torch.cat([h[0, :1], *[h[i, 1:76] for i in range(len(chunks))], h[-1, 76:]]))
    return torch.cat(states, dim=-1), out.text_embeds[0]


def test_a_long_caption_is_encoded_in_chunks_as_kohya_does(pipe):
    """100 tokens at max_token_length 150: two chunks. The first tokenizer pads with its end
    token, so each chunk ends with it; the second pads with "!" (0): the first chunk, whose
    text goes on, gets the end token in its last place, the second keeps its padding."""
    text = [X] * 99 + [X_END]  # "x" * 100: one token a character in the tiny vocabulary
    first = [[BOS, *text[:75], EOS], [BOS, *text[75:], EOS, *[EOS] * 49, EOS]]
    second = [[BOS, *text[:75], EOS], [BOS, *text[75:], EOS, *[0] * 50]]
    caption = "x" * 100
    assert model.tokenize_chunks(pipe.tokenizer, [caption], 2)[0].tolist() == first
    assert model.tokenize_chunks(pipe.tokenizer_2, [caption], 2)[0].tolist() == second
    embeds, pooled = model.encode_long_captions(pipe, [caption], 2)
    assert embeds.shape == (1, 152, 64) and pooled.shape == (1, 32)
    by_hand, pooled_by_hand = encoded_by_hand(pipe, first, second)
    assert torch.equal(embeds[0], by_hand) and torch.equal(pooled[0], pooled_by_hand)
    two, _ = model.encode_long_captions(pipe, [caption, "a disc"], 2)  # a batch: within rounding
    assert two.shape == (2, 152, 64) and (two[0] - by_hand).abs().max() < 1e-5
    three, _ = model.encode_long_captions(pipe, [caption], 3)
    assert three.shape == (1, 227, 64)


def test_an_empty_chunk_of_the_second_tokenizer_starts_with_its_end_token(pipe):
    ids = model.tokenize_chunks(pipe.tokenizer_2, [""], 2)[0].tolist()
    assert ids == [[BOS, EOS, *[0] * 75], [BOS, EOS, *[0] * 75]]  # kohya turns <PAD> into <EOS>
    embeds, pooled = model.encode_long_captions(pipe, [""], 2)
    first = [[BOS, EOS, *[EOS] * 75]] * 2
    by_hand, pooled_by_hand = encoded_by_hand(pipe, first, ids)
    assert torch.equal(embeds[0], by_hand) and torch.equal(pooled[0], pooled_by_hand)


def test_77_tokens_is_the_pipelines_encode_prompt_without_its_warnings(tiny_sdxl, caplog):
    fresh = model.load_pipeline(tiny_sdxl, skip=("unet",))  # its warn-once memory is empty
    long = ["x" * 100, "a kvadring picture", ""]  # 100, 16 (a character each, no spaces), 0
    caplog.clear()
    with caplog.at_level("WARNING"):
        embeds, pooled = model.encode_captions(fresh, long)
        lengths = model.caption_tokens(fresh, long, 75)
        assert caplog.records == []
        reference, _, reference_pooled, _ = fresh.encode_prompt(
            long, device="cpu", num_images_per_prompt=1, do_classifier_free_guidance=False
        )
        said = " ".join(r.getMessage() for r in caplog.records)
    assert "truncated" in said and "Token indices" in said  # what they say, and we do not
    assert torch.equal(embeds, reference) and torch.equal(pooled, reference_pooled)
    assert lengths[0] == {"tokens": 100, "kept": 75, "lost": "x" * 25}
    assert lengths[1]["tokens"] == 16 and lengths[1]["lost"] == ""


def test_a_caption_cut_at_its_tokens_is_one_line():
    value = {"tokens": 100, "kept": 75, "lost": "x" * 25}
    line = captions.truncation_line("disc.png", value, None)
    assert line.startswith("disc.png: its caption is 100 tokens; the 25 past the first 75 are")
    assert "(CLIP's 77-token window; train.max_token_length = 150 or 225 keeps more)" in line
    assert "(train.max_token_length = 150)" in captions.truncation_line("d.png", value, 150)
    assert "'xxxxxxxxxxxxxxxxxxxxxxxxx'" in line
    assert captions.truncation_line("disc.png", {"tokens": 40, "kept": 75}, None) == ""


def options(**changes) -> SdxlDataOptions:
    return SdxlDataOptions(**changes)


def test_shuffle_keeps_the_first_tags_and_joins_with_comma_space():
    caption = "kvad, red disc,blue ring , green, cream ground"
    rng = random.Random(0)
    seen = set()
    for _ in range(200):
        out = process_caption(caption, options(shuffle_caption=True, keep_tokens=1), rng)
        tags = out.split(", ")
        assert tags[0] == "kvad" and sorted(tags[1:]) == sorted(
            ["red disc", "blue ring", "green", "cream ground"]
        )
        seen.add(out)
    assert len(seen) == 24  # every order of the four others
    semicolons = process_caption(
        "a; b; c", options(shuffle_caption=True, caption_separator=";"), rng
    )
    assert sorted(semicolons.split(", ")) == ["a", "b", "c"]
    assert process_caption(caption, options(), rng) == caption  # nothing set: as written


def test_tag_dropout_drops_each_tag_but_the_kept_ones_at_its_rate():
    rng = random.Random(1)
    caption = ", ".join(f"t{i}" for i in range(11))
    option = options(caption_tag_dropout_rate=0.3, keep_tokens=1)
    counts = Counter()
    for _ in range(2000):
        tags = process_caption(caption, option, rng).split(", ")
        assert tags[0] == "t0" and tags[1:] == sorted(tags[1:], key=lambda t: int(t[1:]))
        counts.update(tags)
    assert counts["t0"] == 2000
    dropped = 1 - sum(counts[f"t{i}"] for i in range(1, 11)) / 20000
    assert abs(dropped - 0.3) < 0.02  # 2000 x 10 draws: 0.3 within 6 standard deviations


def test_variants_are_drawn_from_the_seed_and_the_caption():
    option = options(shuffle_caption=True, caption_variants=8)
    caption = "a, b, c, d, e"
    first = variants(caption, option, seed=42)
    assert len(first) == 8 and first == variants(caption, option, seed=42)
    assert first != variants(caption, option, seed=43)
    assert variants("a, b", options(), seed=42) == ["a, b"]  # nothing varies it
    rare = variants(caption, options(caption_tag_dropout_rate=0.05, caption_variants=8), 42)
    assert len(rare) == 8 and rare.count(caption) >= 4  # duplicates kept: mostly whole


def test_what_a_row_needs_encoded():
    found = captions.prompts("a, b", options(shuffle_caption=True, caption_variants=2), 150, 0)
    assert list(found) == ["caption", "variant_0", "variant_1"]
    assert found["caption"] == Prompt("a, b", 150) and found["caption"].positions == 152
    dropped = captions.prompts("a, b", options(caption_dropout_rate=0.1), 75, 0)
    assert dropped == {"caption": Prompt("a, b"), "empty": Prompt("")}


def test_the_trainers_pick_drops_out_at_its_rate_and_draws_the_same_either_way():
    generator = torch.Generator().manual_seed(0)
    picks = [pick_caption(4, 0.25, generator) for _ in range(4000)]
    counts = Counter(picks)
    assert abs(counts[None] / 4000 - 0.25) < 0.03
    assert all(abs(counts[i] / 4000 - 0.75 / 4) < 0.03 for i in range(4))
    a, b = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    pick_caption(3, 0.0, a), pick_caption(3, 1.0, b)
    assert torch.equal(a.get_state(), b.get_state())
    assert pick_caption(3, 1.0, torch.Generator().manual_seed(1)) is None


def test_the_data_settings_default_to_what_trains_today():
    from tunesmith.families.sdxl.config import SdxlTrain
    from tunesmith.families.sdxl.data_options import DEFAULTS, LATER, options

    assert options(SdxlTrain()) == DEFAULTS  # a train section without them reads the defaults
    assert LATER["train"]["buckets"] is False and LATER["train"]["max_token_length"] is None
    mixed = SimpleNamespace(size=64, buckets=True)
    assert options(mixed).buckets and options(mixed).bucket_reso_steps == 64
