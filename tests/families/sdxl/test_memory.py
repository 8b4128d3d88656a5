"""SDXL's memory estimate on the tiny base model: it is built from the folder's configs on meta
as the trainer loads it (the four components' weights, the adapter's factors the only trained
parameters), its step needs less with gradient checkpointing than without, and it rises with
the size and the batch (of this process's share when the run trains on several); a demo's
render at validation is traced as the pipeline runs it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from tunesmith.families.sdxl import FAMILY
from tunesmith.families.sdxl.model import load_pipeline
from tunesmith.families.sdxl.objective import SdxlLora
from tunesmith.train.config import resolve_run
from tunesmith.train.footprint import parameter_bytes, traced_peak


def run_config(tiny_sdxl, **train):
    raw = {"name": "r", "family": "sdxl", "base_model": str(tiny_sdxl), "train": train}
    return resolve_run(raw, Path("tunesmith.toml"), 0)


@pytest.fixture(scope="module")
def model(tiny_sdxl):
    return FAMILY.memory(run_config(tiny_sdxl), tiny_sdxl, torch.float32)


# (size, batch, devices, checkpointing): each traced once, for every test below.
SETTINGS = [
    (64, 1, 1, False),
    (256, 1, 1, False),
    (64, 3, 1, False),
    (64, 3, 3, False),
    (64, 1, 1, True),
    (256, 1, 1, True),
    (64, 3, 1, True),
]


@pytest.fixture(scope="module")
def steps(model, tiny_sdxl) -> dict[tuple, int]:
    """A step's traced peak at each of SETTINGS."""
    traced = {}
    for size, batch, devices, on in SETTINGS:
        train = dict(size=size, batch_size=batch, devices=devices, gradient_checkpointing=on)
        run = run_config(tiny_sdxl, **train)
        traced[size, batch, devices, on] = traced_peak(lambda run=run: model.step(run))
    return traced


def test_the_estimate_holds_what_the_trainer_loads(model, tiny_sdxl):
    pipe = load_pipeline(tiny_sdxl)
    lora = SdxlLora(pipe.unet, pipe.scheduler, pipe.vae.config.scaling_factor, rank=16)
    assert set(model.parts) == {"unet", "vae", "text_encoder", "text_encoder_2"}
    for name, part in model.parts.items():
        loaded = getattr(pipe, name)
        assert all(p.is_meta for p in part.parameters()), name
        assert parameter_bytes(part) == parameter_bytes(loaded), name
    trained = [p for part in model.parts.values() for p in part.parameters() if p.requires_grad]
    assert sum(p.numel() for p in trained) == sum(p.numel() for p in lora.parameters())
    assert all(p.dtype == torch.float32 for p in trained)
    run = run_config(tiny_sdxl, gradient_checkpointing=True)
    footprint = model.estimate(run)
    assert footprint.adapter == 16 * sum(p.numel() for p in lora.parameters())
    assert footprint.step > 0 and footprint.checkpointing


def test_a_step_needs_less_with_checkpointing(steps):
    assert steps[256, 1, 1, True] < 0.8 * steps[256, 1, 1, False]


@pytest.mark.parametrize("on", [False, True])
def test_the_estimate_rises_with_the_size_and_the_batch(steps, on):
    assert steps[256, 1, 1, on] > steps[64, 1, 1, on]
    assert steps[64, 3, 1, on] > steps[64, 1, 1, on]


def test_on_three_processes_each_holds_a_third_of_the_batch(steps):
    assert steps[64, 3, 3, False] == steps[64, 1, 1, False]


def render_bytes(model, tiny_sdxl, size=256, demos=True) -> int:
    run = run_config(tiny_sdxl, size=size)
    run = run if demos else replace(run, demos=())
    return traced_peak(lambda: model.render(run))


def test_a_demo_render_counts_where_the_run_renders(model, tiny_sdxl):
    rendered = render_bytes(model, tiny_sdxl)  # the default demos
    assert rendered > render_bytes(model, tiny_sdxl, size=128) > 0
    assert render_bytes(model, tiny_sdxl, demos=False) == 0


def test_a_float16_vae_decodes_in_float32_as_the_pipeline_does(tiny_sdxl):
    half = FAMILY.memory(run_config(tiny_sdxl), tiny_sdxl, torch.float16)
    run = run_config(tiny_sdxl, size=256)
    upcast = traced_peak(lambda: half.render(run))
    assert half.parts["vae"].dtype == torch.float16  # as the pipeline leaves it
    bfloat = FAMILY.memory(run_config(tiny_sdxl), tiny_sdxl, torch.bfloat16)
    assert upcast > traced_peak(lambda: bfloat.render(run))


def test_the_fit_may_lower_the_batch_to_one_never_the_size(model):
    ((name, values),) = model.knobs
    assert name == "batch_size" and values == tuple(sorted(values, reverse=True))
    assert values[-1] == 1


def test_the_estimate_trains_the_run_s_adapter_type_and_caption_length(tiny_sdxl):
    """The adapter estimated is the one the trainer attaches (the same trained numbers), and
    225-token captions make a longer step than 75-token ones."""
    from tunesmith.families.sdxl.adapters import AdapterSpec

    def run_with(adapter: dict, **train):
        raw = {"name": "r", "family": "sdxl", "base_model": str(tiny_sdxl), "adapter": adapter}
        raw["train"] = {"gradient_checkpointing": False, **train}
        return resolve_run(raw, Path("tunesmith.toml"), 0)

    for adapter in ({"type": "lokr"}, {"type": "loha", "conv_dim": 2}):
        run = run_with(adapter)
        footprint = FAMILY.memory(run, tiny_sdxl, torch.float32).estimate(run)
        pipe = load_pipeline(tiny_sdxl)
        spec = AdapterSpec.of(run.adapter)
        lora = SdxlLora(pipe.unet, pipe.scheduler, 0.13, rank=16, spec=spec)
        assert footprint.adapter == 16 * sum(p.numel() for p in lora.parameters()), adapter
    short, long = (run_with({}, max_token_length=n) for n in (None, 225))
    steps = [FAMILY.memory(r, tiny_sdxl, torch.float32).estimate(r).step for r in (short, long)]
    assert steps[1] > steps[0], steps
