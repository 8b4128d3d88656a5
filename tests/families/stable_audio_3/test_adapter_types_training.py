"""Every underfit adapter type trained end to end on the tiny Stable Audio 3, on both backends.

Per type: a short run trains; its file passes underfit's validator contract with the type the
key fingerprints give; it loads back into tunesmith's model with the trained outputs; and read
by stable-audio-3's loader rules (`effective_weights`: the file, the base weights, U and V
decomposed again) it gives the weights tunesmith trained. The `-xs` types keep their bases in
the store: computed once per base model and rank, read by a run with other settings.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from tests.families.stable_audio_3.test_sa3_training import items
from tunesmith.adapters import torch_lora
from tunesmith.backends.placement import Placement
from tunesmith.families.stable_audio_3 import model
from tunesmith.families.stable_audio_3 import names as sa3_names
from tunesmith.families.stable_audio_3.config import Sa3Adapter, Sa3Train
from tunesmith.families.stable_audio_3.files import read_adapter
from tunesmith.families.stable_audio_3.trainer import TorchTrainer
from tunesmith.formats.underfit import effective_weights, fingerprint_of, validate_file
from tunesmith.train.config import RunConfig
from tunesmith.train.loop import train

TYPES = torch_lora.ADAPTER_TYPES
CPU = Placement("torch", "cpu", "float32", "test")
# The first two blocks' layers and the DiT's input convolution: a fused differential to_qkv
# (rows reordered in the file), plain linears and a Conv1d.
INCLUDE = ("model.transformer.layers.[0-1].", "preprocess_conv")


def run_config(tiny_sa3, adapter_type, include=INCLUDE, **train):
    settings = dict(steps=3, lr=3e-3, eval_every=3, checkpoint_every=3, latent_crop_length=48)
    return RunConfig(
        name="types",
        family="stable-audio-3",
        base_model=str(tiny_sa3),
        adapter=Sa3Adapter(type=adapter_type, rank=4, include=include),
        train=Sa3Train(**{**settings, **train}),
        demos=(),
    )


def fit(tiny_sa3, run_dir, run, placement=CPU, trainer_class=TorchTrainer):
    lines = []
    lineage = {"tunesmith.base_model_fingerprint": "tiny-fingerprint"}
    trainer = trainer_class(run, Path(tiny_sa3), items(), run_dir, placement, lineage)
    result = train(trainer, run_dir, log=lines.append)
    return trainer, result, lines


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("TUNESMITH_STORE", str(tmp_path / "store"))
    return tmp_path / "store"


def base_weights_as_in_file(pipe, layers):
    """The base weights of `layers` (diffusers names) under the file's names and row order."""
    out = {}
    modules = {"transformer": pipe.transformer, "duration_embedder": pipe.duration_embedder}
    for name in layers:
        component, _, path = name.partition(".")
        weight = modules[component].get_submodule(path).weight.detach().float()
        file_name = sa3_names.to_underfit(name)
        if sa3_names.is_fused_qkv(file_name):
            weight = sa3_names.qkv_rows_to_underfit(weight)
        out[f"{file_name}.weight"] = weight
    return out


def check_trained_file(tiny_sa3, result, adapter_type):
    """The file: underfit's validator contract, back into tunesmith's model, the loader's W'."""
    info = validate_file(result.last_path)
    assert info.config.adapter_type == adapter_type
    assert {"rank", "adapter_type"} <= info.lora_config.keys()
    assert info.inferred_adapter_type == fingerprint_of(adapter_type)
    assert not any(k.endswith((".U", ".V")) for k in info.keys)  # a loader decomposes again

    state, _ = read_adapter(result.last_path)
    layers = sorted({k.split(".parametrizations.")[0] for k in state})
    pipe = model.load_pipeline(Path(tiny_sa3))
    modules = torch.nn.ModuleDict(
        {"transformer": pipe.transformer, "duration_embedder": pipe.duration_embedder}
    )
    base = base_weights_as_in_file(pipe, layers)
    loaded = torch_lora.attach(modules, layers, 4, 4.0, adapter_type)
    torch_lora.load_adapter_state(modules, state)
    loader = effective_weights(result.last_path, base)
    assert loader.keys() == {sa3_names.to_underfit(n) for n in layers}
    worst = 0.0
    for name, layer in loaded.items():
        ours = torch_lora.merged_weight(layer).detach().float()
        file_name = sa3_names.to_underfit(name)
        if sa3_names.is_fused_qkv(file_name):
            ours = sa3_names.qkv_rows_to_underfit(ours)
        theirs = loader[file_name].float()
        worst = max(worst, ((ours - theirs).norm() / theirs.norm()).item())
    print(f"{adapter_type}: W' against the loader's, worst relative {worst:.2e}")
    assert worst <= 1e-6, f"{adapter_type}: W' differs from the loader's by {worst:.2e}"
    return modules, state, layers


