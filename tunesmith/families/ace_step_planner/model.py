"""The planner LM's folder: what it must hold, loading it, and its audio-code vocabulary.

ACE-Step 1.5's "5 Hz LM" is a Qwen3 causal LM fine-tuned to write a song plan: a `<think>`
block of metas, then one `<|audio_code_N|>` token per 0.2 s. It is published as plain
`transformers` folders named `acestep-5Hz-lm-0.6B`, `-1.7B` and `-4B` (ACE-Step 1.5 loads them
with `AutoModelForCausalLM` / `AutoTokenizer.from_pretrained`, `acestep/llm_inference.py`;
Side-Step's `sidestep_engine/lm/train_lm.py` does the same):

    config.json                 Qwen3ForCausalLM (model_type "qwen3")
    model.safetensors           or model-0000N-of-0000M.safetensors + model.safetensors.index.json
    tokenizer.json              Qwen2 byte-level BPE with the audio-code tokens added
    tokenizer_config.json       (vocab.json + merges.txt in older saves)
    chat_template.jinja         Qwen3's chat template (inside tokenizer_config.json in older saves)
    generation_config.json      optional

In the releases the vocabulary is Qwen3's (151,669 tokens, `<think>` = 151667, `</think>` =
151668) followed by `<|audio_code_0|>` .. `<|audio_code_65534|>` from 151669 on, of which the
FSQ codebook uses the first 64,000. This module does not assume those numbers: it reads every
id from the folder's own tokenizer, so the tiny planner (200 codes) and the releases go through
the same code. A folder whose vocabulary has no audio-code tokens is a plain Qwen3, not a
planner, and is refused saying so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from tunesmith.families.base_model import quiet_loading

ARCHITECTURE = "Qwen3ForCausalLM"
CODE_TOKEN = "<|audio_code_{}|>"
_CODE_RE = re.compile(r"^<\|audio_code_(\d+)\|>$")
THINK, THINK_END, IM_START, IM_END = "<think>", "</think>", "<|im_start|>", "<|im_end|>"
_PICKLES = ("pytorch_model.bin", "model.pt", "model.ckpt", "pytorch_model.bin.index.json")


@dataclass(frozen=True)
class PlannerVocab:
    """Token ids the planner format needs, read from the folder's tokenizer."""

    code_ids: torch.Tensor  # [codebook] int64: code_ids[n] is the id of <|audio_code_n|>
    think: int
    think_end: int
    im_start: int
    im_end: int

    @property
    def codebook_size(self) -> int:
        return int(self.code_ids.shape[0])

    def code_of(self) -> dict[int, int]:
        """token id -> code, for reading generated tokens back."""
        return {int(token): code for code, token in enumerate(self.code_ids.tolist())}


@dataclass
class Planner:
    """A loaded planner: the causal LM, its tokenizer, its vocabulary and context length."""

    folder: Path
    model: torch.nn.Module  # transformers Qwen3ForCausalLM, eval mode
    tokenizer: object  # transformers tokenizer (AutoTokenizer)
    vocab: PlannerVocab
    context: int  # max_position_embeddings: the longest prompt + answer it takes


