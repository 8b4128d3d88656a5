"""The `sdxl` family: Stable Diffusion XL as diffusers ships it, trained as kohya and diffusers do.

model.py     the checkpoint folder: check, load; encode pictures (VAE posterior) and captions
encoded.py   stage `encoded`: per picture its posterior, per distinct caption both text
             encoders' outputs, cached in the store
"""

from tunesmith.families.checkpoint import model_fingerprint
from tunesmith.families.sdxl.model import (
    FAMILY,
    REQUIRED_PARTS,
    check_checkpoint,
    encode_captions,
    encode_images,
    encoder_details,
    load_pipeline,
    pixels_to_tensor,
)

__all__ = [
    "FAMILY",
    "REQUIRED_PARTS",
    "check_checkpoint",
    "encode_captions",
    "encode_images",
    "encoder_details",
    "load_pipeline",
    "model_fingerprint",
    "pixels_to_tensor",
]
