"""How many layers a loader attached, against how many an adapter file holds.

A loader that finds only some of a file's modules (PEFT on a model that names them otherwise)
attaches those and drops the rest without a word, and an output check on a few inputs may not
show it; so every test that loads an adapter with diffusers, PEFT or LyCORIS also counts.
"""

from __future__ import annotations

from pathlib import Path

from safetensors import safe_open
from torch import nn

# what follows a layer's name in the files tunesmith writes: PEFT and diffusers, kohya, LoKr
# in PEFT's and LyCORIS's layouts
FACTORS = (
    ".lora_A.weight",
    ".lora_B.weight",
    ".lora_down.weight",
    ".lora_up.weight",
    ".alpha",
    ".lokr_w1",
    ".lokr_w2",
    ".lokr_w2_a",
    ".lokr_w2_b",
)


def layers_in_file(path: Path) -> int:
    """The layers an adapter file holds: its keys less their factor suffixes."""
    with safe_open(path, "pt") as f:
        keys = list(f.keys())
    stems = set()
    for key in keys:
        suffix = next((s for s in FACTORS if key.endswith(s)), None)
        assert suffix is not None, f"{path}: {key!r} is no adapter factor this helper knows"
        stems.add(key[: -len(suffix)])
    return len(stems)


def peft_layers(model: nn.Module) -> int:
    """The modules PEFT wrapped (directly, or for diffusers' `load_lora_weights`)."""
    from peft.tuners.tuners_utils import BaseTunerLayer

    return sum(isinstance(m, BaseTunerLayer) for m in model.modules())


def assert_attached_whole(attached: int, path: Path) -> None:
    held = layers_in_file(path)
    assert attached == held, f"{path}: the loader attached {attached} of its {held} layers"
