"""The `ace-step` family's checkpoint: ACE-Step 1.5 as diffusers ships it (`AceStepPipeline`).

A checkpoint is a folder in the diffusers layout, the one `AceStepPipeline.save_pretrained` and
diffusers' `scripts/convert_ace_step_to_diffusers.py` write:

    model_index.json          which class each component folder holds
    transformer/              AceStepTransformer1DModel     the DiT, config.json + *.safetensors
    condition_encoder/        AceStepConditionEncoder       lyric + timbre encoders, the text
                                                            projector, null_condition_emb and
                                                            silence_latent (a buffer)
    vae/                      AutoencoderOobleck            48 kHz stereo <-> 25 Hz latents
    text_encoder/             Qwen3Model                    Qwen3-Embedding-0.6B in the release
    tokenizer/                Qwen2Tokenizer(Fast)          tokenizer_config.json + tokenizer.json
    scheduler/                FlowMatchEulerDiscreteScheduler  scheduler_config.json
    audio_tokenizer/          AceStepAudioTokenizer         25 Hz latents -> 5 Hz FSQ codes
    audio_token_detokenizer/  AceStepAudioTokenDetokenizer  5 Hz codes -> 25 Hz latents

The last two are optional for the pipeline (text-to-music does not use them) and for DiT
training: a folder without them loads, trains and renders, and `check_checkpoint` says that
audio codes are skipped. Everything else is required; a folder that lacks any of it is refused
with every missing part named. Only `.safetensors` weights are ever loaded.

Not handled: the original ACE-Step 1.5 checkpoint layout (`acestep-v15-*/model.safetensors`,
`vae/`, `Qwen3-Embedding-0.6B/`): it is refused with the diffusers command that converts it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch

from tunesmith.families.base_model import quiet_loading

if TYPE_CHECKING:
    from diffusers import AceStepPipeline

from tunesmith.families.ace_step.checkpoint import (  # noqa: F401 (model's names)
    AUDIO_CHANNELS,
    CODE_PARTS,
    FAMILY,
    FAMILY_NAME,
    LATENT_RATE,
    PIPELINE_CLASS,
    REQUIRED_PARTS,
    SAMPLE_RATE,
    CheckpointReport,
    check_checkpoint,
)


def load_pipeline(
    folder: Path, dtype: torch.dtype = torch.float32, device: str = "cpu"
) -> AceStepPipeline:
    """Check `folder`, then load it as an `AceStepPipeline` from .safetensors only, offline.

    Every component is cast to `dtype`, and the pipeline is moved to `device`. Where the audio
    tokenizer or detokenizer is missing, both are left None (`pipe.audio_tokenizer is None`);
    `check_checkpoint` says why.
    """
    from diffusers import AceStepPipeline  # imported here: diffusers takes seconds

    report = check_checkpoint(folder)
    # An incomplete optional part must not be loaded at all: passing None overrides whatever
    # model_index.json declares for it.
    skip = {} if report.codes else {part.name: None for part in CODE_PARTS}
    with quiet_loading():
        pipe = AceStepPipeline.from_pretrained(
            Path(folder), dtype=dtype, use_safetensors=True, local_files_only=True, **skip
        )
    pipe.set_progress_bar_config(disable=True)
    return pipe.to(device)


def hop_length(vae) -> int:
    """Audio samples per latent frame: the product of the VAE's downsampling ratios."""
    return int(vae.hop_length)


def silence_latent(pipe) -> torch.Tensor:
    """The checkpoint's encoded silence [1, T, C]: what the pipeline and the audio tokenizer pad
    with, and the DiT's context where no source audio is given."""
    return pipe.condition_encoder.silence_latent
