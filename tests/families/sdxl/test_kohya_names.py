"""kohya's SGM names for the SDXL UNet's attention projections: a file written with them loads in
diffusers, every layer of it, onto the trainer's own layers to the bit (tiny SDXL), and on the
real SDXL base UNet's layout every projection gets the published kohya name, maps back, and
diffusers' own conversion of the names lands on the same modules."""

from __future__ import annotations

import re

import pytest
import torch
from safetensors.torch import save_file

from tests.attached import assert_attached_whole, peft_layers
from tunesmith.families.sdxl.kohya_names import diffusers_module, kohya_stem
from tunesmith.families.sdxl.model import load_pipeline
from tunesmith.families.sdxl.objective import TARGET_MODULES, SdxlLora
from tunesmith.families.sdxl.tiny import make_tiny_sdxl

# stabilityai/stable-diffusion-xl-base-1.0 unet/config.json, the values that differ from
# UNet2DConditionModel's defaults.
SDXL_BASE_UNET = dict(
    sample_size=128,
    in_channels=4,
    out_channels=4,
    down_block_types=["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"],
    up_block_types=["CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"],
    mid_block_type="UNetMidBlock2DCrossAttn",
    block_out_channels=[320, 640, 1280],
    layers_per_block=2,
    attention_head_dim=[5, 10, 20],
    transformer_layers_per_block=[1, 2, 10],
    use_linear_projection=True,
    cross_attention_dim=2048,
    addition_embed_type="text_time",
    addition_embed_type_num_heads=64,
    addition_time_embed_dim=256,
    projection_class_embeddings_input_dim=2816,
)

# Where sd_xl_base's SpatialTransformers sit (attention_resolutions [4, 2]: levels 1 and 2) and
# how many transformer blocks each holds (transformer_depth [1, 2, 10]), by kohya block prefix.
SDXL_BLOCKS = {
    "input_blocks_4_1": 2,
    "input_blocks_5_1": 2,
    "input_blocks_7_1": 10,
    "input_blocks_8_1": 10,
    "middle_block_1": 10,
    "output_blocks_0_1": 10,
    "output_blocks_1_1": 10,
    "output_blocks_2_1": 10,
    "output_blocks_3_1": 2,
    "output_blocks_4_1": 2,
    "output_blocks_5_1": 2,
}

