"""The text encoder's inputs as ACE-Step 1.5 formats them for training, and the trigger rules.

ACE-Step 1.5 conditions its DiT on two strings per song, and training must format them exactly
as inference does (a different header shifts every token the encoders saw):

- the caption string: the SFT template of ACE-Step 1.5's `acestep/constants.py`
  (`SFT_GEN_PROMPT`, the same in diffusers'
  `src/diffusers/pipelines/ace_step/pipeline_ace_step.py`) filled with the text-to-music
  instruction (`DEFAULT_DIT_INSTRUCTION`), the caption after the trigger rules, and the
  metas block of ACE-Step 1.5's training preprocessor
  (`acestep/training/dataset_builder_modules/preprocess_utils.py`, `build_metas_str`: bpm,
  timesignature, keyscale, duration, in that order, "N/A" where unknown) - the same lines
  diffusers' `AceStepPipeline._build_metadata_string` writes at inference;
- the lyrics string: `LYRIC_GEN_PROMPT` of the same `constants.py`, a `# Languages` header
  with the language code, then the lyrics; `[Instrumental]` where there are none.

The language is not in the caption's metas: ACE-Step 1.5 puts it in the lyrics header only.

The trigger rules are ACE-Step 1.5's dataset builder's (`dataset_builder_modules/models.py`,
`AudioSample.get_training_prompt`) as Side-Step applies them
(`sidestep_engine/data/preprocess_prompt.py`): `custom_tag` prepended, appended or replacing
the text; a `genre_ratio` percent of the items (chosen by `genre_items`) train on their genre
tags instead of their caption; a per-item `prompt_override` ("caption" / "genre") wins.

Not handled: the other tasks' instructions (repaint, cover, extract, lego, complete).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

# ACE-Step 1.5 acestep/constants.py. The newline between each section title and its content,
# and the `<|endoftext|>` terminators, are part of what the text encoder was trained on.
SFT_GEN_PROMPT = "# Instruction\n{}\n\n# Caption\n{}\n\n# Metas\n{}<|endoftext|>\n"
LYRIC_GEN_PROMPT = "# Languages\n{}\n\n# Lyric\n{}<|endoftext|>"
DEFAULT_DIT_INSTRUCTION = "Fill the audio semantic mask based on the given conditions:"
INSTRUMENTAL = "[Instrumental]"  # the lyrics of a song without any (ACE-Step 1.5, Side-Step)

# ACE-Step 1.5 acestep/constants.py VALID_LANGUAGES: the codes the lyric header takes.
LANGUAGES = frozenset(
    "ar az bg bn ca cs da de el en es fa fi fr he hi hr ht hu id is it ja ko la lt ms ne nl no "
    "pa pl pt ro ru sa sk sr sv sw ta te th tl tr uk ur vi yue zh unknown".split()
)
TAG_POSITIONS = ("prepend", "append", "replace")
GENRE_RATIO = 30  # percent of items captioned by their genre tags: HOT-Step's default
GENRE_SEED = 42  # ACE-Step 1.5's and Side-Step's fixed seed for choosing those items


@dataclass(frozen=True)
class Metas:
    """The song facts the caption string carries. None where unknown ("N/A")."""

    bpm: float | None = None  # written rounded to an integer, as ACE-Step's bpm field is
    keyscale: str | None = None  # "A minor", "F# major"
    timesignature: str | None = None  # beats a bar, "4"; "4/4" is accepted and written as "4"
    duration: float = 0.0  # seconds of audio the latents cover; written as whole seconds


def metas_block(metas: Metas) -> str:
    """The `# Metas` section: four "- key: value" lines in ACE-Step 1.5's order."""
    bpm = str(int(round(metas.bpm))) if metas.bpm and metas.bpm > 0 else "N/A"
    timesignature = _timesignature(metas.timesignature)
    keyscale = metas.keyscale.strip() if metas.keyscale and metas.keyscale.strip() else "N/A"
    # int() truncates, as ACE-Step's integer `duration` field and diffusers' `int(duration)` do.
    return (
        f"- bpm: {bpm}\n"
        f"- timesignature: {timesignature}\n"
        f"- keyscale: {keyscale}\n"
        f"- duration: {int(metas.duration)} seconds\n"
    )


