"""SDXL's adapter types on the tiny model, UNet and both text encoders: each type starts as the
base model and gets a gradient on every layer; each file the family writes for it is read by the
real loader of its kind (diffusers' `load_lora_weights` for the PEFT files and the kohya files
it converts, LyCORIS's kohya loader for every kohya-layout file) onto a fresh tiny SDXL, whose
UNet and text encoders then answer as the trainer's do (≤ 1e-5 relative, float32), every layer
of the file attached; and ComfyUI's SDXL key map (comfy/lora.py and comfy/utils.py, rebuilt
below from reading them) covers every key of every kohya file."""

from __future__ import annotations

import json
import re

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file
from torch import nn

from tunesmith.families.sdxl import files
from tunesmith.families.sdxl.adapters import (
    Adapter,
    AdapterError,
    AdapterSpec,
    LycorisFile,
    layer_count,
)
from tunesmith.families.sdxl.kohya_names import text_encoder_module, unet_module
from tunesmith.families.sdxl.model import load_pipeline
from tunesmith.formats import FormatError

LINEAGE = {"tunesmith.base_model_fingerprint": "fp", "tunesmith.training_config": "{}"}
# rank 2 < half of the tiny's 8-wide Kronecker sides: LoKr splits w2; alpha ≠ rank everywhere
SPECS = {
    "lora": AdapterSpec("lora", rank=2, alpha=3.0),
    "dora": AdapterSpec("dora", rank=2, alpha=3.0),
    # kohya's networks/lora.py with conv_dim; LyCORIS's DoRA with conv layers
    "lora-conv": AdapterSpec("lora", rank=2, alpha=3.0, conv_dim=3, conv_alpha=1.5),
    "dora-conv": AdapterSpec("dora", rank=2, alpha=3.0, conv_dim=3, conv_alpha=1.5),
    "locon": AdapterSpec("locon", rank=2, alpha=3.0, conv_dim=3, conv_alpha=1.5),
    "lokr": AdapterSpec("lokr", rank=2, alpha=3.0, conv_dim=3, conv_alpha=1.5),
    "loha": AdapterSpec("loha", rank=2, alpha=3.0, conv_dim=3, conv_alpha=1.5),
}
CLIP_LAYERS = 3 * 6  # the tiny CLIPs' 3 layers × q, k, v, out_proj, fc1, fc2
UNET_PROJECTIONS = 136  # 17 transformer blocks (2·1 + 2·2 down, 2 mid, 3·2 + 3·1 up) × 2 × 4


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def inputs(pipe) -> dict:
    """Fixed inputs of the UNet and the text encoders."""
    g = torch.Generator().manual_seed(7)
    config = pipe.unet.config
    ids = pipe.tokenizer(["a kvadring picture"], padding="max_length", return_tensors="pt")
    ids_2 = pipe.tokenizer_2(["a kvadring picture"], padding="max_length", return_tensors="pt")
    return {
        "x": torch.randn(2, 4, 8, 8, generator=g),
        "t": torch.tensor([100, 700]),
        "embeds": torch.randn(2, 77, config.cross_attention_dim, generator=g),
        "pooled": torch.randn(2, 32, generator=g),
        "ids": torch.tensor([[64, 64, 0, 0, 64, 64]] * 2, dtype=torch.float32),
        "tokens": ids.input_ids,
        "tokens_2": ids_2.input_ids,
    }


@torch.no_grad()
def answers(pipe, data: dict) -> dict[str, torch.Tensor]:
    """The UNet's output and both text encoders' penultimate states (and the pooled one)."""
    unet = pipe.unet(
        data["x"],
        data["t"],
        encoder_hidden_states=data["embeds"],
        added_cond_kwargs={"text_embeds": data["pooled"], "time_ids": data["ids"]},
    ).sample
    one = pipe.text_encoder(data["tokens"], output_hidden_states=True)
    two = pipe.text_encoder_2(data["tokens_2"], output_hidden_states=True)
    return {
        "unet": unet,
        "text_encoder": one.hidden_states[-2],
        "text_encoder_2": two.hidden_states[-2],
        "pooled": two.text_embeds,
    }


