"""LoKr files read by the real loaders: PEFT's `PeftModel.from_pretrained` on our folder and
LyCORIS's `create_lycoris_from_weights` on our file give our layer's outputs, on small modules and
on the tiny ACE-Step 1.5 DiT. The folders and files are written as the families write them:
`lokr_files` gives the tensors and configs, `tunesmith/formats/` writes them."""

from __future__ import annotations

import json
import logging

import peft
import pytest
import torch
from lycoris import create_lycoris_from_weights
from lycoris.logging import logger as lycoris_logger
from safetensors import safe_open
from torch import nn

from tunesmith.adapters.lokr_files import lycoris_state_dict, peft_adapter, read_peft_lokr
from tunesmith.adapters.torch_lokr import (
    adapter_layers,
    attach,
    load_adapter_state,
    named_adapter_parameters,
)
from tunesmith.formats import FormatError, lycoris
from tunesmith.formats import peft as peft_format

lycoris_logger.setLevel(logging.WARNING)

# (dim, alpha): w2 full with alpha ≠ dim (LyCORIS's scale 1 folded into w1), w2 factored
SETTINGS = [(16, 24.0), (3, 5.0)]


def small_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.ModuleDict(
        {
            "attn": nn.ModuleDict({"to_q": nn.Linear(32, 32), "to_out": nn.Linear(32, 48)}),
            "mlp": nn.Sequential(nn.Linear(48, 96), nn.GELU(), nn.Linear(96, 32)),
        }
    )


def run(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    h = model["attn"]["to_out"](model["attn"]["to_q"](x))
    return model["mlp"](h)


TARGETS = ["attn.to_q", "attn.to_out", "mlp.0", "mlp.2"]


def trained(model: nn.Module, dim: int, alpha: float, factor: int = 4) -> nn.Module:
    attach(model, TARGETS, dim, alpha, factor)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for _, p in named_adapter_parameters(model):
            p.copy_(0.2 * torch.randn(p.shape, generator=g))
    return model


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).abs().max() / b.abs().max()).item()


def save_peft(folder, model, metadata=None, dtype=torch.float32, rename=None):
    tensors, config = peft_adapter(model, dtype, rename=rename)
    return peft_format.write(folder, tensors, config, metadata)


def save_lycoris(path, model, metadata=None, rename=None):
    return lycoris.write(path, lycoris_state_dict(model, rename=rename), metadata)


@pytest.mark.parametrize("dim, alpha", SETTINGS)
def test_peft_loads_our_folder_and_computes_our_function(tmp_path, dim, alpha):
    ours = trained(small_model(), dim, alpha)
    x = torch.randn(2, 5, 32)
    expected = run(ours, x)
    save_peft(tmp_path, ours, metadata={"hot_step_trigger": "zq"})
    config = json.loads((tmp_path / "adapter_config.json").read_text())
    # the scale alpha/dim is in w1, so the config's alpha is dim (PEFT's alpha/r is 1)
    assert (config["peft_type"], config["r"], config["alpha"]) == ("LOKR", dim, dim)
    assert config["target_modules"] == sorted(TARGETS)
    with safe_open(tmp_path / "adapter_model.safetensors", "pt") as f:
        assert f.metadata()["hot_step_trigger"] == "zq"
        assert all(key.startswith("base_model.model.") for key in f.keys())
    loaded = peft.PeftModel.from_pretrained(small_model(), tmp_path)
    assert relative(run(loaded.base_model.model, x), expected) <= 1e-6


def test_bf16_peft_folder_is_our_function_with_bf16_factors(tmp_path):
    ours = trained(small_model(), 16, 16.0)
    save_peft(tmp_path, ours, dtype=torch.bfloat16)
    state, _ = read_peft_lokr(tmp_path)
    assert {v.dtype for v in state.values()} == {torch.bfloat16}
    load_adapter_state(ours, state)  # our model, now holding the rounded factors
    loaded = peft.PeftModel.from_pretrained(small_model(), tmp_path)
    x = torch.randn(2, 5, 32)
    assert relative(run(loaded.base_model.model, x), run(ours, x)) <= 1e-5


