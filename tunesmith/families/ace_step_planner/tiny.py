"""A tiny ACE-Step 1.5 planner LM with the real classes, in the published folder layout.

`make_tiny_planner` builds a `transformers.Qwen3ForCausalLM` at a tiny size from a fixed seed
and a Qwen2 byte-level BPE tokenizer carrying what the released `acestep-5Hz-lm-*` tokenizers
carry: `<|endoftext|>` (pad), `<|im_start|>`, `<|im_end|>` (eos), `<think>` and `</think>`
(added, not special, as in Qwen3), then `<|audio_code_0|>` .. one token per code of the tiny
ACE-Step's FSQ codebook (levels [8, 5, 5]: 200 codes; the releases carry 65,535 for a
codebook of 64,000), and Qwen3's chat template. It is saved as the releases are (see
model.py), so `AutoTokenizer` / `AutoModelForCausalLM` and `mlx_lm.load` read it, and
`load_planner` loads it through the code a real 0.6B / 1.7B / 4B folder takes.

What is kept from the real planner: the Qwen3 architecture (GQA, q/k RMS norms, RoPE, SwiGLU
MLP, tied embeddings), the special tokens and their roles, the code tokens' place after the
text vocabulary, the chat template. What is not: widths, depths, the text vocabulary (merges
learnt here from planner prompts), the number of code tokens, and the weights (random).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import torch

from tunesmith.families.ace_step.tiny import TINY_ACE_STEP_CONFIG, _byte_alphabet
from tunesmith.families.ace_step_planner.chat_template import QWEN3_CHAT_TEMPLATE
from tunesmith.families.ace_step_planner.model import CODE_TOKEN, check_planner
from tunesmith.families.tiny import write_tiny

FORMAT = 1  # bump when the builder changes what it writes for the same config and seed

TINY_PLANNER_CONFIG: dict = {
    "hidden_size": 32,  # real 1024 (0.6B) / 2048 (1.7B) / 2560 (4B)
    "intermediate_size": 64,  # real 3072 / 6144 / 9728
    "num_hidden_layers": 2,  # real 28 / 28 / 36
    "num_attention_heads": 4,  # real 16 / 16 / 32
    "num_key_value_heads": 2,  # real 8 (GQA)
    "head_dim": 8,  # real 128
    "max_position_embeddings": 2048,  # real 40960; a few tiny songs of codes fit
    "rope_theta": 1000000.0,  # real
    "rms_norm_eps": 1e-6,  # real
    "tie_word_embeddings": True,  # real (Qwen3 0.6B / 1.7B / 4B tie them)
}
TEXT_VOCAB = 500  # byte alphabet + learnt merges; real 151,643 before the special tokens
# The FSQ codebook of the tiny ACE-Step: the product of its levels.
CODEBOOK_SIZE = math.prod(TINY_ACE_STEP_CONFIG["audio_tokenizer"]["fsq_input_levels"])

# What the merges are learnt from: the planner's prompt and answer text.
_CORPUS = (
    "<|im_start|>system\n# Instruction\nGenerate audio semantic tokens based on the given "
    "conditions:\n\n<|im_end|>\n<|im_start|>user\n# Caption\n\n\n# Lyric\n[Instrumental]\n"
    "<|im_end|>\n<|im_start|>assistant\n",
    "bpm: 120\ncaption: warm\nduration: 30\ngenres: pop\nkeyscale: C major\nlanguage: en\n"
    "timesignature: 4\n",
    "[Verse]\n[Chorus]\n[Bridge]\nwarm bright dark soft lo-fi hip hop funk synth pop house "
    "techno rock jazz ambient piano guitar bass drums vocals minor major sharp flat the and",
)


def make_tiny_planner(folder: Path, seed: int = 0) -> Path:
    """Write a tiny planner LM to `folder`; returns `folder` (see `write_tiny`: idempotent,
    atomic, and a folder it did not make is refused)."""
    config_hash = _config_hash(seed)
    return write_tiny(
        Path(folder),
        config_hash,
        lambda: _TinyPlanner(*build_tiny_planner(seed)),
        lambda planner: _marker(planner, seed, config_hash),
        check_planner,
    )


def build_tiny_planner(seed: int = 0, codebook_size: int = CODEBOOK_SIZE):
    """(Qwen3ForCausalLM, tokenizer) in memory, fp32 on the CPU, without saving them."""
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    tokenizer = planner_tokenizer(codebook_size)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.pad_token_id,  # Qwen3's configs: bos = <|endoftext|>
        eos_token_id=tokenizer.eos_token_id,  # <|im_end|> ends the planner's turn
        pad_token_id=tokenizer.pad_token_id,
        **TINY_PLANNER_CONFIG,
    )
    with torch.random.fork_rng(devices=[]):  # the caller's random state is left as it was
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(config).eval()
    # No sampling defaults in the folder: generate() then takes exactly what the caller passes.
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id,
        eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
    )
    return model, tokenizer


def planner_tokenizer(codebook_size: int = CODEBOOK_SIZE):
    """A Qwen2 byte-level BPE tokenizer with the planner's special and code tokens."""
    from transformers import AddedToken, Qwen2Tokenizer

    bytes_only = Qwen2Tokenizer(
        vocab={char: i for i, char in enumerate(_byte_alphabet())},
        merges=[],
        unk_token=None,
        bos_token=None,
        model_max_length=TINY_PLANNER_CONFIG["max_position_embeddings"],
    )
    # tokenizers' own BPE trainer (deterministic); the byte alphabet stays, so any text encodes.
    tokenizer = bytes_only.train_new_from_iterator(list(_CORPUS), vocab_size=TEXT_VOCAB)
    # After the text vocabulary, one at a time in Qwen3's order (ids ascending).
    tokenizer.add_special_tokens({"pad_token": "<|endoftext|>"})
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>"]})
    tokenizer.add_special_tokens({"eos_token": "<|im_end|>"})
    think = [AddedToken(t, special=False, normalized=False) for t in ("<think>", "</think>")]
    tokenizer.add_tokens(think)
    codes = [
        AddedToken(CODE_TOKEN.format(n), special=True, normalized=False)
        for n in range(codebook_size)
    ]
    tokenizer.add_tokens(codes, special_tokens=True)
    tokenizer.chat_template = QWEN3_CHAT_TEMPLATE
    return tokenizer


