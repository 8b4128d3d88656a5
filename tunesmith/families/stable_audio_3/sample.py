"""Rendering Stable Audio 3 demos: the pipeline a user calls, with an adapter applied.

A render is exactly `StableAudio3Pipeline(prompt, duration, num_inference_steps,
guidance_scale, generator=torch.Generator().manual_seed(seed))` with the adapter attached
at a strength; strength 0 is the base model bit for bit (both adapter types return the
base layer's output unchanged at strength 0), so base and adapter renders differ only by
what the adapter learned.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from torch import nn

from tunesmith.adapters import torch_lora
from tunesmith.backends.placement import Placement
from tunesmith.families.stable_audio_3 import model
from tunesmith.families.stable_audio_3.files import read_adapter
from tunesmith.families.stable_audio_3.trainer import DTYPES
from tunesmith.train.config import DemoConfig


class Renderer:
    kind, sample_rate = "audio", model.SAMPLE_RATE

    def __init__(self, base_model: Path, placement: Placement, adapter: Path | None = None):
        self.pipe = model.load_pipeline(base_model, DTYPES[placement.dtype], placement.device)
        self.modules = nn.ModuleDict(
            {"transformer": self.pipe.transformer, "duration_embedder": self.pipe.duration_embedder}
        )
        self.adapter = adapter
        if adapter is not None:
            differential = self.pipe.transformer.config.use_differential_attention
            state, info = read_adapter(adapter, differential)
            layers = sorted({k.split(".parametrizations.")[0] for k in state})
            cfg = info.config
            torch_lora.attach(self.modules, layers, cfg.rank, cfg.alpha, cfg.adapter_type)
            torch_lora.load_adapter_state(self.modules, state)

    def render(self, demo: DemoConfig, strength: float) -> np.ndarray:
        """Stereo float32 [2, N] for `demo`, trimmed to its duration."""
        if self.adapter is not None:
            torch_lora.set_strength(self.modules, strength)
        elif strength != 0:
            raise ValueError("no adapter is attached: only strength 0 (the base) can render")
        return model.render_demo(self.pipe, demo)
