"""Image facts for the labels table: width and height as displayed, and the colour mode.

Opening decodes every pixel (`load`), so a truncated file fails here rather than at
encode time. Pillow's decompression-bomb guard is kept and turned into a clear error.
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image, UnidentifiedImageError

from tunesmith.media.sniff import MediaError

IMAGE_ANALYZER_VERSION = "1"
# Pillow's default bomb limit (about 89 megapixels); twice it is refused outright.
MAX_PIXELS = Image.MAX_IMAGE_PIXELS
# EXIF orientations 5–8 rotate by 90°, so the displayed width is the stored height.
_ROTATED = {5, 6, 7, 8}


def analyze_image(path: Path, label: str | None = None) -> dict:
    name = label or str(path)
    try:
        with Image.open(path) as image:
            width, height = image.size
            if width * height > MAX_PIXELS:
                raise MediaError(
                    f"{name}: {width}x{height} pixels is over the limit of {MAX_PIXELS} "
                    "(a decompression bomb, or a picture far larger than training needs)"
                )
            orientation = image.getexif().get(0x0112, 1)
            mode = image.mode
            image.load()
    except (UnidentifiedImageError, OSError, Image.DecompressionBombError) as exc:
        raise MediaError(f"{name}: not a readable image ({exc})") from exc
    if orientation in _ROTATED:
        width, height = height, width
    return {"width": width, "height": height, "mode": mode}
