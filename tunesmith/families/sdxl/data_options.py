"""The data settings of an SDXL run's `[runs.train]` table, as kohya's sd-scripts names them.

    [runs.train]
    buckets = true              # kohya's enable_bucket
    min_bucket_reso = 256
    max_bucket_reso = 2048
    bucket_reso_steps = 64
    bucket_no_upscale = false
    max_token_length = 150      # None (or 75), 150, 225
    caption_dropout_rate = 0.1
    shuffle_caption = true
    keep_tokens = 1
    caption_separator = ","
    caption_tag_dropout_rate = 0.0
    flip_aug = true
    masked_loss = true

`SdxlDataOptions` holds them, a frozen dataclass mixin for the family's train section; every
default trains what a run without them trains (one square of `size`, the caption as written,
77 tokens, no flip, no mask), and `LATER` lists those defaults so that a run keeps its key.
`options(train)` reads them from any train section (a missing field is its default), and
`problems(train)` checks what one field's type cannot.

The meaning of each, and where it comes from: docs of buckets.py, captions.py, masks.py.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

from tunesmith.train.schema import Count, Fraction, Whole

# kohya's SDXL scripts check that bucket_reso_steps divides by 32 (sdxl_train_network.py,
# verify_bucket_reso_steps(32)): the VAE halves a side three times and the UNet twice more.
BUCKET_STEP_DIVISOR = 32
TOKEN_LENGTHS = (75, 150, 225)  # kohya's --max_token_length choices (None is 75)


@dataclass(frozen=True)
class SdxlDataOptions:
    # Aspect-ratio buckets (kohya's train_util.BucketManager); off: one square of `size`.
    buckets: bool = False  # kohya's enable_bucket
    min_bucket_reso: Count = 256  # kohya's default
    max_bucket_reso: Count = 2048  # kohya's default is 1024; 2048 lets SDXL's 1024² area
    # reach its wide buckets (kohya's SDXL guides use 2048)
    bucket_reso_steps: Count = 64  # kohya's default
    bucket_no_upscale: bool = False  # kohya's default
    # Captions (kohya's train_util.BaseDataset.process_caption and its SDXL token chunks).
    max_token_length: Literal[75, 150, 225] | None = None  # None: 75 tokens, one chunk
    caption_dropout_rate: Fraction = 0.0
    shuffle_caption: bool = False
    keep_tokens: Whole = 0
    caption_separator: str = ","  # kohya's default
    caption_tag_dropout_rate: Fraction = 0.0
    # How many shuffled or tag-dropped versions of each caption are encoded (tunesmith's
    # own: kohya encodes a new one every step; captions.py says why and what it costs).
    caption_variants: Count = 8
    # Flips and masks (kohya's flip_aug and masked_loss with alpha_mask).
    flip_aug: bool = False
    masked_loss: bool = False


DEFAULTS = SdxlDataOptions()
NAMES = tuple(f.name for f in fields(SdxlDataOptions))
# The settings at the defaults that train as before (`ConfigSections.later`, section "train").
LATER = {"train": {name: getattr(DEFAULTS, name) for name in NAMES}}


def options(train) -> SdxlDataOptions:
    """The data settings of a run's train section; a field it lacks takes its default."""
    return SdxlDataOptions(**{n: getattr(train, n, getattr(DEFAULTS, n)) for n in NAMES})


def tokens_of(option: SdxlDataOptions) -> int:
    """The caption's length in text tokens: 75 (one chunk of CLIP's 77), 150 or 225."""
    return option.max_token_length or 75


def varied(option: SdxlDataOptions) -> bool:
    """Whether captions are shuffled or lose tags: each caption is encoded in variants."""
    return option.shuffle_caption or option.caption_tag_dropout_rate > 0


def problems(train, where: str = "") -> list[str]:
    """One line per data setting of `train` that cannot be used (kohya's own checks)."""
    o = options(train)
    at = f"{where}: " if where else ""
    found = []
    if o.buckets:
        if o.bucket_reso_steps % BUCKET_STEP_DIVISOR:
            found.append(
                f"{at}train.bucket_reso_steps = {o.bucket_reso_steps}: must be a multiple of "
                f"{BUCKET_STEP_DIVISOR} for SDXL (kohya's check)"
            )
        if not o.bucket_no_upscale:
            from tunesmith.families.sdxl.buckets import BucketRules

            rules = BucketRules.of(train.size, o)
            if rules.min_reso > train.size:
                found.append(
                    f"{at}train.min_bucket_reso = {o.min_bucket_reso} is over train.size = "
                    f"{train.size}: lower it or raise the size"
                )
            if rules.max_reso < train.size:
                found.append(
                    f"{at}train.max_bucket_reso = {o.max_bucket_reso} is under train.size = "
                    f"{train.size}: raise it or lower the size"
                )
    if o.max_token_length not in (None, *TOKEN_LENGTHS):
        found.append(f"{at}train.max_token_length = {o.max_token_length}: None, 75, 150 or 225")
    if not o.caption_separator:
        found.append(f'{at}train.caption_separator is empty: a separator like "," is needed')
    return found
