"""The ACE-Step 1.5 base model folder: its parts, the check that it is whole, and the
encoding constants that cache keys name.

Kept apart from `model` (which imports torch) so that checking a folder, and keying the
work on it, imports no model library: a build that computes nothing stays light.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tunesmith.families.base_model import Part, check_folder

FAMILY = "ace-step"
PIPELINE_CLASS = "AceStepPipeline"
FAMILY_NAME = "ACE-Step 1.5"
SAMPLE_RATE = 48000  # the Oobleck VAE's sampling_rate in the ACE-Step 1.5 release
AUDIO_CHANNELS = 2
# The encoding's constants, named by the cache keys (`encode` uses them, `encoded` keys on them).
CHUNK_SECONDS = 30.0  # AutoencoderOobleck's tile_sample_min_length; ACE-Step/Side-Step: 30 s
OVERLAP_SECONDS = 2.0  # context each side of a window; diffusers, ACE-Step, Side-Step: 2 s
FORMAT = 1  # bump when the encoded files' layout changes
LATENT_RATE = 25  # latent frames a second: 48000 / prod(downsampling_ratios [2, 4, 4, 6, 10])

_TOKENIZER = ("Qwen2Tokenizer", "Qwen2TokenizerFast")  # the latter: what transformers 4.x saves

# The components of AceStepPipeline.__init__ (diffusers 0.42.1) that text-to-music and DiT
# training need, in its order.
REQUIRED_PARTS: tuple[Part, ...] = (
    Part("vae", ("AutoencoderOobleck",), "config.json", weights=True),
    Part("text_encoder", ("Qwen3Model",), "config.json", weights=True),
    Part(
        "tokenizer",
        _TOKENIZER,
        "tokenizer_config.json",
        weights=False,
        any_of=("tokenizer.json", "vocab.json"),
    ),
    Part("transformer", ("AceStepTransformer1DModel",), "config.json", weights=True),
    Part("condition_encoder", ("AceStepConditionEncoder",), "config.json", weights=True),
    # The pipeline computes its own sigmas and hands them to this scheduler (configured with
    # num_train_timesteps=1, shift=1.0), so no other scheduler class takes its place.
    Part("scheduler", ("FlowMatchEulerDiscreteScheduler",), "scheduler_config.json", weights=False),
)
# The pipeline's `_optional_components`: the FSQ audio tokenizer and its inverse.
CODE_PARTS: tuple[Part, ...] = (
    Part("audio_tokenizer", ("AceStepAudioTokenizer",), "config.json", weights=True),
    Part("audio_token_detokenizer", ("AceStepAudioTokenDetokenizer",), "config.json", weights=True),
)

# Signs of the original (non-diffusers) ACE-Step 1.5 base model folder.
_ORIGINAL_LAYOUT = ("Qwen3-Embedding-0.6B", "silence_latent.pt")


@dataclass(frozen=True)
class CheckpointReport:
    """What a usable ACE-Step 1.5 folder offers beyond DiT training."""

    folder: Path
    codes: bool  # audio_tokenizer/ and audio_token_detokenizer/ are both whole
    codes_message: str = ""  # why audio codes are skipped, when they are


def check_base_model(folder: Path) -> CheckpointReport:
    """Raise ValueError naming every missing required part; else report the optional ones.

    A folder whose audio tokenizer or detokenizer is missing or incomplete is accepted (DiT
    training does not need them); the report says so and why, and codes are skipped.
    """
    folder = Path(folder)
    try:
        check_folder(folder, PIPELINE_CLASS, REQUIRED_PARTS, FAMILY_NAME)
    except ValueError as exc:
        raise ValueError(str(exc) + _conversion_hint(folder)) from None
    try:
        check_folder(folder, PIPELINE_CLASS, CODE_PARTS, FAMILY_NAME)
    except ValueError as exc:
        problems = [line.strip()[2:] for line in str(exc).splitlines() if line.startswith("  - ")]
        message = (
            f"{folder}: audio codes are skipped (DiT training still runs), because "
            + "; ".join(problems)
            + ". Codes need the base model's own audio_tokenizer/ and audio_token_detokenizer/."
        )
        return CheckpointReport(folder, codes=False, codes_message=message)
    return CheckpointReport(folder, codes=True)


def _conversion_hint(folder: Path) -> str:
    if (folder / "model_index.json").exists() or not folder.is_dir():
        return ""
    original = any((folder / name).exists() for name in _ORIGINAL_LAYOUT) or any(
        folder.glob("acestep-v15-*/model.safetensors")
    )
    if not original:
        return ""
    return (
        "\nThis looks like the original ACE-Step 1.5 base model layout. Convert it once with "
        "diffusers' scripts/convert_ace_step_to_diffusers.py (--checkpoint_dir <this folder> "
        "--dit_config <variant> --output_dir <new folder>) and pass the new folder."
    )
