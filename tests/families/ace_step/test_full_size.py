"""ACE-Step 1.5 at its published size, on the meta device: the components build from their
config.json at the release's parameter counts, and the adapter files a run writes at the
default settings (HOT-Step's LoRA r128 and LoKr dim 512, factor 6) name modules of the full
DiT, as many as ComfyUI's ACE-Step 1.5 key map and diffusers' loader find there.

The files are the family's own writer's (`files.write_adapter`) over the adapter the trainer
attaches (`trainer.attach`); nothing is materialised: the writer's copies to the CPU stay on
`meta` (`MetaCopies`) and what it would write to disk is kept instead (`captured`).
"""

from __future__ import annotations

from pathlib import Path

import peft
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from tests.attached import peft_layers
from tunesmith.families.ace_step import files, full_size
from tunesmith.families.ace_step.trainer import attach
from tunesmith.formats import peft as peft_format
from tunesmith.train.config import resolve_run

# Per DiT block the trainer adapts self- and cross-attention's q, k, v, o and the MLP's gate,
# up and down (HOT-Step's and Side-Step's targets); the release has 24 blocks.
BLOCKS = full_size.PUBLISHED["transformer"]["num_hidden_layers"]
LAYERS, MLP = BLOCKS * (4 + 4 + 3), BLOCKS * 3


class MetaCopies(TorchDispatchMode):
    """A copy of a meta tensor to another device stays on meta (the writer's `.cpu()`)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func is torch.ops.aten._to_copy.default and args[0].is_meta:
            kwargs["device"] = torch.device("meta")
        return func(*args, **kwargs)


def run_of(adapter_type: str):
    raw = {"name": "r", "family": "ace-step", "base_model": "m", "adapter": {"type": adapter_type}}
    return resolve_run(raw, Path("tunesmith.toml"), 0)


@pytest.fixture(scope="module")
def captured():
    """adapter type → {file name: (key → meta tensor, PEFT config or None)}, as
    `files.write_adapter` would write them for the full DiT."""
    out = {}
    for adapter_type in ("lora", "lokr"):
        written = {}

        def peft_write(folder, tensors, config, metadata=None, into=written):
            keys = {peft_format.PREFIX + k: v for k, v in tensors.items()}  # as write() keys them
            into[Path(folder).name] = (keys, config)

        def lycoris_write(path, tensors, metadata=None, into=written):
            into[Path(path).name] = (dict(tensors), None)

        dit = full_size.build("transformer")
        run = run_of(adapter_type)
        attach(dit, run.adapter, run.train.seed)
        with pytest.MonkeyPatch.context() as patch, MetaCopies():
            patch.setattr(files.peft_format, "write", peft_write)
            patch.setattr(files.lycoris, "write", lycoris_write)
            files.write_adapter(Path("out/r/adapter_model.safetensors"), dit, run, ("", ""), {})
        out[adapter_type] = written
    return out


def test_the_components_build_at_the_releases_sizes():
    counts = {
        part: sum(p.numel() for p in full_size.build(part).parameters()) for part in full_size.PARTS
    }
    # Two published numbers to hold them to: keras-hub's Qwen3-Embedding-0.6B preset counts
    # 595,776,512 parameters, and the release's bf16 files hold 2 bytes each plus a header
    # (vae/diffusion_pytorch_model.safetensors 337,431,388 bytes, the text encoder's
    # model.safetensors 1,191,586,416). The rest are the classes at the configs.
    assert counts == {
        "vae": 168_695_426,
        "text_encoder": 595_776_512,
        "transformer": 1_575_458_880,
        "condition_encoder": 608_369_664,
        "audio_tokenizer": 105_032_198,
        "audio_token_detokenizer": 105_011_776,
    }
    dit = full_size.build("transformer", dtype=torch.float32)
    assert dit.dtype == torch.float32 and next(dit.parameters()).is_meta


def comfy_key_map(dit) -> set[str]:
    """The LoRA keys ComfyUI's `model_lora_keys_unet` (its `ACEStep15` branch) maps onto the
    decoder: for each weight `diffusion_model.decoder.<m>.weight`, `base_model.model.<m>` and
    `lycoris_<m with dots as underscores>`; its decoder keeps ACE-Step's own names."""
    keys = set()
    for name, _ in dit.named_parameters():
        if name.endswith(".weight"):
            module = files.original_name(name.removesuffix(".weight"))
            keys |= {f"base_model.model.{module}", "lycoris_" + module.replace(".", "_")}
    return keys


def modules(keys, suffixes: tuple[str, ...]) -> set[str]:
    found = set()
    for key in keys:
        suffix = next(s for s in suffixes if key.endswith(s))
        found.add(key.removesuffix(suffix))
    return found


@pytest.mark.parametrize("adapter_type", ["lora", "lokr"])
def test_the_original_named_files_map_through_comfyuis_ace_step_key_map(captured, adapter_type):
    key_map = comfy_key_map(full_size.build("transformer"))
    written = captured[adapter_type]
    suffixes = files.LORA_SUFFIXES if adapter_type == "lora" else files.LOKR_SUFFIXES
    found = modules(written["r"][0], suffixes)
    assert len(found) == LAYERS and found <= key_map, sorted(found - key_map)[:3]
    assert sorted(written["r"][1].target_modules) == sorted(
        m.removeprefix(peft_format.PREFIX) for m in found
    )
    if adapter_type == "lokr":  # LyCORIS's twin: w1, w2 (dim 512 keeps w2 whole) and alpha
        tensors = written[files.LYCORIS][0]
        assert len(tensors) == 3 * LAYERS
        assert modules(tensors, (*files.LOKR_SUFFIXES, ".alpha")) <= key_map
    # the diffusers twin is not ComfyUI's: its attention names are diffusers'
    assert len(modules(written["r.diffusers"][0], suffixes) & key_map) == MLP


def test_diffusers_loader_attaches_every_layer_of_our_lora_to_the_full_dit(captured):
    from diffusers import AceStepPipeline

    tensors, _ = captured["lora"]["r"]
    state = AceStepPipeline.lora_state_dict(dict(tensors))  # renames ACE-Step's names
    assert len(state) == 2 * LAYERS and all(k.startswith("transformer.") for k in state)
    dit = full_size.build("transformer")
    for key in state:
        dit.get_submodule(key.removeprefix("transformer.").rsplit(".", 2)[0])
    dit.load_lora_adapter(state, prefix="transformer", adapter_name="x", low_cpu_mem_usage=True)
    assert peft_layers(dit) == LAYERS


@pytest.mark.parametrize("adapter_type", ["lora", "lokr"])
def test_peft_attaches_the_diffusers_twin_whole_onto_the_full_dit(captured, adapter_type):
    tensors, config = captured[adapter_type]["r.diffusers"]
    dit = full_size.build("transformer")
    model = peft.inject_adapter_in_model(config, dit, low_cpu_mem_usage=True)
    assert peft_layers(model) == LAYERS
    state = {k.removeprefix(peft_format.PREFIX): v for k, v in tensors.items()}
    loaded = peft.set_peft_model_state_dict(model, state, low_cpu_mem_usage=True)
    assert not loaded.unexpected_keys  # each tensor found its module, at PEFT's own shape
