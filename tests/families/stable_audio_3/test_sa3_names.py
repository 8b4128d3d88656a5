"""Stable Audio 3 names and the fused to_qkv row order, against the reference conversion."""

from __future__ import annotations

import pytest
import torch

from tunesmith.families.stable_audio_3.names import (
    ROW_TENSORS,
    adapter_targets,
    convert_qkv_adapter_tensor,
    is_fused_qkv,
    qkv_rows_to_diffusers,
    qkv_rows_to_underfit,
    to_diffusers,
    to_underfit,
)
from tunesmith.families.stable_audio_3.tiny import build_tiny_stable_audio_3


@pytest.fixture(scope="module")
def tiny():
    return build_tiny_stable_audio_3(seed=0)


def reference_to_diffusers_qkv(weight: torch.Tensor) -> torch.Tensor:
    """diffusers' scripts/convert_stable_audio_3_to_diffusers.py `_reorder_differential_qkv`."""
    q, k, v, q2, k2 = weight.split(weight.shape[0] // 5, dim=0)
    return torch.cat([q, q2, k, k2, v], dim=0)


# --- names ------------------------------------------------------------------------------------


def test_every_linear_and_conv_layer_of_the_tiny_model_maps_both_ways(tiny):
    targets = adapter_targets(tiny.transformer, tiny.duration_embedder)
    depth = tiny.transformer.config.depth
    # 12 outside the blocks, 9 in each block (to_qkv, to_out, to_q, to_kv, to_out, ff in/out,
    # two to_local_embed), and the duration embedder's Linear.
    assert len(targets) == 12 + 9 * depth + 1
    assert len(set(targets.values())) == len(targets)
    for diffusers_name, underfit_name in targets.items():
        assert underfit_name.startswith(("model.", "conditioners."))
        assert to_diffusers(underfit_name) == diffusers_name


def test_every_dit_parameter_maps_both_ways(tiny):
    for key in tiny.transformer.state_dict():
        name = f"transformer.{key}"
        assert to_diffusers(to_underfit(name)) == name


BLOCK_D, BLOCK_U = "transformer.transformer_blocks.", "model.transformer.layers."
SECONDS_U = "conditioners.seconds_total.embedder.embedding.1"


@pytest.mark.parametrize(
    ("diffusers_name", "underfit_name"),
    [
        (f"{BLOCK_D}3.ff.proj_in", f"{BLOCK_U}3.ff.ff.0.proj"),
        (f"{BLOCK_D}3.ff.proj_out.bias", f"{BLOCK_U}3.ff.ff.2.bias"),
        (f"{BLOCK_D}0.self_attn.to_qkv", f"{BLOCK_U}0.self_attn.to_qkv"),
        (f"{BLOCK_D}11.cross_attn.to_kv", f"{BLOCK_U}11.cross_attn.to_kv"),
        (f"{BLOCK_D}1.to_local_embed.2", f"{BLOCK_U}1.to_local_embed.2"),
        (f"{BLOCK_D}1.pre_norm.gamma", f"{BLOCK_U}1.pre_norm.gamma"),
        (f"{BLOCK_D}1.to_scale_shift_gate", f"{BLOCK_U}1.to_scale_shift_gate"),
        (f"{BLOCK_D}1", f"{BLOCK_U}1"),
        ("transformer.proj_in", "model.transformer.project_in"),
        ("transformer.proj_out.weight", "model.transformer.project_out.weight"),
        ("transformer.global_cond_embedder.2", "model.transformer.global_cond_embedder.2"),
        ("transformer.memory_tokens", "model.transformer.memory_tokens"),
        ("transformer.rotary_pos_emb.inv_freq", "model.transformer.rotary_pos_emb.inv_freq"),
        ("transformer.to_timestep_embed.0", "model.to_timestep_embed.0"),
        ("transformer.to_cond_embed.2.weight", "model.to_cond_embed.2.weight"),
        ("transformer.preprocess_conv", "model.preprocess_conv"),
        ("transformer.prompt_padding_embedding", "conditioners.prompt.padding_embedding"),
        ("duration_embedder.linear", SECONDS_U),
        ("duration_embedder.linear.weight", f"{SECONDS_U}.weight"),
    ],
)
def test_names_follow_the_reference_conversion(diffusers_name, underfit_name):
    assert to_underfit(diffusers_name) == underfit_name
    assert to_diffusers(underfit_name) == diffusers_name


@pytest.mark.parametrize(
    "name",
    [
        "transformer.foo",
        "transformer_blocks.0.ff.proj_in",  # not qualified by its component
        "transformer.transformer_blocks.x.ff",
        "transformer.transformer_blocks.0.ff.ff.0.proj",  # underfit's name on the diffusers side
        "transformer.to_cond_embed.3",
        "text_encoder.encoder.layers.0.self_attn.q_proj",
        "vae.encoder.proj",
    ],
)
def test_unknown_diffusers_names_raise_key_error_naming_them(name):
    with pytest.raises(KeyError) as err:
        to_underfit(name)
    assert repr(name) in str(err.value) and "known:" in str(err.value)


@pytest.mark.parametrize(
    "name",
    [
        "model.model.transformer.layers.0.self_attn.to_qkv",  # the reference key, not underfit's
        "model.transformer.layers.0.ff.ff",  # a reference container diffusers does not have
        "model.transformer",
        "conditioners.prompt.model.encoder.layers.0.self_attn.q_proj",
        "model.transformer.layers.0.self_attn.to_qkv.parametrizations.weight.0.lora_B",
    ],
)
def test_unknown_underfit_names_raise_key_error_naming_them(name):
    with pytest.raises(KeyError, match="not a Stable Audio 3 underfit layer name"):
        to_diffusers(name)


def test_frozen_components_are_said_to_be_frozen():
    with pytest.raises(KeyError, match="frozen"):
        to_underfit("text_encoder.encoder.layers.0.mlp.up_proj")


def test_fused_qkv_is_recognised_on_both_sides():
    assert is_fused_qkv("transformer.transformer_blocks.0.self_attn.to_qkv")
    assert is_fused_qkv("model.transformer.layers.0.self_attn.to_qkv.weight")
    assert not is_fused_qkv("model.transformer.layers.0.cross_attn.to_q")
    assert not is_fused_qkv("transformer.transformer_blocks.0.self_attn.to_out")


# --- the fused to_qkv row order ---------------------------------------------------------------


def test_row_order_matches_the_conversion_script(tiny):
    weight = tiny.transformer.transformer_blocks[0].self_attn.to_qkv.weight.detach()
    reference = qkv_rows_to_underfit(weight)
    assert torch.equal(reference_to_diffusers_qkv(reference), weight)
    assert torch.equal(qkv_rows_to_diffusers(reference), weight)
    assert not torch.equal(reference, weight)


def qkv_case(tiny, rank: int = 3):
    """The tiny DiT's to_qkv weight (diffusers order) and LoRA factors in underfit's order."""
    generator = torch.Generator().manual_seed(0)
    weight = tiny.transformer.transformer_blocks[1].self_attn.to_qkv.weight.detach().double()
    out_features, in_features = weight.shape
    lora_b = torch.randn(out_features, rank, generator=generator, dtype=torch.float64)
    lora_a = torch.randn(rank, in_features, generator=generator, dtype=torch.float64)
    return weight, lora_a, lora_b, 16.0 / rank  # alpha 16


def test_lora_delta_in_underfit_order_gives_the_same_dense_weight_in_diffusers_order(tiny):
    weight_d, lora_a_u, lora_b_u, scale = qkv_case(tiny)
    weight_u = qkv_rows_to_underfit(weight_d)  # the reference model's weight
    dense_u = weight_u + scale * lora_b_u @ lora_a_u

    lora_a_d = convert_qkv_adapter_tensor("lora_A", lora_a_u, "lora", to="diffusers")
    lora_b_d = convert_qkv_adapter_tensor("lora_B", lora_b_u, "lora", to="diffusers")
    dense_d = weight_d + scale * lora_b_d @ lora_a_d

    assert lora_a_d is lora_a_u
    assert torch.equal(qkv_rows_to_diffusers(dense_u), dense_d)
    back = convert_qkv_adapter_tensor("lora_B", lora_b_d, "lora", to="underfit")
    assert torch.equal(back, lora_b_u)


def test_dora_rows_magnitude_follows_the_rows(tiny):
    weight_d, lora_a_u, lora_b_u, scale = qkv_case(tiny)
    generator = torch.Generator().manual_seed(1)
    magnitude_u = torch.rand(weight_d.shape[0], generator=generator, dtype=torch.float64) + 0.5

    def dora_rows(weight, lora_a, lora_b, magnitude):  # stable-audio-3 dora_forward, norm dim 1
        direction = weight + scale * lora_b @ lora_a
        return magnitude[:, None] * direction / direction.norm(dim=1, keepdim=True)

    dense_u = dora_rows(qkv_rows_to_underfit(weight_d), lora_a_u, lora_b_u, magnitude_u)
    convert = {
        name: convert_qkv_adapter_tensor(name, tensor, "dora-rows", to="diffusers")
        for name, tensor in (("lora_A", lora_a_u), ("lora_B", lora_b_u), ("magnitude", magnitude_u))
    }
    dense_d = dora_rows(weight_d, convert["lora_A"], convert["lora_B"], convert["magnitude"])
    assert torch.equal(qkv_rows_to_diffusers(dense_u), dense_d)


def test_dora_cols_magnitude_is_left_as_it_is(tiny):
    weight_d, lora_a_u, lora_b_u, scale = qkv_case(tiny)
    magnitude_u = torch.linspace(0.5, 1.5, weight_d.shape[1], dtype=torch.float64)

    def dora_cols(weight, lora_a, lora_b, magnitude):  # norm dim 0: one magnitude per column
        direction = weight + scale * lora_b @ lora_a
        return magnitude[None, :] * direction / direction.norm(dim=0, keepdim=True)

    dense_u = dora_cols(qkv_rows_to_underfit(weight_d), lora_a_u, lora_b_u, magnitude_u)
    magnitude_d = convert_qkv_adapter_tensor("magnitude", magnitude_u, "dora-cols", to="diffusers")
    lora_b_d = convert_qkv_adapter_tensor("lora_B", lora_b_u, "dora-cols", to="diffusers")
    dense_d = dora_cols(weight_d, lora_a_u, lora_b_d, magnitude_d)
    assert magnitude_d is magnitude_u
    # Column norms sum the rows in another order: equal up to rounding, not bit for bit.
    torch.testing.assert_close(qkv_rows_to_diffusers(dense_u), dense_d, rtol=1e-14, atol=0)


def test_every_adapter_type_converts_its_row_tensors_and_nothing_else():
    rows = torch.arange(10.0)
    for adapter_type, row_names in ROW_TENSORS.items():
        for name in row_names:
            converted = convert_qkv_adapter_tensor(name, rows, adapter_type, to="diffusers")
            assert converted.tolist() == [0, 1, 6, 7, 2, 3, 8, 9, 4, 5]


def test_bad_adapter_tensors_are_refused():
    with pytest.raises(KeyError, match="vnorm"):
        convert_qkv_adapter_tensor("vnorm", torch.zeros(10), "dora-rows", to="diffusers")
    with pytest.raises(ValueError, match="adapter_type"):
        convert_qkv_adapter_tensor("lora_B", torch.zeros(10, 2), "loha", to="diffusers")
    with pytest.raises(ValueError, match="divisible by 5"):
        qkv_rows_to_diffusers(torch.zeros(12, 2))
