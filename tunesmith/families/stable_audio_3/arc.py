"""Demos on the ARC model: the base model's distilled sibling, with the adapter trained on the
base merged into it, sampled as underfit renders a demo entry marked `arc`.

underfit trains on a `-base` (rectified-flow) checkpoint. An `arc` demo entry
(`underfit/training/demo_step.py`, `_swap_full_arc_weights` and `_run_one_arc_entry`) puts the
ARC checkpoint's weights under the adapter it is training, and samples with the objective
"rf_denoiser", 8 steps and cfg 1 unless the entry says otherwise. In stable-audio-3
(`stable_audio_3/inference/sampling.py`, `sample_diffusion`) that objective selects the
ping-pong sampler, `sample_flow_pingpong`, over the model's inference schedule
(`sampling_dist_shift`: `LogSNRShift(rate=0, anchor_logsnr=-6.2, logsnr_end=2.0)` unless the
model configures another).

The ARC network is the same kind as the base's: it outputs the rectified-flow velocity
v ≈ ε − x0 at noise level σ (x_σ = (1 − σ)·x0 + σ·ε); "rf_denoiser" changes only how it is
sampled. One ping-pong step from σ_i to σ_{i+1}:

    x̂0 = x − σ_i · v(x, σ_i)                    the denoised estimate
    x  ← (1 − σ_{i+1}) · x̂0 + σ_{i+1} · ε_i      re-noised with fresh noise ε_i

over σ_i = sigmoid(−λ_i), λ_i = 2.0 − (1 − i/N)·(2.0 + 6.2), i < N, with σ_0 set to exactly 1 and
σ_N = 0 (so the last step returns x̂0). diffusers ships this sampler:
`FlowMatchEulerDiscreteScheduler(stochastic_sampling=True)` is the step above, and
`StableAudio3Pipeline` drives it over that schedule (`logsnr_sigma_schedule`), drawing the
starting noise and every ε_i from the demo's generator, so a demo renders the same every time.
cfg 1 makes no unconditional pass: the pipeline guides only above 1, as stable-audio-3 does.

The adapter. Its layers are attached to copies of the ARC model's target layers, with an -xs
type's fixed bases U, V taken from the base model (what the adapter was trained with, as in
underfit, where the parametrization is attached to the base before the ARC weights are swapped
in under it); everything else is computed on the ARC weights: a magnitude's blend at a strength
≠ 1 is toward the ARC weight's own norm. To render at strength g, each target layer of the ARC
model is given W' (torch_lora.merged_weight at g, cast to the model's dtype); at g = 0 it gets
its own weight back, so strength 0 is the ARC model alone bit for bit.

Where the ARC model is: `arc_model_folder` (`Sa3Train.arc_model`, "" for the base model's
sibling, `arc_model_name`). Not handled: finding the sibling of a base model inside the Hugging
Face cache (`models--…/snapshots/<rev>`): name its folder in `train.arc_model`; underfit's other
ARC path (an ARC LoRA stacked on the base model, `arc_lora_path`) and its per-entry strength
schedules over σ (`lora_interval_max`, `arc_lora_strength`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch
from torch import nn

from tunesmith.adapters import torch_lora
from tunesmith.adapters.svd_bases import Bases, canonical_bases
from tunesmith.families.stable_audio_3 import model
from tunesmith.families.stable_audio_3.published import PUBLISHED

ARC_SUFFIX = "-arc"  # the sibling of a folder that is not a published base model


def arc_model_name(base_model_name: str, setting: str = "") -> str:
    """The ARC model's folder name for a base model folder's name and `train.arc_model`.

    A setting other than "" is the answer. Otherwise the sibling: for a published base model
    (`stable-audio-3-medium-base`, `-small-music-base`, `-small-sfx-base`) the published ARC
    model, the same name without `-base` (the repositories of underfit's `registry.json`,
    `published.PUBLISHED`); for any other folder `<name>-arc` (`tiny-stable-audio-3` →
    `tiny-stable-audio-3-arc`).
    """
    if setting:
        return setting
    for published in PUBLISHED:
        base, arc = (repo.split("/", 1)[1] for repo in published.repos)
        if base_model_name == base:
            return arc
    return base_model_name + ARC_SUFFIX


def arc_model_folder(base_model: Path, setting: str = "") -> Path:
    """The ARC model's folder: `arc_model_name`, absolute as given, else beside the base model
    folder (in the models folder, where the base model is one)."""
    base_model = Path(base_model)
    given = Path(arc_model_name(base_model.name, setting)).expanduser()
    return given if given.is_absolute() else base_model.parent / given


def pingpong_scheduler(scheduler):
    """The pipeline's scheduler as the ping-pong sampler: its own config (timestep scale,
    shift) with `stochastic_sampling` on, whatever the folder's config says."""
    from diffusers import FlowMatchEulerDiscreteScheduler

    return FlowMatchEulerDiscreteScheduler.from_config(scheduler.config, stochastic_sampling=True)


