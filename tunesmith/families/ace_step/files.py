"""An ACE-Step adapter as the tools its users run load it: a PEFT folder under ACE-Step's own
module names, and its twin under diffusers' names.

    <run>/adapter_model.safetensors   bf16 tensors under ACE-Step 1.5's original module names,
                                      `base_model.model.layers.N.self_attn.q_proj.lora_A.weight`
                                      (LoKr: `.lokr_w1`, `.lokr_w2` or `.lokr_w2_a`/`_b`)
    <run>/adapter_config.json         PEFT's LoraConfig / LoKrConfig, as PEFT writes it
                                      (its sets sorted)
    <run>/lokr_weights.safetensors    LoKr only: LyCORIS's layout of the same adapter
                                      (`lycoris_layers_N_self_attn_q_proj.lokr_w1`, `.alpha`),
                                      what Side-Step saves and LyCORIS loads
    <run>.diffusers/                  the same tensors, metadata and config under diffusers'
                                      names (`self_attn.to_q` ... `to_out.0`): the folder
                                      `PeftModel.from_pretrained(pipe.transformer, ...)` takes

Why the original names: ACE-Step 1.5's own trainer and Side-Step wrap the original DiT decoder
(`q_proj`, `k_proj`, `v_proj`, `o_proj`, `gate_proj`, `up_proj`, `down_proj`) with PEFT, so
their folders look like this one; ComfyUI's `comfy/lora.py` maps exactly
`base_model.model.<decoder module>` and `lycoris_<decoder module, dots as underscores>` onto its
ACE-Step 1.5 model; and diffusers' `AceStepPipeline.load_lora_weights` recognises this form
(a key holding `q_proj` or `k_proj`) and renames it to its own `to_q` ... `to_out.0`. A PEFT
folder under diffusers' names loads nothing there (diffusers logs "No LoRA keys associated to
AceStepTransformer1DModel").

Why the twin: PEFT renames nothing. On diffusers' `AceStepTransformer1DModel` the original
folder's attention targets match no module, so PEFT wraps only the MLP (6 of 22 layers on the
tiny model) and drops the attention tensors without a word; the twin's targets are the DiT's
own. The converse holds too: the twin on ACE-Step's decoder loses the attention the same way,
so each folder is named for its model. One folder cannot serve both: diffusers' loader wants
the original names under PEFT's prefix, PEFT on diffusers' DiT the diffusers names.

The scale. PEFT scales a factor pair by alpha/rank from adapter_config.json; diffusers reads no
adapter_config.json and takes alpha = rank unless the file carries its `lora_adapter_metadata`;
ComfyUI takes alpha only from `.alpha` tensors, which a PEFT file has none of, and then scales
by 1. So the trained scale alpha/rank is multiplied into one factor (LoRA's B, LoKr's w1) and the
config says alpha = rank: every one of those loaders then computes the trained function (the
trained rank and alpha are in the metadata, `tunesmith.rank` / `tunesmith.alpha`). The LyCORIS
twin folds the scale into w1 the same way and stores `.alpha` = dim
(`tunesmith/formats/lycoris.py`).

The files are written by `tunesmith/formats/` (`peft.py`, `lycoris.py`); this module gives them
the names. The trigger goes into the safetensors metadata (HOT-Step's keys,
`formats.trigger_metadata`), never into adapter_config.json, and the lineage the loop passes
goes beside it. Not handled: a folder written before the twin existed gets none (its check
says so); the twin of a LoKr adapter has no LyCORIS file (LyCORIS and ComfyUI take the
original names).
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import peft
import torch

from tunesmith.adapters import lokr_files, torch_lokr, torch_lora
from tunesmith.formats import FormatError, lycoris, trigger_metadata
from tunesmith.formats import peft as peft_format

WEIGHTS, CONFIG = peft_format.WEIGHTS, peft_format.CONFIG
LYCORIS = "lokr_weights.safetensors"  # Side-Step's name for its LyCORIS file
TWIN = ".diffusers"  # <run>/ → <run>.diffusers/, as the planner's <run>.mlx-lm/
DTYPE = torch.bfloat16  # HOT-Step's and Side-Step's export dtype
# diffusers' attention projection names → ACE-Step 1.5's (diffusers' own conversion, inverted)
TO_ORIGINAL = (
    (".to_q", ".q_proj"),
    (".to_k", ".k_proj"),
    (".to_v", ".v_proj"),
    (".to_out.0", ".o_proj"),
)
LINEAGE = ("tunesmith.version", "tunesmith.base_model_fingerprint", "tunesmith.run_key")
LORA_SUFFIXES = (".lora_A.weight", ".lora_B.weight")
LOKR_SUFFIXES = tuple(f".{n}" for n in ("lokr_w1", *torch_lokr.W2_NAMES))


def original_name(name: str) -> str:
    """`layers.0.self_attn.to_out.0` → `layers.0.self_attn.o_proj` (MLP names are shared)."""
    for diffusers, original in TO_ORIGINAL:
        if name.endswith(diffusers):
            return name[: -len(diffusers)] + original
    return name


def diffusers_name(name: str) -> str:
    for diffusers, original in TO_ORIGINAL:
        if name.endswith(original):
            return name[: -len(original)] + diffusers
    return name


def twin_folder(path: Path) -> Path:
    """The diffusers-named twin of the adapter folder holding `path` (its weights)."""
    folder = Path(path).parent
    return folder.with_name(folder.name + TWIN)


def as_diffusers(tensors: dict, config: peft.PeftConfig) -> tuple[dict, peft.PeftConfig]:
    """An original-named adapter's (`<module><suffix>` → tensor, config) under diffusers'
    module names, the tensors themselves unchanged."""
    renamed = {}
    for key, value in tensors.items():
        suffix = next(s for s in LORA_SUFFIXES + LOKR_SUFFIXES if key.endswith(s))
        renamed[diffusers_name(key[: -len(suffix)]) + suffix] = value
    targets = sorted(diffusers_name(m) for m in config.target_modules)
    return renamed, dataclasses.replace(config, target_modules=targets)


def write_adapter(path: Path, transformer, run, trigger: tuple[str, str], metadata: dict) -> Path:
    """Write the run's adapter (LoRA or LoKr on `transformer`) as the folder of `path`."""
    a = run.adapter
    # "format": "pt" stands in the LyCORIS twin's metadata too, over Side-Step's "lycoris"
    info = {
        "format": "pt",
        **metadata,
        **trigger_metadata(*trigger),
        "tunesmith.adapter_type": a.type,
        "tunesmith.rank": str(a.rank),
        "tunesmith.alpha": f"{a.scale_alpha:g}",
    }
    if a.type == "lokr":
        tensors, config = lokr_files.peft_adapter(transformer, DTYPE, run.base_model, original_name)
        layout = lokr_files.lycoris_state_dict(transformer, DTYPE, original_name)
        lycoris.write(path.parent / LYCORIS, layout, info)
    else:
        tensors, config = _lora(transformer, run)
    # The twin first: the original folder's config, written last, means both are whole.
    peft_format.write(twin_folder(path), *as_diffusers(tensors, config), info)
    peft_format.write(path.parent, tensors, config, info)
    return path