@pytest.mark.parametrize("adapter_type", TYPES)
def test_each_type_trains_into_a_file_underfit_and_its_loader_read(
    tiny_sa3, tmp_path, store, adapter_type
):
    trainer, result, _ = fit(tiny_sa3, tmp_path / "run", run_config(tiny_sa3, adapter_type))
    trained_state = trainer.objective.adapter_state()
    modules, state, layers = check_trained_file(tiny_sa3, result, adapter_type)

    # The adapter learned something: a trained tensor moved from its initial value (B, M_xs).
    moved = [k for k in trained_state if k.endswith((".lora_B", ".M_xs"))]
    assert any(trained_state[k].abs().max() > 0 for k in moved)
    # Loaded from the file, the model computes what the trained model computes with the
    # file's (float16) tensors: exactly, once the trained model holds them too.
    torch_lora.load_adapter_state(trainer.objective.modules, state)
    for name in layers:
        ours = torch_lora.merged_weight(trainer.objective.modules.get_submodule(name))
        again = torch_lora.merged_weight(modules.get_submodule(name))
        assert torch.equal(ours, again), name


@pytest.mark.parametrize("adapter_type", TYPES)
def test_each_type_trains_on_mlx_into_the_same_file(tiny_sa3, tmp_path, store, adapter_type):
    pytest.importorskip("mlx.core")
    from tunesmith.families.stable_audio_3.mlx.trainer import MlxTrainer

    mlx = Placement("mlx", "cpu", "float32", "test")
    run = run_config(tiny_sa3, adapter_type, include=("model.transformer.layers.[0-1].",))
    _, result, _ = fit(tiny_sa3, tmp_path / "run", run, mlx, MlxTrainer)
    check_trained_file(tiny_sa3, result, adapter_type)


def test_xs_bases_are_computed_once_per_base_model_and_rank(tiny_sa3, tmp_path, store):
    run = run_config(tiny_sa3, "dora-rows-xs")
    first, _, lines = fit(tiny_sa3, tmp_path / "a", run)
    assert any("0 layers from the store" in line for line in lines), lines
    (cache,) = (store / "svd_bases").glob("*.safetensors")
    written = cache.stat().st_mtime_ns

    other = replace(run, train=replace(run.train, lr=1e-3))  # another run, same model and rank
    second, _, lines = fit(tiny_sa3, tmp_path / "b", other)
    count = len(first.objective.targets)
    assert any(f"{count} layers from the store, 0 computed" in line for line in lines), lines
    assert cache.stat().st_mtime_ns == written

    # The signs are canonical: each U column's largest-magnitude entry is positive.
    with safe_open(str(cache), framework="pt") as f:
        us = [f.get_tensor(k) for k in f.keys() if k.endswith(".U")]  # noqa: SIM118
    assert len(us) == count
    for u in us:
        picked = u[u.abs().argmax(dim=0), torch.arange(u.shape[1])]
        assert (picked > 0).all()
    # M_xs (r × r) and the magnitudes are all that trains.
    for param in second.params:
        assert param.dim() == 1 or tuple(param.shape) == (4, 4)
    assert sum(p.dim() == 2 for p in second.params) == count
