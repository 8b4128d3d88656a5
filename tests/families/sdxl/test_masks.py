"""Loss masks as kohya's masked_loss takes them: which file is whose mask, the alpha channel,
the latent mask (8 x 8 block means, what kohya's apply_masked_loss computes with
interpolate(mode="area") at every step) and the masked loss."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from tunesmith.families.sdxl import masks
from tunesmith.media.images import load_alpha
from tunesmith.media.sniff import MediaError


def test_a_mask_is_the_file_named_after_a_picture_beside_it():
    paths = ["a.png", "a.mask.png", "b.jpg", "sub/c.webp", "sub/c.mask.png", "lonely.mask.png"]
    assert masks.mask_files(paths) == {"a.png": "a.mask.png", "sub/c.webp": "sub/c.mask.png"}


def test_the_alpha_channel_is_read_as_it_is(tmp_path):
    rng = np.random.default_rng(0)
    rgba = rng.integers(0, 256, (20, 30, 4), dtype=np.uint8)
    Image.fromarray(rgba, "RGBA").save(tmp_path / "rgba.png")
    assert np.array_equal(load_alpha(tmp_path / "rgba.png"), rgba[..., 3])
    Image.fromarray(rgba[..., :3]).save(tmp_path / "rgb.png")
    assert load_alpha(tmp_path / "rgb.png") is None
    la = Image.fromarray(rgba[..., [0, 3]], "LA")
    la.save(tmp_path / "la.png")
    assert np.array_equal(load_alpha(tmp_path / "la.png"), rgba[..., 3])
    palette = Image.new("P", (4, 2), 1)
    palette.putpixel((0, 0), 0)
    palette.info["transparency"] = 0
    palette.save(tmp_path / "p.png", transparency=0)
    assert load_alpha(tmp_path / "p.png").tolist() == [[0, 255, 255, 255], [255] * 4]


def test_a_mask_of_another_size_is_refused_by_name(tmp_path):
    Image.new("L", (10, 10), 255).save(tmp_path / "a.mask.png")
    with pytest.raises(MediaError, match=r"a.mask.png: the mask is 10x10, expected 20x10 as a.png"):
        masks.read_mask(tmp_path / "a.mask.png", "a.mask.png", 20, 10, "a.png")
    Image.new("RGB", (20, 10), (200, 7, 9)).save(tmp_path / "a.mask.png")
    red = masks.read_mask(tmp_path / "a.mask.png", "a.mask.png", 20, 10, "a.png")
    assert red.shape == (10, 20) and (red == 200).all()  # the first channel


def test_the_latent_mask_and_the_masked_loss_are_kohyas():
    """kohya: alpha / 255 at the picture's size, interpolated ("area") to the loss's size at
    every step, times the element-wise loss. Here the mask is brought to the latent grid once;
    the loss it gives is the same."""
    rng = np.random.default_rng(1)
    alpha = rng.integers(0, 256, (2, 32, 48), dtype=np.uint8)
    loss = torch.rand(2, 4, 4, 6, generator=torch.Generator().manual_seed(0))
    pixel_masks = torch.from_numpy(alpha.astype(np.float32) / 255.0)[:, None]
    kohya = loss * torch.nn.functional.interpolate(pixel_masks, size=(4, 6), mode="area")
    latent = torch.stack([torch.from_numpy(masks.latent_mask(a)) for a in alpha])
    assert latent.shape == (2, 4, 6) and latent.dtype == torch.float32
    ours = masks.apply_masked_loss(loss, latent)
    assert torch.allclose(ours, kohya, atol=1e-6)
    assert masks.apply_masked_loss(loss, None) is loss
    flipped = torch.from_numpy(masks.latent_mask(alpha[0][:, ::-1].copy()))
    assert torch.allclose(masks.flipped(latent[0]), flipped, atol=1e-7)
    with pytest.raises(ValueError, match="do not match"):
        masks.apply_masked_loss(loss, latent[:, :2])