def trained(tiny_sdxl, spec: AdapterSpec, text_encoders: bool = True):
    """A pipeline with the adapter attached and its factors moved off their start (so the
    adapter changes every answer), and the adapter."""
    pipe = load_pipeline(tiny_sdxl)
    models = {"unet": pipe.unet}
    if text_encoders:
        models |= {"text_encoder": pipe.text_encoder, "text_encoder_2": pipe.text_encoder_2}
    adapter = Adapter(spec, models, seed=3)
    g = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for layer in adapter.layers:
            for name, p in adapter.factors(layer).items():
                if name == "lora_magnitude_vector":  # DoRA's: about ‖W‖ still
                    p.mul_(1 + 0.2 * torch.randn(p.shape, generator=g))
                else:
                    p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return pipe, adapter


@pytest.fixture(scope="module")
def written(tiny_sdxl, tmp_path_factory):
    """Per type: the trainer's answers, its answers at strength 0 and the files it writes."""
    out = {}
    for kind, spec in SPECS.items():
        folder = tmp_path_factory.mktemp(kind)
        pipe, adapter = trained(tiny_sdxl, spec)
        data = inputs(pipe)
        ours = answers(pipe, data)
        adapter.set_strength(0.0)
        base = answers(pipe, data)
        adapter.set_strength(1.0)
        path = folder / "run.safetensors"
        if files.has_peft_file(spec.type):
            files.save_kohya(adapter, files.kohya_path(path), LINEAGE, "run", 3, 64, 5e-5)
            files.save_peft(adapter, path, LINEAGE)
        else:
            files.save_kohya(adapter, path, LINEAGE, "run", 3, 64, 5e-5)
        files.validate_files(path)
        out[kind] = (data, ours, base, path, adapter)
    return out


def assert_same(got: dict, ours: dict, what: str) -> None:
    for key, value in ours.items():
        assert relative(got[key], value) <= 1e-5, f"{what}: {key} {relative(got[key], value)}"


# -- the types on the model -----------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_each_type_starts_as_the_base_model_and_every_layer_gets_a_gradient(tiny_sdxl, kind):
    pipe = load_pipeline(tiny_sdxl)
    data = inputs(pipe)
    base = answers(pipe, data)
    models = {"unet": pipe.unet, "text_encoder": pipe.text_encoder}
    models["text_encoder_2"] = pipe.text_encoder_2
    adapter = Adapter(SPECS[kind], models, seed=3)
    started = answers(pipe, data)
    for key in base:
        assert torch.equal(started[key], base[key]), key
    assert all(p.dtype == torch.float32 and p.requires_grad for p in adapter.parameters())
    frozen = [p for m in models.values() for p in m.parameters() if p.requires_grad]
    assert {id(p) for p in frozen} == {id(p) for p in adapter.parameters()}
    one = pipe.text_encoder(data["tokens"], output_hidden_states=True).hidden_states[-2]
    two = pipe.text_encoder_2(data["tokens_2"], output_hidden_states=True)
    embeds = torch.cat([one, two.hidden_states[-2]], dim=-1).repeat(2, 1, 1)
    out = pipe.unet(
        data["x"],
        data["t"],
        encoder_hidden_states=embeds,
        added_cond_kwargs={"text_embeds": two.text_embeds.repeat(2, 1), "time_ids": data["ids"]},
    ).sample
    out.square().mean().backward()
    zero = adapter.zero_factors()
    dead = {name for name, p in zero.items() if p.grad is None or not p.grad.abs().sum() > 0}
    # SDXL reads CLIP-L's penultimate states: its last layer never reaches the loss (kohya's
    # files carry it all the same, at its start)
    last = pipe.text_encoder.config.num_hidden_layers - 1
    unused = {n for n in zero if n.startswith(f"text_encoder.encoder.layers.{last}.")}
    assert dead == unused and len(unused) == 6
    assert len(zero) == len(adapter.layers)


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_over_a_bf16_model_each_type_starts_as_the_base_in_float32_factors(tiny_sdxl, kind):
    """DoRA's magnitude included: PEFT draws it in the base's dtype, set again in float32."""
    pipe = load_pipeline(tiny_sdxl, torch.bfloat16)
    data = {
        k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in inputs(pipe).items()
    }
    base = answers(pipe, data)
    models = {"unet": pipe.unet, "text_encoder": pipe.text_encoder}
    adapter = Adapter(SPECS[kind], models | {"text_encoder_2": pipe.text_encoder_2}, seed=3)
    assert {p.dtype for p in adapter.parameters()} == {torch.float32}
    started = answers(pipe, data)
    for key in base:
        assert torch.equal(started[key], base[key]), key


