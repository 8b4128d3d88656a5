"""The `stable-audio-3` family: Stable Audio 3 as diffusers ships it, trained as underfit does.

model.py     the checkpoint folder: check, load, fingerprint; encode audio and prompts
encoded.py   stage `encoded`: underfit's pre-encoded layout (<stem>.npy + <stem>.json)
"""

from tunesmith.families.stable_audio_3.model import (
    FAMILY,
    REQUIRED_PARTS,
    SAMPLE_RATE,
    check_checkpoint,
    conditioning,
    encode_audio,
    encode_prompts,
    encoder_details,
    load_pipeline,
)
from tunesmith.store.fingerprints import model_fingerprint

__all__ = [
    "FAMILY",
    "REQUIRED_PARTS",
    "SAMPLE_RATE",
    "check_checkpoint",
    "conditioning",
    "encode_audio",
    "encode_prompts",
    "encoder_details",
    "load_pipeline",
    "model_fingerprint",
]
