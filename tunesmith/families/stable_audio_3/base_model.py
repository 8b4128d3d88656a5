"""The Stable Audio 3 base model folder: its parts, the check that it is whole, and the
encoding constants that cache keys name.

Kept apart from `model` (which imports torch) so that checking a folder, and keying the
work on it, imports no model library: a build that computes nothing stays light.
"""

from __future__ import annotations

from pathlib import Path

from tunesmith.families.base_model import Part, check_folder

FAMILY = "stable-audio-3"
PIPELINE_CLASS = "StableAudio3Pipeline"
SAMPLE_RATE = 44100  # SAME-S/L config `sampling_rate`; the tiny model keeps it
AUDIO_CHANNELS = 2  # stereo, as the published VAEs
CHUNK_SECONDS = 30.0  # underfit encodes files above 30 s in chunks (`chunked=True`)
CHUNK_OVERLAP = 32  # latent frames of context on each side of a chunk, dropped after

# The components of StableAudio3Pipeline.__init__ (diffusers 0.42.1), in its order.
REQUIRED_PARTS: tuple[Part, ...] = (
    Part("vae", ("AutoencoderSAME",), "config.json", weights=True),
    Part("text_encoder", ("T5GemmaEncoderModel",), "config.json", weights=True),
    # GemmaTokenizerFast: the name a tokenizer saved by transformers 4.x records.
    Part(
        "tokenizer",
        ("GemmaTokenizer", "GemmaTokenizerFast"),
        "tokenizer_config.json",
        weights=False,
        any_of=("tokenizer.json", "tokenizer.model"),
    ),
    Part("duration_embedder", ("StableAudio3DurationEmbedder",), "config.json", weights=True),
    Part("transformer", ("StableAudio3DiTModel",), "config.json", weights=True),
    # The pipeline reads `scheduler.config.stochastic_sampling`, which only this class has.
    # Newer diffusers name PingPongScheduler / StableAudio3EulerScheduler here; 0.42.1 lacks both.
    Part("scheduler", ("FlowMatchEulerDiscreteScheduler",), "scheduler_config.json", weights=False),
)


def check_base_model(folder: Path) -> None:
    """Raise ValueError naming every missing or refused part, or return if the folder is whole."""
    check_folder(Path(folder), PIPELINE_CLASS, REQUIRED_PARTS, "Stable Audio 3")