def test_the_layers_of_each_type_are_kohyas():
    """lora/dora: the UNet's attention projections; with conv_dim the LyCORIS types add every
    Conv2d and Linear of the resnets and samplers (3×3 at conv_dim, 1×1 and Linear at rank);
    each CLIP gets its q, k, v, out_proj, fc1, fc2."""
    from tunesmith.families.sdxl.tiny import build_tiny_sdxl

    pipe = build_tiny_sdxl(0)
    unet = pipe.unet
    resnet_layers = sum(
        isinstance(m, nn.Linear | nn.Conv2d)
        for n, block in unet.named_modules()
        if type(block).__name__ in ("ResnetBlock2D", "Downsample2D", "Upsample2D")
        for m in block.modules()
    )
    models = {"unet": unet, "text_encoder": pipe.text_encoder}
    adapter = Adapter(SPECS["lokr"], models)
    unet_layers = [x for x in adapter.layers if x.component == "unet"]
    assert len(unet_layers) == UNET_PROJECTIONS + resnet_layers
    dims = {(x.name.rsplit(".", 1)[-1], x.dim) for x in unet_layers if "resnets" in x.name}
    assert dims == {("conv1", 3), ("conv2", 3), ("conv_shortcut", 2), ("time_emb_proj", 2)}
    assert len([x for x in adapter.layers if x.component == "text_encoder"]) == CLIP_LAYERS
    assert layer_count(unet) == len(unet_layers)
    bare = build_tiny_sdxl(0).unet
    lora = Adapter(SPECS["lora"], {"unet": bare})
    assert [x.name for x in lora.layers] == [
        n for n, _ in bare.named_modules() if n.endswith((".to_q", ".to_k", ".to_v", ".to_out.0"))
    ]


@pytest.mark.parametrize(
    "spec, message",
    [
        (AdapterSpec("loha", factor=4), "factor 4 is LoKr's"),
        (AdapterSpec("lokr", factor=1), r"-1 \(automatic\) or 2"),
        (AdapterSpec("lycoris"), "one of lora, dora"),
    ],
)
def test_settings_that_do_not_go_together_are_refused_in_one_line(spec, message):
    from tunesmith.families.sdxl.tiny import build_tiny_sdxl

    with pytest.raises(AdapterError, match=message):
        Adapter(spec, {"unet": build_tiny_sdxl(0).unet})


# -- the files, read by their loaders ----------------------------------------------------------


@pytest.mark.parametrize("kind", ["lora", "dora", "locon", "lora-conv", "dora-conv"])
def test_diffusers_loads_the_peft_file_into_unet_and_both_text_encoders(tiny_sdxl, written, kind):
    data, ours, base, path, adapter = written[kind]
    pipe = load_pipeline(tiny_sdxl)
    pipe.load_lora_weights(str(path.parent), weight_name=path.name, adapter_name="x")
    assert layer_count(pipe.unet) == len([x for x in adapter.layers if x.component == "unet"])
    assert layer_count(pipe.text_encoder) == CLIP_LAYERS
    assert layer_count(pipe.text_encoder_2) == CLIP_LAYERS
    assert_same(answers(pipe, data), ours, f"{kind} PEFT file")
    pipe.set_adapters(["x"], adapter_weights=[0.0])
    at_zero = answers(pipe, data)
    for key in base:  # scale 0: the trainer's own at 0
        assert relative(at_zero[key], base[key]) <= 1e-6, key
    truly = answers(load_pipeline(tiny_sdxl), data)
    # LoRA at scale 0 adds exactly nothing; PEFT's DoRA keeps each row's magnitude / ‖W‖
    # (DoraRenderer switches the adapter off for the base picture)
    off = relative(at_zero["unet"], truly["unet"])
    assert off == 0.0 if not kind.startswith("dora") else off > 0.01
    pipe.disable_lora()
    assert torch.equal(answers(pipe, data)["unet"], truly["unet"])


