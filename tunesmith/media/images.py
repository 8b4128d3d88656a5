"""Pictures for an image model: decode to RGB, then fit to a square.

`load_image` reads jpg, png, webp, bmp, gif, tiff and avif (content checked against the
extension first), applies the EXIF orientation, and converts every colour mode to 8-bit RGB:

- alpha (RGBA, LA, PA, a palette with transparency) is composited on white: a transparent
  background reads as white paper. (Pillow's plain `convert("RGB")`, which many loaders call,
  drops the alpha and shows whatever colour the transparent pixels hold, often black.)
- palette and grey levels are expanded; bilevel (1-bit) becomes black and white;
- 16-bit grey is scaled to 8 bits (value / 257, rounded), since Pillow's own conversion clips
  it at 255 instead; 16-bit RGB PNGs are read by Pillow as 8-bit already;
- CMYK (print JPEGs) goes through Pillow's plain conversion, without the embedded ICC profile.

`fit_square` shrinks a picture until its short side is `size`, each new pixel the mean of the
source pixels its footprint covers, each weighted by the part of it covered (the plain mean
of a block where the factor is a whole number; what OpenCV's INTER_AREA, which kohya uses,
computes), then cuts the middle square. The mean is computed here in float64 and rounded
once (`box_shrink`), not by Pillow's BOX filter (see there why).

Pictures whose short side is under `size` are enlarged with the bicubic filter (kohya enlarges
too, with `bucket_no_upscale` off, its default); `fit_plan` says when, so the stage can report
it. Pictures with a side under MIN_SIDE pixels are refused: there is nothing to enlarge.

`load_alpha` gives a picture's alpha channel on its own (a training mask).

Not handled here: animated images (the first frame is used), colour management (ICC profiles
are ignored, as kohya and diffusers ignore them); aspect-ratio buckets are the SDXL family's
(`tunesmith/families/sdxl/buckets.py`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from tunesmith.media.sniff import MediaError, check_format

# GIF, TIFF and AVIF as Pillow reads them; an animated GIF or multi-page TIFF gives its first
# frame (Pillow opens on the first frame).
IMAGE_FORMATS = ("PNG", "JPEG", "WebP", "BMP", "GIF", "TIFF", "AVIF")
# Pillow's default decompression-bomb limit (about 89 megapixels, a 9459 x 9459 picture).
MAX_PIXELS = Image.MAX_IMAGE_PIXELS
MIN_SIDE = 8  # one latent pixel of SDXL's VAE covers 8 x 8 pixels
WHITE = (255, 255, 255)
ENLARGE = Image.Resampling.BICUBIC
_ALPHA_MODES = ("RGBA", "LA", "PA", "RGBa", "La")
_SIXTEEN_BIT = ("I;16", "I;16B", "I;16L", "I;16N", "I")


def load_image(path: Path, label: str | None = None, max_pixels: int = MAX_PIXELS) -> Image.Image:
    """The picture at `path` as an 8-bit RGB image, EXIF orientation applied.

    `label` is how the file is named in messages (its path inside the dataset). Raises
    MediaError for a file that is not a picture we read, one over `max_pixels` pixels (a
    decompression bomb, checked from the header before any pixel is decoded), a truncated
    file, or one with a side under MIN_SIDE pixels.
    """
    path = Path(path)
    name = label or str(path)
    found = check_format(path, label)
    if found not in IMAGE_FORMATS:
        raise MediaError(f"{name}: {found} is not a picture format (expected {IMAGE_FORMATS})")
    try:
        with warnings.catch_warnings():
            # Our limit is checked below, before decoding; Pillow's warning would only repeat it.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(path) as image:
                width, height = image.size
                if width * height > max_pixels:
                    raise MediaError(
                        f"{name}: {width}x{height} is {width * height} pixels, over the limit of "
                        f"{max_pixels} (a decompression bomb, or a picture far larger than "
                        "training needs: shrink it first)"
                    )
                image.load()  # decode every pixel now: a truncated file fails here
                image = ImageOps.exif_transpose(image)
                rgb = to_rgb(image)
    except (UnidentifiedImageError, OSError, Image.DecompressionBombError) as exc:
        raise MediaError(f"{name}: not a readable {found} picture ({exc})") from exc
    if min(rgb.size) < MIN_SIDE:
        raise MediaError(
            f"{name}: {rgb.width}x{rgb.height} pixels is too small to train on (each side must "
            f"be at least {MIN_SIDE} pixels)"
        )
    return rgb


def to_rgb(image: Image.Image) -> Image.Image:
    """8-bit RGB of any Pillow mode we meet; alpha composited on white (see module docstring)."""
    mode = image.mode
    if mode == "RGB":
        return image.copy()
    if (mode == "P" and "transparency" in image.info) or mode == "PA":
        image, mode = image.convert("RGBA"), "RGBA"
    if mode in _ALPHA_MODES:
        rgba = image.convert("RGBA")
        # Over white: out = a * colour + (1 - a) * 255, per channel (Pillow's integer blend).
        return Image.alpha_composite(Image.new("RGBA", rgba.size, (*WHITE, 255)), rgba).convert(
            "RGB"
        )
    if mode in _SIXTEEN_BIT:
        # Pillow clips 16-bit values at 255 when converting; scale 0..65535 to 0..255 instead.
        values = np.asarray(image, dtype=np.float64).clip(0, 65535)
        grey = np.floor(values / 257.0 + 0.5).astype(np.uint8)
        return Image.fromarray(grey).convert("RGB")
    return image.convert("RGB")  # P, L, 1, CMYK, YCbCr


def load_alpha(path: Path, label: str | None = None) -> np.ndarray | None:
    """The alpha channel of the picture at `path` as uint8 [H, W], EXIF orientation applied
    (as `load_image` turns the colours), or None for a picture without one. Read after
    `load_image` has checked the file."""
    name = label or str(path)
    try:
        with Image.open(path) as image:
            image.load()
            if not (image.mode in _ALPHA_MODES or "transparency" in image.info):
                return None
            image = ImageOps.exif_transpose(image)
            return np.asarray(image.convert("RGBA").getchannel("A"), dtype=np.uint8).copy()
    except (UnidentifiedImageError, OSError, Image.DecompressionBombError) as exc:
        raise MediaError(f"{name}: its alpha channel cannot be read ({exc})") from exc


@dataclass(frozen=True)
class FitPlan:
    """How `fit_square` fits a width x height picture to size x size."""

    width: int  # after resizing: the short side is `size`
    height: int
    top: int  # the square's top-left corner in the resized picture (SDXL's crop conditioning)
    left: int
    enlarged: bool  # the short side was under `size`: bicubic, not box


def fit_plan(width: int, height: int, size: int) -> FitPlan:
    """The resized dimensions and the centred crop, without touching pixels."""
    check_size(size)
    short = min(width, height)
    # The long side rounded to the nearest pixel; the short side is exactly `size`.
    new_w = size if width == short else max(size, round(width * size / short))
    new_h = size if height == short else max(size, round(height * size / short))
    return FitPlan(new_w, new_h, (new_h - size) // 2, (new_w - size) // 2, short < size)


def fit_square(image: Image.Image, size: int) -> np.ndarray:
    """uint8 [size, size, 3]: `image` resized until its short side is `size`, then its middle.

    Shrinking is an exact box filter (`box_shrink`); enlarging is Pillow's bicubic. A picture
    already at `size` on its short side is only cut.
    """
    plan = fit_plan(image.width, image.height, size)
    rgb = np.asarray(image.convert("RGB"), dtype=np.uint8)
    if (plan.width, plan.height) == image.size:
        resized = rgb
    elif plan.enlarged:
        resized = np.asarray(image.convert("RGB").resize((plan.width, plan.height), ENLARGE))
    else:
        resized = box_shrink(rgb, plan.width, plan.height)
    return resized[plan.top : plan.top + size, plan.left : plan.left + size].copy()


def box_shrink(pixels: np.ndarray, width: int, height: int) -> np.ndarray:
    """uint8 [height, width, C]: each new pixel the mean of the source pixels it covers, each
    weighted by the part of it covered (the plain mean of a block for a whole-number factor).

    Not Pillow's BOX filter, which weighs a source pixel 1 or 0 by whether its centre falls in
    the new pixel (no partial coverage, so off by tens of levels at factors like 3.0075), and
    rounds to 8 bits between its row and column passes (off by one even at a factor of 2).
    Here both passes run in float64 and the mean is rounded once, halves up (the 1e-9 keeps a
    half computed as 0.4999999… going up). Values are averaged as stored (sRGB), as Pillow,
    OpenCV and kohya do.
    """
    rows = np.concatenate(
        [_box_axis(pixels[i : i + _BAND], width, axis=1) for i in range(0, len(pixels), _BAND)]
    )
    columns = np.concatenate(
        [_box_axis(rows[:, j : j + _BAND], height, axis=0) for j in range(0, width, _BAND)],
        axis=1,
    )
    return np.floor(columns + 0.5 + 1e-9).clip(0, 255).astype(np.uint8)


_BAND = 256  # rows (or columns) a pass holds in float64 at once: ~40 MB for a 6000-wide picture


def _box_axis(values: np.ndarray, n_out: int, axis: int) -> np.ndarray:
    """Box-average `values` along `axis` from its length to `n_out` (<= it), in float64.

    With C the running sum of the pixels, the integral of the pixel row up to a position x is
    C[floor(x)] + frac(x) * p[floor(x)]; a new pixel is the difference of that integral at its
    two edges, divided by its width.
    """
    v = np.moveaxis(values, axis, 0).astype(np.float64)
    n_in = v.shape[0]
    edges = np.arange(n_out + 1) * n_in / n_out
    index = np.minimum(np.floor(edges).astype(np.int64), n_in - 1)
    frac = (edges - index).reshape(-1, *([1] * (v.ndim - 1)))
    cumulative = np.concatenate([np.zeros_like(v[:1]), np.cumsum(v, axis=0)])
    integral = cumulative[index] + frac * v[index]
    out = (integral[1:] - integral[:-1]) * (n_out / n_in)
    return np.moveaxis(out, 0, axis)


def check_size(size: int) -> None:
    """`size` must be a positive multiple of 8: SDXL's VAE downsamples by 8."""
    if not isinstance(size, int) or size <= 0 or size % 8:
        raise ValueError(
            f"size must be a positive multiple of 8 (the VAE downsamples by 8), got {size!r}"
        )
