"""An ACE-Step adapter as the tools its users run load it: one PEFT folder per adapter.

    <run>/adapter_model.safetensors   bf16 tensors under ACE-Step 1.5's original module names,
                                      `base_model.model.layers.N.self_attn.q_proj.lora_A.weight`
                                      (LoKr: `.lokr_w1`, `.lokr_w2` or `.lokr_w2_a`/`_b`)
    <run>/adapter_config.json         PEFT's LoraConfig / LoKrConfig, as PEFT writes it
    <run>/lokr_weights.safetensors    LoKr only: LyCORIS's layout of the same adapter
                                      (`lycoris_layers_N_self_attn_q_proj.lokr_w1`, `.alpha`),
                                      what Side-Step saves and LyCORIS loads

Why these names: ACE-Step 1.5's own trainer and Side-Step wrap the original DiT decoder
(`q_proj`, `k_proj`, `v_proj`, `o_proj`, `gate_proj`, `up_proj`, `down_proj`) with PEFT, so
their folders look like this one; ComfyUI's `comfy/lora.py` maps exactly
`base_model.model.<decoder module>` and `lycoris_<decoder module, dots as underscores>` onto its
ACE-Step 1.5 model; and diffusers' `AceStepPipeline.load_lora_weights` recognises this form
(a key holding `q_proj` or `k_proj`) and renames it to its own `to_q` ... `to_out.0`. A plain
PEFT folder under diffusers' names would load nothing there.

The scale. PEFT scales a factor pair by alpha/rank from adapter_config.json; diffusers reads no
adapter_config.json and takes alpha = rank unless the file carries its `lora_adapter_metadata`;
ComfyUI takes alpha only from `.alpha` tensors, which a PEFT file has none of, and then scales
by 1. So the trained scale alpha/rank is multiplied into one factor (LoRA's B, LoKr's w1) and the
config says alpha = rank: every one of those loaders then computes the trained function (the
trained rank and alpha are in the metadata, `tunesmith.rank` / `tunesmith.alpha`). The LyCORIS
twin keeps LyCORIS's own rule (`lokr_files`).

The trigger goes into the safetensors metadata (`hot_step_trigger`,
`hot_step_trigger_position`, `modelspec.trigger_phrase`, HOT-Step's keys), never into
adapter_config.json: PEFT builds its config as `LoraConfig(**json)`, and an unknown key is a
TypeError in some PEFT versions. The lineage the loop passes goes beside it.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import peft
import torch
from safetensors import safe_open

from tunesmith.adapters import lokr_files, torch_lokr, torch_lora
from tunesmith.store.atomic import atomic_write_bytes
from tunesmith.store.tensors import write_safetensors

WEIGHTS, CONFIG = "adapter_model.safetensors", "adapter_config.json"
LYCORIS = "lokr_weights.safetensors"  # Side-Step's name for its LyCORIS file
PREFIX = "base_model.model."
DTYPE = torch.bfloat16  # HOT-Step's and Side-Step's export dtype
# diffusers' attention projection names → ACE-Step 1.5's (diffusers' own conversion, inverted)
TO_ORIGINAL = ((".to_q", ".q_proj"), (".to_k", ".k_proj"), (".to_v", ".v_proj"),
               (".to_out.0", ".o_proj"))  # fmt: skip
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


@dataclass(frozen=True)
class PeftNames:
    """`<run>/adapter_model.safetensors` is the best adapter, `<run>.last/...` the last step's
    where it differs; no periodic files (the state is saved instead)."""

    folder: Path
    run: str

    def best(self, step: int) -> Path:
        return self.folder / self.run / WEIGHTS

    def checkpoint(self, step: int, epoch: int) -> None:
        return None

    def last(self, step: int, epoch: int) -> Path:
        return self.folder / f"{self.run}.last" / WEIGHTS


def trigger_metadata(trigger: str, position: str) -> dict[str, str]:
    if not trigger:
        return {}
    return {"hot_step_trigger": trigger, "hot_step_trigger_position": position,
            "modelspec.trigger_phrase": trigger}  # fmt: skip


def write_adapter(path: Path, transformer, run, trigger: tuple[str, str], metadata: dict) -> Path:
    """Write the run's adapter (LoRA or LoKr on `transformer`) as the folder of `path`."""
    a = run.adapter
    info = {"format": "pt", **metadata, **trigger_metadata(*trigger),
            "tunesmith.adapter_type": a.type, "tunesmith.rank": str(a.rank),
            "tunesmith.alpha": f"{a.scale_alpha:g}"}  # fmt: skip
    if a.type == "lokr":
        tensors, config = _lokr(transformer, run)
        lycoris = lokr_files.lycoris_state_dict(transformer, DTYPE, original_name)
        write_safetensors(path.parent / LYCORIS, lycoris,
                          {"algo": "lokr", "format": "lycoris", **info})  # fmt: skip
    else:
        tensors, config = _lora(transformer, run)
    write_safetensors(path, tensors, info)
    atomic_write_bytes(path.parent / CONFIG, config_bytes(config))  # last: a config means whole
    return path


def config_bytes(config: peft.PeftConfig) -> bytes:
    """adapter_config.json as PEFT's `save_pretrained` writes it (its `to_dict`, sets as lists,
    indent 2, sorted keys), except that sets are sorted: PEFT lists a set in hash order, which
    differs between processes, and the file's bytes must not."""
    document = {k: sorted(v) if isinstance(v, set) else v for k, v in config.to_dict().items()}
    return json.dumps(document, indent=2, sort_keys=True).encode()


