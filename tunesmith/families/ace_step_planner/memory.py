"""A planner run's training step on the `meta` device, for the estimate of its peak memory
(`Family.memory`, `tunesmith.train.footprint`).

The trainer's step (trainer.py) takes one song at a time: the planner's forward over the song's
prompt and answer, the LM head over the answer positions only, the cross-entropy and its
backward (`TorchPlannerLora.answer_loss`). `memory` builds the planner the run names from its
config.json on `meta` at the placement's dtype, attaches the run's LoRA through
`TorchPlannerLora` as the trainer does (float32 factors), and its `step` runs that same
`answer_loss` on `meta` tensors as long as the run's longest example, with gradient
checkpointing as the run says.

The length is the items': with the run's encoded rows (`items`), the longest example the
trainer builds from them (each song's prompt and metas through the planner's own tokenizer,
one token per audio code, cut at the planner's context). Without them, the longest song
ACE-Step 1.5 makes (600 s: 3,000 codes) with a caption and lyrics as long as ACE-Step reads
them (256 and 2,048 tokens; the caption is in the prompt and again in the metas): over 5,560
tokens, where a 3-minute song is 900 codes and its prompt. A caller that has the run's items
should pass them. On a planner whose context is shorter than that, an example that fills the
context, with the longest answer beside the prompt.

Knobs: none. The planner learns whole songs' code sequences, and no setting shortens them: a
run that does not fit is refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from tunesmith.families.ace_step.config import MAX_DEMO_SECONDS
from tunesmith.families.ace_step.model import MAX_CAPTION_TOKENS, MAX_LYRICS_TOKENS
from tunesmith.families.ace_step_planner.data import CODES_PER_SECOND
from tunesmith.train.footprint import MemoryModel

LONGEST_SONG_CODES = int(MAX_DEMO_SECONDS) * CODES_PER_SECOND  # 600 s: ACE-Step 1.5's longest


def memory(run, base_model: Path, dtype: torch.dtype, items=None) -> MemoryModel:
    """The planner of `run` on `meta` with its LoRA, and its training step (module docstring);
    `items`: the run's encoded rows (a DataFrame), or None for the longest song."""
    from tunesmith.families.ace_step_planner.full_size import build
    from tunesmith.families.ace_step_planner.inputs import resolve_planner
    from tunesmith.families.ace_step_planner.model import Planner, load_tokenizer, planner_vocab
    from tunesmith.families.ace_step_planner.torch_lm import TorchPlannerLora

    folder = resolve_planner(run, base_model)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    tokenizer = load_tokenizer(folder)
    planner = Planner(
        folder,
        build(config, device="meta", dtype=dtype),
        tokenizer,
        planner_vocab(tokenizer, folder),
        int(config.get("max_position_embeddings") or 0),
    )
    tokens, answer = longest_example(planner, items)
    lora = TorchPlannerLora(planner, run.adapter.rank, run.adapter.scale_alpha, run.train.seed)

    def step(trial) -> None:
        lora.set_checkpointing(trial.train.gradient_checkpointing is True)
        ids = torch.zeros(1, tokens, dtype=torch.long, device="meta")
        rows = torch.zeros(answer, dtype=torch.long, device="meta")
        # a batch of one has no padding: no mask, as `TorchPlannerLora.loss` passes it
        lora.answer_loss(ids, None, rows, torch.zeros_like(rows)).backward()

    return MemoryModel({"planner": lora.model}, step)


def longest_example(planner, items=None) -> tuple[int, int]:
    """(tokens, answer tokens) of the longest example the trainer would build from `items`
    (the encoded rows; module docstring), or of the longest ACE-Step song when None."""
    from tunesmith.families.ace_step_planner.data import build_example
    from tunesmith.families.ace_step_planner.inputs import rows_with_codes

    def example(labels: dict, codes: int, context: int) -> tuple[int, int]:
        zeros = torch.zeros(codes, dtype=torch.long)  # the lengths matter, not the codes
        built = build_example(planner.tokenizer, planner.vocab, "", labels, zeros, context)
        return len(built.input_ids), built.answer_tokens

    rows = rows_with_codes(items.to_dict("records"))[0] if items is not None else []
    if rows:
        return max(
            example(json.loads(r["planner_labels"]), int(r["codes"]), planner.context) for r in rows
        )
    tokens, answer = example({}, LONGEST_SONG_CODES, context=2 * LONGEST_SONG_CODES)  # uncut
    prompt = tokens - answer  # the chat template's alone
    # A planner whose context is shorter holds the longest answer that fits beside the prompt.
    tokens = min(tokens + 2 * MAX_CAPTION_TOKENS + MAX_LYRICS_TOKENS, planner.context)
    return tokens, min(answer + MAX_CAPTION_TOKENS, tokens - prompt)