@pytest.mark.parametrize("kind", ["lora", "locon", "lora-conv"])
def test_diffusers_converts_the_kohya_file_of_lora_and_locon(tiny_sdxl, written, kind):
    """diffusers' kohya conversion (SGM blocks, resnets, samplers, `lora_te1_`/`lora_te2_`)."""
    data, ours, _, path, adapter = written[kind]
    pipe = load_pipeline(tiny_sdxl)
    twin = files.kohya_path(path)
    pipe.load_lora_weights(str(twin.parent), weight_name=twin.name)
    assert layer_count(pipe.unet) == len([x for x in adapter.layers if x.component == "unet"])
    assert layer_count(pipe.text_encoder) == layer_count(pipe.text_encoder_2) == CLIP_LAYERS
    assert_same(answers(pipe, data), ours, f"{kind} kohya file in diffusers")


def kohya_file(kind: str, path):
    return files.kohya_path(path) if files.has_peft_file(SPECS[kind].type) else path


def flat_view(modules: dict[str, nn.Module]) -> nn.Module:
    """A module whose children are `modules` under names without dots: LyCORIS's kohya loader
    names a child `<prefix>_<name>`, so each gets the kohya stem it is found by here, as
    sd-scripts' own SGM UNet and transformers 4's CLIP name them."""
    view = nn.Module()
    for name, module in modules.items():
        view.add_module(name, module)
    return view


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_lycoris_kohya_loader_reads_every_kohya_file_onto_the_tiny_sdxl(tiny_sdxl, written, kind):
    """`lycoris.kohya.create_network_from_weights`, what sd-scripts' LyCORIS networks load
    with, in LyCORIS's own (weight-merging) forward."""
    from lycoris.kohya import create_network_from_weights

    data, ours, base, path, _ = written[kind]
    path = kohya_file(kind, path)
    pipe = load_pipeline(tiny_sdxl)
    stems = sorted({k.split(".", 1)[0] for k in load_file(path)})
    unet, encoders = {}, {"text_encoder": {}, "text_encoder_2": {}}
    for stem in stems:
        if stem.startswith("lora_unet_"):
            module = pipe.unet.get_submodule(unet_module(stem, pipe.unet.config))
            unet[stem.removeprefix("lora_unet_")] = module
        else:
            component, name = text_encoder_module(stem)
            encoder = getattr(pipe, component)
            if not hasattr(encoder, "text_model"):
                name = name.removeprefix("text_model.")
            encoders[component][stem[len("lora_te1_") :]] = encoder.get_submodule(name)
    views = [flat_view(encoders["text_encoder"]), flat_view(encoders["text_encoder_2"])]
    network, _ = create_network_from_weights(1.0, str(path), None, views, flat_view(unet))
    assert len(network.unet_loras) + len(network.text_encoder_loras) == len(stems)
    assert len(network.text_encoder_loras) == 2 * CLIP_LAYERS
    network.apply_to(views, flat_view(unet), apply_text_encoder=True, apply_unet=True)
    assert_same(answers(pipe, data), ours, f"{kind} kohya file in LyCORIS")
    network.set_multiplier(0.0)
    at_zero = answers(pipe, data)
    for key in base:
        # LyCORIS's DoRA forward blends only the magnitude by its multiplier and adds the whole
        # ΔW at any multiplier (LoConModule.forward): at 0 it is W + ΔW, not the base model
        assert (relative(at_zero[key], base[key]) <= 1e-6) == (not kind.startswith("dora")), key


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_the_renders_reader_gives_the_trainers_answers(tiny_sdxl, written, kind):
    """`LycorisFile` (how the renders load the kohya file of lokr and loha)."""
    data, ours, base, path, _ = written[kind]
    pipe = load_pipeline(tiny_sdxl)
    loaded = LycorisFile(kohya_file(kind, path), pipe)
    assert_same(answers(pipe, data), ours, f"{kind} kohya file, LycorisFile")
    if kind.startswith("dora"):  # LyCORIS's DoRA at 0 is not the base (the test above)
        return
    loaded.set_strength(0.0)
    at_zero = answers(pipe, data)
    for key in base:
        assert torch.equal(at_zero[key], base[key]), key


