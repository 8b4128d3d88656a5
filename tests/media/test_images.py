"""Pictures: decoding to RGB (orientation, alpha, palette, 16-bit, CMYK, bombs) and fitting to a
square by the exact box mean of the covered pixels, checked against numpy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tunesmith.media.images import fit_plan, fit_square, load_image
from tunesmith.media.sniff import MediaError

RNG = np.random.default_rng(0)


def save(image: Image.Image, path: Path, **kwargs) -> Path:
    image.save(path, **kwargs)
    return path


def pixels(image: Image.Image) -> np.ndarray:
    return np.asarray(image).astype(np.int64)


@pytest.mark.parametrize("fmt, suffix", [("PNG", ".png"), ("WEBP", ".webp"), ("BMP", ".bmp")])
def test_lossless_formats_read_back_exactly(tmp_path, fmt, suffix):
    array = RNG.integers(0, 256, (12, 20, 3), dtype=np.uint8)
    kwargs = {"lossless": True} if fmt == "WEBP" else {}
    path = save(Image.fromarray(array), tmp_path / f"a{suffix}", format=fmt, **kwargs)
    image = load_image(path)
    assert image.mode == "RGB" and np.array_equal(np.asarray(image), array)


def test_exif_orientation_is_applied(tmp_path):
    array = RNG.integers(0, 256, (10, 16, 3), dtype=np.uint8)  # stored 16 wide, 10 high
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90° clockwise to display"
    path = save(Image.fromarray(array), tmp_path / "turned.png", exif=exif)
    image = load_image(path)
    assert image.size == (10, 16)
    assert np.array_equal(np.asarray(image), np.rot90(array, k=-1))


def test_exif_orientation_of_a_jpeg(tmp_path):
    exif = Image.Exif()
    exif[0x0112] = 8  # "rotate 90° counter-clockwise to display"
    path = save(Image.new("RGB", (40, 16), (10, 200, 30)), tmp_path / "turned.jpg", exif=exif)
    assert load_image(path).size == (16, 40)


def test_alpha_is_composited_on_white(tmp_path):
    colour = (200, 40, 0)
    alphas = np.array([[0, 255, 128, 64] * 2] * 8, dtype=np.uint8)
    rgba = np.zeros((8, 8, 4), dtype=np.uint8)
    rgba[..., :3], rgba[..., 3] = colour, alphas
    image = load_image(save(Image.fromarray(rgba, "RGBA"), tmp_path / "alpha.png"))
    out = pixels(image)[0, :4]
    assert image.mode == "RGB"
    assert out[0].tolist() == [255, 255, 255]  # transparent: white
    assert out[1].tolist() == list(colour)  # opaque: the colour
    a = alphas[0, 2:4, None] / 255.0
    expected = np.asarray(colour) * a + 255 * (1 - a)  # a·colour + (1 − a)·white
    assert np.abs(out[2:4] - expected).max() <= 1  # Pillow blends in integers


def test_grey_with_alpha_and_a_transparent_palette_entry(tmp_path):
    la = Image.new("LA", (8, 8), (50, 0))
    assert pixels(load_image(save(la, tmp_path / "la.png")))[0, 0].tolist() == [255, 255, 255]
    palette = Image.new("P", (8, 8), 1)
    palette.putpalette([0, 0, 0, 10, 20, 30] + [0] * 762)
    palette.putpixel((0, 0), 0)
    path = save(palette, tmp_path / "p.png", transparency=0)
    out = pixels(load_image(path))
    assert out[0, 0].tolist() == [255, 255, 255] and out[0, 1].tolist() == [10, 20, 30]
    opaque = save(palette, tmp_path / "opaque.png")  # no transparency: plain expansion
    assert pixels(load_image(opaque))[0, 0].tolist() == [0, 0, 0]


def test_sixteen_bit_grey_is_scaled_not_clipped(tmp_path):
    values = np.array([[0, 257 * 10, 65535, 300, 257 * 128 + 129]] * 8, dtype=np.uint16)
    values = np.concatenate([values, values[:, :3]], axis=1)  # 8 wide
    path = save(Image.fromarray(values), tmp_path / "deep.png")
    assert Image.open(path).mode.startswith("I")
    out = pixels(load_image(path))
    assert out[0, :5, 0].tolist() == [0, 10, 255, 1, 129]  # round(v / 257)
    assert (out[..., 0] == out[..., 1]).all() and (out[..., 1] == out[..., 2]).all()


def test_cmyk_jpeg_becomes_rgb(tmp_path):
    path = save(Image.new("CMYK", (16, 16), (0, 255, 255, 0)), tmp_path / "print.jpg")
    image = load_image(path)
    assert image.mode == "RGB"
    assert np.abs(pixels(image) - [255, 0, 0]).max() <= 3  # red, up to JPEG's rounding


def test_decompression_bomb_limit(tmp_path):
    path = save(Image.new("RGB", (40, 30)), tmp_path / "big.png")
    with pytest.raises(MediaError, match=r"pics/big.png: 40x30 is 1200 pixels.*decompression"):
        load_image(path, "pics/big.png", max_pixels=1000)
    assert load_image(path, max_pixels=1200).size == (40, 30)


def test_one_pixel_picture_is_refused_by_name(tmp_path):
    path = save(Image.new("RGB", (1, 1)), tmp_path / "dot.png")
    with pytest.raises(MediaError, match=r"^pics/dot.png: 1x1 pixels is too small"):
        load_image(path, "pics/dot.png")


def test_truncated_and_mislabelled_files_name_the_file(tmp_path):
    good = save(
        Image.fromarray(RNG.integers(0, 256, (64, 64, 3), dtype=np.uint8)), tmp_path / "g.png"
    )
    cut = tmp_path / "cut.png"
    cut.write_bytes(good.read_bytes()[:200])
    with pytest.raises(MediaError, match=r"^cut.png: not a readable PNG picture"):
        load_image(cut, "cut.png")
    wrong = tmp_path / "wrong.jpg"
    wrong.write_bytes(good.read_bytes())
    with pytest.raises(MediaError, match=r"wrong.jpg: the extension says JPEG.*PNG"):
        load_image(wrong, "wrong.jpg")


def box_mean(array: np.ndarray, out_w: int, out_h: int) -> np.ndarray:
    """The reference: each output pixel the mean of the source pixels it covers, each weighted
    by the part of it covered, rounded to the nearest level (halves up)."""

    def weights(n_in: int, n_out: int) -> np.ndarray:
        scale = n_in / n_out
        w = np.zeros((n_out, n_in))
        for i in range(n_out):
            lo, hi = i * scale, (i + 1) * scale
            for j in range(int(np.floor(lo)), int(np.ceil(hi))):
                w[i, j] = min(hi, j + 1) - max(lo, j)
        return w / scale

    wy, wx = weights(array.shape[0], out_h), weights(array.shape[1], out_w)
    mean = np.einsum("yi,xj,ijc->yxc", wy, wx, array.astype(np.float64), optimize=True)
    return np.floor(mean + 0.5 + 1e-9).astype(np.uint8)  # a half up, even one summed as 0.49999


def test_fit_square_halving_is_the_mean_of_each_two_by_two_block(tmp_path):
    array = RNG.integers(0, 256, (16, 24, 3), dtype=np.uint8)  # 24 wide, 16 high
    out = fit_square(Image.fromarray(array), 8)
    # Shrunk to 12 x 8, then columns 2..9 of it (the middle 8): source columns 4..19.
    blocks = array[:, 4:20].reshape(8, 2, 8, 2, 3).astype(np.int64).sum(axis=(1, 3))
    assert out.shape == (8, 8, 3) and out.dtype == np.uint8
    assert np.array_equal(out, (blocks + 2) // 4)  # mean of 4, halves rounded up


@pytest.mark.parametrize(
    "height, width, size, resized_width",
    [(12, 18, 8, 12), (300, 400, 96, 128), (300, 400, 104, 139)],  # by 1.5, 3.125, 2.885
)
def test_fit_square_by_a_fraction_weights_each_pixel_by_the_part_covered(
    height, width, size, resized_width
):
    array = RNG.integers(0, 256, (height, width, 3), dtype=np.uint8)
    out = fit_square(Image.fromarray(array), size)
    left = (resized_width - size) // 2
    assert np.array_equal(out, box_mean(array, resized_width, size)[:, left : left + size])


def test_fit_square_cuts_the_middle():
    array = RNG.integers(0, 256, (24, 8, 3), dtype=np.uint8)  # tall, already 8 wide
    assert np.array_equal(fit_square(Image.fromarray(array), 8), array[8:16])
    plan = fit_plan(8, 24, 8)
    assert (plan.width, plan.height, plan.top, plan.left, plan.enlarged) == (8, 24, 8, 0, False)
    assert fit_plan(3000, 2000, 1024) == fit_plan(3000, 2000, 1024)
    wide = fit_plan(3000, 2000, 1024)
    assert (wide.width, wide.height, wide.top, wide.left) == (1536, 1024, 0, 256)


def test_small_pictures_are_enlarged_and_say_so():
    image = Image.fromarray(RNG.integers(0, 256, (8, 12, 3), dtype=np.uint8))
    assert fit_plan(12, 8, 16).enlarged
    assert fit_square(image, 16).shape == (16, 16, 3)


@pytest.mark.parametrize("size", [100, 0, -8, 8.0])
def test_size_must_be_a_multiple_of_eight(size):
    with pytest.raises(ValueError, match="multiple of 8"):
        fit_square(Image.new("RGB", (64, 64)), size)
