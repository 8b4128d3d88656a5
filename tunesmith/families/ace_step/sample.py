"""Rendering ACE-Step demos: `AceStepPipeline` text-to-music, with an adapter applied.

A render is exactly `AceStepPipeline(prompt, lyrics, audio_duration, vocal_language,
num_inference_steps, guidance_scale, shift, generator=torch.Generator().manual_seed(seed))`,
cut to the demo's duration; a demo without lyrics sings `[Instrumental]`, as such an item
trains. A LoRA is loaded as a diffusers user loads it, `load_lora_weights` on its folder, and
its strength set with `set_adapters`; diffusers refuses LoKr files, so a LoKr folder is read
back onto the DiT with tunesmith's LoKr layer (`torch_lokr`) at the demo's strength. At
strength 0 both add exactly nothing, so the base side is the base model's render. During
training the trainer's own pipeline, its DiT carrying the adapter as it is now, renders through
the same `render_demo`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import torch

from tunesmith.adapters import lokr_files, torch_lokr
from tunesmith.families.ace_step.model import SAMPLE_RATE, first_noise, load_pipeline
from tunesmith.families.ace_step.text import INSTRUMENTAL

ADAPTER = "tunesmith"
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def render_demo(pipe, demo) -> np.ndarray:
    """Stereo float32 [2, N] of `demo`, N = its duration in samples."""
    generator = torch.Generator().manual_seed(demo.seed)
    frames = math.ceil(float(demo.duration) * pipe.latents_per_second)  # as the pipeline counts
    with torch.no_grad():
        audio = pipe(
            prompt=demo.prompt,
            lyrics=demo.lyrics.strip() or INSTRUMENTAL,
            audio_duration=float(demo.duration),
            vocal_language=demo.language,
            num_inference_steps=demo.steps,
            guidance_scale=demo.cfg,
            shift=demo.shift,
            latents=first_noise(pipe, frames, generator),
        ).audios[0]
    return audio.float().cpu().numpy()[:, : round(demo.duration * SAMPLE_RATE)]


class Renderer:
    kind, sample_rate = "audio", SAMPLE_RATE

    def __init__(self, base_model: Path, placement, adapter: Path | None = None) -> None:
        self.pipe = load_pipeline(base_model, DTYPES[placement.dtype], placement.device)
        self.adapter, self.lokr = adapter, False
        if adapter is None:
            return
        folder = Path(adapter).parent if Path(adapter).is_file() else Path(adapter)
        config = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8"))
        self.lokr = config.get("peft_type") == "LOKR"
        if self.lokr:
            _attach_lokr(self.pipe.transformer, folder)
        else:
            from diffusers.utils import logging as diffusers_logging

            level = diffusers_logging.get_verbosity()
            diffusers_logging.set_verbosity_error()
            try:
                self.pipe.load_lora_weights(
                    str(folder), weight_name="adapter_model.safetensors", adapter_name=ADAPTER
                )
            finally:
                diffusers_logging.set_verbosity(level)

    def render(self, demo, strength: float) -> np.ndarray:
        if self.adapter is None and strength != 0:
            raise ValueError("no adapter is attached: only strength 0 (the base) can render")
        if self.adapter is not None and self.lokr:
            torch_lokr.set_strength(self.pipe.transformer, strength)
        elif self.adapter is not None:
            self.pipe.set_adapters([ADAPTER], adapter_weights=[strength])
        return render_demo(self.pipe, demo)


def _attach_lokr(transformer, folder: Path) -> None:
    """Our PEFT LoKr folder onto diffusers' DiT (its names are ACE-Step's original ones)."""
    from tunesmith.families.ace_step.files import diffusers_name

    state, config = lokr_files.read_peft_lokr(folder)
    state = {_renamed(k, diffusers_name): v for k, v in state.items()}
    targets = sorted({diffusers_name(m) for m in config.target_modules})
    torch_lokr.attach(transformer, targets, config.r, float(config.alpha), config.decompose_factor)
    torch_lokr.load_adapter_state(transformer, state)


def _renamed(key: str, rename) -> str:
    module, _, factor = key.rpartition(".")
    return f"{rename(module)}.{factor}"
