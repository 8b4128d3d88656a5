"""The example image dataset `rings`: flat discs with thick dark rings on a flat ground.

One made-up style, drawn from a fixed seed, so an adapter has something consistent to
learn: 1–4 discs of flat colour, each inside a thick near-black ring, on a plain pastel
ground, with a `.txt` caption (kohya/diffusers convention) that names the trigger word,
the count and the colours. Sizes and aspect ratios vary so the centre crop is exercised.
"""

from __future__ import annotations

import io
import random
from pathlib import Path

from PIL import Image, ImageDraw

from tunesmith.store.atomic import write_if_changed

TRIGGER = "rngstyle"
COUNT = 12
_COLOURS = {
    "red": (214, 64, 52),
    "orange": (236, 140, 40),
    "yellow": (240, 200, 60),
    "green": (70, 160, 90),
    "teal": (40, 150, 150),
    "blue": (60, 100, 200),
    "purple": (130, 80, 170),
    "pink": (230, 120, 160),
}
_GROUNDS = {
    "cream": (246, 238, 220),
    "pale blue": (214, 230, 244),
    "pale green": (222, 240, 222),
    "light grey": (228, 228, 228),
}
_SIZES = [(320, 320), (384, 288), (288, 384), (352, 256)]
_NUMBERS = ["one", "two", "three", "four"]


def make_rings(folder: Path, count: int = COUNT, seed: int = 7) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    written = []
    for i in range(count):
        image, caption = _draw(rng, _SIZES[i % len(_SIZES)])
        # Mostly PNG, every fourth a JPEG, as a user's folder would be.
        ext, fmt = (".jpg", "JPEG") if i % 4 == 3 else (".png", "PNG")
        path = folder / f"rings_{i:02d}{ext}"
        buffer = io.BytesIO()
        image.save(buffer, format=fmt, **({"quality": 95} if fmt == "JPEG" else {}))
        write_if_changed(path, buffer.getvalue())
        write_if_changed(path.with_suffix(".txt"), f"{caption}\n".encode())
        written.append(path)
    return written


def _draw(rng: random.Random, size: tuple[int, int]) -> tuple[Image.Image, str]:
    ground_name, ground = rng.choice(sorted(_GROUNDS.items()))
    image = Image.new("RGB", size, ground)
    draw = ImageDraw.Draw(image)
    w, h = size
    n = rng.randint(1, 4)
    names = []
    for _ in range(n):
        name, colour = rng.choice(sorted(_COLOURS.items()))
        names.append(name)
        r = rng.randint(min(w, h) // 9, min(w, h) // 5)
        cx, cy = rng.randint(r, w - r), rng.randint(r, h - r)
        ring = max(6, r // 3)  # the style: a ring a third of the radius thick
        draw.ellipse(
            (cx - r, cy - r, cx + r, cy + r), fill=colour, outline=(24, 22, 28), width=ring
        )
    unique = sorted(set(names))
    colours = " and ".join([", ".join(unique[:-1]), unique[-1]] if len(unique) > 1 else unique)
    plural = "disc" if n == 1 else "discs"
    caption = (
        f"{TRIGGER}, {_NUMBERS[n - 1]} {colours} {plural} "
        f"with thick dark rings on a flat {ground_name} ground"
    )
    return image, caption
