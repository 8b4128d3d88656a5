"""An SDXL run's settings: a LoRA on every attention projection of the UNet, as kohya's and
diffusers' SDXL LoRA trainers make it (docs/conventions/sdxl.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from tunesmith.train.config import AdapterConfig, DemoConfig, TrainConfig
from tunesmith.train.schema import Count, Ge, MultipleOf, Number, Positive


@dataclass(frozen=True)
class SdxlAdapter(AdapterConfig):
    type: Literal["lora"] = "lora"  # the only type: to_q/to_k/to_v/to_out.0 of every attention
    rank: Count = 16  # kohya's common network_dim for SDXL styles; alpha None: alpha = rank


@dataclass(frozen=True)
class SdxlTrain(TrainConfig):
    lr: Positive = 1e-4  # diffusers' train_text_to_image_lora_sdxl default
    size: Annotated[int, Ge(8), MultipleOf(8)] = 1024  # the square side pictures are fitted to
    # (SDXL's own 1024; the VAE halves a side three times)


@dataclass(frozen=True)
class SdxlDemo(DemoConfig):
    steps: Count = 50
    cfg: Number = 7.0
