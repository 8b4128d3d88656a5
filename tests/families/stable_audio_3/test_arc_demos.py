"""Demos on the ARC model (`arc = true`): the tiny ARC sibling with a trained-shape adapter
merged, the ping-pong sampler against its formula, the sibling's name and folder, the tiny ARC
that `tunesmith examples` writes, and the sidecar and audition page naming the ARC model."""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from tunesmith.adapters import torch_lora
from tunesmith.adapters.svd_bases import canonical_bases
from tunesmith.backends.placement import Placement
from tunesmith.families.stable_audio_3 import arc, model
from tunesmith.families.stable_audio_3.config import Sa3Adapter, Sa3Demo, Sa3Train
from tunesmith.families.stable_audio_3.files import read_adapter
from tunesmith.families.stable_audio_3.sample import Renderer
from tunesmith.families.stable_audio_3.tiny import make_tiny_stable_audio_3_arc
from tunesmith.train.config import RunConfig

CPU = Placement("torch", "cpu", "float32", "test")
ARC_DEMO = Sa3Demo(prompt="zq, a loop", seed=3, duration=1.0, arc=True)  # 8 steps, cfg 1
TYPES = ("dora-rows", "lora-xs")


@pytest.fixture(scope="module")
def tiny_arc(tiny_sa3) -> Path:
    """The tiny base model's ARC sibling, where `arc_model_name` puts it."""
    return make_tiny_stable_audio_3_arc(arc.arc_model_folder(Path(tiny_sa3)), seed=0)


def write_adapter(tiny_sa3, folder: Path, adapter_type: str) -> Path:
    """An adapter file of `adapter_type` as training writes it, every tensor moved off its
    init (lora_B and M_xs start at zero), so that it changes what the model renders."""
    from tests.families.stable_audio_3.test_sa3_training import run_config
    from tunesmith.families.stable_audio_3.trainer import Objective

    run = replace(run_config(tiny_sa3), adapter=Sa3Adapter(type=adapter_type, rank=4))
    objective = Objective(Path(tiny_sa3), run, CPU)
    generator = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for param in objective.parameters():
            param.add_(0.1 * torch.randn(param.shape, generator=generator))
    return objective.save(folder, 1, 0, {})


@pytest.fixture(scope="module", params=TYPES)
def adapted(request, tiny_sa3, tiny_arc, tmp_path_factory):
    """(adapter file, a Renderer with it) for each adapter type."""
    path = write_adapter(tiny_sa3, tmp_path_factory.mktemp("adapter"), request.param)
    return path, Renderer(Path(tiny_sa3), CPU, path)


@pytest.fixture(scope="module")
def plain_arc(tiny_sa3, tiny_arc) -> np.ndarray:
    """The ARC demo on the ARC model alone: a renderer without any adapter."""
    return Renderer(Path(tiny_sa3), CPU).render(ARC_DEMO, 0.0)


def test_the_arc_sibling_is_the_published_arc_model_or_the_name_with_arc(tmp_path):
    from tunesmith.examples import TINY_SA3, TINY_SA3_ARC

    assert arc.arc_model_name("stable-audio-3-medium-base") == "stable-audio-3-medium"
    assert arc.arc_model_name("stable-audio-3-small-music-base") == "stable-audio-3-small-music"
    assert arc.arc_model_name("stable-audio-3-small-sfx-base") == "stable-audio-3-small-sfx"
    assert arc.arc_model_name("my-model-base") == "my-model-base-arc"  # not a published one
    assert arc.arc_model_name(TINY_SA3) == TINY_SA3_ARC == "tiny-stable-audio-3-arc"
    assert arc.arc_model_name("stable-audio-3-medium-base", "mine") == "mine"  # the setting
    base = tmp_path / "models" / "stable-audio-3-medium-base"
    assert arc.arc_model_folder(base) == tmp_path / "models" / "stable-audio-3-medium"
    assert arc.arc_model_folder(base, "elsewhere") == tmp_path / "models" / "elsewhere"
    assert arc.arc_model_folder(base, str(tmp_path / "arc")) == tmp_path / "arc"
    with pytest.raises(FileNotFoundError, match="train.arc_model"):
        arc.ArcModel(arc.arc_model_folder(base), torch.float32, "cpu")