# (diffusers attention, kohya block, projection inside it): sd_xl_base's kohya LoRA names.
KNOWN = [
    ("down_blocks.1.attentions.0", "input_blocks_4_1", "transformer_blocks.0.attn1.to_q"),
    ("down_blocks.1.attentions.1", "input_blocks_5_1", "transformer_blocks.1.attn2.to_v"),
    ("down_blocks.2.attentions.0", "input_blocks_7_1", "transformer_blocks.0.attn1.to_k"),
    ("down_blocks.2.attentions.1", "input_blocks_8_1", "transformer_blocks.9.attn2.to_out.0"),
    ("mid_block.attentions.0", "middle_block_1", "transformer_blocks.0.attn2.to_k"),
    ("mid_block.attentions.0", "middle_block_1", "transformer_blocks.9.attn1.to_v"),
    ("up_blocks.0.attentions.0", "output_blocks_0_1", "transformer_blocks.1.attn1.to_out.0"),
    ("up_blocks.0.attentions.2", "output_blocks_2_1", "transformer_blocks.9.attn2.to_q"),
    ("up_blocks.1.attentions.0", "output_blocks_3_1", "transformer_blocks.0.attn1.to_q"),
    ("up_blocks.1.attentions.2", "output_blocks_5_1", "transformer_blocks.1.attn2.to_out.0"),
]
ONE_NAME = f"{KNOWN[0][0]}.{KNOWN[0][2]}"


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """The tiny UNet's ops are far too small to share out: one thread is much faster here."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def sdxl_base_unet():
    """The real-size SDXL base UNet on the meta device: its module names, no weights."""
    from diffusers import UNet2DConditionModel

    with torch.device("meta"):
        return UNet2DConditionModel(**SDXL_BASE_UNET)


def _projections(unet) -> list[str]:
    return [
        n for n, _ in unet.named_modules() if n.endswith(tuple(f".{t}" for t in TARGET_MODULES))
    ]


def _tiny_inputs(unet):
    g = torch.Generator().manual_seed(3)
    cfg = unet.config
    x = torch.randn((1, cfg.in_channels, cfg.sample_size, cfg.sample_size), generator=g)
    embeds = torch.randn((1, 77, cfg.cross_attention_dim), generator=g)
    pooled_dim = cfg.projection_class_embeddings_input_dim - 6 * cfg.addition_time_embed_dim
    pooled = torch.randn((1, pooled_dim), generator=g)
    ids = torch.tensor([[64.0, 64.0, 0.0, 0.0, 64.0, 64.0]])
    return x, torch.tensor([500]), embeds, {"text_embeds": pooled, "time_ids": ids}


def _run(unet, inputs) -> torch.Tensor:
    x, t, embeds, added = inputs
    with torch.no_grad():
        return unet(x, t, encoder_hidden_states=embeds, added_cond_kwargs=added).sample


def test_kohya_names_load_in_diffusers_onto_the_trainers_layers_to_the_bit(tmp_path):
    from diffusers import StableDiffusionXLPipeline

    folder = make_tiny_sdxl(tmp_path / "tiny-sdxl", seed=0)
    pipe = load_pipeline(folder)
    lora = SdxlLora(pipe.unet, pipe.scheduler, pipe.vae.config.scaling_factor, rank=4, alpha=8.0)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for b in lora.b_parameters():
            b.copy_(torch.randn(b.shape, generator=g) * 0.05)

    factors = lora.named_factors()
    state = {}
    for name, (a, b) in factors.items():
        stem = kohya_stem(name, pipe.unet.config)
        state[f"{stem}.lora_down.weight"] = a.detach().float().contiguous()
        state[f"{stem}.lora_up.weight"] = b.detach().float().contiguous()
        state[f"{stem}.alpha"] = torch.tensor(lora.alpha)
    assert len(state) == 3 * len(factors) == 3 * 136  # the tiny UNet: 17 transformer blocks × 8
    for stem in (
        "input_blocks_4_1_transformer_blocks_0_attn1_to_q",
        "input_blocks_8_1_transformer_blocks_1_attn2_to_v",
        "middle_block_1_transformer_blocks_1_attn2_to_k",
        "output_blocks_0_1_transformer_blocks_1_attn1_to_out_0",
        "output_blocks_5_1_transformer_blocks_0_attn2_to_q",
    ):
        assert f"lora_unet_{stem}.lora_down.weight" in state
    save_file(state, tmp_path / "sgm.safetensors")

    inputs = _tiny_inputs(pipe.unet)
    ours = _run(pipe.unet, inputs)
    other = StableDiffusionXLPipeline.from_pretrained(folder, local_files_only=True)
    base = _run(other.unet, inputs)
    other.load_lora_weights(str(tmp_path), weight_name="sgm.safetensors")
    assert_attached_whole(peft_layers(other.unet), tmp_path / "sgm.safetensors")
    theirs = _run(other.unet, inputs)
    assert torch.equal(ours, theirs)
    assert not torch.equal(theirs, base)

    # Each factor landed on its own module, with alpha / rank as its scale.
    loaded = {}
    for name, module in other.unet.named_modules():
        if hasattr(module, "lora_A") and len(module.lora_A):
            (adapter,) = module.lora_A.keys()
            assert module.scaling[adapter] == 8.0 / 4
            loaded[name] = (module.lora_A[adapter].weight, module.lora_B[adapter].weight)
    assert loaded.keys() == factors.keys()
    for name, (a, b) in factors.items():
        assert torch.equal(loaded[name][0], a) and torch.equal(loaded[name][1], b), name


def test_sdxl_base_names_are_kohyas(sdxl_base_unet):
    config = sdxl_base_unet.config
    names = _projections(sdxl_base_unet)
    # 70 transformer blocks (2·1 + 2·10 down, 10 mid, 3·10 + 3·2 up), attn1 and attn2, 4 each.
    # kohya's default SDXL LoRA has 722 UNet modules: these, ff.net.0.proj and ff.net.2 of every
    # block (700) and proj_in / proj_out of the 11 transformers.
    assert len(names) == 70 * 2 * 4 == 560
    stems = [kohya_stem(n, config) for n in names]
    assert len(set(stems)) == len(stems)
    for attention, block, projection in KNOWN:
        stem = f"lora_unet_{block}_{projection.replace('.', '_')}"
        assert kohya_stem(f"{attention}.{projection}", config) == stem
    blocks: dict[str, set[str]] = {}
    for stem in stems:
        block, _, rest = stem.removeprefix("lora_unet_").partition("_transformer_blocks_")
        blocks.setdefault(block, set()).add(rest.split("_")[0])
    assert {b: len(numbers) for b, numbers in blocks.items()} == SDXL_BLOCKS
    assert [diffusers_module(s, config) for s in stems] == names


def test_diffusers_maps_our_kohya_names_onto_the_same_modules(sdxl_base_unet):
    """diffusers' own loader path (`lora_state_dict` with the UNet config, which runs
    `_maybe_map_sgm_blocks_to_diffusers` and `_convert_non_diffusers_lora_to_diffusers`, then
    `convert_unet_state_dict_to_peft` as `load_lora_adapter` does) on names with 1-element
    tensors."""
    from diffusers import StableDiffusionXLPipeline
    from diffusers.utils import convert_unet_state_dict_to_peft

    config = sdxl_base_unet.config
    names = _projections(sdxl_base_unet)
    expected = {f"unet.{n}.lora_{ab}.weight" for n in names for ab in "AB"}

    def converted(stem_of) -> tuple[set[str], dict]:
        state = {}
        for n in names:
            stem = stem_of(n)
            state[f"{stem}.lora_down.weight"] = torch.zeros(1, 1)
            state[f"{stem}.lora_up.weight"] = torch.zeros(1, 1)
            state[f"{stem}.alpha"] = torch.tensor(2.0)
        out, alphas = StableDiffusionXLPipeline.lora_state_dict(state, unet_config=config)
        return set(convert_unet_state_dict_to_peft(out)), alphas

    keys, alphas = converted(lambda n: kohya_stem(n, config))
    assert keys == expected
    assert len(alphas) == len(names) and set(alphas.values()) == {2.0}

    # The diffusers-spelled kohya names (lora_unet_down_blocks_…) are accepted too.
    keys, _ = converted(lambda n: "lora_unet_" + n.replace(".", "_"))
    assert keys == expected


@pytest.mark.parametrize(
    "name",
    [
        "down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q",  # level 0: no attention
        "down_blocks.1.attentions.2.transformer_blocks.0.attn1.to_q",  # 2 layers a down level
        "down_blocks.3.attentions.0.transformer_blocks.0.attn1.to_q",  # 3 levels
        "up_blocks.1.attentions.3.transformer_blocks.0.attn1.to_q",  # 3 layers an up level
        "up_blocks.2.attentions.0.transformer_blocks.0.attn1.to_q",  # UpBlock2D
        "mid_block.attentions.1.transformer_blocks.0.attn1.to_q",
        "down_blocks.1.attentions.0.proj_in",
        "down_blocks.1.attentions.0.transformer_blocks.0.ff.net.2",
        "down_blocks.1.resnets.0.conv1",
        "conv_in",
        "down_blocks.1.attentions.0.transformer_blocks.0.attn1.to_out",
    ],
)
def test_a_module_without_a_kohya_name_is_an_error_naming_it(name):
    with pytest.raises(ValueError, match=re.escape(repr(name))):
        kohya_stem(name, SDXL_BASE_UNET)


@pytest.mark.parametrize(
    "stem",
    [
        "lora_unet_input_blocks_0_1_transformer_blocks_0_attn1_to_q",  # conv_in
        "lora_unet_input_blocks_1_1_transformer_blocks_0_attn1_to_q",  # level 0: no attention
        "lora_unet_input_blocks_6_1_transformer_blocks_0_attn1_to_q",  # a downsampler's slot
        "lora_unet_input_blocks_9_1_transformer_blocks_0_attn1_to_q",  # past the last level
        "lora_unet_output_blocks_6_1_transformer_blocks_0_attn1_to_q",  # UpBlock2D
        "lora_unet_output_blocks_9_1_transformer_blocks_0_attn1_to_q",
        "lora_unet_middle_block_0_transformer_blocks_0_attn1_to_q",
        "lora_unet_input_blocks_04_1_transformer_blocks_0_attn1_to_q",
        "lora_unet_input_blocks_4_0_in_layers_2",
        "lora_unet_input_blocks_4_1_proj_in",
        "lora_unet_down_blocks_1_attentions_0_transformer_blocks_0_attn1_to_q",
        "lora_te1_text_model_encoder_layers_0_self_attn_q_proj",
    ],
)
def test_a_stem_without_a_module_is_an_error_naming_it(stem):
    with pytest.raises(ValueError, match=re.escape(repr(stem))):
        diffusers_module(stem, SDXL_BASE_UNET)


def test_a_config_it_cannot_number_is_refused():
    with pytest.raises(ValueError, match="layers_per_block"):
        kohya_stem(ONE_NAME, {**SDXL_BASE_UNET, "layers_per_block": [2, 2, 2]})
    with pytest.raises(ValueError, match="mid_block_type"):
        kohya_stem(ONE_NAME, {**SDXL_BASE_UNET, "mid_block_type": None})
