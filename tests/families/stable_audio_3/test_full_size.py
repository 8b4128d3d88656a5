"""The published models at full size, built on the `meta` device: their configs, and every key
an adapter file of theirs holds.

The adapters are attached by the trainer's own `Objective` (over the full-size pipeline on
`meta`, as the memory estimate builds it), and the file is written by its own writer
(`files.write_adapter`, the fused QKV's rows permuted for the medium) from zeros of the
adapter's shapes: a meta tensor has no bytes to write. The file is then read as underfit reads
it: its validator, its dashboard's seed rule and the layer templates of its `registry.json`
(`test_underfit_base_model`), and each layer back to a module of the full model by
`names.to_diffusers`, with that module's fan-in and fan-out.
"""

from __future__ import annotations

import pytest
import torch
from diffusers import StableAudio3Pipeline
from safetensors import safe_open

from tests.families.stable_audio_3.test_underfit_base_model import (
    LAYER_TEMPLATES,
    dashboard_verdict,
)
from tunesmith.backends.placement import Placement
from tunesmith.families.stable_audio_3 import files, full_size, names, published
from tunesmith.families.stable_audio_3.config import Sa3Adapter, Sa3Train
from tunesmith.families.stable_audio_3.trainer import Objective
from tunesmith.formats.underfit import validate_file
from tunesmith.train.config import RunConfig

META = Placement("torch", "meta", "bfloat16", "test")
PARAMS = {"lora": ("lora_A", "lora_B"), "dora-rows": ("lora_A", "lora_B", "magnitude")}
MODELS = {"medium": "sa3-medium", "small": "sa3-sm-music"}  # underfit's ids (its templates)
ALL = ("model.", "conditioners.")  # every layer underfit can adapt
DURATION = "conditioners.seconds_total.embedder.embedding.1"
ADAPTED = ("transformer", "duration_embedder")


def meta_objective(folder, model: str, adapter: Sa3Adapter) -> Objective:
    """The trainer's Objective over the full-size pipeline of `model` on `meta`: the parts it
    adapts (the VAE and the text encoder are never adapted: not built here)."""
    parts = {part: full_size.build(model, part) for part in ADAPTED}
    pipe = StableAudio3Pipeline(
        vae=None, text_encoder=None, tokenizer=None, scheduler=None, **parts
    )
    run = RunConfig("full", "stable-audio-3", str(folder), "zq", adapter, Sa3Train())
    return Objective(folder, run, META, pipe=pipe)


def written(objective: Objective, path) -> dict[str, tuple[int, ...]]:
    """The file the run would write at step 0 (zeros in the adapter's shapes): key → shape."""
    state = {k: torch.zeros(v.shape) for k, v in objective.adapter_state().items()}
    differential = objective.pipe.transformer.config.use_differential_attention
    files.write_adapter(path, state, objective.adapter_config(0, 0), differential, {})
    with safe_open(str(path), framework="pt") as f:
        return {key: tuple(f.get_slice(key).get_shape()) for key in f.keys()}


def layers_of(keys: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, int]]:
    """underfit's layer name → (fan-in, fan-out), from lora_A and lora_B."""
    layers = {}
    for key, shape in keys.items():
        layer, _, param = key.rpartition(".parametrizations.weight.0.")
        fan_in, fan_out = layers.get(layer, (None, None))
        if param == "lora_A":
            fan_in = shape[1]
        elif param == "lora_B":
            fan_out = shape[0]
        layers[layer] = (fan_in, fan_out)
    return layers


def module_shape(module: torch.nn.Module) -> tuple[int, int]:
    base = module.base_layer  # the adapted layer inside its adapter
    if isinstance(base, torch.nn.Linear):
        return base.in_features, base.out_features
    return base.in_channels * base.kernel_size[0], base.out_channels


