"""Loss masks (`masked_loss`): where a picture's loss counts, as kohya's sd-scripts weighs it.

A picture's mask is, in this order:

1. `<stem>.mask.<ext>` beside it (any picture format; its first colour channel, red or its
   grey level, 0 to 255): the same width and height as the picture, or the picture is
   skipped with one line naming the mask. Such a file is the picture's mask, never a
   training picture of its own, in a dataset where a run has `masked_loss = true`.
2. Else the picture's alpha channel (kohya's `alpha_mask`), read before the colours are
   composited on white.
3. Else none: every pixel counts (kohya's mask of ones), and the encoded stage says so.

The mask is resized and cut exactly as the picture (`buckets.fit_pixels`, or the square fit),
scaled to [0, 1] (value / 255, as kohya), then brought to the latent grid by the mean of each
8 x 8 block: `torch.nn.functional.interpolate(mode="area")`, what kohya's
`library/custom_train_functions.py` `apply_masked_loss` does to the alpha mask at every step,
done here once. It is stored as `mask.safetensors` (float32 [h/8, w/8]) in the picture's entry.

`apply_masked_loss` is the loss side: the element-wise loss times the mask, broadcast over the
latent channels; the mean over every element follows (kohya's `loss.mean` over all but the
batch dimension, then over the batch), so a half-masked picture weighs half in the mean. A
flipped picture's mask is the mask flipped (`flipped`).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import numpy as np

from tunesmith.media import images
from tunesmith.media.sniff import MediaError

if TYPE_CHECKING:
    import torch

MASK_SUFFIX = ".mask"  # <stem>.mask.png beside <stem>.png
PARAMS = {
    "mask": "first channel of <stem>.mask.*, else alpha",
    "scale": "value / 255",
    "latent": "mean of each 8 x 8 block",
}


def mask_files(paths: list[str]) -> dict[str, str]:
    """picture path → its mask file's path, for the paths (all pictures of a dataset) named
    `<stem>.mask.<ext>` beside a picture `<stem>.<ext2>`."""
    pictures = {}
    for path in paths:
        p = PurePosixPath(path)
        if not p.stem.endswith(MASK_SUFFIX):
            pictures.setdefault(str(p.with_suffix("")), path)
    found = {}
    for path in sorted(paths):
        p = PurePosixPath(path)
        if p.stem.endswith(MASK_SUFFIX):
            stem = str(p.with_name(p.stem[: -len(MASK_SUFFIX)]))
            if stem in pictures and pictures[stem] not in found:
                found[pictures[stem]] = path
    return found


def read_mask(path: Path, label: str, width: int, height: int, picture: str) -> np.ndarray:
    """uint8 [height, width]: the first channel of a mask file, which must be `picture`'s
    size (width x height, as displayed)."""
    rgb = images.load_image(path, label)
    if rgb.size != (width, height):
        raise MediaError(
            f"{label}: the mask is {rgb.width}x{rgb.height}, expected {width}x{height} as "
            f"{picture} (a mask has its picture's size)"
        )
    return np.asarray(rgb, dtype=np.uint8)[..., 0].copy()


def latent_mask(mask: np.ndarray, factor: int = 8) -> np.ndarray:
    """float32 [h / factor, w / factor]: a uint8 mask at the fitted picture's size, scaled to
    [0, 1] and averaged over each factor x factor block (interpolate's "area" at a whole
    factor)."""
    h, w = mask.shape
    if h % factor or w % factor:
        raise ValueError(f"a mask of {w}x{h} does not divide into {factor}-pixel blocks")
    blocks = mask.astype(np.float64).reshape(h // factor, factor, w // factor, factor)
    return (blocks.mean(axis=(1, 3)) / 255.0).astype(np.float32)


def flipped(mask: torch.Tensor) -> torch.Tensor:
    """The mask of the picture flipped left to right ([..., h, w])."""
    import torch

    return torch.flip(mask, dims=[-1])


def apply_masked_loss(loss: torch.Tensor, masks: torch.Tensor | None) -> torch.Tensor:
    """The element-wise loss [B, C, h, w] weighed by the latent masks [B, h, w] (kohya's
    `apply_masked_loss`); None: the loss as it is."""
    if masks is None:
        return loss
    if masks.shape != (loss.shape[0], *loss.shape[2:]):
        raise ValueError(f"masks {tuple(masks.shape)} do not match the loss {tuple(loss.shape)}")
    return loss * masks.to(loss)[:, None]
