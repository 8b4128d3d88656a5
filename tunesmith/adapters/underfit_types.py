"""underfit's adapter types by name (stable-audio-3 `models/lora/model.py`), without importing
a model library: the settings check them, the torch and MLX modules implement them."""

ADAPTER_TYPES = (
    "lora",
    "dora-rows",
    "dora-cols",
    "bora",
    "lora-xs",
    "dora-rows-xs",
    "dora-cols-xs",
    "bora-xs",
)
XS_TYPES = tuple(t for t in ADAPTER_TYPES if t.endswith("-xs"))
# The types whose row norms stable-audio-3's `save_lora_safetensors(model=...)` bakes: names
# starting with "dora" whose norm is along dim 1.
BAKED_TYPES = ("dora-rows", "dora-rows-xs")
