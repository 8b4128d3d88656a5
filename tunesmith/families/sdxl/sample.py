"""Rendering SDXL demos: the pipeline a user calls, with an adapter applied.

A render is exactly `StableDiffusionXLPipeline(prompt, height=size, width=size,
num_inference_steps, guidance_scale, generator=torch.Generator().manual_seed(seed))`, the
picture as the pipeline's own PIL conversion makes it. The adapter file is loaded with the
pipeline's `load_lora_weights`, as a user loads it, and its strength set with `set_adapters`;
at strength 0 every LoRA layer adds exactly zero, so the base render is the base model's.
During training the trainer's own pipeline (its UNet carrying the adapter as it is now)
renders through `render_demo`, so the samples and the stage's renders are the same code.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from tunesmith.backends.placement import Placement
from tunesmith.families.sdxl.model import load_pipeline
from tunesmith.train.config import DemoConfig

ADAPTER = "tunesmith"
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def render_demo(pipe, demo: DemoConfig, size: int) -> np.ndarray:
    """uint8 [size, size, 3] for `demo`."""
    generator = torch.Generator().manual_seed(demo.seed)
    with torch.no_grad():
        image = pipe(
            prompt=demo.prompt,
            height=size,
            width=size,
            num_inference_steps=demo.steps,
            guidance_scale=demo.cfg,
            generator=generator,
        ).images[0]
    return np.asarray(image.convert("RGB"), dtype=np.uint8)


class Renderer:
    kind = "image"

    def __init__(
        self, base_model: Path, placement: Placement, size: int, adapter: Path | None = None
    ):
        self.pipe = load_pipeline(base_model, DTYPES[placement.dtype], placement.device)
        self.size, self.adapter = size, adapter
        if adapter is not None:
            from diffusers.utils import logging as diffusers_logging

            adapter, level = Path(adapter), diffusers_logging.get_verbosity()
            # The file holds UNet factors only; diffusers would say so once per text encoder.
            diffusers_logging.set_verbosity_error()
            try:
                self.pipe.load_lora_weights(
                    str(adapter.parent), weight_name=adapter.name, adapter_name=ADAPTER
                )
            finally:
                diffusers_logging.set_verbosity(level)

    def render(self, demo: DemoConfig, strength: float) -> np.ndarray:
        if self.adapter is not None:
            self.pipe.set_adapters([ADAPTER], adapter_weights=[strength])
        elif strength != 0:
            raise ValueError("no adapter is attached: only strength 0 (the base) can render")
        return render_demo(self.pipe, demo, self.size)