class HandMadeDenoiser(nn.Module):
    """v(x, t) = 0.5·x − t, recording the batch size and the timestep of each call."""

    def __init__(self) -> None:
        super().__init__()
        self.anchor = nn.Parameter(torch.zeros(()))  # the pipeline finds its device through it
        self.calls: list[tuple[int, torch.Tensor]] = []

    @property
    def device(self) -> torch.device:  # what the pipeline asks of its components (ModelMixin)
        return self.anchor.device

    @property
    def dtype(self) -> torch.dtype:
        return self.anchor.dtype

    def forward(self, hidden_states, timestep, *args, **kwargs):
        self.calls.append((hidden_states.shape[0], timestep.detach().clone()))
        return (0.5 * hidden_states - timestep[:, None, None].to(hidden_states.dtype),)


def test_the_pingpong_sampler_follows_its_formula_for_two_steps(tiny_arc):
    loaded = arc.ArcModel(tiny_arc, torch.float32, "cpu")
    denoiser = HandMadeDenoiser()
    loaded.pipe.transformer = denoiser
    demo = replace(ARC_DEMO, steps=2)
    rendered = loaded.render(demo, 0.0)

    # σ = sigmoid(−λ), λ from −6.2 to 2.0 over 2 steps: σ0 = 1 (set), σ1 = sigmoid(2.1), σ2 = 0.
    sigmas = [1.0, 1.0 / (1.0 + math.exp(-2.1)), 0.0]
    generator = torch.Generator("cpu").manual_seed(demo.seed)
    frames = math.ceil(demo.duration * model.SAMPLE_RATE / loaded.pipe.vae.downsampling_ratio)
    x = torch.randn((1, loaded.pipe.vae.config.latent_dim, frames), generator=generator)
    for sigma, following in zip(sigmas[:-1], sigmas[1:], strict=True):
        denoised = x - sigma * (0.5 * x - sigma)  # x̂0 = x − σ_i·v(x, σ_i)
        noise = torch.randn(x.shape, generator=generator)  # fresh ε_i from the demo's generator
        x = (1 - following) * denoised + following * noise
    with torch.no_grad():
        audio = loaded.pipe.vae.decode(x).sample[0, :, : int(demo.duration * model.SAMPLE_RATE)]
    expected = audio.clamp(-1, 1).numpy()

    assert [b for b, _ in denoiser.calls] == [1, 1]  # cfg 1: no unconditional pass
    assert torch.allclose(torch.cat([t for _, t in denoiser.calls]), torch.tensor(sigmas[:-1]))
    np.testing.assert_allclose(rendered, expected, rtol=1e-5, atol=1e-6)
    # The same demo without re-noising (deterministic Euler) is another sound: the sampler is
    # what the test pins down.
    loaded.pipe.scheduler = type(loaded.pipe.scheduler).from_config(
        loaded.pipe.scheduler.config, stochastic_sampling=False
    )
    assert not np.allclose(model.render_demo(loaded.pipe, demo), expected, atol=1e-3)


def test_strength_zero_is_the_arc_model_alone_bit_for_bit(adapted, plain_arc):
    _, renderer = adapted
    renderer.render(ARC_DEMO, 1.0)  # merged first, then taken out again
    alone = renderer.render(ARC_DEMO, 0.0)
    assert alone.dtype == plain_arc.dtype and alone.tobytes() == plain_arc.tobytes()