def test_lokr_and_loha_files_carry_the_scale_in_their_first_factor(written):
    """alpha = dim in the file, the trained scale inside the first factor (LyCORIS 4.1.3 would
    scale a second time when it merges otherwise). The trained scale is alpha/dim, or 1 for a
    LoKr whose factors are both full (LyCORIS ignores alpha there): both occur here."""
    scales = set()
    for kind, first in (("lokr", "lokr_w1"), ("loha", "hada_w1_a")):
        _, _, _, path, adapter = written[kind]
        tensors = load_file(path)
        for layer in adapter.layers:
            stem = adapter.kohya_stem(layer)
            assert float(tensors[f"{stem}.alpha"]) == layer.dim
            scale = layer.module.adapter.scale
            trained = layer.module.factors()[first].detach()
            assert torch.allclose(tensors[f"{stem}.{first}"], trained * scale), stem
            scales.add((kind, float(scale)))
    assert scales == {("lokr", 1.0), ("lokr", 1.5), ("lokr", 0.5), ("loha", 1.5), ("loha", 0.5)}


def test_the_kohya_metadata_names_the_network(written):
    for kind, module, args in (
        ("lora", "networks.lora", {}),
        ("lora-conv", "networks.lora", {"conv_dim": "3", "conv_alpha": "1.5"}),
        ("dora", "lycoris.kohya", {"algo": "lora", "dora_wd": "True"}),
        ("lokr", "lycoris.kohya", {"algo": "lokr", "factor": "-1", "conv_dim": "3"}),
        ("loha", "lycoris.kohya", {"algo": "loha", "conv_alpha": "1.5"}),
    ):
        _, _, _, path, _ = written[kind]
        with safe_open(kohya_file(kind, path), "pt") as f:
            meta = f.metadata()
        assert meta["ss_network_module"] == module
        assert args.items() <= json.loads(meta["ss_network_args"]).items()
        assert meta["ss_text_encoder_lr"] == "5e-05"
        assert meta["ss_network_train_unet_only"] == "False"
        assert meta["ss_network_dim"] == "2" and meta["ss_network_alpha"] == "3"


def test_a_lone_kohya_file_without_lineage_or_with_a_stray_key_is_refused(written, tmp_path):
    from safetensors.torch import save_file

    _, _, _, path, _ = written["lokr"]
    tensors = load_file(path)
    with safe_open(path, "pt") as f:
        meta = f.metadata()
    bare = tmp_path / "bare.safetensors"
    save_file(tensors, bare, {k: v for k, v in meta.items() if not k.startswith("tunesmith.")})
    with pytest.raises(FormatError, match="lineage"):
        files.validate_files(bare)
    stray = tmp_path / "stray.safetensors"
    key = next(k for k in tensors if k.endswith(".lokr_w1"))
    save_file({k: v for k, v in tensors.items() if k != key}, stray, meta)
    with pytest.raises(FormatError, match="no network's set of tensors"):
        files.validate_files(stray)


# -- ComfyUI's key map ----------------------------------------------------------------------------

# comfy/utils.py UNET_MAP_RESNET (the weights), UNET_MAP_ATTENTIONS, TRANSFORMER_BLOCKS
COMFY_RESNET = {
    "in_layers.2": "conv1",
    "emb_layers.1": "time_emb_proj",
    "out_layers.3": "conv2",
    "skip_connection": "conv_shortcut",
}
COMFY_TRANSFORMER = (
    "attn1.to_q",
    "attn1.to_k",
    "attn1.to_v",
    "attn1.to_out.0",
    "attn2.to_q",
    "attn2.to_k",
    "attn2.to_v",
    "attn2.to_out.0",
    "ff.net.0.proj",
    "ff.net.2",
)
# comfy/lora.py LORA_CLIP_MAP
COMFY_CLIP = ("mlp.fc1", "mlp.fc2", "self_attn.k_proj", "self_attn.q_proj", "self_attn.v_proj")
COMFY_CLIP += ("self_attn.out_proj",)
# what comfy/lora.py's load_lora reads under a mapped name, per network
COMFY_SUFFIXES = {
    "lora_up.weight",
    "lora_down.weight",
    "alpha",
    "dora_scale",
    "hada_w1_a",
    "hada_w1_b",
    "hada_w2_a",
    "hada_w2_b",
    "lokr_w1",
    "lokr_w2",
    "lokr_w1_a",
    "lokr_w1_b",
    "lokr_w2_a",
    "lokr_w2_b",
}


