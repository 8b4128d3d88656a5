"""The SDXL family's adapter types and a run's adapter settings, without torch (the run's
config checks them on every build; `adapters.py` attaches them)."""

from __future__ import annotations

from dataclasses import dataclass

ADAPTER_TYPES = ("lora", "dora", "locon", "lokr", "loha")
PEFT_TYPES = ("lora", "dora")  # PEFT's LoraConfig; the others are LyCORIS's modules
LYCORIS_TYPES = ("locon", "lokr", "loha")
PEFT_FILE_TYPES = ("lora", "dora", "locon")  # the types diffusers' load_lora_weights reads


class AdapterError(ValueError):
    """Adapter settings that do not go together, or a model they cannot be attached to."""


@dataclass(frozen=True)
class AdapterSpec:
    """What an adapter is, from a run's `[runs.adapter]`."""

    type: str = "lora"
    rank: int = 16
    alpha: float = 16.0
    conv_dim: int = 0  # 0: no conv layers (kohya's networks/lora.py without conv_dim)
    conv_alpha: float = 0.0  # the conv layers' alpha (`of` makes None conv_dim)
    factor: int = -1  # LoKr's factor; LyCORIS's default -1: the most even split

    @classmethod
    def of(cls, adapter) -> AdapterSpec:
        """From a run's adapter section (`SdxlAdapter`); settings it lacks take the defaults."""
        conv_dim = int(getattr(adapter, "conv_dim", 0) or 0)
        conv_alpha = getattr(adapter, "conv_alpha", None)
        return cls(
            type=adapter.type,
            rank=int(adapter.rank),
            alpha=float(adapter.scale_alpha),
            conv_dim=conv_dim,
            conv_alpha=float(conv_dim if conv_alpha is None else conv_alpha),
            factor=int(getattr(adapter, "factor", -1)),
        )

    def problems(self) -> list[str]:
        found = []
        if self.type not in ADAPTER_TYPES:
            found.append(f"adapter.type {self.type!r}: one of {', '.join(ADAPTER_TYPES)}")
        if self.factor != -1 and self.type != "lokr":
            found.append(f"adapter.factor {self.factor} is LoKr's: type is {self.type!r}")
        if self.factor != -1 and self.factor < 2:
            found.append(f"adapter.factor {self.factor}: -1 (automatic) or 2 and more")
        return found

    @property
    def peft(self) -> bool:
        return self.type in PEFT_TYPES
