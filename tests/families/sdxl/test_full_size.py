"""SDXL at its published size, on the meta device: the published configs build the real classes
at their published parameter counts; the adapter the trainer attaches (its default rank 16 on
`to_q`, `to_k`, `to_v`, `to_out.0`) lands on the UNet's 560 attention projections; the family's
own writers name every layer after a module of the full UNet, in PEFT's form and in kohya's,
whose names are those ComfyUI's SDXL map gives the same projections; diffusers' `load_lora_weights`
path attaches each file whole onto the full UNet; and a folder written from the configs loads
as they say."""

from __future__ import annotations

import pytest
import torch
from safetensors import safe_open
from torch import nn

from tests.attached import assert_attached_whole, peft_layers
from tunesmith.families.sdxl import files, full_size
from tunesmith.families.sdxl.config import SdxlAdapter
from tunesmith.families.sdxl.kohya_names import diffusers_module
from tunesmith.families.sdxl.model import load_pipeline
from tunesmith.families.sdxl.objective import TARGET_MODULES, SdxlLora

PARAMETERS = {  # the published checkpoint's tensors, counted
    "unet": 2_567_463_684,
    "vae": 83_653_863,
    "text_encoder": 123_060_480,
    "text_encoder_2": 694_659_840,
}
# 70 transformer blocks (2·1 + 2·10 down, 10 mid, 3·10 + 3·2 up), attn1 and attn2, 4 each.
PROJECTIONS = 70 * 2 * 4
LINEAGE = {"tunesmith.base_model_fingerprint": "fp", "tunesmith.training_config": "{}"}

# ComfyUI's SDXL UNet (comfy/supported_models.py, SDXL.unet_config, with the depths
# comfy/model_detection.py derives for it): transformer blocks per input slot, in the middle
# and per output slot, which comfy/utils.py's unet_to_diffusers turns into its key map.
COMFY_SDXL = {
    "num_res_blocks": [2, 2, 2],
    "transformer_depth": [0, 0, 2, 2, 10, 10],
    "transformer_depth_middle": 10,
    "transformer_depth_output": [0, 0, 0, 2, 2, 2, 10, 10, 10],
}


def comfy_kohya_stems() -> set[str]:
    """The `lora_unet_` stems of SDXL's attention projections in ComfyUI's map: input block
    1 + (res + 1)·level + i, output block (res + 1)·level + i with the output depths taken from
    the end of the list, as unet_to_diffusers numbers them; each transformer block's attn1
    and attn2 with their four projections."""
    stems: set[str] = set()

    def add(block: str, depth: int) -> None:
        for t in range(depth):
            for attention in ("attn1", "attn2"):
                for projection in ("to_q", "to_k", "to_v", "to_out_0"):
                    stems.add(f"lora_unet_{block}_transformer_blocks_{t}_{attention}_{projection}")

    res_blocks = COMFY_SDXL["num_res_blocks"]
    depth_in = list(COMFY_SDXL["transformer_depth"])
    for level, res in enumerate(res_blocks):
        for i in range(res):
            add(f"input_blocks_{1 + (res + 1) * level + i}_1", depth_in.pop(0))
    add("middle_block_1", COMFY_SDXL["transformer_depth_middle"])
    depth_out = list(COMFY_SDXL["transformer_depth_output"])
    for level, res in enumerate(reversed(res_blocks)):
        for i in range(res + 1):
            add(f"output_blocks_{(res + 1) * level + i}_1", depth_out.pop())
    return stems


@pytest.fixture(scope="module")
def modules() -> dict[str, nn.Module]:
    """The full UNet's modules by name, without an adapter."""
    return dict(full_size.build("unet").named_modules())


@pytest.fixture(scope="module")
def lora() -> SdxlLora:
    """The trainer's adapter, default settings, on the full UNet on meta; only its factors
    (23 M numbers) are then made real, so the family's writers can run on them."""
    unet = full_size.build("unet")
    scheduler = full_size.build_scheduler(full_size.SCHEDULER)
    adapter = SdxlAdapter()
    lora = SdxlLora(unet, scheduler, full_size.VAE["scaling_factor"], adapter.rank)
    assert lora.alpha == adapter.scale_alpha
    g = torch.Generator().manual_seed(0)
    for a, b in lora.named_factors().values():
        for factor in (a, b):
            real = nn.Parameter(torch.randn(factor.shape, generator=g) * 0.01)
            torch.utils.swap_tensors(factor, real)
    return lora