def comfy_unet_to_diffusers(config) -> dict[str, str]:
    """ComfyUI's `unet_to_diffusers` (diffusers module → SGM module, weights only) for a
    diffusers UNet config, with the depths ComfyUI's model detection derives from it."""
    levels = len(config["down_block_types"])
    res = [config["layers_per_block"]] * levels
    depth = config["transformer_layers_per_block"]
    attention = ["CrossAttn" in t for t in config["down_block_types"]]
    per_level = [depth[i] if attention[i] else 0 for i in range(levels)]
    transformer_depth = [d for d in per_level for _ in range(res[0])]
    transformer_depth_output = [d for d in per_level for _ in range(res[0] + 1)]
    out = {}
    for x in range(levels):
        n = 1 + (res[x] + 1) * x
        for i in range(res[x]):
            for sgm, diffusers in COMFY_RESNET.items():
                out[f"down_blocks.{x}.resnets.{i}.{diffusers}"] = f"input_blocks.{n}.0.{sgm}"
            for t in range(transformer_depth.pop(0)):
                for b in COMFY_TRANSFORMER:
                    out[f"down_blocks.{x}.attentions.{i}.transformer_blocks.{t}.{b}"] = (
                        f"input_blocks.{n}.1.transformer_blocks.{t}.{b}"
                    )
            n += 1
        out[f"down_blocks.{x}.downsamplers.0.conv"] = f"input_blocks.{n}.0.op"
    for t in range(depth[-1]):
        for b in COMFY_TRANSFORMER:
            out[f"mid_block.attentions.0.transformer_blocks.{t}.{b}"] = (
                f"middle_block.1.transformer_blocks.{t}.{b}"
            )
    for i, n in enumerate([0, 2]):
        for sgm, diffusers in COMFY_RESNET.items():
            out[f"mid_block.resnets.{i}.{diffusers}"] = f"middle_block.{n}.{sgm}"
    res = list(reversed(res))
    for x in range(levels):
        n = (res[x] + 1) * x
        last = res[x] + 1
        for i in range(last):
            c = 0
            for sgm, diffusers in COMFY_RESNET.items():
                out[f"up_blocks.{x}.resnets.{i}.{diffusers}"] = f"output_blocks.{n}.0.{sgm}"
            c += 1
            blocks = transformer_depth_output.pop()
            if blocks > 0:
                c += 1
                for t in range(blocks):
                    for b in COMFY_TRANSFORMER:
                        out[f"up_blocks.{x}.attentions.{i}.transformer_blocks.{t}.{b}"] = (
                            f"output_blocks.{n}.1.transformer_blocks.{t}.{b}"
                        )
            if i == last - 1:
                out[f"up_blocks.{x}.upsamplers.0.conv"] = f"output_blocks.{n}.{c}.conv"
            n += 1
    return out


def comfy_key_map(pipe) -> set[str]:
    """The names ComfyUI's `model_lora_keys_unet` and `model_lora_keys_clip` map for an SDXL
    model: `lora_unet_` + every SGM weight of the model, dots as underscores; `lora_te1_` and
    `lora_te2_` + each CLIP layer's LORA_CLIP_MAP name (CLIP-L and CLIP-G both present)."""
    table = comfy_unet_to_diffusers(pipe.unet.config)
    weights = {k.removesuffix(".weight") for k in pipe.unet.state_dict() if k.endswith(".weight")}
    names = {"lora_unet_" + table[m].replace(".", "_") for m in weights if m in table}
    for prefix, encoder in (("lora_te1_", pipe.text_encoder), ("lora_te2_", pipe.text_encoder_2)):
        for b in range(encoder.config.num_hidden_layers):
            for c in COMFY_CLIP:
                names.add(f"{prefix}text_model_encoder_layers_{b}_{c.replace('.', '_')}")
    return names


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_comfyuis_key_map_covers_every_key_of_the_kohya_file(tiny_sdxl, written, kind):
    _, _, _, path, adapter = written[kind]
    path = kohya_file(kind, path)
    pipe = load_pipeline(tiny_sdxl, skip=("vae",))
    mapped = comfy_key_map(pipe)
    keys = list(load_file(path))
    for key in keys:
        stem, _, suffix = key.partition(".")
        assert stem in mapped and suffix in COMFY_SUFFIXES, key
    assert len({k.partition(".")[0] for k in keys}) == len(adapter.layers)


