"""Training examples for the planner LM: an item's labels and audio codes in the planner format.

The prompt is what ACE-Step 1.5 sends its planner (`acestep/llm_inference.py`,
`build_formatted_prompt`), rendered through the planner's own chat template:

    system     "# Instruction\\nGenerate audio semantic tokens based on the given conditions:\\n\\n"
    user       "# Caption\\n{caption}\\n\\n# Lyric\\n{lyrics}\\n"
    generation prompt "<|im_start|>assistant\\n"

The answer is the assistant turn ACE-Step's second phase continues from
(`build_formatted_prompt_with_cot`): `<think>\\n{metas}\\n</think>\\n\\n`, then one
`<|audio_code_N|>` per 0.2 s, then `<|im_end|>`. The metas are a YAML mapping with sorted keys,
written by PyYAML exactly as ACE-Step's `_format_metadata_as_cot` writes them (bpm, caption,
duration, genres, keyscale, language, timesignature; missing ones left out; `genres` is in the
format ACE-Step's `parse_lm_output` documents, and is written only when the labels have
genres). HOT-Step's `engine/src/prompt.h` and Side-Step's `sidestep_engine/lm/prompts.py`
build the same bytes by hand; Side-Step trains the whole answer (`loss_on_cot`) with the
prompt masked, as here (labels -100 on the prompt).

Lyrics: `[Instrumental]` when there are none (ACE-Step's convention). The caption in both the
prompt and the metas is the trained caption: the trigger applied (text.apply_trigger), or the
trigger alone for an item whose caption is dropped this epoch (`caption_dropped`).

Not handled: the unconditional (CFG) prompts, the understanding/inspiration instructions.
"""

from __future__ import annotations

import random
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from tunesmith.families.ace_step.text import INSTRUMENTAL, apply_trigger
from tunesmith.families.ace_step_planner.model import PlannerVocab

LM_INSTRUCTION = "Generate audio semantic tokens based on the given conditions:"  # constants.py
IGNORE = -100  # the label of a prompt token: cross-entropy skips it (torch's ignore_index)
CODES_PER_SECOND = 5  # one FSQ code per 5 latent frames at 25 Hz


@dataclass(frozen=True)
class PlannerExample:
    """One item as the planner trains on it."""

    item: str
    input_ids: tuple[int, ...]
    labels: tuple[int, ...]  # IGNORE on the prompt, the token itself on the answer
    prompt_tokens: int
    caption: str  # the caption trained with (trigger applied, or the trigger alone)
    warnings: tuple[str, ...] = ()

    @property
    def answer_tokens(self) -> int:
        return len(self.input_ids) - self.prompt_tokens


def messages(caption: str, lyrics: str | None) -> list[dict[str, str]]:
    """The system and user turns of ACE-Step's planner prompt."""
    body = lyrics.strip() if lyrics and lyrics.strip() else INSTRUMENTAL
    return [
        {"role": "system", "content": f"# Instruction\n{LM_INSTRUCTION}\n\n"},
        {"role": "user", "content": f"# Caption\n{caption}\n\n# Lyric\n{body}\n"},
    ]


def prompt_text(tokenizer, caption: str, lyrics: str | None) -> str:
    """The prompt string: the two turns and the generation prompt, by the chat template."""
    return tokenizer.apply_chat_template(
        messages(caption, lyrics), tokenize=False, add_generation_prompt=True
    )


def think_text(labels: Mapping, caption: str) -> str:
    """`<think>\\n{yaml}\\n</think>`: the metas as ACE-Step writes them (sorted, no empties)."""
    import yaml  # PyYAML: ACE-Step dumps the metas with it, so its line wrapping is the same

    metas = {
        "bpm": _positive_int(labels.get("bpm")),
        "caption": caption.strip() or None,
        "duration": _positive_int(labels.get("duration")),
        "genres": _genres(labels.get("genres")),
        "keyscale": _text(labels.get("keyscale")),
        "language": _text(labels.get("language")),
        "timesignature": _beats(labels.get("timesignature")),
    }
    present = {k: v for k, v in metas.items() if v is not None}
    body = yaml.dump(present, allow_unicode=True, sort_keys=True).strip() if present else ""
    return f"<think>\n{body}\n</think>"


def answer_head(tokenizer, caption: str, lyrics: str | None, think: str) -> str:
    """The answer up to the codes (`<think>...</think>\\n\\n`), rendered by the chat template as
    the final assistant turn; the template's closing `<|im_end|>\\n` is cut, since the codes
    and the planner's own `<|im_end|>` follow."""
    prompt = prompt_text(tokenizer, caption, lyrics)
    turns = messages(caption, lyrics) + [{"role": "assistant", "content": think}]
    full = tokenizer.apply_chat_template(turns, tokenize=False)
    close = "<|im_end|>\n"
    if not full.startswith(prompt) or not full.endswith(close):
        raise ValueError("the tokenizer's chat template does not render Qwen3's assistant turn")
    return full[len(prompt) : -len(close)]


