"""Aspect-ratio buckets as kohya's sd-scripts makes them (`enable_bucket`).

Read from kohya-ss/sd-scripts: `library/model_util.py` `make_bucket_resolutions`,
`library/train_util.py` `BucketManager` (`select_bucket`, `get_crop_ltrb`),
`BaseDataset.make_buckets`/`shuffle_buckets`, `trim_and_resize_if_required`, and
`library/utils.py` `resize_image`. The rules, with `size` the side of the largest area
(kohya's `resolution`; the pixels of a bucket are at most size²):

- The buckets (`resolutions`): the square of side ⌊size / steps⌋·steps, and for every width w
  from `min_bucket_reso` to `max_bucket_reso` in steps of `bucket_reso_steps`, the height
  h = min(max, ⌊⌊size² / w⌋ / steps⌋·steps), kept (both (w, h) and (h, w)) where h ≥ min;
  sorted. `min_bucket_reso` is first rounded down and `max_bucket_reso` up to a multiple of
  the steps, as kohya adjusts them.
- A picture's bucket (`select`): the bucket equal to its size if there is one, else the one
  whose aspect ratio w/h is nearest its own (the first of the sorted list on a tie). It is
  scaled so that it covers the bucket (its height matched where it is wider than the bucket,
  else its width), each side rounded half up, then the middle of the bucket is cut from it.
- With `bucket_no_upscale` there is no list: a picture over size² pixels is first shrunk to
  that area (kohya's rounding of the side nearer its aspect ratio), one that is not keeps its
  size, and its bucket is each side rounded down to the steps; `min`/`max` are unused.
- Resizing: shrinking is the exact box mean (`images.box_shrink`, what OpenCV's INTER_AREA
  computes, kohya's filter for shrinking); enlarging is Pillow's Lanczos, as kohya enlarges.
- SDXL's conditioning (`BucketFit`): original size (h, w) of the picture; target size the
  bucket (h, w); crop top and left as kohya computes them (`get_crop_ltrb`, "according to
  the preprocessing of Stability AI"): the offsets, in the bucket, of the whole picture
  fitted inside it. These are not where the picture was cut (`cut_top`, `cut_left`): kohya's
  value for a picture cut at its left and right is a top offset (its users have asked about
  it; the code stands), and a LoRA trained here conditions as kohya's.
  A flipped picture's crop left is the bucket's width less the right edge (kohya's
  `__getitem__`).
- The order (`bucket_batches`): per epoch, the batches of each bucket (its pictures in runs of
  `batch_size`, the last one shorter) are shuffled together, then each bucket's pictures, from
  Python's `random` seeded with seed + epoch, as kohya's `shuffle_buckets` does. kohya
  shuffles the previous epoch's order again; here each epoch starts from the given order, so
  an epoch's batches depend only on (seed, epoch) and a resumed run needs no saved order.

No torch: the bucket a picture takes is known from its size before anything is decoded.
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from tunesmith.media import images

LANCZOS = Image.Resampling.LANCZOS  # kohya's resize_image enlarges with Pillow's Lanczos


@dataclass(frozen=True)
class BucketRules:
    """The bucket settings of a run: `size` the largest area's side."""

    size: int
    min_reso: int = 256
    max_reso: int = 2048
    steps: int = 64
    no_upscale: bool = False

    @classmethod
    def of(cls, size: int, option: Any) -> BucketRules:
        """From a run's size and data options (`data_options.SdxlDataOptions`), min and max
        rounded to the steps as kohya's `adjust_min_max_bucket_reso_by_steps` does."""
        steps = int(option.bucket_reso_steps)
        low, high = int(option.min_bucket_reso), int(option.max_bucket_reso)
        low -= low % steps
        if high % steps:
            high += steps - high % steps
        return cls(int(size), low, high, steps, bool(option.bucket_no_upscale))

    @property
    def max_area(self) -> int:
        return self.size * self.size

    def as_dict(self) -> dict:
        return {
            "size": self.size,
            "min": self.min_reso,
            "max": self.max_reso,
            "steps": self.steps,
            "no_upscale": self.no_upscale,
        }