def test_an_arc_demo_renders_on_the_arc_model_with_the_adapter_merged(
    adapted, plain_arc, tiny_sa3, tiny_arc
):
    path, renderer = adapted
    merged = renderer.render(ARC_DEMO, 1.0)
    assert np.abs(merged - plain_arc).max() > 1e-2  # the adapter changes the ARC render
    # The base model draws the same demo otherwise: the render is the ARC model's.
    base = renderer.render(replace(ARC_DEMO, arc=False), 0.0)
    assert np.abs(base - plain_arc).max() > 1e-2

    # The same thing by hand: the ARC pipeline, the adapter attached to its layers with an
    # -xs type's U, V from the base weights, merged by torch_lora, sampled ping-pong.
    pipe = model.load_pipeline(tiny_arc)
    pipe.scheduler = arc.pingpong_scheduler(pipe.scheduler)
    modules = nn.ModuleDict(
        {"transformer": pipe.transformer, "duration_embedder": pipe.duration_embedder}
    )
    state, info = read_adapter(path, pipe.transformer.config.use_differential_attention)
    targets = sorted({k.split(".parametrizations.")[0] for k in state})
    cfg = info.config
    base_pipe = model.load_pipeline(tiny_sa3)
    base_modules = nn.ModuleDict(
        {"transformer": base_pipe.transformer, "duration_embedder": base_pipe.duration_embedder}
    )
    bases = {t: canonical_bases(base_modules.get_submodule(t).weight, cfg.rank) for t in targets}
    torch_lora.attach(modules, targets, cfg.rank, cfg.alpha, cfg.adapter_type, bases=bases)
    torch_lora.load_adapter_state(modules, state)
    torch_lora.merge(modules)
    assert model.render_demo(pipe, ARC_DEMO).tobytes() == merged.tobytes()
    assert renderer.render(ARC_DEMO, 1.0).tobytes() == merged.tobytes()  # after the base one

    if cfg.adapter_type in torch_lora.XS_TYPES:  # the bases are the base model's, not the ARC's
        on_arc = renderer.arc_model().adapters
        name = targets[0]
        u = on_arc.get_submodule(name).U
        arc_weight = on_arc.get_submodule(name).base_layer.weight  # the ARC model's own
        assert torch.equal(u, bases[name][0])
        assert not torch.allclose(u, canonical_bases(arc_weight, cfg.rank)[0], atol=1e-3)


def test_training_renders_its_arc_demos_with_the_adapter_as_it_is_now(tiny_sa3, plain_arc):
    from tests.families.stable_audio_3.test_sa3_training import run_config
    from tunesmith.families.stable_audio_3.trainer import Objective

    run = replace(run_config(tiny_sa3), adapter=Sa3Adapter(type="lora", rank=4))
    objective = Objective(Path(tiny_sa3), run, CPU)
    on_arc = arc.training_arc(
        Path(tiny_sa3), run, torch.float32, "cpu", objective.modules, objective.targets
    )
    on_arc.load_state(objective.adapter_state())  # step 0: lora's B is zero
    assert on_arc.render(ARC_DEMO, 1.0).tobytes() == plain_arc.tobytes()
    with torch.no_grad():
        for param in objective.parameters():
            param.add_(0.1)
    on_arc.load_state(objective.adapter_state())
    assert np.abs(on_arc.render(ARC_DEMO, 1.0) - plain_arc).max() > 1e-2


def test_a_half_strength_merge_sits_between(adapted, plain_arc):
    _, renderer = adapted
    full, half = renderer.render(ARC_DEMO, 1.0), renderer.render(ARC_DEMO, 0.5)
    assert 0 < np.abs(half - plain_arc).max() and 0 < np.abs(half - full).max()


def test_the_tiny_arc_is_written_once_beside_the_base_and_fits_it(tiny_sa3, tiny_arc):
    files = {p: p.stat().st_mtime_ns for p in tiny_arc.rglob("*") if p.is_file()}
    time.sleep(0.05)
    assert make_tiny_stable_audio_3_arc(tiny_arc, seed=0) == tiny_arc
    assert {p: p.stat().st_mtime_ns for p in tiny_arc.rglob("*") if p.is_file()} == files
    base, sibling = model.load_pipeline(tiny_sa3), model.load_pipeline(tiny_arc)
    assert sibling.scheduler.config.stochastic_sampling
    assert not base.scheduler.config.stochastic_sampling
    ours, theirs = base.transformer.state_dict(), sibling.transformer.state_dict()
    assert ours.keys() == theirs.keys()
    assert all(ours[k].shape == theirs[k].shape for k in ours)
    assert not torch.equal(ours["proj_in.weight"], theirs["proj_in.weight"])
    vae_a, vae_b = base.vae.state_dict(), sibling.vae.state_dict()
    assert all(torch.equal(vae_a[k], vae_b[k]) for k in vae_a)  # post-training moves the DiT