def _lora(transformer, run) -> tuple[dict, peft.LoraConfig]:
    layers = torch_lora.adapter_layers(transformer)
    scale, tensors = run.adapter.scale_alpha / run.adapter.rank, {}
    for name, layer in layers.items():
        key = PREFIX + original_name(name)
        a = layer.lora_A[torch_lora.PEFT_ADAPTER].weight.detach().float()
        b = layer.lora_B[torch_lora.PEFT_ADAPTER].weight.detach().float()
        tensors[f"{key}.lora_A.weight"] = a.to(DTYPE).cpu()
        tensors[f"{key}.lora_B.weight"] = (b * scale).to(DTYPE).cpu()  # the scale, folded
    config = peft.LoraConfig(
        r=run.adapter.rank, lora_alpha=run.adapter.rank, lora_dropout=0.0, bias="none",
        target_modules=sorted(original_name(n) for n in layers), inference_mode=True,
        base_model_name_or_path=run.base_model,
    )  # fmt: skip
    return tensors, config


def _lokr(transformer, run) -> tuple[dict, peft.LoKrConfig]:
    layers = torch_lokr.adapter_layers(transformer)
    tensors = {}
    for name, layer in layers.items():
        key = PREFIX + original_name(name)
        for factor, param in layer.factors().items():
            value = param.detach().float()
            if factor == "lokr_w1":
                value = value * layer.scaling  # the scale, folded (module docstring)
            tensors[f"{key}.{factor}"] = value.to(DTYPE).cpu()
    config = lokr_files.peft_config(transformer, run.base_model, original_name)
    config.alpha = float(config.r)
    return tensors, config


def adapter_files(path: Path, adapter_type: str) -> list[Path]:
    names = [WEIGHTS, CONFIG] + ([LYCORIS] if adapter_type == "lokr" else [])
    return [Path(path).parent / name for name in names]


def remove_adapter(path: Path) -> None:
    folder = Path(path).parent
    for name in (WEIGHTS, CONFIG, LYCORIS):
        (folder / name).unlink(missing_ok=True)
    if folder.is_dir() and not any(folder.iterdir()):
        shutil.rmtree(folder)


def validate_files(path: str | Path) -> dict[str, str]:
    """Check an adapter folder (or its adapter_model.safetensors) as PEFT, diffusers and
    ComfyUI read it; returns the weights' metadata. Raises ValueError naming the rule."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    for name in (WEIGHTS, CONFIG):
        if not (folder / name).is_file():
            raise ValueError(f"{folder}: no {name}; an ACE-Step adapter is a PEFT folder of both")
    document = json.loads((folder / CONFIG).read_text(encoding="utf-8"))
    if document.get("task_type") == "CAUSAL_LM":  # a planner LoRA (ace-step-planner)
        from tunesmith.families.ace_step_planner.adapter_files import validate_folder

        return validate_folder(folder, LINEAGE)
    if any(k.startswith(("hot_step", "modelspec", "tunesmith")) for k in document):
        raise ValueError(
            f"{folder / CONFIG}: holds metadata keys; PEFT reads every key as a LoraConfig "
            "field, so they belong in the safetensors metadata"
        )
    config = peft.PeftConfig.from_pretrained(str(folder))
    lokr = isinstance(config, peft.LoKrConfig)
    if not lokr and not isinstance(config, peft.LoraConfig):
        raise ValueError(f"{folder / CONFIG}: a {type(config).__name__}, not LoRA or LoKr")
    with safe_open(folder / WEIGHTS, "pt") as f:
        metadata, keys = f.metadata() or {}, list(f.keys())
        dtypes = {f.get_slice(k).get_dtype() for k in keys}
    _check_keys(folder / WEIGHTS, keys, set(config.target_modules), lokr)
    if dtypes != {"BF16"}:
        raise ValueError(f"{folder / WEIGHTS}: tensors in {sorted(dtypes)}; expected BF16")
    missing = [k for k in LINEAGE if k not in metadata]
    if missing:
        raise ValueError(f"{folder / WEIGHTS}: lineage metadata missing: {', '.join(missing)}")
    if lokr and not (folder / LYCORIS).is_file():
        raise ValueError(f"{folder}: a LoKr adapter without its LyCORIS twin {LYCORIS}")
    return dict(metadata)


def _check_keys(path: Path, keys: list[str], targets: set[str], lokr: bool) -> None:
    suffixes = LOKR_SUFFIXES if lokr else LORA_SUFFIXES
    modules = set()
    for key in keys:
        suffix = next((s for s in suffixes if key.endswith(s)), None)
        if not key.startswith(PREFIX) or suffix is None:
            raise ValueError(f"{path}: key {key!r} is not {PREFIX}<module>{'|'.join(suffixes)}")
        module = key[len(PREFIX) : -len(suffix)]
        if any(f"{diffusers}." in f"{module}." for diffusers, _ in TO_ORIGINAL):
            raise ValueError(
                f"{path}: {module} is a diffusers name; ComfyUI and Side-Step read ACE-Step's "
                "original names (q_proj, k_proj, v_proj, o_proj)"
            )
        modules.add(module)
    if modules != targets:
        raise ValueError(f"{path}: its modules and adapter_config.json's target_modules differ "
                         f"({len(modules ^ targets)} not in both)")  # fmt: skip
    if not lokr and not any("q_proj" in k or "k_proj" in k for k in keys):
        raise ValueError(f"{path}: no q_proj or k_proj key; diffusers' AceStepPipeline "
                         "recognises ACE-Step's names by them and would load nothing")  # fmt: skip