@pytest.mark.parametrize("dim, alpha", SETTINGS)
def test_lycoris_loads_our_file_and_computes_our_function(tmp_path, dim, alpha):
    ours = trained(small_model(), dim, alpha)
    x = torch.randn(2, 5, 32)
    expected = run(ours, x)
    path = save_lycoris(tmp_path / "lokr_weights.safetensors", ours, {"trigger": "zq"})
    with safe_open(path, "pt") as f:
        expected_metadata = {"algo": "lokr", "format": "lycoris", "trigger": "zq"}
        assert expected_metadata.items() <= f.metadata().items()
        assert "lycoris_attn_to_q.alpha" in f.keys()
    target = small_model()
    network, _ = create_lycoris_from_weights(1.0, str(path), target)
    assert len(network.loras) == len(TARGETS)
    network.apply_to()
    assert relative(run(target, x), expected) <= 1e-6


def comfy_lokr_delta(tensors: dict[str, torch.Tensor], stem: str) -> torch.Tensor:
    """ΔW as ComfyUI's LoKr reads a file: the scale is `.alpha` / dim where w2 (or w1) is split,
    dim the inner size of the split; 1 where both factors are full."""
    w1 = tensors[f"{stem}.lokr_w1"].float()
    if f"{stem}.lokr_w2" in tensors:
        return torch.kron(w1, tensors[f"{stem}.lokr_w2"].float())
    w2_a, w2_b = tensors[f"{stem}.lokr_w2_a"].float(), tensors[f"{stem}.lokr_w2_b"].float()
    scale = tensors[f"{stem}.alpha"].float() / w2_b.shape[0]
    return torch.kron(w1, w2_a @ w2_b) * scale


@pytest.mark.parametrize("dim, alpha", [*SETTINGS, (3, 4.5)])
def test_a_lycoris_merge_gives_the_forward_s_weights(tmp_path, dim, alpha):
    """LyCORIS's `merge_to` scales its diff weight a second time (`get_diff_weight` over an
    already scaled `get_weight`); with alpha/dim folded into w1 the file's scale is 1, so the
    merge, LyCORIS's forward, ComfyUI's reading, PEFT's folder and our layer are one function."""
    from safetensors.torch import load_file

    ours = trained(small_model(), dim, alpha)
    x = torch.randn(2, 5, 32)
    path = save_lycoris(tmp_path / "lokr_weights.safetensors", ours)
    save_peft(tmp_path / "peft", ours)
    tensors = load_file(path)
    assert float(tensors["lycoris_attn_to_q.alpha"]) == dim
    with torch.no_grad():
        expected = run(ours, x)
        forward = small_model()
        network, _ = create_lycoris_from_weights(1.0, str(path), forward)
        network.apply_to()
        merged = small_model()
        network, _ = create_lycoris_from_weights(1.0, str(path), merged)
        network.merge_to()
        by_peft = peft.PeftModel.from_pretrained(small_model(), tmp_path / "peft")
        assert relative(run(forward, x), expected) <= 1e-6
        assert relative(run(merged, x), expected) <= 1e-6
        assert relative(run(by_peft.base_model.model, x), expected) <= 1e-6
        base = small_model()
        for name, layer in adapter_layers(ours).items():
            delta = layer.delta_weight()
            stem = lycoris.name(name)
            by_merge = merged.get_submodule(name).weight - base.get_submodule(name).weight
            assert relative(by_merge, delta) <= 1e-6
            assert relative(comfy_lokr_delta(tensors, stem), delta) <= 1e-6


def test_bf16_lycoris_file_rounds_the_numbers_the_peft_folder_rounds(tmp_path):
    ours = trained(small_model(), 3, 5.0)  # w2 split, alpha ≠ dim
    tensors, _ = peft_adapter(ours, torch.bfloat16)
    twin = lycoris_state_dict(ours, torch.bfloat16)
    for key, value in tensors.items():
        layer, _, factor = key.rpartition(".")
        assert torch.equal(twin[f"{lycoris.name(layer)}.{factor}"], value)


def test_lycoris_takes_its_own_layout_not_peft_s(tmp_path):
    """LyCORIS matches keys `lycoris_<module>` to modules: a PEFT state loads nothing."""
    save_peft(tmp_path, trained(small_model(), 16, 16.0))
    from safetensors.torch import load_file

    weights = load_file(tmp_path / "adapter_model.safetensors")
    network, _ = create_lycoris_from_weights(1.0, "", small_model(), weights_sd=weights)
    assert network.loras == []
    assert lycoris.name("layers.0.self_attn.to_q") == "lycoris_layers_0_self_attn_to_q"