def _lora(transformer, run) -> tuple[dict, peft.LoraConfig]:
    layers = torch_lora.adapter_layers(transformer)
    scale, factors = run.adapter.scale_alpha / run.adapter.rank, {}
    for name, layer in layers.items():
        a = layer.lora_A[torch_lora.PEFT_ADAPTER].weight.detach().float()
        b = layer.lora_B[torch_lora.PEFT_ADAPTER].weight.detach().float()
        factors[original_name(name)] = (a, b * scale)  # the scale, folded
    config = peft.LoraConfig(
        r=run.adapter.rank,
        lora_alpha=run.adapter.rank,
        lora_dropout=0.0,
        bias="none",
        target_modules=sorted(factors),
        inference_mode=True,
        base_model_name_or_path=Path(run.base_model).name,  # a name, not this machine's path
    )
    return peft_format.lora_tensors(factors, DTYPE), config


def adapter_files(path: Path, adapter_type: str) -> list[Path]:
    names = [WEIGHTS, CONFIG] + ([LYCORIS] if adapter_type == "lokr" else [])
    twin = twin_folder(path)
    return [Path(path).parent / name for name in names] + [twin / WEIGHTS, twin / CONFIG]


def remove_adapter(path: Path) -> None:
    for folder in (Path(path).parent, twin_folder(path)):
        for name in (WEIGHTS, CONFIG, LYCORIS):
            (folder / name).unlink(missing_ok=True)
        if folder.is_dir() and not any(folder.iterdir()):
            shutil.rmtree(folder)


