"""The planner adapter's two folders, and the factors both backends read and write.

Both backends hold the same numbers: per projection, LoRA factors A [r, in] and B [out, r] and
one scale alpha / r, applied as y = W x + (alpha / r) * B A x. `LoraFactors` is that, keyed by
the module's path in the causal LM (`model.layers.3.self_attn.q_proj`), which is the same path
in transformers' Qwen3ForCausalLM and in mlx-lm's qwen3 Model.

    PEFT     adapter_config.json        PEFT's own LoraConfig file (r, lora_alpha, targets)
             adapter_model.safetensors  `base_model.model.<module>.lora_A.weight` [r, in] and
                                        `.lora_B.weight` [out, r], bf16 (as PEFT names them when
                                        it saves a PeftModel of a causal LM; HOT-Step's LM export
                                        writes the same keys)
    mlx-lm   adapter_config.json        fine_tune_type, num_layers, lora_parameters {rank, scale,
                                        dropout, keys}: what mlx_lm.lora writes and
                                        mlx_lm.tuner.utils.load_adapters reads
             adapters.safetensors       `<module>.lora_a` [in, r] and `.lora_b` [r, out]
                                        (mlx-lm multiplies x @ lora_a @ lora_b, so both are the
                                        transposes of PEFT's), float32 as mlx-lm saves them

Both layouts hold the same numbers: `write` rounds the factors to bf16 once, and the mlx-lm
file keeps those values in float32 (`rounded`). So the two folders written from one adapter
compute the same planner, to float32's own error.

mlx-lm's `scale` is PEFT's alpha / r (its default of 20 is not used). `tunesmith/formats/`
writes and reads both (`peft.py`, `mlx_lm.py`); this module gives them the factors. In both
files the safetensors `__metadata__` carries the trigger (HOT-Step's keys,
`formats.trigger_metadata`) and the run's lineage, never adapter_config.json. Folders are
written to a temporary sibling and renamed in.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from tunesmith.formats import (
    FormatError,
    mlx_lm,
    read_header,
    replace_folder,
    text_metadata,
    trigger_metadata,
)
from tunesmith.formats import peft as peft_format

PEFT_WEIGHTS, MLX_WEIGHTS, CONFIG = peft_format.WEIGHTS, mlx_lm.WEIGHTS, peft_format.CONFIG
TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
MLX_KEYS = tuple(
    f"self_attn.{m}" if m.endswith(("q_proj", "k_proj", "v_proj", "o_proj")) else f"mlp.{m}"
    for m in TARGET_MODULES
)


@dataclass
class LoraFactors:
    """A LoRA over the planner's projections: {module: (A [r, in], B [out, r])} float32."""

    factors: dict[str, tuple[torch.Tensor, torch.Tensor]]
    rank: int
    alpha: float

    @property
    def scale(self) -> float:
        return self.alpha / self.rank


LAYOUTS = ("peft", "mlx-lm")
STORED = torch.bfloat16  # the PEFT file's dtype: half of float32's bytes, and PEFT upcasts it


def rounded(lora: LoraFactors) -> LoraFactors:
    """The factors as every planner file holds them: rounded to bf16, kept as float32.

    The PEFT file stores these values as bf16 and the mlx-lm twin as float32, so both give the
    same planner; without the shared rounding a float32 twin beside the bf16 file gives logits
    4.6e-3 apart (relative) on the tiny planner, enough to change sampled plans. The twin stays
    float32 because that is mlx-lm's own dtype for LoRA factors (its trainer makes and saves
    them so), and because mlx-lm computes `x @ lora_a` in the wider of the two dtypes: float32
    factors keep the update in float32 on a bf16 planner, as PEFT does after upcasting a bf16
    file on load; bf16 factors would round it to bf16 there.
    """
    factors = {
        m: (a.detach().to(STORED).float(), b.detach().to(STORED).float())
        for m, (a, b) in lora.factors.items()
    }
    return LoraFactors(factors, lora.rank, lora.alpha)


def write(
    folder: Path,
    layout: str,
    lora: LoraFactors,
    num_layers: int,
    base_model: str = "",
    trigger: str = "",
    trigger_position: str = "prepend",
    lineage: dict[str, str] | None = None,
) -> Path:
    """The adapter as a PEFT folder (`layout="peft"`: what `PeftModel.from_pretrained(planner,
    folder)` loads) or an mlx-lm one (`"mlx-lm"`: what `mlx_lm.load(planner,
    adapter_path=folder)` loads), written whole or not at all."""
    meta = _metadata(trigger, trigger_position, lineage)
    lora = rounded(lora)
    if layout == "peft":
        tensors = peft_format.lora_tensors(lora.factors, STORED)
        config = _peft_config(lora, base_model)

        def files(tmp: Path) -> None:
            peft_format.write(tmp, tensors, config, meta)

    elif layout == "mlx-lm":
        document = mlx_lm.config(base_model, num_layers, lora.rank, lora.scale, MLX_KEYS)

        def files(tmp: Path) -> None:
            mlx_lm.write(tmp, lora.factors, document, meta)

    else:
        raise ValueError(f"layout {layout!r}: expected one of {', '.join(LAYOUTS)}")
    return replace_folder(Path(folder), files)