def test_the_configs_are_the_published_architectures(tmp_path):
    counts = {model: full_size.parameter_counts(model) for model in full_size.MODELS}
    # diffusers' AutoencoderSAME docstring: SAME-L 852 M, SAME-S 108 M parameters.
    assert round(counts["medium"]["vae"] / 1e6) == 852
    assert round(counts["small"]["vae"] / 1e6) == 107  # 107.46 M: the docstring's "108 M"
    # underfit's sa3-medium registry.json: "~1.5B".
    assert round(counts["medium"]["transformer"] / 1e9, 1) == 1.5
    # google/t5gemma-b-b-ul2's encoder: 256000 × 768 embedding and 12 layers.
    assert counts["medium"]["text_encoder"] == counts["small"]["text_encoder"] == 281_580_288
    # The configs as the classes write them are recognised as the published models (the small
    # ones by a folder named for the repository: they share an architecture).
    medium = full_size.write_configs(tmp_path / "medium", "medium")
    assert published.underfit_model_id(medium) == "sa3-medium"
    small = full_size.write_configs(tmp_path / "stable-audio-3-small-sfx-base", "small")
    assert published.underfit_model_id(small) == "sa3-sm-sfx"
    assert full_size.read_configs(small)["transformer"]["embed_dim"] == 1024


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("adapter_type", PARAMS)
def test_every_key_of_a_default_run_is_a_layer_of_the_full_model(tmp_path, model, adapter_type):
    """The run's defaults (rank 16, the transformer blocks only): the file holds exactly the
    per-block layers of underfit's template, each a module of the full DiT of that shape."""
    folder = full_size.write_configs(tmp_path / model, model)
    objective = meta_objective(folder, model, Sa3Adapter(type=adapter_type))
    keys = written(objective, tmp_path / "a.safetensors")
    layers = layers_of(keys)
    modules = dict(objective.modules.named_modules())
    for layer, shape in layers.items():
        assert module_shape(modules[names.to_diffusers(layer)]) == shape, layer
    template = {(n, fi, fo) for n, fi, fo in LAYER_TEMPLATES[MODELS[model]] if ".layers." in n}
    assert {(n, *shape) for n, shape in layers.items()} == template
    depth = full_size.MODELS[model]["transformer"]["depth"]
    assert len(layers) == 9 * depth and len(keys) == len(PARAMS[adapter_type]) * 9 * depth
    assert {key.rpartition(".")[2] for key in keys} == set(PARAMS[adapter_type])
    ranks = {
        shape[0] if key.endswith("lora_A") else shape[1]
        for key, shape in keys.items()
        if key.endswith(("lora_A", "lora_B"))
    }
    assert ranks == {16}
    info = validate_file(tmp_path / "a.safetensors")  # underfit's validator
    assert (info.lora_config["rank"], info.lora_config["adapter_type"]) == (16, adapter_type)
    expected = (
        ("start", "sa3-medium")
        if model == "medium"
        else (
            "Pick a base model",
            [
                "sa3-sm-music",
                "sa3-sm-sfx",
            ],
        )
    )
    assert dashboard_verdict(tmp_path / "a.safetensors") == expected


@pytest.mark.parametrize("model", MODELS)
def test_a_run_adapting_everything_covers_underfits_whole_template(tmp_path, model):
    """include = every root: the file holds every `model.*` layer of the template and the
    duration conditioner's Linear, nothing else."""
    folder = full_size.write_configs(tmp_path / model, model)
    objective = meta_objective(folder, model, Sa3Adapter(type="dora-rows", include=ALL))
    layers = layers_of(written(objective, tmp_path / "a.safetensors"))
    modules = dict(objective.modules.named_modules())
    for layer, shape in layers.items():
        assert module_shape(modules[names.to_diffusers(layer)]) == shape, layer
    dit = {(n, *shape) for n, shape in layers.items() if n.startswith("model.")}
    assert dit == LAYER_TEMPLATES[MODELS[model]]
    assert set(layers) - {n for n, *_ in dit} == {DURATION}
    if model == "medium":  # its registry.json's lora_aggregate counts these same layers
        assert len(layers) == 229
        assert sum(fi for fi, _ in layers.values()) == 423_704
        assert sum(fo for _, fo in layers.values()) == 870_912


def test_a_meta_build_holds_no_bytes_after_a_model_was_loaded(pipe):
    """Once transformers has loaded a model (`pipe`: the tiny one), torch.linspace ignores the
    device context; every tensor of a meta build is still on meta."""
    for part in full_size.PARTS:
        module = full_size.build("small", part)
        tensors = [*module.parameters(), *module.buffers()]
        assert {t.device.type for t in tensors} == {"meta"}, part