@pytest.mark.slow
def test_tunesmith_examples_writes_the_arc_model_once(tmp_path):
    from tunesmith.examples import TINY_SA3_ARC, make_examples

    folders = make_examples(tmp_path / "datasets", tmp_path / "models")
    folder = folders[TINY_SA3_ARC]
    assert folder == tmp_path / "models" / TINY_SA3_ARC
    assert (folder / "transformer" / "config.json").is_file()
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}
    time.sleep(0.05)
    make_examples(tmp_path / "datasets", tmp_path / "models")
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()} == before


def test_the_sidecar_and_the_audition_page_name_the_arc_model(tiny_sa3, tiny_arc, tmp_path):
    from tunesmith.render.audition import audition_html
    from tunesmith.render.demos import build_renders
    from tunesmith.store import Store

    path = write_adapter(tiny_sa3, tmp_path / "adapter", "dora-rows")
    demos = (Sa3Demo(prompt="zq, a loop", seed=2, duration=1.0, steps=4), ARC_DEMO)
    run = RunConfig("r", "stable-audio-3", str(tiny_sa3), "zq", Sa3Adapter(), Sa3Train(), demos)
    made = []

    def renderer(run, adapter):
        made.append(adapter)
        return Renderer(Path(tiny_sa3), CPU, adapter, run.train.arc_model)

    def build(run):
        return build_renders(
            [(run, {"best_path": str(path), "best_step": 1})],
            {"r": "fp"},
            tmp_path / "out",
            Store(tmp_path / "store"),
            {"stable-audio-3": CPU},
            renderer,
        )

    renders = build(run)
    rows = renders.frame.to_dict("records")
    sidecars = {(r["demo"], r["side"]): json.loads(Path(r["sidecar"]).read_text()) for r in rows}
    for side in ("base", "adapter"):
        assert "model" not in sidecars[("demo0", side)]  # the base model's, as before
        arc_sidecar = sidecars[("demo1", side)]
        assert arc_sidecar["model"] == "ARC" and arc_sidecar["sampler"] == "ping-pong"
        assert arc_sidecar["model_folder"] == str(tiny_arc)
        assert (arc_sidecar["steps"], arc_sidecar["cfg"]) == (8, 1.0)

    folder = tmp_path / "out" / "auditions"
    folder.mkdir(parents=True)
    prompts = []
    for i, demo in enumerate(demos):
        pair = {r["side"]: r for r in rows if r["demo"] == f"demo{i}"}
        sides = {
            side: {
                "audio": os.path.relpath(r["wav"], folder),
                "spectrogram": os.path.relpath(r["spectrogram"], folder),
            }
            for side, r in pair.items()
        }
        sides["adapter"] |= {"strength": 1.0, "step": 1}
        prompts.append(
            {"id": f"demo{i}", "prompt": demo.prompt, "seed": demo.seed, "steps": demo.steps}
            | {"cfg": demo.cfg, "duration": demo.duration, **sides}
        )
    page = {"title": "t", "run": "r", "dataset": "d", "family": "stable-audio-3"}
    text = audition_html({**page, "prompts": prompts}, folder)
    plain, on_arc = text.split('data-prompt-id="demo1"')
    assert "Base model" in plain and "ARC" not in plain.split('data-prompt-id="demo0"')[1]
    assert '<span class="label">ARC model</span>' in on_arc
    assert "Adapter on the ARC model · step 1 · strength 1" in on_arc
    assert "8 steps · cfg 1 · ARC model, ping-pong sampler" in on_arc

    # Another ARC model renders the ARC demo again and leaves the other one cached.
    other = replace(run, train=replace(run.train, arc_model=tiny_arc.name))
    again = build(other)
    assert (again.result.computed, again.result.cached) == (2, 2)