def caption_dropped(rate: float, seed: int, epoch: int, index: int) -> bool:
    """Whether item `index` trains on the trigger alone in `epoch`: a seeded draw per item and
    epoch, so a run repeats and every epoch drops a different subset."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"caption dropout {rate!r}: expected a rate from 0 to 1")
    return rate > 0 and random.Random(f"{seed}:{epoch}:{index}").random() < rate


def build_example(
    tokenizer,
    vocab: PlannerVocab,
    item: str,
    labels: Mapping,
    codes: Sequence[int] | torch.Tensor,
    context: int,
    trigger: str = "",
    tag_position: str = "prepend",
    drop_caption: bool = False,
) -> PlannerExample:
    """One item's prompt and answer as token ids, the prompt masked.

    An example longer than `context` is cut at the end, with a warning saying by how many
    tokens; a cut example ends without `<|im_end|>` (its song did not end there), as HOT-Step
    leaves the stop token unsupervised on songs its preprocessing cut. Codes must already be
    checked (model.check_codes); a code outside the codebook raises IndexError.
    """
    caption = str(labels.get("caption") or "")
    caption = trigger if drop_caption and trigger else apply_trigger(caption, trigger, tag_position)
    if drop_caption and not trigger:
        caption = ""
    lyrics = labels.get("lyrics")
    prompt = tokenizer(prompt_text(tokenizer, caption, lyrics), add_special_tokens=False)
    head = answer_head(tokenizer, caption, lyrics, think_text(labels, caption))
    head_ids = tokenizer(head, add_special_tokens=False)["input_ids"]
    code_ids = vocab.code_ids[torch.as_tensor(_codes(codes), dtype=torch.long)].tolist()
    prompt_ids = list(prompt["input_ids"])
    ids = prompt_ids + head_ids + code_ids + [vocab.im_end]
    warnings = list(_language_warnings(item, lyrics, labels.get("language")))
    if len(ids) > context:
        cut = len(ids) - context
        warnings.append(
            f"{item}: {len(ids)} tokens, {cut} more than the planner's context of {context}; "
            f"the last {cut} answer tokens are cut (about {cut / CODES_PER_SECOND:.1f} s of codes)"
        )
        ids = ids[:context]
    if len(ids) <= len(prompt_ids):
        raise ValueError(f"{item}: the prompt alone fills the planner's context of {context}")
    labels_out = [IGNORE] * len(prompt_ids) + ids[len(prompt_ids) :]
    return PlannerExample(
        item, tuple(ids), tuple(labels_out), len(prompt_ids), caption, tuple(warnings)
    )


def _codes(codes: Sequence[int] | torch.Tensor) -> list[int]:
    if isinstance(codes, torch.Tensor):
        return [int(c) for c in codes.reshape(-1).tolist()]
    return [int(c) for c in codes]


def _positive_int(value) -> int | None:
    try:
        number = int(float(value))
    except (TypeError, ValueError):
        return None
    # int() truncates, as ACE-Step's integer bpm and duration fields do
    return number if number > 0 else None


def _text(value) -> str | None:
    text = str(value).strip() if value is not None else ""
    return text or None


def _genres(value) -> str | None:
    if isinstance(value, (list, tuple)):
        value = ", ".join(str(v).strip() for v in value if str(v).strip())
    return _text(value)


def _beats(value) -> int | None:
    """Beats a bar: "4/4" -> 4, as the planner writes it (ACE-Step drops "/4"; HOT-Step keeps
    the numerator of any signature, and so do the DiT's metas in text.py)."""
    text = _text(value)
    if text is None:
        return None
    beats = text.split("/")[0].strip()
    return int(beats) if beats.isdigit() and int(beats) > 0 else None


# The writing systems a declared language is written in. A language-identification model would
# tell English from Spanish too, but none is a dependency here, and the mistake this catches is
# the common one (lyrics in one script, the dataset's language set for another).
_SCRIPTS = {
    "zh": {"CJK"},
    "yue": {"CJK"},
    "ja": {"CJK", "HIRAGANA", "KATAKANA"},
    "ko": {"HANGUL", "CJK"},
    "ru": {"CYRILLIC"},
    "uk": {"CYRILLIC"},
    "bg": {"CYRILLIC"},
    "sr": {"CYRILLIC", "LATIN"},
    "ar": {"ARABIC"},
    "fa": {"ARABIC"},
    "ur": {"ARABIC"},
    "he": {"HEBREW"},
    "hi": {"DEVANAGARI"},
    "ne": {"DEVANAGARI"},
    "sa": {"DEVANAGARI"},
    "bn": {"BENGALI"},
    "pa": {"GURMUKHI"},
    "ta": {"TAMIL"},
    "te": {"TELUGU"},
    "th": {"THAI"},
    "el": {"GREEK"},
}


def _language_warnings(item: str, lyrics: str | None, language) -> list[str]:
    """A warning when the lyrics' letters are mostly in a script the declared language is not
    written in. The item still trains, as declared."""
    language = _text(language)
    if not lyrics or not language or language == "unknown":
        return []
    expected = _SCRIPTS.get(language, {"LATIN"})
    counts: dict[str, int] = {}
    in_tag = False
    for char in lyrics:
        in_tag = (in_tag or char == "[") and char != "]"  # skip section tags like [Verse]
        if in_tag or not char.isalpha():
            continue
        script = unicodedata.name(char, "UNKNOWN").split(" ")[0]
        counts[script] = counts.get(script, 0) + 1
    if not counts:
        return []
    script, count = max(counts.items(), key=lambda kv: kv[1])
    if script in expected or count < 0.5 * sum(counts.values()):
        return []
    return [
        f"{item}: the lyrics are mostly {script.title()} script but the declared language is "
        f"{language!r}; trained as declared"
    ]