def test_a_folder_that_is_not_a_peft_lokr_is_refused(tmp_path):
    with pytest.raises(FormatError, match="no adapter_model.safetensors"):
        read_peft_lokr(tmp_path)
    peft.LoraConfig(r=4).save_pretrained(tmp_path)
    (tmp_path / "adapter_model.safetensors").write_bytes(b"")
    with pytest.raises(FormatError, match="a LoraConfig, not a LoKrConfig"):
        read_peft_lokr(tmp_path)
    with pytest.raises(FormatError, match="no LoKr adapters"):
        save_peft(tmp_path / "x", small_model())


def test_both_loaders_reproduce_the_tiny_ace_step_dit(tmp_path):
    """HOT-Step's LoKr (dim 512, alpha 512, factor 6) on every attention and MLP projection of
    the tiny ACE-Step 1.5 DiT, written both ways, loaded by PEFT and by LyCORIS."""
    from diffusers import AceStepTransformer1DModel

    from tunesmith.families.ace_step.tiny import TINY_ACE_STEP_CONFIG

    def dit() -> AceStepTransformer1DModel:
        torch.manual_seed(0)
        return AceStepTransformer1DModel(**TINY_ACE_STEP_CONFIG["transformer"]).eval()

    ours = dit()
    targets = [
        n
        for n, m in ours.named_modules()
        if isinstance(m, nn.Linear) and (".self_attn." in n or ".cross_attn." in n or ".mlp." in n)
    ]
    assert len(targets) == 22
    attach(ours, targets, 512, 512.0, 6)
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for _, p in named_adapter_parameters(ours):
            p.copy_(0.3 * torch.randn(p.shape, generator=g))
    g = torch.Generator().manual_seed(3)
    inputs = dict(
        hidden_states=torch.randn(1, 12, 8, generator=g),
        timestep=torch.tensor([0.7]),
        timestep_r=torch.tensor([0.7]),
        encoder_hidden_states=torch.randn(1, 5, 32, generator=g),
        context_latents=torch.randn(1, 12, 16, generator=g),
    )
    with torch.no_grad():
        expected = ours(**inputs).sample
        base = dit()(**inputs).sample
        assert relative(expected, base) > 1e-2  # the adapter changes the output

        save_peft(tmp_path / "peft", ours)
        by_peft = peft.PeftModel.from_pretrained(dit(), tmp_path / "peft")
        assert relative(by_peft.base_model.model(**inputs).sample, expected) <= 1e-5

        path = save_lycoris(tmp_path / "lokr_weights.safetensors", ours)
        target = dit()
        network, _ = create_lycoris_from_weights(1.0, str(path), target)
        assert len(network.loras) == 22
        network.apply_to()
        assert relative(target(**inputs).sample, expected) <= 1e-5


def test_files_can_name_another_model_s_modules(tmp_path):
    """`rename`: diffusers' `to_q` written as ACE-Step's original `q_proj`, loaded by both
    libraries onto a model whose modules carry the original names."""
    ours = trained(small_model(), 3, 5.0)
    x = torch.randn(2, 5, 32)
    expected = run(ours, x)

    def original() -> nn.Module:
        model = small_model()
        model["attn"]["q_proj"] = model["attn"].pop("to_q")
        return model

    def original_run(model, x):
        return model["mlp"](model["attn"]["to_out"](model["attn"]["q_proj"](x)))

    rename = lambda name: name.replace("to_q", "q_proj")  # noqa: E731
    save_peft(tmp_path, ours, rename=rename)
    loaded = peft.PeftModel.from_pretrained(original(), tmp_path)
    assert relative(original_run(loaded.base_model.model, x), expected) <= 1e-6
    path = save_lycoris(tmp_path / "l.safetensors", ours, rename=rename)
    target = original()
    network, _ = create_lycoris_from_weights(1.0, str(path), target)
    network.apply_to()
    assert len(network.loras) == len(TARGETS)
    assert relative(original_run(target, x), expected) <= 1e-6
    with pytest.raises(FormatError, match="both named 'same'"):
        save_peft(tmp_path / "bad", ours, rename=lambda name: "same")
