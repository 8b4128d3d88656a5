"""An SDXL run's settings: a LoRA on every attention projection of the UNet, as kohya's and
diffusers' SDXL LoRA trainers make it (docs/conventions/sdxl.md)."""

from __future__ import annotations

from dataclasses import dataclass

from tunesmith.train.config import AdapterConfig, DemoConfig, TrainConfig


@dataclass(frozen=True)
class SdxlAdapter(AdapterConfig):
    type: str = "lora"  # the only type: to_q/to_k/to_v/to_out.0 of every attention block
    rank: int = 16  # kohya's common network_dim for SDXL styles; alpha None: alpha = rank


@dataclass(frozen=True)
class SdxlTrain(TrainConfig):
    lr: float = 1e-4  # diffusers' train_text_to_image_lora_sdxl default
    size: int = 1024  # the square side pictures are fitted to (SDXL's own 1024)


@dataclass(frozen=True)
class SdxlDemo(DemoConfig):
    steps: int = 50
    cfg: float = 7.0


def problems(run) -> list[str]:
    found = []
    if run.adapter.type != "lora":
        found.append(
            "the sdxl family trains adapter.type lora on every attention projection of the UNet, "
            f"got {run.adapter.type!r}"
        )
    size = run.train.size
    if isinstance(size, bool) or not isinstance(size, int) or size < 8 or size % 8:
        found.append(f"train.size must be a positive multiple of 8, got {size!r}")
    return found