def base_bases(base_modules: nn.Module, targets: list[str], rank: int) -> dict[str, Bases]:
    """An -xs adapter's U, V for each target, from the base model: those of the adapter already
    attached to the base model's layer (the bases it renders and trains with), else the SVD of
    the base weight (`svd_bases.canonical_bases`, what attaching to the base computes)."""
    bases = {}
    for name in targets:
        layer = base_modules.get_submodule(name)
        if isinstance(layer, torch_lora.UnderfitAdapter) and layer.XS:
            bases[name] = (layer.U.detach(), layer.V.detach())
        else:
            bases[name] = canonical_bases(_plain(layer).weight, rank)
    return bases


def _plain(layer: nn.Module) -> nn.Module:
    """The nn.Linear or nn.Conv1d inside an adapter (itself when it has none)."""
    while hasattr(layer, "base_layer"):
        layer = layer.base_layer
    return layer


class ArcModel:
    """The ARC model's pipeline with the ping-pong scheduler, and the adapter to merge into it."""

    def __init__(self, folder: Path, dtype: torch.dtype, device: str) -> None:
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise FileNotFoundError(
                f"no ARC model at {self.folder}: put the ARC checkpoint (a diffusers "
                "StableAudio3Pipeline folder) there, or name its folder in train.arc_model"
            )
        self.pipe = model.load_pipeline(self.folder, dtype, device)
        self.pipe.scheduler = pingpong_scheduler(self.pipe.scheduler)
        self.modules = nn.ModuleDict(
            {"transformer": self.pipe.transformer, "duration_embedder": self.pipe.duration_embedder}
        )
        self.adapters: nn.Module | None = None  # copies of the target layers, adapters on them
        self.merged: float | None = 0.0  # the strength the live layers hold; None: stale

    def attach(
        self,
        targets: list[str],
        rank: int,
        alpha: float,
        adapter_type: str,
        base_modules: nn.Module,
    ) -> None:
        """Attach adapters of a type to copies of the ARC model's `targets` (names within
        `modules`), an -xs type's U, V from `base_modules` (the base model's transformer and
        duration embedder, adapters attached or not); load their tensors with `load_state`.
        ValueError when a target's weight is not the base model's shape."""
        holder = nn.Module()
        for name in targets:
            layer = self.modules.get_submodule(name)
            base = _plain(base_modules.get_submodule(name))
            if base.weight.shape != layer.weight.shape:
                raise ValueError(
                    f"the ARC model {self.folder} does not fit the base model: its {name} is "
                    f"{tuple(layer.weight.shape)}, the base model's {tuple(base.weight.shape)}"
                )
            _put(holder, name, copy.deepcopy(layer))
        bases = None
        if adapter_type in torch_lora.XS_TYPES:
            bases = base_bases(base_modules, targets, rank)
        torch_lora.attach(holder, targets, rank, alpha, adapter_type, bases=bases)
        self.adapters, self.merged = holder, None

    def load_state(self, state: Mapping[str, torch.Tensor]) -> None:
        """The adapter's tensors (torch_lora's keys: `<target>.parametrizations.weight.0.*`)."""
        torch_lora.load_adapter_state(self.adapters, dict(state))
        self.merged = None

    @torch.no_grad()
    def merge(self, strength: float) -> None:
        """Put W' at `strength` into each target layer; at 0 the ARC model's own weights."""
        if strength == self.merged:
            return
        if self.adapters is None:
            if strength != 0:
                raise ValueError("no adapter is attached: only strength 0 (the ARC model)")
            self.merged = 0.0
            return
        torch_lora.set_strength(self.adapters, strength)
        for name, adapter in torch_lora.adapter_layers(self.adapters).items():
            live = self.modules.get_submodule(name).weight
            if strength == 0:
                live.copy_(_plain(adapter).weight)
            else:
                live.copy_(torch_lora.merged_weight(adapter).to(live.dtype))
        self.merged = strength

    def render(self, demo, strength: float) -> np.ndarray:
        """Stereo float32 [2, N] of `demo` on the ARC model with the adapter merged at
        `strength`, sampled ping-pong (`model.render_demo` through this pipeline)."""
        self.merge(strength)
        return model.render_demo(self.pipe, demo)


def training_arc(base_model: Path, run, dtype: torch.dtype, device: str, modules, targets):
    """The ARC model a training run renders its `arc` demos on: the run's adapter type, rank
    and alpha on its `targets`, U, V from the training model's own adapters (`modules`, the
    base model's transformer and duration embedder); give it the adapter as it is now with
    `load_state` before each render."""
    arc = ArcModel(arc_model_folder(base_model, run.train.arc_model), dtype, device)
    a = run.adapter
    arc.attach(list(targets), a.rank, a.scale_alpha, a.type, modules)
    return arc


def _put(root: nn.Module, name: str, layer: nn.Module) -> None:
    """Set `layer` at the dotted `name` under `root`, making empty parents on the way."""
    parent = root
    *path, leaf = name.split(".")
    for part in path:
        if not hasattr(parent, part):
            parent.add_module(part, nn.Module())
        parent = getattr(parent, part)
    parent.add_module(leaf, layer)