def _timesignature(value: str | None) -> str:
    """ACE-Step writes the beats a bar ("3" for 3/4, "6" for 6/8); "N/A" when unknown."""
    if value is None or not str(value).strip():
        return "N/A"
    beats = str(value).strip().split("/")[0].strip()
    if not beats.isdigit():
        raise ValueError(f"timesignature {value!r}: expected beats a bar such as '4' or '3/4'")
    return beats


def caption_text(caption: str, metas: Metas, instruction: str = DEFAULT_DIT_INSTRUCTION) -> str:
    """The string the text encoder reads for a song's caption (triggers already applied)."""
    if not instruction.endswith(":"):  # the pipeline adds the colon too (`_format_prompt`)
        instruction += ":"
    return SFT_GEN_PROMPT.format(instruction, caption, metas_block(metas))


def lyrics_text(lyrics: str | None, language: str) -> str:
    """The string whose token embeddings the lyric encoder reads: language header + lyrics."""
    if language not in LANGUAGES:
        raise ValueError(
            f"language {language!r} is not one ACE-Step 1.5 knows; expected one of "
            f"{', '.join(sorted(LANGUAGES))}"
        )
    body = lyrics.strip() if lyrics and lyrics.strip() else INSTRUMENTAL
    return LYRIC_GEN_PROMPT.format(language, body)


def apply_trigger(text: str, custom_tag: str, tag_position: str) -> str:
    """`custom_tag` put before ("tag, text"), after ("text, tag") or instead of `text`."""
    if tag_position not in TAG_POSITIONS:
        raise ValueError(
            f"tag_position {tag_position!r}: expected one of {', '.join(TAG_POSITIONS)}"
        )
    if not custom_tag:
        return text
    if tag_position == "replace" or not text:
        return custom_tag
    return f"{custom_tag}, {text}" if tag_position == "prepend" else f"{text}, {custom_tag}"


def training_caption(
    caption: str,
    genre: str,
    use_genre: bool,
    custom_tag: str = "",
    tag_position: str = "prepend",
    prompt_override: str | None = None,
) -> str:
    """The caption one item trains with: its caption or genre tags, then the trigger.

    `prompt_override` ("caption" or "genre", from Side-Step's dataset.json) decides for the
    item; otherwise `use_genre` (see `genre_items`). An item with no genre tags keeps its
    caption (Side-Step's `genre or caption`; ACE-Step's builder would train on an empty text).
    """
    if prompt_override not in (None, "caption", "genre"):
        raise ValueError(f"prompt_override {prompt_override!r}: expected 'caption' or 'genre'")
    if prompt_override == "genre":
        text = genre
    elif prompt_override == "caption" or not use_genre:
        text = caption
    else:
        text = genre or caption
    return apply_trigger(text, custom_tag, tag_position)


def genre_items(count: int, genre_ratio: float = GENRE_RATIO) -> frozenset[int]:
    """Indices (of `count` items in dataset order) that train on their genre tags.

    floor(count * ratio / 100) of them, chosen by shuffling the indices with a seeded
    `random.Random(42)`: the selection ACE-Step 1.5's `select_genre_indices` and Side-Step's
    make, so the same dataset picks the same items in all three.
    """
    if not 0 <= genre_ratio <= 100:
        raise ValueError(f"genre_ratio {genre_ratio!r}: expected a percentage from 0 to 100")
    chosen = int(count * genre_ratio / 100)
    if chosen == 0:
        return frozenset()
    indices = list(range(count))
    random.Random(GENRE_SEED).shuffle(indices)
    return frozenset(indices[:chosen])