@pytest.fixture(scope="module")
def written(lora, tmp_path_factory):
    """The PEFT file and its kohya twin, as the trainer writes them."""
    path = tmp_path_factory.mktemp("adapter") / "full.safetensors"
    files.save_kohya(lora, files.kohya_path(path), LINEAGE, "full", 1, 1024)
    files.save_peft(lora, path, LINEAGE)
    files.validate_files(path)
    return path


def _keys(path) -> list[str]:
    with safe_open(path, "pt") as f:
        return list(f.keys())


@pytest.mark.parametrize("name", sorted(PARAMETERS))
def test_each_published_component_builds_at_its_published_size(name):
    model = full_size.build(name)
    params = list(model.parameters())
    assert all(p.is_meta and p.dtype == torch.bfloat16 for p in params)
    assert sum(p.numel() for p in params) == PARAMETERS[name]


def test_the_trainers_adapter_is_on_every_attention_projection(lora, modules):
    projections = [
        n for n, m in modules.items() if n.endswith(tuple(f".{t}" for t in TARGET_MODULES))
    ]
    assert len(projections) == PROJECTIONS
    factors = lora.named_factors()
    assert list(factors) == projections
    for name, (a, b) in factors.items():
        layer = modules[name]
        assert isinstance(layer, nn.Linear), name
        assert a.shape == (16, layer.in_features) and b.shape == (layer.out_features, 16), name
    assert sum(p.numel() for p in lora.parameters()) == 23_224_320


def test_every_peft_key_is_a_module_of_the_full_unet(written, modules):
    keys = _keys(written)
    assert len(keys) == 2 * PROJECTIONS
    for key in keys:
        component, _, rest = key.partition(".")
        module, _, factor = rest.rpartition(".lora_")
        assert component == "unet" and factor in ("A.weight", "B.weight"), key
        assert isinstance(modules[module], nn.Linear), key


def test_every_kohya_key_maps_to_a_module_and_matches_comfyuis_sdxl_map(written, modules):
    keys = _keys(files.kohya_path(written))
    assert len(keys) == 3 * PROJECTIONS
    stems = {k.rsplit(".", 2)[0] if k.endswith(".weight") else k.rsplit(".", 1)[0] for k in keys}
    assert stems == comfy_kohya_stems() and len(stems) == PROJECTIONS
    config = modules[""].config
    for stem in stems:
        assert isinstance(modules[diffusers_module(stem, config)], nn.Linear), stem


@pytest.mark.filterwarnings("ignore:for .*copying from a non-meta parameter")
@pytest.mark.parametrize("kind", ["peft", "kohya"])
def test_diffusers_load_path_attaches_each_file_whole_onto_the_full_unet(kind, written, lora):
    """`load_lora_weights`' two steps, on a UNet on meta (the factors' values are dropped)."""
    from diffusers import StableDiffusionXLPipeline

    path = written if kind == "peft" else files.kohya_path(written)
    unet = full_size.build("unet")
    state, alphas = StableDiffusionXLPipeline.lora_state_dict(str(path), unet_config=unet.config)
    StableDiffusionXLPipeline.load_lora_into_unet(state, alphas, unet=unet, adapter_name="x")
    assert_attached_whole(peft_layers(unet), path)
    attached = [n for n, m in unet.named_modules() if hasattr(m, "lora_A") and "x" in m.lora_A]
    assert attached == list(lora.named_factors())


def test_a_folder_written_from_the_configs_loads_as_they_say(tmp_path):
    configs = full_size.reduced()
    folder = full_size.write_base_model(tmp_path / "model", configs, torch.float32)
    assert full_size.folder_configs(folder)["model_index"] == full_size.MODEL_INDEX
    pipe = load_pipeline(folder)
    for name in full_size.COMPONENTS:
        built = full_size.build(configs[name])
        loaded = getattr(pipe, name)
        assert type(loaded) is type(built), name
        shapes = {k: v.shape for k, v in loaded.state_dict().items()}
        assert shapes == {k: v.shape for k, v in built.state_dict().items()}, name
        drawn = torch.cat([p.detach().flatten() for p in loaded.parameters()])
        assert abs(drawn.std().item() - full_size.STD) < 0.001, name  # the weights as written
