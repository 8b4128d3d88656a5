"""The memory estimate of a Stable Audio 3 run (`Family.memory`), on the tiny base model.

The estimate is built from the folder's configs on `meta`; here it is held to the trainer's own
objective loaded on the CPU: the same weights and trained parameters, and the same step (the
CPU step's tensors traced as the meta step's are). Then what the fit relies on: checkpointing
lowers the step, a longer crop or a larger batch raises it, and the knobs lower the crop first.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from tunesmith.backends.placement import Placement
from tunesmith.families.stable_audio_3 import FAMILY
from tunesmith.families.stable_audio_3.config import Sa3Adapter, Sa3Demo, Sa3Train
from tunesmith.families.stable_audio_3.data import Batch
from tunesmith.families.stable_audio_3.memory import KNOBS
from tunesmith.families.stable_audio_3.trainer import Objective
from tunesmith.train.config import RunConfig
from tunesmith.train.footprint import (
    ADAPTER_BYTES_PER_PARAMETER,
    fit,
    parameter_bytes,
    traced_peak,
)

CPU = Placement("torch", "cpu", "float32", "test")


def run_config(folder, checkpointing=False, crop=512, batch=1) -> RunConfig:
    train = Sa3Train(
        latent_crop_length=crop, batch_size=batch, gradient_checkpointing=checkpointing
    )
    return RunConfig("m", "stable-audio-3", str(folder), "zq", Sa3Adapter(rank=4), train)


def with_train(run, **train) -> RunConfig:
    return replace(run, train=replace(run.train, **train))


@pytest.fixture(scope="module")
def estimate(tiny_sa3):
    return FAMILY.memory(run_config(tiny_sa3), tiny_sa3, torch.float32)


def test_the_estimate_holds_what_the_trainer_loads(tiny_sa3, estimate):
    run = run_config(tiny_sa3)
    objective = Objective(tiny_sa3, run, CPU)
    pipe = objective.pipe
    loaded = [pipe.transformer, pipe.vae, pipe.text_encoder, pipe.duration_embedder]
    trained = sum(p.numel() for p in objective.parameters())
    every = sum(parameter_bytes(module) for module in loaded)
    footprint = estimate.estimate(run)
    assert footprint.weights == every - 4 * trained  # float32 adapters, the rest frozen
    assert footprint.adapter == ADAPTER_BYTES_PER_PARAMETER * trained
    assert estimate.estimate(run) == footprint  # traced again: the same bytes


@pytest.mark.parametrize("checkpointing", [False, True])
def test_the_meta_step_is_the_trainers_step(tiny_sa3, estimate, checkpointing):
    """The trainer's objective on the CPU, its inputs made and its step taken inside the trace
    as the meta step's are: the same peak, but for the prompts' T5Gemma outputs, which the
    meta step makes inside the trace and the CPU objective has cached before it."""
    run = run_config(tiny_sa3, checkpointing, crop=384, batch=2)
    objective = Objective(tiny_sa3, run, CPU)
    prompts = ["zq, Genre: house", "a slow piece"]
    objective._prompts(prompts)  # encoded before the first step, as in training
    for param in objective.parameters():
        param.grad = torch.zeros_like(param)
    channels = objective.pipe.transformer.config.io_channels

    def step() -> None:
        batch = Batch(
            latents=torch.randn(2, channels, 384),
            mask=torch.ones(2, 384, dtype=torch.bool),
            seconds_total=torch.tensor([30.0, 95.0]),
            pieces=[(), ()],
            paths=["a", "b"],
        )
        t = torch.rand(2, dtype=torch.float64)
        noise, drop = torch.randn(2, channels, 384), torch.tensor([False, True])
        objective.loss(batch, prompts, t, noise, drop).mean().backward()

    cpu = traced_peak(step)
    meta = estimate.estimate(run).step
    cached = sum(e.numel() * e.element_size() + m.numel() * 8 for e, m in objective._text.values())
    assert meta - cached == pytest.approx(cpu, abs=64)  # a few scalars apart


def test_checkpointing_lowers_the_step_and_the_shapes_raise_it(tiny_sa3, estimate):
    run = run_config(tiny_sa3, crop=512)
    plain = estimate.estimate(run).step
    checkpointed = estimate.estimate(with_train(run, gradient_checkpointing=True)).step
    assert checkpointed < 0.8 * plain  # two blocks' activations kept against one recomputed
    assert estimate.estimate(with_train(run, latent_crop_length=256)).step < plain
    assert estimate.estimate(with_train(run, batch_size=2)).step > plain
    longer = estimate.estimate(with_train(run, latent_crop_length=1024)).total
    assert longer > estimate.estimate(run).total


def test_a_long_demo_counts_where_its_render_outgrows_the_step(tiny_sa3, estimate):
    """The demo's render: the VAE's band-mask attention over 17 tokens a latent frame grows
    with the square of its length; a two-minute demo needs more than a 512-frame step."""
    run = run_config(tiny_sa3, crop=512)
    short = estimate.estimate(replace(run, demos=(Sa3Demo(duration=2.0),)))
    long = estimate.estimate(replace(run, demos=(Sa3Demo(duration=120.0),)))
    assert 0 < short.render < short.step and short.total == estimate.estimate(run).total
    assert long.render > 50 * short.render and long.render > long.step
    assert long.total == long.runtime + long.weights + long.adapter + long.render


def test_the_fit_turns_checkpointing_on_then_shortens_the_crop(tiny_sa3, estimate):
    assert [name for name, _ in estimate.knobs] == ["latent_crop_length", "batch_size"]
    assert estimate.knobs == KNOBS
    run = with_train(run_config(tiny_sa3, crop=1300), gradient_checkpointing="auto")
    off = estimate.estimate(with_train(run, gradient_checkpointing=False)).total
    on = estimate.estimate(with_train(run, gradient_checkpointing=True)).total
    fitted = fit(run, (off + on) // 2, estimate.estimate, lambda: estimate.knobs)
    assert fitted.run.train.gradient_checkpointing is True
    assert fitted.run.train.latent_crop_length == 1300 and fitted.changed == [
        "gradient checkpointing on"
    ]
    shorter = fit(run, on - 1, estimate.estimate, lambda: estimate.knobs)
    assert shorter.run.train.latent_crop_length < 1300
    assert shorter.changed[1].startswith("train.latent_crop_length 1300 → ")
