"""`lora_config.base_model`: underfit's model id for a published model, no key otherwise,
read back with underfit's dashboard's own rule.

The published models' configs are written by the real diffusers classes, built on the
meta device (no weights, no download) from the values of underfit's model templates
(`dashboard/models/<id>/training_template.json`): what `save_pretrained` writes for them.

`dashboard_verdict` is the dashboard's reading of a seed adapter, rewritten from its code:
`underfit/utils/lora_validate.py` (`validate_lora_safetensors`: parametrization keys, a
`lora_config` with rank and adapter_type, each layer's fan-in/fan-out from lora_A/lora_B),
`dashboard/server.py` (the seed upload handler: a `base_model` it knows, one it does not, or
none: then every model whose `lora_layer_template` holds all of the file's `model.*` layers)
and `dashboard/index.html` (the dialog that follows: start, "Base model not loaded", pick one,
"Incompatible LoRA"). `LAYER_TEMPLATES` are the `ui.lora_layer_template` entries of its
`dashboard/models/<id>/registry.json`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from tunesmith.backends.placement import Placement
from tunesmith.families.stable_audio_3 import names as sa3_names
from tunesmith.families.stable_audio_3.config import Sa3Adapter, Sa3Train
from tunesmith.families.stable_audio_3.files import row_permutation
from tunesmith.families.stable_audio_3.published import UNDERFIT_MODEL_IDS, underfit_model_id
from tunesmith.families.stable_audio_3.trainer import Objective
from tunesmith.formats.underfit import AdapterConfig, write_adapter_file
from tunesmith.train.config import RunConfig

# underfit's templates: model.diffusion.config and the pretransform's encoder, per model.
MEDIUM = dict(embed_dim=1536, depth=24, num_heads=24, use_differential_attention=True)
SMALL = dict(embed_dim=1024, depth=20, num_heads=16, use_differential_attention=False)
SAME_L = dict(encoder_channels=256, encoder_transformer_depths=[12])
SAME_S = dict(encoder_channels=128, encoder_transformer_depths=[6])


def _layer_template(d: int, depth: int, qkv: int, q: int, kv: int) -> set[tuple[str, int, int]]:
    """One registry.json `lora_layer_template` as the dashboard expands it: (name, fi, fo)."""
    fixed = [
        ("model.to_timestep_embed.0", 256, d),
        ("model.to_timestep_embed.2", d, d),
        ("model.to_cond_embed.0", 768, d),
        ("model.to_cond_embed.2", d, d),
        ("model.to_global_embed.0", 768, d),
        ("model.to_global_embed.2", d, d),
        ("model.transformer.project_in", 256, d),
        ("model.transformer.global_cond_embedder.0", d, d),
        ("model.transformer.global_cond_embedder.2", d, 6 * d),
        ("model.transformer.project_out", d, 256),
        ("model.preprocess_conv", 256, 256),
        ("model.postprocess_conv", 256, 256),
    ]
    block = [
        (".self_attn.to_qkv", d, qkv),
        (".self_attn.to_out", d, d),
        (".cross_attn.to_q", d, q),
        (".cross_attn.to_kv", d, kv),
        (".cross_attn.to_out", d, d),
        (".ff.ff.0.proj", d, 8 * d),
        (".ff.ff.2", 4 * d, d),
        (".to_local_embed.0", 257, d),
        (".to_local_embed.2", d, d),
    ]
    per_block = {
        (f"model.transformer.layers.{i}{suffix}", fi, fo)
        for i in range(depth)
        for suffix, fi, fo in block
    }
    return set(fixed) | per_block


LAYER_TEMPLATES = {
    "sa3-medium": _layer_template(1536, 24, 7680, 3072, 4608),
    "sa3-sm-music": _layer_template(1024, 20, 3072, 1024, 2048),
    "sa3-sm-sfx": _layer_template(1024, 20, 3072, 1024, 2048),
}
_LORA_KEY = re.compile(
    r"\.parametrizations\.weight\.\d+\.(lora_A|lora_B|magnitude|magnitude_r|magnitude_c|M_xs|U|V)$"
)


def dashboard_verdict(path: Path) -> tuple[str, object]:
    """What underfit's dashboard does with `path` uploaded as a seed adapter."""
    with safe_open(str(path), framework="pt") as f:
        keys, metadata = list(f.keys()), f.metadata() or {}
        dims: dict[str, dict[str, int]] = {}
        for key in keys:
            match = _LORA_KEY.search(key)
            if match and match.group(1) in ("lora_A", "lora_B"):
                shape = f.get_slice(key).get_shape()
                side = "fan_in" if match.group(1) == "lora_A" else "fan_out"
                dims.setdefault(key[: match.start()], {})[side] = shape[
                    1 if side == "fan_in" else 0
                ]
    if not any(_LORA_KEY.search(k) for k in keys) or "lora_config" not in metadata:
        return "not a LoRA", None
    config = json.loads(metadata["lora_config"])
    if "rank" not in config or "adapter_type" not in config:
        return "not a LoRA", None
    seed_base = config.get("base_model")
    if seed_base:
        if seed_base in LAYER_TEMPLATES:
            return "start", seed_base
        return "Base model not loaded", seed_base
    fingerprint = {
        (name, d["fan_in"], d["fan_out"])
        for name, d in dims.items()
        if name.startswith("model.") and {"fan_in", "fan_out"} <= d.keys()
    }
    inferred = [m for m, layers in LAYER_TEMPLATES.items() if fingerprint and fingerprint <= layers]
    return ("Pick a base model", inferred) if inferred else ("Incompatible LoRA", [])


