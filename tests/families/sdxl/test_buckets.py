"""Aspect-ratio buckets as kohya's sd-scripts makes them: the list, a picture's bucket, its
resize, cut and SDXL conditioning, the pixels, and the order of one bucket a step."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

from tunesmith.families.sdxl import buckets
from tunesmith.families.sdxl.buckets import BucketOrder, BucketRules, bucket_batches, select
from tunesmith.families.sdxl.data_options import SdxlDataOptions, problems
from tunesmith.media import images

SDXL = BucketRules(1024, 256, 2048, 64, False)  # size 1024 and the settings' defaults


def kohya_list(size: int, low: int, high: int, steps: int) -> list[tuple[int, int]]:
    """library/model_util.py make_bucket_resolutions((size, size), low, high, steps), as read:
    the square of ⌊√area / steps⌋·steps, then for each width from low to high by steps the
    height min(high, ⌊⌊area / width⌋ / steps⌋·steps), both ways round where it is ≥ low."""
    area = size * size
    square = int(math.sqrt(area) // steps) * steps
    pairs = {(square, square)}
    for width in range(low, high + 1, steps):
        height = min(high, int((area // width) // steps) * steps)
        if height >= low:
            pairs |= {(width, height), (height, width)}
    return sorted(pairs)


def test_the_buckets_of_1024_are_kohyas():
    table = buckets.resolutions(SDXL)
    assert table == kohya_list(1024, 256, 2048, 64)
    # The ends and SDXL's best-known shapes, worked out by hand from the rules.
    assert table[0] == (256, 2048) and table[-1] == (2048, 512)
    for pair in [(1024, 1024), (1152, 896), (896, 1152), (1216, 832), (1344, 768), (1536, 640)]:
        assert pair in table
    assert all(w * h <= 1024 * 1024 and w % 64 == 0 and h % 64 == 0 for w, h in table)
    # max_bucket_reso 1024 (kohya's own default) keeps every side within 1024
    assert buckets.resolutions(BucketRules(1024, 256, 1024, 64)) == kohya_list(1024, 256, 1024, 64)


def test_min_and_max_are_rounded_to_the_steps_as_kohya_adjusts_them():
    option = SimpleNamespace(
        bucket_reso_steps=64, min_bucket_reso=300, max_bucket_reso=2000, bucket_no_upscale=False
    )
    rules = BucketRules.of(1024, option)
    assert (rules.min_reso, rules.max_reso) == (256, 2048)


def test_a_landscape_picture_is_enlarged_cut_and_conditioned_as_kohya_does():
    """1200 x 800 (3:2): nearest bucket 1216 x 832 (1.4615); wider than it, so its height is
    matched: x1.04 gives 1248 x 832, cut 16 from the left. kohya's crop conditioning is the
    fitted picture's offset inside the bucket: 1216 / 1.5 = 810.67 high, (832 - 810.67) // 2 =
    10 from the top."""
    fit = select(1200, 800, SDXL)
    assert fit.bucket == (1216, 832) and fit.resized == (1248, 832) and fit.enlarged
    assert (fit.cut_left, fit.cut_top) == (16, 0)
    assert fit.time_ids() == [800, 1200, 10, 0, 832, 1216]
    assert fit.time_ids(flipped=True) == [800, 1200, 10, 0, 832, 1216]
    shrunk = select(3000, 2000, SDXL)  # the same shape, shrunk
    assert shrunk.bucket == (1216, 832) and shrunk.resized == (1248, 832)
    assert not shrunk.enlarged and shrunk.time_ids()[2:] == [10, 0, 832, 1216]


def test_a_portrait_picture_and_its_flip():
    """800 x 1200: bucket 832 x 1216, width matched (832 x 1248, cut 16 from the top); the
    fitted picture is 810.67 wide, left (832 - 810.67) // 2 = 10, right 820.67; flipped, the
    left is 832 - 820.67 = 11.33, 11 as kohya's int() makes it."""
    fit = select(800, 1200, SDXL)
    assert fit.bucket == (832, 1216) and fit.resized == (832, 1248)
    assert (fit.cut_left, fit.cut_top) == (0, 16)
    assert fit.time_ids() == [1200, 800, 0, 10, 1216, 832]
    assert fit.time_ids(flipped=True) == [1200, 800, 0, 11, 1216, 832]


def test_a_picture_of_a_buckets_size_is_used_as_it_is():
    fit = select(1024, 1024, SDXL)
    assert (fit.bucket, fit.resized, fit.cut_left, fit.cut_top) == (
        (1024, 1024),
        (1024, 1024),
        0,
        0,
    )
    assert fit.time_ids() == [1024, 1024, 0, 0, 1024, 1024] and fit.aspect_error == 0


