"""Rendering Stable Audio 3 demos: the pipeline a user calls, with an adapter applied.

A render is exactly `StableAudio3Pipeline(prompt, duration, num_inference_steps,
guidance_scale, generator=torch.Generator().manual_seed(seed))` with the adapter attached
at a strength; strength 0 is the base model bit for bit (every adapter type returns the
base layer's output unchanged at strength 0), so base and adapter renders differ only by
what the adapter learned.

A demo with `arc = true` renders on the ARC model instead (`arc.py`): the base model's distilled
sibling with the adapter merged into it at the strength, sampled ping-pong (8 steps, cfg 1 by
default); strength 0 is the ARC model alone, bit for bit. `details()` marks such a render for
its sidecar: `model` "ARC", the ARC model's folder and the sampler.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from torch import nn

from tunesmith.adapters import torch_lora
from tunesmith.backends.placement import Placement
from tunesmith.families.stable_audio_3 import arc, model
from tunesmith.families.stable_audio_3.files import read_adapter
from tunesmith.families.stable_audio_3.trainer import DTYPES
from tunesmith.train.config import DemoConfig


class Renderer:
    kind, sample_rate = "audio", model.SAMPLE_RATE

    def __init__(
        self,
        base_model: Path,
        placement: Placement,
        adapter: Path | None = None,
        arc_model: str = "",
    ):
        """`arc_model`: the run's `train.arc_model` ("" for the base model's ARC sibling)."""
        self.base_model, self.placement = Path(base_model), placement
        self.arc_folder = arc.arc_model_folder(self.base_model, arc_model)
        self.pipe = model.load_pipeline(base_model, DTYPES[placement.dtype], placement.device)
        self.modules = nn.ModuleDict(
            {"transformer": self.pipe.transformer, "duration_embedder": self.pipe.duration_embedder}
        )
        self.adapter, self.state, self.info = adapter, None, None
        if adapter is not None:
            differential = self.pipe.transformer.config.use_differential_attention
            self.state, self.info = read_adapter(adapter, differential)
            cfg = self.info.config
            torch_lora.attach(self.modules, self.targets(), cfg.rank, cfg.alpha, cfg.adapter_type)
            torch_lora.load_adapter_state(self.modules, self.state)
        self._arc: arc.ArcModel | None = None  # loaded for the first `arc` demo
        self.drawn_by: dict = {}  # what `details` reports of the last render

    def targets(self) -> list[str]:
        return sorted({k.split(".parametrizations.")[0] for k in self.state})

    def render(self, demo: DemoConfig, strength: float) -> np.ndarray:
        """Stereo float32 [2, N] for `demo`, trimmed to its duration."""
        if self.adapter is None and strength != 0:
            raise ValueError("no adapter is attached: only strength 0 (the base) can render")
        if getattr(demo, "arc", False):
            self.drawn_by = {
                "model": "ARC",
                "model_folder": str(self.arc_folder),
                "sampler": "ping-pong",
            }
            return self.arc_model().render(demo, strength)
        self.drawn_by = {}
        if self.adapter is not None:
            torch_lora.set_strength(self.modules, strength)
        return model.render_demo(self.pipe, demo)

    def arc_model(self) -> arc.ArcModel:
        """The ARC model with this renderer's adapter ready to merge, loaded once."""
        if self._arc is None:
            loaded = arc.ArcModel(
                self.arc_folder, DTYPES[self.placement.dtype], self.placement.device
            )
            if self.adapter is not None:
                cfg = self.info.config
                # -xs: U, V of the adapters attached to the base model above, which the
                # adapter was trained with (arc.py).
                loaded.attach(self.targets(), cfg.rank, cfg.alpha, cfg.adapter_type, self.modules)
                loaded.load_state(self.state)
            self._arc = loaded
        return self._arc

    def details(self) -> dict:
        """What the renders stage adds to the last render's sidecar: for a render on the ARC
        model `model` "ARC", its folder and the sampler; nothing for the base model's (a
        sidecar without `model` is the base model's, as every sidecar before ARC demos)."""
        return dict(self.drawn_by)
