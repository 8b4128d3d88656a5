"""The `sdxl` family: Stable Diffusion XL as diffusers ships it, trained as kohya and diffusers do.

model.py        the checkpoint folder: check, load; encode pictures (VAE posterior) and captions
encoded.py      stage `encoded`: per picture its posterior, per distinct caption both text
                encoders' outputs, cached in the store
train.py        the LoRA objective: the UNet with adapters, its loss, the validation loss
run.py          stage `adapters`: one run's loop (validation, samples, files, state, cap)
files.py        the PEFT and kohya files, and their check
kohya_names.py  kohya's (Stability's) UNet module names for the kohya file
sample.py       stage `renders` and the training samples: the pipeline with an adapter
"""

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
from tunesmith.store.fingerprints import model_fingerprint

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
