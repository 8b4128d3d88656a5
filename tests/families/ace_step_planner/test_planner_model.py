"""The tiny planner in the published layout, loaded as a real planner folder is."""

from __future__ import annotations

import json

import pytest
import torch

from tunesmith.families.ace_step_planner.model import (
    check_codes,
    check_planner,
    load_planner,
    load_tokenizer,
    planner_vocab,
)
from tunesmith.families.ace_step_planner.tiny import (
    CODEBOOK_SIZE,
    build_tiny_planner,
    make_tiny_planner,
)


def test_folder_has_the_published_layout(tiny_planner):
    names = {p.name for p in tiny_planner.iterdir()}
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        assert name in names
    assert "chat_template.jinja" in names
    config = json.loads((tiny_planner / "config.json").read_text())
    assert config["architectures"] == ["Qwen3ForCausalLM"]
    assert config["model_type"] == "qwen3"
    assert config["tie_word_embeddings"] is True


def test_tokenizer_carries_the_planner_tokens(tiny_planner):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_planner)
    vocab = planner_vocab(tokenizer, tiny_planner)
    # the tiny ACE-Step's FSQ levels [8, 5, 5]
    assert vocab.codebook_size == CODEBOOK_SIZE == 200
    codes = vocab.code_ids.tolist()
    # one token each, contiguous, after the text vocabulary and the think tokens (Qwen3's order)
    assert codes == list(range(codes[0], codes[0] + 200))
    pad = tokenizer.pad_token_id
    assert pad < vocab.im_start < vocab.im_end < vocab.think < vocab.think_end < codes[0]
    text = "<think>\nbpm: 90\n</think>\n\n<|audio_code_7|><|audio_code_199|><|im_end|>"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert ids[0] == vocab.think and ids[-3:] == [codes[7], codes[199], vocab.im_end]
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"


def test_chat_template_renders_qwen3_turns(tiny_planner):
    tokenizer = load_tokenizer(tiny_planner)
    turns = [{"role": "system", "content": "SYS\n"}, {"role": "user", "content": "Hi"}]
    prompt = tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True)
    assert prompt == (
        "<|im_start|>system\nSYS\n<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    answer = [*turns, {"role": "assistant", "content": "<think>\nwhy\n</think>\nanswer"}]
    full = tokenizer.apply_chat_template(answer, tokenize=False)
    assert full.endswith("<|im_start|>assistant\n<think>\nwhy\n</think>\n\nanswer<|im_end|>\n")
    off = tokenizer.apply_chat_template(
        turns, tokenize=False, add_generation_prompt=True, enable_thinking=False
    )
    assert off.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_generate_runs_on_the_loaded_planner(planner):
    ids = planner.tokenizer("<|im_start|>user\nhi", return_tensors="pt")["input_ids"]
    out = planner.model.generate(ids, max_new_tokens=12, do_sample=False)
    assert out.shape[1] > ids.shape[1]
    assert int(out.max()) < len(planner.tokenizer)


def test_make_is_idempotent_and_refuses_foreign_folders(tiny_planner, tmp_path):
    stamp = (tiny_planner / "model.safetensors").stat().st_mtime_ns
    assert make_tiny_planner(tiny_planner, seed=0) == tiny_planner
    assert (tiny_planner / "model.safetensors").stat().st_mtime_ns == stamp
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="not a tiny model made by tunesmith"):
        make_tiny_planner(foreign)
    assert (foreign / "notes.txt").read_text() == "keep me"


def test_a_plain_qwen3_folder_is_refused(tmp_path):
    model, tokenizer = build_tiny_planner(seed=0, codebook_size=0)  # no code tokens
    model.save_pretrained(tmp_path / "qwen3")
    tokenizer.save_pretrained(tmp_path / "qwen3")
    check_planner(tmp_path / "qwen3")  # the files are fine
    with pytest.raises(ValueError, match=r"no <\|audio_code_N\|> tokens.*not an ACE-Step 1.5"):
        load_planner(tmp_path / "qwen3")


def test_folder_problems_are_named_together(tmp_path):
    folder = tmp_path / "lm"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    (folder / "pytorch_model.bin").write_bytes(b"pickle")
    with pytest.raises(ValueError) as err:
        check_planner(folder)
    message = str(err.value)
    assert "Qwen3ForCausalLM" in message
    assert "pickled weights are never loaded" in message
    assert "no tokenizer" in message


def test_codes_outside_the_codebook_name_item_and_position(planner):
    items = {
        "good": torch.tensor([0, 5, 199]),
        "bad": [3, 4, 250, 1],
        "empty": [],
    }
    good, problems = check_codes(items, planner.vocab)
    assert good == ["good"]
    assert any("bad: audio code 250 at position 2" in p for p in problems)
    assert any(p.startswith("empty: no audio codes") for p in problems)