def published_folder(root: Path, dit: dict, vae: dict) -> Path:
    """A base model folder's configs as diffusers writes them (`save_config`), weights left out."""
    from diffusers import AutoencoderSAME, StableAudio3DiTModel

    with torch.device("meta"):
        StableAudio3DiTModel(**dit).save_config(root / "transformer")
        AutoencoderSAME(**vae).save_config(root / "vae")
    return root


def rank_one_file(path: Path, dit: dict, base_model: str | None) -> Path:
    """An underfit file of rank-1 zero adapters on every Linear/Conv1d of a DiT of `dit`'s
    shape, under the names and row order tunesmith writes (its production writer)."""
    from diffusers import StableAudio3DiTModel, StableAudio3DurationEmbedder

    with torch.device("meta"):
        transformer, durations = StableAudio3DiTModel(**dit), StableAudio3DurationEmbedder()
    modules = {
        **{f"transformer.{n}": m for n, m in transformer.named_modules()},
        **{f"duration_embedder.{n}": m for n, m in durations.named_modules()},
    }
    state = {}
    for name in sa3_names.adapter_targets(transformer, durations):
        module = modules[name]
        fan_in = module.in_features if hasattr(module, "in_features") else module.in_channels
        fan_out = module.out_features if hasattr(module, "out_features") else module.out_channels
        state[f"{name}.parametrizations.weight.0.lora_A"] = torch.zeros(1, fan_in)
        state[f"{name}.parametrizations.weight.0.lora_B"] = torch.zeros(fan_out, 1)
    config = AdapterConfig(rank=1, alpha=1, adapter_type="lora", base_model=base_model)
    permute = row_permutation(transformer.config.use_differential_attention)
    return write_adapter_file(
        path, state, config, to_checkpoint_name=sa3_names.to_underfit, permute_rows=permute
    )


def test_the_medium_is_recognised_by_its_architecture(tmp_path):
    plain = published_folder(tmp_path / "my-base", MEDIUM, SAME_L)
    assert underfit_model_id(plain) == "sa3-medium"
    cached = tmp_path / "models--stabilityai--stable-audio-3-medium-base" / "snapshots" / "0a1b"
    assert underfit_model_id(published_folder(cached, MEDIUM, SAME_L)) == "sa3-medium"
    # A path naming another published model contradicts the architecture: no id.
    named_small = tmp_path / "stable-audio-3-small-sfx-base"
    assert underfit_model_id(published_folder(named_small, MEDIUM, SAME_L)) is None
    # The medium DiT with the small models' VAE is no published model.
    assert underfit_model_id(published_folder(tmp_path / "mixed", MEDIUM, SAME_S)) is None