def test_without_upscaling_the_bucket_is_the_picture_rounded_down():
    rules = BucketRules(1024, 256, 2048, 64, no_upscale=True)
    small = select(500, 300, rules)  # under the area: kept, bucket 448 x 256, cut in the middle
    assert small.resized == (500, 300) and small.bucket == (448, 256)
    assert (small.cut_left, small.cut_top) == (26, 22) and not small.enlarged
    assert small.crop_top_left == [0, 10]  # 256 x 1.667 = 426.67 wide: (448 - 426.67) // 2
    # 4000 x 3000 is over the area: shrunk so that one side falls on the steps, the side whose
    # rounding keeps 4:3 nearer (kohya: 1088 / 832 = 1.308 beats 1152 / 832 = 1.385)
    large = select(4000, 3000, rules)
    assert large.resized == (1109, 832) and large.bucket == (1088, 832)
    with pytest.raises(buckets.BucketError, match="under bucket_reso_steps"):
        select(50, 300, rules)


def test_the_pixels_are_box_shrunk_or_lanczos_enlarged_then_cut_from_the_middle():
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (90, 200, 3), dtype=np.uint8)
    image = Image.fromarray(pixels)
    rules = BucketRules(64, 32, 128, 32)
    fit = select(200, 90, rules)  # 2.22: bucket 96 x 32 (3.0) is the nearest
    assert fit.bucket == (96, 32) and fit.resized == (96, 43)  # its width matched: x0.48
    assert np.array_equal(buckets.fit_bucket(image, fit), images.box_shrink(pixels, 96, 43)[5:37])
    fit = select(40, 100, rules)  # 0.4: bucket 32 x 96, height matched 0.96: 38 x 96, cut 3
    assert (fit.bucket, fit.resized, fit.cut_left) == ((32, 96), (38, 96), 3)
    tall = rng.integers(0, 256, (100, 40, 3), dtype=np.uint8)
    assert np.array_equal(
        buckets.fit_bucket(Image.fromarray(tall), fit),
        images.box_shrink(tall, 38, 96)[:, 3:35],
    )
    up = select(20, 60, rules)  # enlarged: Pillow's Lanczos, as kohya enlarges
    small = rng.integers(0, 256, (60, 20, 3), dtype=np.uint8)
    lanczos = np.asarray(Image.fromarray(small).resize(up.resized, Image.Resampling.LANCZOS))
    assert up.enlarged and np.array_equal(
        buckets.fit_bucket(Image.fromarray(small), up),
        lanczos[up.cut_top : up.cut_top + 96, up.cut_left : up.cut_left + 32],
    )


def test_each_batch_is_one_bucket_and_an_epoch_takes_every_picture_once():
    shapes = [(64, 64)] * 5 + [(32, 96)] * 3 + [(96, 32)] * 1
    batches = bucket_batches(shapes, 2, seed=42, epoch=1)
    assert sorted(i for b in batches for i in b) == list(range(9))
    assert all(len({shapes[i] for i in b}) == 1 for b in batches)
    assert sorted(len(b) for b in batches) == [1, 1, 1, 2, 2, 2]  # each bucket's last is short
    assert bucket_batches(shapes, 2, 42, 1) == batches  # deterministic
    assert bucket_batches(shapes, 2, 42, 2) != batches  # a new order each epoch
    assert bucket_batches(shapes, 2, 7, 1) != batches


def test_the_bucket_order_resumes_where_it_stopped():
    shapes = [(64, 64)] * 4 + [(32, 96)] * 3
    order = BucketOrder(shapes, 2, seed=3)
    assert order.steps_per_epoch() == 4
    first = [order.next() for _ in range(6)]  # one epoch and half the next
    assert order.epoch == 2 and sorted(i for b in first[:4] for i in b) == list(range(7))
    resumed = BucketOrder(shapes, 2, seed=3)
    resumed.load_state_dict(order.state_dict())
    assert [resumed.next() for _ in range(5)] == [order.next() for _ in range(5)]


def test_the_checks_kohya_makes():
    train = SimpleNamespace(size=1024, **vars(SdxlDataOptions(buckets=True)))
    assert problems(train) == []
    wrong = SimpleNamespace(
        **{**vars(train), "bucket_reso_steps": 48, "min_bucket_reso": 1100, "max_bucket_reso": 512}
    )
    found = problems(wrong, "tunesmith.toml, run a")
    assert len(found) == 3 and all(
        line.startswith("tunesmith.toml, run a: train.") for line in found
    )
    assert "multiple of 32" in found[0]