def validate_files(path: str | Path) -> dict[str, str]:
    """Check an adapter folder (or its adapter_model.safetensors) and its diffusers-named twin
    as PEFT, diffusers and ComfyUI read them; returns the weights' metadata. Raises ValueError
    naming the rule."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    original = folder.with_name(folder.name.removesuffix(TWIN))
    if original != folder and (original / WEIGHTS).is_file():  # the twin: check the pair
        folder = original
    config = peft_format.read_config(folder, (peft.LoraConfig, peft.LoKrConfig))
    if config.task_type == "CAUSAL_LM":  # a planner LoRA (ace-step-planner)
        from tunesmith.families.ace_step_planner.adapter_files import validate_folder

        return validate_folder(folder, LINEAGE)
    lokr = isinstance(config, peft.LoKrConfig)
    suffixes = LOKR_SUFFIXES if lokr else LORA_SUFFIXES
    _, metadata, modules = peft_format.validate(
        folder, (type(config),), suffixes, "BF16", LINEAGE, _original_names_only
    )
    if not lokr and not any("q_proj" in m or "k_proj" in m for m in modules):
        raise FormatError(
            f"{folder / WEIGHTS}: no q_proj or k_proj key; diffusers' AceStepPipeline "
            "recognises ACE-Step's names by them and would load nothing"
        )
    if lokr:
        if not (folder / LYCORIS).is_file():
            raise FormatError(f"{folder}: a LoKr adapter without its LyCORIS twin {LYCORIS}")
        lycoris.validate(folder / LYCORIS)
    _validate_twin(folder, suffixes)
    return metadata


def _validate_twin(folder: Path, suffixes: tuple[str, ...]) -> None:
    """The twin holds the folder's tensors, metadata and config, under diffusers' names."""
    twin = twin_folder(folder / WEIGHTS)
    if not (twin / WEIGHTS).is_file() and not (twin / CONFIG).is_file():
        raise FormatError(
            f"{folder}: no diffusers-named twin {twin.name}/ beside it; PEFT on diffusers' "
            "AceStepTransformer1DModel would attach only the MLP layers of this folder"
        )
    kinds = (peft.LoraConfig, peft.LoKrConfig)
    peft_format.validate(twin, kinds, suffixes, "BF16", LINEAGE, _diffusers_names_only)
    tensors, config, metadata = peft_format.read(folder, kinds)
    theirs, their_config, their_metadata = peft_format.read(twin, kinds)
    ours, our_config = as_diffusers(tensors, config)
    same = ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    if not same or metadata != their_metadata:
        raise FormatError(f"{twin}: its tensors or metadata are not those of {folder.name}/")
    if peft_format.config_bytes(our_config) != peft_format.config_bytes(their_config):
        raise FormatError(f"{twin / CONFIG}: not {folder.name}/'s config under diffusers' names")


def _original_names_only(path: Path, module: str) -> None:
    if any(f"{diffusers}." in f"{module}." for diffusers, _ in TO_ORIGINAL):
        raise FormatError(
            f"{path}: {module} is a diffusers name; ComfyUI and Side-Step read ACE-Step's "
            "original names (q_proj, k_proj, v_proj, o_proj)"
        )


def _diffusers_names_only(path: Path, module: str) -> None:
    if any(f"{original}." in f"{module}." for _, original in TO_ORIGINAL):
        raise FormatError(
            f"{path}: {module} is ACE-Step's original name; PEFT on diffusers' DiT finds only "
            "its own (to_q, to_k, to_v, to_out.0)"
        )
