"""ACE-Step 1.5's planner LM at the sizes people download: the three releases' config.json, and
the real class built from them (on `meta` for names and shapes, or with random weights to
measure).

The releases are `acestep-5Hz-lm-0.6B` (its own repository, `ACE-Step/acestep-5Hz-lm-0.6B`),
`acestep-5Hz-lm-1.7B` (inside `ACE-Step/Ace-Step1.5`) and `acestep-5Hz-lm-4B`, each a
Qwen3ForCausalLM fine-tuned from the Qwen3 of its size. Their config.json files were not found
in a readable copy, so each config here is the config.json of its base model (`Qwen/Qwen3-0.6B`,
`Qwen/Qwen3-1.7B`, `Qwen/Qwen3-4B`) with the planner's vocabulary: Qwen3's 151,669 tokens and
the 65,535 `<|audio_code_N|>` tokens after them (model.py), 217,204 rows. The sizes agree with
the releases' weights: bf16 `model.safetensors` of 1,325,804,024 bytes (0.6B) and
3,708,521,528 bytes (1.7B) as their repositories list them, which is 2 bytes times the
662,884,352 and 1,854,243,840 parameters these configs build (tied embeddings) plus a
safetensors header of 35,320 and 33,848 bytes. The 4B is published in two shards.

`build(name_or_config)` makes the causal LM: on `meta` (a second, nothing allocated) at
`dtype`; on another device under transformers' `no_init_weights` with its parameters drawn
from N(0, 0.02²) (the class's own init of billions of parameters takes minutes), so Qwen3's
rotary frequencies, a computed buffer, hold their values; the LM head tied to the embedding as
the releases have it. `write_planner` writes such a model
as a planner folder in the published layout with random bf16 weights and the tiny maker's
tokenizer carrying the releases' 65,535 code tokens (its text vocabulary is the tiny one's: its
ids all fall inside the 217,204 rows).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch

from tunesmith.families.base_model import default_dtype, fill_normal, quiet_loading, without_init

VOCAB = 217_204  # Qwen3's 151,669 tokens + 65,535 <|audio_code_N|> tokens
CODE_TOKENS = 65_535  # <|audio_code_0|> .. <|audio_code_65534|> in the releases (model.py)
INIT_STD = 0.02  # the random weights' spread (Qwen3's initializer_range)
SHARD = "5GB"  # the shard size the releases were saved with: the 4B's 8.4 GB in two files


def _qwen3(hidden: int, intermediate: int, layers: int, heads: int) -> dict:
    """A Qwen3 release's config.json (Qwen/Qwen3-0.6B, -1.7B, -4B) with the planner's
    vocabulary; the sizes differ between them, the rest is shared."""
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 151643,
        "eos_token_id": 151645,
        "head_dim": 128,
        "hidden_act": "silu",
        "hidden_size": hidden,
        "initializer_range": 0.02,
        "intermediate_size": intermediate,
        "max_position_embeddings": 40960,
        "max_window_layers": layers,
        "model_type": "qwen3",
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "num_key_value_heads": 8,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000,
        "sliding_window": None,
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": VOCAB,
    }


PUBLISHED: dict[str, dict] = {
    "acestep-5Hz-lm-0.6B": _qwen3(hidden=1024, intermediate=3072, layers=28, heads=16),
    "acestep-5Hz-lm-1.7B": _qwen3(hidden=2048, intermediate=6144, layers=28, heads=16),
    "acestep-5Hz-lm-4B": _qwen3(hidden=2560, intermediate=9728, layers=36, heads=32),
}


def config_of(name_or_config: str | Mapping) -> dict:
    """A planner's config.json as a dict: a release's by its folder name, or the dict given."""
    if isinstance(name_or_config, str):
        if name_or_config not in PUBLISHED:
            raise ValueError(f"no planner {name_or_config!r}; known: {', '.join(PUBLISHED)}")
        return dict(PUBLISHED[name_or_config])
    return dict(name_or_config)


def build(
    name_or_config: str | Mapping,
    device: str = "meta",
    dtype: torch.dtype = torch.bfloat16,
    seed: int = 0,
):
    """The planner's Qwen3ForCausalLM from a release's name or a config.json dict, in eval mode
    at `dtype` on `device` (module docstring: random weights from `seed` off `meta`)."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config.from_dict(config_of(name_or_config))
    with quiet_loading(), default_dtype(dtype), without_init(device):
        model = Qwen3ForCausalLM(config)
    model.tie_weights()  # the LM head is the embedding (no_init_weights leaves them apart)
    if device != "meta":
        fill_normal(model, INIT_STD, seed)
    return model.eval()


def write_planner(
    folder: Path,
    name_or_config: str | Mapping,
    seed: int = 0,
    code_tokens: int = CODE_TOKENS,
) -> Path:
    """Write a planner folder as the releases lay it out (config.json, model*.safetensors in
    5 GB shards, generation_config.json, the tokenizer files) with random bf16 weights; its
    tokenizer is the tiny maker's with `code_tokens` code tokens, and the config's special ids
    are that tokenizer's. Returns `folder`."""
    from transformers import GenerationConfig

    from tunesmith.families.ace_step_planner.tiny import planner_tokenizer

    tokenizer = planner_tokenizer(code_tokens)
    config = config_of(name_or_config)
    ids = {
        "bos_token_id": tokenizer.pad_token_id,  # Qwen3's configs: bos = <|endoftext|>
        "eos_token_id": tokenizer.eos_token_id,  # <|im_end|> ends the planner's turn
        "pad_token_id": tokenizer.pad_token_id,
    }
    if len(tokenizer) > config["vocab_size"]:
        raise ValueError(f"a tokenizer of {len(tokenizer)} ids for {config['vocab_size']} rows")
    model = build({**config, **ids}, device="cpu", seed=seed)
    model.generation_config = GenerationConfig(**ids)  # no sampling defaults, as the tiny one
    folder = Path(folder)
    with quiet_loading():
        model.save_pretrained(folder, safe_serialization=True, max_shard_size=SHARD)
    tokenizer.save_pretrained(folder)
    return folder