def _peft_config(lora: LoraFactors, base_model: str):
    from peft import LoraConfig

    return LoraConfig(
        r=lora.rank,
        lora_alpha=lora.alpha,
        lora_dropout=0.0,
        target_modules=list(TARGET_MODULES),
        bias="none",
        task_type="CAUSAL_LM",
        base_model_name_or_path=base_model or None,
    )


class AdapterFolders:
    """`save` and `load` of a planner LoRA as PEFT or mlx-lm folders, for a backend's LoRA
    class that has `factors()`, `set_factors(lora)`, `num_layers` and `base_folder`."""

    default_layout = "peft"

    def save(self, folder: Path, layout: str = "", **labels) -> Path:
        """Write the adapter as a PEFT (`layout="peft"`) or mlx-lm (`"mlx-lm"`) folder, the
        backend's own layout when none is named; `labels` are `write`'s trigger,
        trigger_position and lineage."""
        layout = layout or self.default_layout
        # The planner's folder name, never its path: adapters are shared, and the path of the
        # machine that trained says where nothing is on another one.
        base = Path(self.base_folder).name
        return write(folder, layout, self.factors(), self.num_layers, base, **labels)

    def load(self, folder: Path) -> dict[str, str]:
        """Load a PEFT or mlx-lm adapter folder; returns its safetensors metadata."""
        lora, metadata = read(folder)
        self.set_factors(lora)
        return metadata


def read(folder: Path) -> tuple[LoraFactors, dict[str, str]]:
    """(factors, safetensors metadata) of a PEFT or mlx-lm adapter folder."""
    from peft import LoraConfig

    folder = Path(folder)
    if (folder / PEFT_WEIGHTS).is_file():
        tensors, config, metadata = peft_format.read(folder, (LoraConfig,))
        if config.use_dora or config.use_rslora:
            raise FormatError(f"{folder}: a PEFT adapter other than a plain LoRA (r, lora_alpha)")
        factors = peft_format.lora_factors(tensors, folder / PEFT_WEIGHTS)
        return LoraFactors(factors, int(config.r), float(config.lora_alpha)), metadata
    if (folder / MLX_WEIGHTS).is_file():
        factors, document, metadata = mlx_lm.read(folder)
        rank = int(document["lora_parameters"]["rank"])
        scale = float(document["lora_parameters"]["scale"])
        return LoraFactors(factors, rank, scale * rank), metadata
    raise FormatError(f"{folder}: neither {PEFT_WEIGHTS} (PEFT) nor {MLX_WEIGHTS} (mlx-lm)")


def read_metadata(folder: Path) -> dict[str, str]:
    """The safetensors metadata of an adapter folder's weights file."""
    folder = Path(folder)
    path = folder / PEFT_WEIGHTS if (folder / PEFT_WEIGHTS).is_file() else folder / MLX_WEIGHTS
    return read_header(path)[0]


def validate_folder(folder: Path, lineage: tuple[str, ...] = ()) -> dict[str, str]:
    """Check a planner PEFT folder as PEFT loads it, and its mlx-lm twin `<folder>.mlx-lm`
    beside it (as the trainer writes them: the same modules, rank, scale, factor values and
    lineage); returns the PEFT weights' metadata. ValueError naming the file and the rule."""
    from peft import LoraConfig

    folder = Path(folder)
    suffixes = (".lora_A.weight", ".lora_B.weight")
    config, metadata, _ = peft_format.validate(folder, (LoraConfig,), suffixes, "BF16", lineage)
    if config.task_type != "CAUSAL_LM":
        raise FormatError(f"{folder / CONFIG}: a {type(config).__name__}, not a causal-LM LoRA")
    lora, _ = read(folder)
    twin = folder.parent / f"{folder.name}.mlx-lm"
    mlx, mlx_metadata = read(twin)
    if (dtypes := read_header(twin / MLX_WEIGHTS)[2]) != {"F32"}:
        raise FormatError(f"{twin / MLX_WEIGHTS}: tensors in {sorted(dtypes)}; expected F32")
    if set(mlx.factors) != set(lora.factors) or mlx.rank != lora.rank:
        raise FormatError(f"{twin}: its modules or rank differ from {folder}")
    if mlx.scale != lora.scale or any(
        not (torch.equal(a, lora.factors[m][0]) and torch.equal(b, lora.factors[m][1]))
        for m, (a, b) in mlx.factors.items()
    ):
        raise FormatError(f"{twin}: its scale or factors differ from {folder}'s (bf16) values")
    if any(mlx_metadata.get(k) != metadata.get(k) for k in lineage):
        raise FormatError(f"{twin / MLX_WEIGHTS}: its lineage differs from {folder}")
    return metadata


def _metadata(trigger: str, position: str, lineage: dict[str, str] | None) -> dict[str, str]:
    return {**text_metadata(lineage), **trigger_metadata(trigger, position)}