class _TinyPlanner:
    """The model and tokenizer saved together, as `write_tiny` saves a pipeline."""

    def __init__(self, model, tokenizer):
        self.model, self.tokenizer = model, tokenizer

    def save_pretrained(self, folder: Path, safe_serialization: bool = True) -> None:
        self.model.save_pretrained(folder, safe_serialization=safe_serialization)
        self.tokenizer.save_pretrained(folder)


def _config_hash(seed: int) -> str:
    spec = {
        "format": FORMAT,
        "seed": seed,
        "config": TINY_PLANNER_CONFIG,
        "text_vocab": TEXT_VOCAB,
        "codebook_size": CODEBOOK_SIZE,
        "corpus": _CORPUS,
        "chat_template": QWEN3_CHAT_TEMPLATE,
    }
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def _marker(planner: _TinyPlanner, seed: int, config_hash: str) -> dict:
    import transformers

    return {
        "family": "ace-step",
        "part": "planner",
        "format": FORMAT,
        "seed": seed,
        "config_hash": config_hash,
        "config": TINY_PLANNER_CONFIG,
        "codebook_size": CODEBOOK_SIZE,
        "vocab_size": len(planner.tokenizer),
        "parameters": sum(p.numel() for p in planner.model.parameters()),
        "made_with": {"torch": torch.__version__, "transformers": transformers.__version__},
    }