def test_sdxl_bases_layers_get_comfyuis_names_and_kohyas_counts():
    """At the published size (on meta): every UNet layer a LyCORIS type with conv_dim trains is
    named as ComfyUI's SDXL map names it and maps back; CLIP-L and OpenCLIP-G get the 72 and 192
    layers kohya's SDXL LoRA logs ("create LoRA for Text Encoder 1/2"), named as ComfyUI's
    `model_lora_keys_clip` maps them; a full LoCon attaches on meta."""
    from tunesmith.families.sdxl import full_size
    from tunesmith.families.sdxl.adapters import text_encoder_targets, unet_targets
    from tunesmith.families.sdxl.kohya_names import text_encoder_stem, unet_stem

    unet = full_size.build("unet")
    table = comfy_unet_to_diffusers(unet.config)
    spec = AdapterSpec("locon", rank=4, alpha=4.0, conv_dim=4, conv_alpha=4.0)
    targets = unet_targets(unet, spec)
    # 560 projections; 17 resnets × conv1, conv2, time_emb_proj, 11 conv_shortcuts, 4 samplers
    assert len(targets) == 560 + 17 * 3 + 11 + 4
    for name in targets:
        stem = unet_stem(name, unet.config)
        assert stem == "lora_unet_" + table[name].replace(".", "_"), name
        assert unet_module(stem, unet.config) == name
    counts = {}
    for component, layers in (("text_encoder", 12), ("text_encoder_2", 32)):
        encoder = full_size.build(component)
        names = text_encoder_targets(encoder, spec)
        counts[component] = len(names)
        expected = {
            f"{'lora_te1_' if component == 'text_encoder' else 'lora_te2_'}text_model_encoder"
            f"_layers_{b}_{c.replace('.', '_')}"
            for b in range(layers)
            for c in COMFY_CLIP
        }
        assert {text_encoder_stem(component, n) for n in names} == expected
    assert counts == {"text_encoder": 72, "text_encoder_2": 192}
    adapter = Adapter(spec, {"unet": unet})
    assert len(adapter.layers) == len(targets)
    assert all(p.is_meta for p in adapter.parameters())


@pytest.mark.parametrize(
    "name",
    [
        "down_blocks.2.downsamplers.0.conv",  # the last level has no downsampler
        "up_blocks.2.upsamplers.0.conv",
        "down_blocks.0.resnets.2.conv1",  # 2 resnets a down level
        "up_blocks.0.resnets.3.conv1",  # 3 an up level
        "down_blocks.0.resnets.0.norm1",
        "conv_in",
    ],
)
def test_a_unet_layer_kohya_does_not_name_is_an_error_naming_it(name):
    from tunesmith.families.sdxl.kohya_names import unet_stem
    from tunesmith.families.sdxl.tiny import TINY_SDXL_CONFIG

    config = {**TINY_SDXL_CONFIG["unet"], "mid_block_type": "UNetMidBlock2DCrossAttn"}
    with pytest.raises(ValueError, match=re.escape(repr(name))):
        unet_stem(name, config)


@pytest.mark.parametrize(
    "stem",
    [
        "lora_unet_input_blocks_3_0_in_layers_2",  # slot 3 is level 0's downsampler
        "lora_unet_input_blocks_1_0_op",  # a resnet's slot
        "lora_unet_output_blocks_2_1_conv",  # up level 0 has attention: its upsampler is slot 2
        "lora_unet_output_blocks_8_1_conv",  # the last up level has no upsampler
        "lora_unet_middle_block_1_in_layers_2",  # middle_block.1 is the attention
        "lora_unet_input_blocks_0_0_op",
        "lora_te3_text_model_encoder_layers_0_self_attn_q_proj",
        "lora_te1_text_model_encoder_layers_0_layer_norm1",
    ],
)
def test_a_stem_of_no_layer_is_an_error_naming_it(stem):
    from tunesmith.families.sdxl.kohya_names import text_encoder_module
    from tunesmith.families.sdxl.tiny import TINY_SDXL_CONFIG

    config = {**TINY_SDXL_CONFIG["unet"], "mid_block_type": "UNetMidBlock2DCrossAttn"}
    with pytest.raises(ValueError, match=re.escape(repr(stem))):
        if stem.startswith("lora_unet_"):
            unet_module(stem, config)
        else:
            text_encoder_module(stem)