def resolutions(rules: BucketRules) -> list[tuple[int, int]]:
    """The buckets (width, height), sorted (kohya's `make_bucket_resolutions`)."""
    area, steps = rules.max_area, rules.steps
    found = set()
    side = int(math.sqrt(area) // steps) * steps
    found.add((side, side))
    width = rules.min_reso
    while width <= rules.max_reso:
        height = min(rules.max_reso, int((area // width) // steps) * steps)
        if height >= rules.min_reso:
            found.add((width, height))
            found.add((height, width))
        width += steps
    return sorted(found)


@dataclass(frozen=True)
class BucketFit:
    """How one picture of width x height goes into its bucket (all in pixels)."""

    width: int  # the picture as displayed (EXIF orientation applied)
    height: int
    bucket: tuple[int, int]  # (width, height)
    resized: tuple[int, int]  # (width, height) before the cut
    cut_left: int  # where the bucket is cut from the resized picture
    cut_top: int
    crop_left: int  # SDXL's crop conditioning, as kohya computes it (module docstring)
    crop_top: int
    flipped_crop_left: int  # the same for the picture flipped left to right
    aspect_error: float  # the bucket's w/h less the picture's

    @property
    def enlarged(self) -> bool:
        return self.resized[0] > self.width or self.resized[1] > self.height

    @property
    def original_size(self) -> list[int]:
        return [self.height, self.width]

    @property
    def target_size(self) -> list[int]:
        return [self.bucket[1], self.bucket[0]]

    @property
    def crop_top_left(self) -> list[int]:
        return [self.crop_top, self.crop_left]

    @property
    def flipped_crop_top_left(self) -> list[int]:
        return [self.crop_top, self.flipped_crop_left]

    @property
    def cut_top_left(self) -> list[int]:
        return [self.cut_top, self.cut_left]

    def time_ids(self, flipped: bool = False) -> list[int]:
        """SDXL's six numbers: original (h, w), crop (top, left), target (h, w)."""
        crop = self.flipped_crop_top_left if flipped else self.crop_top_left
        return [*self.original_size, *crop, *self.target_size]


class BucketError(ValueError):
    """A picture no bucket fits (with `bucket_no_upscale`, a side under the steps)."""


def select(width: int, height: int, rules: BucketRules, table=None) -> BucketFit:
    """The bucket of a width x height picture, its resize and cut (kohya's `select_bucket`
    and `trim_and_resize_if_required`); `table` is `resolutions(rules)` where the caller has
    it already."""
    aspect = width / height
    if not rules.no_upscale:
        table = resolutions(rules) if table is None else table
        if (width, height) in table:
            bucket = (width, height)
        else:
            errors = [abs(w / h - aspect) for w, h in table]
            bucket = table[errors.index(min(errors))]  # the first of the smallest, as argmin
        if aspect > bucket[0] / bucket[1]:  # wider than the bucket: match the height
            scale = bucket[1] / height
        else:
            scale = bucket[0] / width
        resized = (int(width * scale + 0.5), int(height * scale + 0.5))
    else:
        if width * height > rules.max_area:
            resized = _shrunk_to_area(width, height, rules)
        else:
            resized = (width, height)
        bucket = (resized[0] - resized[0] % rules.steps, resized[1] - resized[1] % rules.steps)
        if not bucket[0] or not bucket[1]:
            raise BucketError(
                f"{width}x{height} has a side under bucket_reso_steps = {rules.steps}: no "
                "bucket fits it without enlarging (bucket_no_upscale)"
            )
    cut_left = (resized[0] - bucket[0]) // 2 if resized[0] > bucket[0] else 0
    cut_top = (resized[1] - bucket[1]) // 2 if resized[1] > bucket[1] else 0
    left, top, right = _crop_ltr(bucket, (width, height))
    return BucketFit(
        width,
        height,
        bucket,
        resized,
        cut_left,
        cut_top,
        int(left),
        int(top),
        int(bucket[0] - right),
        bucket[0] / bucket[1] - aspect,
    )


def _shrunk_to_area(width: int, height: int, rules: BucketRules) -> tuple[int, int]:
    """kohya's no-upscale shrink to the largest area: one side rounded to the steps, the
    side whose rounding keeps the aspect ratio nearer."""
    aspect = width / height
    area = rules.max_area
    new_w = math.sqrt(area * aspect)
    new_h = area / new_w

    def rounded(x: float) -> int:  # kohya's round_to_steps
        x = int(x + 0.5)
        return x - x % rules.steps

    by_w = rounded(new_w)
    h_of_w = rounded(by_w / aspect)
    by_h = rounded(new_h)
    w_of_h = rounded(by_h * aspect)
    error_w = abs(by_w / h_of_w - aspect) if h_of_w else math.inf
    error_h = abs(w_of_h / by_h - aspect) if by_h else math.inf
    if error_w < error_h:
        return by_w, int(by_w / aspect + 0.5)
    return int(by_h * aspect + 0.5), by_h


def _crop_ltr(bucket: tuple[int, int], size: tuple[int, int]) -> tuple[float, float, float]:
    """kohya's `get_crop_ltrb` (left, top, right), floats as it computes them."""
    bucket_aspect, aspect = bucket[0] / bucket[1], size[0] / size[1]
    if bucket_aspect > aspect:
        fitted_w, fitted_h = bucket[1] * aspect, bucket[1]
    else:
        fitted_w, fitted_h = bucket[0], bucket[0] / aspect
    left = (bucket[0] - fitted_w) // 2
    top = (bucket[1] - fitted_h) // 2
    return left, top, left + fitted_w


def fit_pixels(pixels: np.ndarray, fit: BucketFit, enlarge=LANCZOS) -> np.ndarray:
    """uint8 [H, W, C] (the picture's pixels, or a mask as one channel) resized and cut to
    the bucket: uint8 [bucket h, bucket w, C]; `enlarge` is the Pillow filter that enlarges
    (the square fit's is bicubic)."""
    if pixels.shape[:2] != (fit.height, fit.width):
        raise ValueError(f"pixels {pixels.shape[:2]} are not the fit's {fit.height}x{fit.width}")
    width, height = fit.resized
    if (width, height) == (fit.width, fit.height):
        resized = pixels
    elif width <= fit.width and height <= fit.height:
        resized = images.box_shrink(pixels, width, height)
    else:
        channels = [
            np.asarray(Image.fromarray(pixels[..., c]).resize((width, height), enlarge))
            for c in range(pixels.shape[2])
        ]
        resized = np.stack(channels, axis=-1)
    bw, bh = fit.bucket
    return resized[fit.cut_top : fit.cut_top + bh, fit.cut_left : fit.cut_left + bw].copy()


def fit_bucket(image: Image.Image, fit: BucketFit) -> np.ndarray:
    """uint8 [bucket h, bucket w, 3]: an RGB picture resized and cut to its bucket."""
    if fit.enlarged:  # Pillow's Lanczos on the RGB picture itself
        resized = np.asarray(image.convert("RGB").resize(fit.resized, LANCZOS))
        bw, bh = fit.bucket
        return resized[fit.cut_top : fit.cut_top + bh, fit.cut_left : fit.cut_left + bw].copy()
    return fit_pixels(np.asarray(image.convert("RGB"), dtype=np.uint8), fit)


def bucket_batches(
    buckets: Sequence[Hashable], batch_size: int, seed: int, epoch: int
) -> list[list[int]]:
    """One epoch's batches: indices into `buckets` (each picture's bucket), every batch of one
    bucket, in kohya's order for (seed, epoch) (module docstring)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    groups: dict[Hashable, list[int]] = {}
    for index, bucket in enumerate(buckets):
        groups.setdefault(bucket, []).append(index)
    order = sorted(groups)  # kohya sorts its buckets by resolution
    rng = random.Random(seed + epoch)  # kohya: random.seed(self.seed + self.current_epoch)
    batches = [(b, j) for b in order for j in range(math.ceil(len(groups[b]) / batch_size))]
    rng.shuffle(batches)
    for b in order:
        rng.shuffle(groups[b])
    return [groups[b][j * batch_size : (j + 1) * batch_size] for b, j in batches]


class BucketOrder:
    """Steps of one bucket each, epoch after epoch (`bucket_batches`), from epoch 1.

    Its state is (epoch, position): an epoch's batches are a function of the seed and the
    epoch, so `load_state_dict` needs nothing else to continue where a run stopped."""

    def __init__(self, buckets: Sequence[Hashable], batch_size: int, seed: int) -> None:
        self.buckets, self.batch_size, self.seed = list(buckets), batch_size, seed
        self.epoch, self.position, self._batches = 0, 0, []

    def next(self) -> list[int]:
        """The next step's item indices (all of one bucket)."""
        if self.position >= len(self._batches):
            self.epoch, self.position = self.epoch + 1, 0
            self._batches = bucket_batches(self.buckets, self.batch_size, self.seed, self.epoch)
        batch = self._batches[self.position]
        self.position += 1
        return batch

    @property
    def ends_pass(self) -> bool:
        return self.position >= len(self._batches)

    def steps_per_epoch(self) -> int:
        counts: dict[Hashable, int] = {}
        for bucket in self.buckets:
            counts[bucket] = counts.get(bucket, 0) + 1
        return sum(math.ceil(n / self.batch_size) for n in counts.values())

    def state(self, key: str) -> tuple[dict, dict]:
        """Its part of a trainer's state, as `tunesmith.train.order.Order.state` gives it:
        no tensors (no generator to keep), `state_dict()` as `<key>` and the `epoch`."""
        return {}, {key: self.state_dict(), "epoch": self.epoch}

    def load_state(self, tensors: dict, document: dict, key: str) -> None:
        self.load_state_dict(document[key])

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict) -> None:
        self.epoch, self.position = int(state["epoch"]), int(state["position"])
        self._batches = (
            bucket_batches(self.buckets, self.batch_size, self.seed, self.epoch)
            if self.epoch
            else []
        )