def test_the_small_models_share_an_architecture_and_need_their_repository_named(tmp_path):
    assert underfit_model_id(published_folder(tmp_path / "plain", SMALL, SAME_S)) is None
    sfx = tmp_path / "hub" / "models--stabilityai--stable-audio-3-small-sfx-base" / "snapshots"
    assert underfit_model_id(published_folder(sfx / "rev", SMALL, SAME_S)) == "sa3-sm-sfx"
    music = tmp_path / "stabilityai" / "stable-audio-3-small-music"
    assert underfit_model_id(published_folder(music, SMALL, SAME_S)) == "sa3-sm-music"
    assert UNDERFIT_MODEL_IDS == tuple(LAYER_TEMPLATES)


@pytest.mark.parametrize(
    ("dit", "expected"),
    [(MEDIUM, ["sa3-medium"]), (SMALL, ["sa3-sm-music", "sa3-sm-sfx"])],
)
def test_the_dashboard_infers_from_the_layers_what_the_table_says(tmp_path, dit, expected):
    """Without a base_model key, the dashboard's layer rule on a file tunesmith writes names the
    same model(s) as the architecture table: one for the medium, both small ones for small."""
    path = rank_one_file(tmp_path / "a.safetensors", dit, None)
    assert dashboard_verdict(path) == ("Pick a base model", expected)


def test_a_published_base_starts_in_the_dashboard(tmp_path):
    model_id = underfit_model_id(published_folder(tmp_path / "base", MEDIUM, SAME_L))
    path = rank_one_file(tmp_path / "a.safetensors", MEDIUM, model_id)
    assert dashboard_verdict(path) == ("start", "sa3-medium")


def test_a_tiny_base_leaves_the_key_out_so_the_dashboard_infers(tiny_sa3, tmp_path):
    assert underfit_model_id(tiny_sa3) is None
    run = RunConfig(
        name="t",
        family="stable-audio-3",
        base_model=str(tiny_sa3),
        adapter=Sa3Adapter(type="dora-rows", rank=2),
        train=Sa3Train(),
    )
    objective = Objective(Path(tiny_sa3), run, Placement("torch", "cpu", "float32", "test"))
    path = objective.save(tmp_path, 1, 0, {})
    config = json.loads(safe_open(str(path), framework="pt").metadata()["lora_config"])
    assert "base_model" not in config and config["step"] == 1
    # No key: the layer rule; the tiny's shapes fit no underfit model, as they should.
    assert dashboard_verdict(path) == ("Incompatible LoRA", [])
    # What the file said before (the tunesmith.toml string) stopped the dashboard outright.
    old = write_adapter_file(
        tmp_path / "old.safetensors",
        objective.adapter_state(),
        AdapterConfig(rank=2, alpha=2, adapter_type="dora-rows", base_model=str(tiny_sa3)),
        to_checkpoint_name=sa3_names.to_underfit,
        permute_rows=row_permutation(True),
    )
    assert dashboard_verdict(old) == ("Base model not loaded", str(tiny_sa3))


def test_a_plain_qkv_keeps_its_rows_in_both_directions(tmp_path):
    """The small models' self-attention is [q | k | v] on both sides (diffusers' conversion
    reorders only a differential one): written and read back unpermuted, to the bit."""
    from safetensors.torch import load_file

    from tunesmith.families.stable_audio_3.files import read_adapter

    name = "transformer.transformer_blocks.0.self_attn.to_qkv.parametrizations.weight.0"
    lora_b = torch.randn(3 * 1024, 2, generator=torch.Generator().manual_seed(0)).half().float()
    state = {f"{name}.lora_A": torch.zeros(2, 1024), f"{name}.lora_B": lora_b}
    path = write_adapter_file(
        tmp_path / "plain.safetensors",
        state,
        AdapterConfig(rank=2, alpha=2, adapter_type="lora"),
        to_checkpoint_name=sa3_names.to_underfit,
        permute_rows=row_permutation(False),
    )
    stored = load_file(path)
    key = "model.transformer.layers.0.self_attn.to_qkv.parametrizations.weight.0.lora_B"
    assert torch.equal(stored[key].float(), lora_b)
    back, _ = read_adapter(path, differential=False)
    assert torch.equal(back[f"{name}.lora_B"], lora_b)
