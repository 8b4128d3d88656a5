"""Captions as kohya's sd-scripts trains SDXL on them: long captions, dropout, shuffled tags.

Long captions (`max_token_length` 150 or 225; None or 75 is CLIP's one window). kohya's
`strategy_base.TokenizeStrategy._get_input_ids` and `strategy_sdxl.SdxlTextEncodingStrategy`:
the caption is tokenized to max_token_length + 2 tokens (cut there), split into chunks of 75
text tokens, each given the beginning-of-text token before and one token after (the
tokenizer's end-of-text or padding; where the text goes on past the chunk, end-of-text; an
empty chunk of the second tokenizer, which pads with "!", starts with end-of-text), each
chunk run through both text encoders (the penultimate hidden states), and the chunks'
states put back in one sequence: the first chunk's beginning token, the 75 text positions of
every chunk, the last chunk's final token (152 or 227 positions). The pooled embedding is the
first chunk's (kohya: `pool2[::n_size]`). `model.encode_long_captions` does it; 75 tokens is
exactly the pipeline's `encode_prompt`.

A caption longer than its tokens loses the rest; the encoded stage's report has one line per
picture whose caption was cut, with the tokens lost (transformers' and diffusers' own
warnings are not printed).

Variants (`shuffle_caption`, `keep_tokens`, `caption_separator`, `caption_tag_dropout_rate`):
kohya's `train_util.BaseDataset.process_caption`: the caption split at the separator, each
tag stripped; the first `keep_tokens` stay in front; the rest are shuffled, then each dropped
with probability `caption_tag_dropout_rate`; joined again with ", ". kohya draws a new one every
step and runs the text encoders on it. Here, with frozen text encoders (the default), they run
in the encoded stage only (the trainer holds none, and an encoder is not linear, so a shuffled
caption's encoding cannot be put together from its tags' encodings): each caption is drawn
`caption_variants` times (8 by default) from a generator seeded with the run's seed and the
caption, each variant is encoded once (an entry keyed by its text: a variant two captions or
two runs share is encoded once) and the trainer picks one of the caption's variants at every
step (`pick_caption`). The cost: up to `caption_variants` text encodings and entries per
caption (SDXL's is 77 x 2048 float32, 0.6 MB; 1.2 and 1.8 MB at 150 and 225 tokens), and a
caption is seen in at most that many orders where kohya's would see a new one each epoch.
Duplicates are kept in the list, so each variant is picked as often as kohya's generator
would give it (a caption whose tags are rarely dropped is mostly whole). A run that trains the
text encoders (`train_text_encoder`) runs them on the picked variant's text at every step.

Caption dropout (`caption_dropout_rate`): at each step, with that probability, the empty
caption instead of the picture's (kohya's dropout, decided before the tags are shuffled). The
empty caption is encoded once, an entry like any other.

Not handled: kohya's `keep_tokens_separator`, `secondary_separator`, wildcards, caption
prefix and suffix, token warm-up and dropout every n epochs; a caption of several lines is
used whole (kohya takes its first line).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

WINDOW = 77  # CLIP's context: the beginning token, 75 text tokens, the end token
CHUNK = WINDOW - 2
JOIN = ", "  # kohya joins the tags with ", " whatever the separator


@dataclass(frozen=True)
class Prompt:
    """A caption to encode: its text and its length in text tokens (75, 150 or 225)."""

    text: str
    tokens: int = CHUNK

    @property
    def chunks(self) -> int:
        return self.tokens // CHUNK

    @property
    def positions(self) -> int:
        """The encoded sequence's length: 77, 152 or 227."""
        return self.tokens + 2


def process_caption(caption: str, option: Any, rng: random.Random) -> str:
    """One variant of `caption` (kohya's `process_caption`, its shuffle and tag dropout):
    `option` holds shuffle_caption, keep_tokens, caption_separator, caption_tag_dropout_rate."""
    if not (option.shuffle_caption or option.caption_tag_dropout_rate > 0):
        return caption
    tags = [t.strip() for t in caption.strip().split(option.caption_separator)]
    fixed, flex = [], tags[:]
    if option.keep_tokens > 0:
        fixed, flex = flex[: option.keep_tokens], tags[option.keep_tokens :]
    if option.shuffle_caption:
        rng.shuffle(flex)
    if option.caption_tag_dropout_rate > 0:
        flex = [t for t in flex if rng.random() >= option.caption_tag_dropout_rate]
    return JOIN.join(fixed + flex)


def variants(caption: str, option: Any, seed: int) -> list[str]:
    """The caption's `option.caption_variants` variants, drawn in order from a generator
    seeded with (seed, caption); [caption] where nothing varies it."""
    if not (option.shuffle_caption or option.caption_tag_dropout_rate > 0):
        return [caption]
    rng = random.Random(f"{seed}\0{caption}")  # a string seed: the same in every process
    return [process_caption(caption, option, rng) for _ in range(option.caption_variants)]


def prompts(caption: str, option: Any, tokens: int, seed: int) -> dict[str, Prompt]:
    """What a picture's row needs encoded: its caption as written ("caption", for validation
    and where nothing varies), its variants ("variant_<i>") where they vary, and the empty
    caption ("empty") where it drops out."""
    found = {"caption": Prompt(caption, tokens)}
    if option.shuffle_caption or option.caption_tag_dropout_rate > 0:
        for i, text in enumerate(variants(caption, option, seed)):
            found[f"variant_{i}"] = Prompt(text, tokens)
    if option.caption_dropout_rate > 0:
        found["empty"] = Prompt("", tokens)
    return found


def pick_caption(count: int, dropout_rate: float, generator: torch.Generator) -> int | None:
    """The trainer's pick at one step: the index of one of `count` variants, or None for the
    empty caption (with probability `dropout_rate`). Two draws from `generator` every time,
    whatever is picked, so the draws after it do not depend on the pick."""
    import torch

    dropped = torch.rand((), generator=generator).item() < dropout_rate
    index = int(torch.randint(count, (), generator=generator))
    return None if dropped else index


def truncation_line(path: str, value: dict, max_token_length: int | None) -> str:
    """The report's line for a picture whose caption was cut at its tokens ("" when nothing
    was lost); `value` is the caption entry's value.json."""
    lost = int(value.get("tokens", 0)) - int(value.get("kept", 0))
    if lost <= 0:
        return ""
    if max_token_length in (None, CHUNK):
        why = "CLIP's 77-token window; train.max_token_length = 150 or 225 keeps more"
    else:
        why = f"train.max_token_length = {max_token_length}"
    return (
        f"{path}: its caption is {value['tokens']} tokens; the {lost} past the first "
        f"{value['kept']} are cut off ({why}): {value.get('lost', '')!r}"
    )
