"""The step's traced peak and the fit to a cap: what the estimate promises, without a family."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from tunesmith.train.config import RunConfig, TrainConfig
from tunesmith.train.footprint import DoesNotFit, Footprint, fit, traced_peak

WIDTH, TOKENS, BLOCKS = 256, 512, 4


def blocks():
    with torch.device("meta"):
        layers = [
            torch.nn.Sequential(
                torch.nn.Linear(WIDTH, 4 * WIDTH),
                torch.nn.GELU(),
                torch.nn.Linear(4 * WIDTH, WIDTH),
            )
            for _ in range(BLOCKS)
        ]
    for layer in layers:
        layer[0].weight.requires_grad_(False)  # frozen base weights, a trained bias or two
    return layers


def step(layers, checkpointed: bool, tokens: int = TOKENS):
    def run():
        x = torch.randn(1, tokens, WIDTH, device="meta")
        for layer in layers:
            x = checkpoint(layer, x, use_reentrant=False) if checkpointed else layer(x)
        x.square().mean().backward()

    return run


def test_the_trace_counts_what_a_step_keeps_and_checkpointing_keeps_less():
    layers = blocks()
    plain, kept = traced_peak(step(layers, False)), traced_peak(step(layers, True))
    # Each block keeps its two 4×-wide activations (the linear's output and the GELU's), in
    # float32, until the backward reaches it.
    hidden = TOKENS * 4 * WIDTH * 4
    assert plain >= BLOCKS * 2 * hidden
    assert kept < plain / 2  # only the blocks' inputs, and one block recomputed at a time
    assert traced_peak(step(layers, False, 2 * TOKENS)) == pytest.approx(2 * plain, rel=0.05)


def test_attention_is_counted_as_the_fused_kernels_keep_it_not_as_score_matrices():
    heads, tokens, dim = 8, 4096, 64
    q, k, v = (
        torch.randn(1, heads, tokens, dim, device="meta", requires_grad=True) for _ in range(3)
    )
    peak = traced_peak(lambda: F.scaled_dot_product_attention(q, k, v).sum().backward())
    scores = heads * tokens * tokens * 4  # one float32 score matrix per head
    assert peak < scores / 4


@dataclass(frozen=True)
class Train(TrainConfig):
    crop: int = 1000


def run(checkpointing="auto", crop=1000, batch=4):
    train = Train(gradient_checkpointing=checkpointing, crop=crop, batch_size=batch)
    return RunConfig("r", "f", "m", train=train)


def estimate(r) -> Footprint:
    """A run's bytes: 10 of weights, a step of 1 per crop frame and batch item, a tenth of it
    with checkpointing."""
    per = r.train.crop * r.train.batch_size
    on = r.train.gradient_checkpointing is True
    return Footprint(0, 10, 0, per // 10 if on else per, on)


KNOBS = lambda: (("crop", (1000, 500, 250)), ("batch_size", (2, 1)))  # noqa: E731


def test_a_run_under_its_cap_is_trained_as_asked():
    fitted = fit(run(), 10_000, estimate, KNOBS)
    assert fitted.run == run(checkpointing=False) and fitted.changed == []


def test_a_cap_between_the_estimates_turns_checkpointing_on_and_says_so():
    fitted = fit(run(), 1_000, estimate, KNOBS)  # 4010 without, 410 with
    assert fitted.run.train.gradient_checkpointing is True
    assert fitted.run.train.crop == 1000 and fitted.changed == ["gradient checkpointing on"]
    assert "gradient checkpointing on" in fitted.line()


def test_then_the_crop_shrinks_before_the_batch():
    fitted = fit(run(), 120, estimate, KNOBS)  # 410 at crop 1000, 210 at 500, 110 at 250
    assert (fitted.run.train.crop, fitted.run.train.batch_size) == (250, 4)
    assert fitted.changed == ["gradient checkpointing on", "train.crop 1000 → 250"]
    fitted = fit(run(), 40, estimate, KNOBS)  # crop 250: 110 at batch 4, 60 at 2, 35 at 1
    assert (fitted.run.train.crop, fitted.run.train.batch_size) == (250, 1)


def test_a_run_that_fits_no_setting_is_refused_with_its_estimate_and_the_smallest():
    with pytest.raises(DoesNotFit) as refused:
        fit(run(), 20, estimate, KNOBS)
    said = str(refused.value)
    assert "estimated peak 0.00 GB" in said and "against a cap of 0.00 GB" in said
    assert "gradient checkpointing on, train.crop 1000 → 250, train.batch_size 4 → 1" in said


def test_a_refused_run_traces_the_smallest_setting_not_every_one_on_the_way():
    """Each estimate of a real run is a trace of its step (seconds at full size): a run that
    fits nothing is refused after the asked setting, checkpointing on and the smallest."""
    traced = []

    def counted(r) -> Footprint:
        traced.append((r.train.gradient_checkpointing, r.train.crop, r.train.batch_size))
        return estimate(r)

    with pytest.raises(DoesNotFit):
        fit(run(), 20, counted, KNOBS)
    assert traced == [(False, 1000, 4), (True, 1000, 4), (True, 250, 1), (False, 1000, 4)]
    traced.clear()
    fit(run(), 40, counted, KNOBS)  # fits at the smallest: found by lowering, as before
    assert traced[-1] == (True, 250, 1) and (True, 250, 2) in traced


def test_checkpointing_set_by_hand_is_not_fitted():
    assert fit(run(True), 10_000, estimate, KNOBS).run.train.gradient_checkpointing is True
    with pytest.raises(DoesNotFit, match='"auto" lets the run fit itself'):
        fit(run(False), 1_000, estimate, KNOBS)


@pytest.mark.slow
def test_the_runtime_is_measured_once_a_machine_and_kept_outside_any_store(tmp_path, monkeypatch):
    """A fresh training process's resident set is measured by starting one (seconds): the
    measurement is kept in the user's cache folder, so a second store, a second dataset or a
    second build on the machine reads it instead of starting another."""
    import json
    import subprocess

    from tunesmith.train.footprint import machine_runtime_bytes

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    measured = machine_runtime_bytes()
    assert measured > 100e6  # torch alone holds more than this
    saved = json.loads((tmp_path / "cache" / "tunesmith" / "runtime.json").read_text())
    (key,) = saved
    assert saved[key] == measured and "torch " in key and "diffusers " in key

    def no_probe(*args, **kwargs):
        raise AssertionError(f"measured again: {args}")

    monkeypatch.setattr(subprocess, "run", no_probe)
    assert machine_runtime_bytes() == measured


@pytest.mark.slow
def test_an_unwritable_cache_folder_only_means_measuring_again(tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "a-file"))
    from tunesmith.train.footprint import machine_runtime_bytes

    assert machine_runtime_bytes() > 100e6