def check_planner(folder: Path) -> None:
    """Raise ValueError naming every problem of a planner folder's files (not its vocabulary)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"{folder}: not a folder; expected an acestep-5Hz-lm-* planner folder")
    problems = []
    config = _read_config(folder, problems)
    if config is not None:
        architectures = config.get("architectures") or []
        if ARCHITECTURE not in architectures and config.get("model_type") != "qwen3":
            problems.append(
                f"config.json describes {architectures or config.get('model_type')!r}; "
                f"the ACE-Step planner is a {ARCHITECTURE}"
            )
    weights = list(folder.glob("model*.safetensors"))
    if not weights:
        pickles = [name for name in _PICKLES if (folder / name).exists()]
        hint = f" (found {', '.join(pickles)}: pickled weights are never loaded)" if pickles else ""
        problems.append(f"no model*.safetensors weights{hint}")
    has_tokenizer = (folder / "tokenizer.json").is_file() or (
        (folder / "vocab.json").is_file() and (folder / "merges.txt").is_file()
    )
    if not has_tokenizer or not (folder / "tokenizer_config.json").is_file():
        problems.append("no tokenizer (tokenizer_config.json with tokenizer.json or vocab.json)")
    if problems:
        listed = "\n".join(f"  - {p}" for p in problems)
        raise ValueError(f"{folder} is not a usable ACE-Step 1.5 planner LM folder:\n{listed}")


def _read_config(folder: Path, problems: list[str]) -> dict | None:
    try:
        return json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        problems.append("no config.json")
    except (OSError, json.JSONDecodeError) as exc:
        problems.append(f"config.json is unreadable ({exc})")
    return None


def planner_vocab(tokenizer, folder: Path | str = "") -> PlannerVocab:
    """The planner's token ids; ValueError when the vocabulary is not a planner's.

    The codes must run from <|audio_code_0|> without a gap (the FSQ index is the offset).
    """
    vocab = tokenizer.get_vocab()  # includes the added tokens
    codes = {}
    for token, token_id in vocab.items():
        match = _CODE_RE.match(token)
        if match:
            codes[int(match.group(1))] = token_id
    if not codes:
        raise ValueError(
            f"{folder}: the tokenizer's vocabulary has no <|audio_code_N|> tokens, so this is not "
            "an ACE-Step 1.5 planner (acestep-5Hz-lm-*): a plain Qwen3 cannot write audio codes"
        )
    size = 0
    while size in codes:
        size += 1
    if size != len(codes):
        raise ValueError(
            f"{folder}: the audio-code tokens are not contiguous: <|audio_code_{size}|> is missing "
            f"but {len(codes)} code tokens exist"
        )
    missing = [t for t in (THINK, THINK_END, IM_START, IM_END) if t not in vocab]
    if missing:
        raise ValueError(f"{folder}: the tokenizer lacks {', '.join(missing)}")
    return PlannerVocab(
        code_ids=torch.tensor([codes[n] for n in range(size)], dtype=torch.long),
        think=vocab[THINK],
        think_end=vocab[THINK_END],
        im_start=vocab[IM_START],
        im_end=vocab[IM_END],
    )


def load_tokenizer(folder: Path):
    """The folder's tokenizer through AutoTokenizer, offline."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(Path(folder), local_files_only=True)


def load_planner(folder: Path, dtype: torch.dtype = torch.float32, device: str = "cpu") -> Planner:
    """Check `folder`, read its vocabulary (refusing one without audio codes), then load the
    causal LM from .safetensors only, offline, in eval mode."""
    from transformers import AutoModelForCausalLM

    folder = Path(folder)
    check_planner(folder)
    tokenizer = load_tokenizer(folder)
    vocab = planner_vocab(tokenizer, folder)
    with quiet_loading():
        model = AutoModelForCausalLM.from_pretrained(
            folder, dtype=dtype, use_safetensors=True, local_files_only=True
        )
    if model.get_input_embeddings().num_embeddings <= int(vocab.code_ids.max()):
        raise ValueError(
            f"{folder}: the model's embedding has {model.get_input_embeddings().num_embeddings} "
            f"rows but the tokenizer uses ids up to {int(vocab.code_ids.max())}"
        )
    context = int(getattr(model.config, "max_position_embeddings", 0) or 0)
    return Planner(folder, model.to(device).eval(), tokenizer, vocab, context)


def check_codes(
    items: Mapping[str, Sequence[int] | torch.Tensor], vocab: PlannerVocab
) -> tuple[list[str], list[str]]:
    """(items whose codes the planner can write, one message per item it cannot).

    A code outside the codebook names its item, its position and its value; the item is left
    out and the rest go through. An item with no codes at all is left out too.
    """
    good, problems = [], []
    for item, codes in items.items():
        values = _as_list(codes)
        if not values:
            problems.append(f"{item}: no audio codes")
            continue
        bad = next((i for i, c in enumerate(values) if not 0 <= c < vocab.codebook_size), None)
        if bad is None:
            good.append(item)
            continue
        problems.append(
            f"{item}: audio code {values[bad]} at position {bad} is outside the planner's "
            f"vocabulary (<|audio_code_0|> .. <|audio_code_{vocab.codebook_size - 1}|>); "
            "were the codes made with another base model's audio tokenizer?"
        )
    return good, problems


def _as_list(codes: Iterable[int] | torch.Tensor) -> list[int]:
    if isinstance(codes, torch.Tensor):
        return [int(c) for c in codes.reshape(-1).tolist()]
    return [int(c) for c in codes]
