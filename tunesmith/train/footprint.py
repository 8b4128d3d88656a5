"""A training step's peak memory, estimated before the first step, and a run fitted to its cap.

The estimate is the sum of what a training process holds at the peak of a step:

- `runtime`: the process before any model: a fresh Python's resident set once it has
  imported torch and the model libraries (measured once per machine's interpreter and
  library versions, `machine_runtime_bytes`; 0 on a GPU);
- `weights`: every component the trainer loads, at the placement's dtype;
- `adapter`: the trained parameters in float32 with their gradients and the optimizer's state
  (AdamW's two moments; tunesmith's trainers keep the factors in float32 whatever the base);
- `step`: the tensors one forward, loss and backward create, at their peak, traced on the
  `meta` device (`traced_peak`): autograd's saved activations, the backward's gradients, the
  recomputation of a checkpointed block. The family runs its own step there (`Family.memory`),
  on the base model's architecture as its `config.json` files state it, at the run's crop or
  size and batch, so no weights are read and a billion-parameter model traces in seconds;
- or `render` where it is larger: the demos rendered at validation (a guided denoiser call,
  the VAE's decode at the demo's length or size), traced the same way without gradients.

Attention is counted as the fused kernels compute it (the CPU's flash kernel and CUDA's keep
the query, key, value, output and the log-sum-exp, never the score matrix): on `meta`, torch
would otherwise decompose it into its math form, whose score matrices a real step never holds.
What the trace cannot see: a kernel's private scratch and the allocator's fragmentation;
`docs/performance.md` has the estimate against measured peaks at full size.

`fit(run, cap, estimate, knobs)` with `train.gradient_checkpointing = "auto"`: the run as
asked if its estimate is under the cap; else checkpointing on; else the family's knobs lowered
in order (a shorter crop, a smaller batch), never a smaller model; a run that fits no setting
is refused with its estimate and the smallest setting's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

GB = 1e9
# AdamW's state per trained parameter (two float32 moments), and the parameter and its
# gradient in float32: 16 bytes each.
ADAPTER_BYTES_PER_PARAMETER = 4 + 4 + 8


if TYPE_CHECKING:
    import torch

TRACE_NAMES = ("traced_peak", "parameter_bytes", "trainable_parameters")


def __getattr__(name: str):
    """The tracer's names (`tunesmith.train.trace`), imported with torch when first asked for."""
    if name in TRACE_NAMES:
        from tunesmith.train import trace

        return getattr(trace, name)
    raise AttributeError(name)


def process_bytes() -> int:
    """This process's resident set now."""
    import psutil

    return psutil.Process().memory_info().rss


# What a training process imports before it loads a model: its entry point where installed
# (pipelines.train_child, with pandas and Dagster Pipes), and the model libraries.
MODEL_LIBRARIES = ("torch", "diffusers", "transformers", "peft")
RUNTIME_IMPORTS = (*MODEL_LIBRARIES, "pipelines.train_child")


def runtime_bytes(cache: dict) -> int:
    """What a training process holds before it loads a model: a fresh Python that has
    imported what the training process imports, measured once per interpreter and set of
    library versions (in `cache`). Not the resident set of the process that asks, which may
    have loaded models."""
    import importlib.metadata
    import importlib.util
    import subprocess
    import sys

    found = [n for n in RUNTIME_IMPORTS if importlib.util.find_spec(n.split(".")[0])]
    versions = [f"{n} {importlib.metadata.version(n)}" for n in MODEL_LIBRARIES if n in found]
    key = f"runtime {sys.executable} {' '.join(versions)}"
    if key not in cache:
        imports = "; ".join(f"import {name}" for name in found)
        probe = f"{imports}; import psutil; print(psutil.Process().memory_info().rss)"
        done = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True
        )
        cache[key] = int(done.stdout.split()[-1])
    return cache[key]


def machine_runtime_bytes() -> int:
    """`runtime_bytes`, kept for this machine's user in `$XDG_CACHE_HOME/tunesmith/runtime.json`
    (`~/.cache` by default): a property of the installed interpreter and libraries, not of a
    dataset or a store, and a fresh process that imports torch costs seconds, so it is
    measured once per machine rather than once per store. Unwritable: measured every time."""
    import os
    from pathlib import Path

    from tunesmith.store.atomic import atomic_write_json

    home = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    path = Path(home) / "tunesmith" / "runtime.json"
    saved = _read_json(path)
    before = dict(saved)
    found = runtime_bytes(saved)
    if saved != before:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(path, saved)
        except OSError:
            pass  # a read-only home: the next fit measures again
    return found


@dataclass
class MemoryModel:
    """What a family gives the estimate of one run (`Family.memory`).

    `parts`: every component its training process loads, built on the `meta` device from the
    base model's `config.json` files at the placement's dtype, the trained one with the run's
    adapter attached as the trainer attaches it (its parameters the only ones requiring
    gradients). `step(run)`: one training forward, loss and backward over `parts` on `meta`
    tensors of the run's shapes (crop or size, batch), with gradient checkpointing as
    `run.train.gradient_checkpointing` says (True or False, never "auto" here). `knobs`: the
    train settings the fit may lower when the run does not fit, in order, each with the
    values to try from the largest down (a crop, a batch; never the model)."""

    parts: dict[str, torch.nn.Module]
    step: Callable[[Any], Any]
    knobs: tuple[tuple[str, tuple[int, ...]], ...] = ()
    # `render(run)`: the largest piece of a demo render at validation, without gradients, on
    # `meta` (a guided denoiser call, the VAE's decode at the demo's length or size); None:
    # the family's renders hold less than its step.
    render: Callable[[Any], Any] | None = None

    def estimate(self, run, runtime: int = 0) -> Footprint:
        from tunesmith.train.trace import parameter_bytes, traced_peak, trainable_parameters

        weights = sum(parameter_bytes(p, trainable=False) for p in self.parts.values())
        trained = sum(trainable_parameters(p) for p in self.parts.values())
        return Footprint(
            runtime=runtime,
            weights=weights,
            adapter=trained * ADAPTER_BYTES_PER_PARAMETER,
            step=traced_peak(lambda: self.step(run)),
            checkpointing=run.train.gradient_checkpointing is True,
            render=traced_peak(lambda: self.render(run)) if self.render else 0,
        )


@dataclass(frozen=True)
class Footprint:
    """One run's estimated peak, in bytes, by part."""

    runtime: int
    weights: int
    adapter: int
    step: int
    checkpointing: bool
    render: int = 0  # a demo render's peak at validation (the step's and the render's
    # tensors are never alive together: the larger counts)

    @property
    def total(self) -> int:
        return self.runtime + self.weights + self.adapter + max(self.step, self.render)

    def line(self) -> str:
        on = "on" if self.checkpointing else "off"
        render = f", a demo render {_gb(self.render)}" if self.render else ""
        return (
            f"estimated peak {_gb(self.total)} (weights {_gb(self.weights)}, adapter and "
            f"optimizer {_gb(self.adapter)}, a step {_gb(self.step)}{render}, runtime "
            f"{_gb(self.runtime)}; gradient checkpointing {on})"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "runtime": self.runtime,
            "weights": self.weights,
            "adapter": self.adapter,
            "step": self.step,
            "render": self.render,
            "checkpointing": self.checkpointing,
        }


@dataclass(frozen=True)
class Fitted:
    """A run fitted to its cap: the run to train, its estimate, and what the fit changed."""

    run: Any
    footprint: Footprint | None  # None: the family does not estimate
    changed: list[str] = field(default_factory=list)  # "gradient checkpointing on", ...

    def line(self) -> str:
        if self.footprint is None:
            return ""
        said = self.footprint.line()
        if self.changed:
            said += f"; to fit the cap: {', '.join(self.changed)}"
        return said


class DoesNotFit(ValueError):
    """No setting the fit may choose brings the run under its cap."""


def fit(
    run,
    cap: int,
    estimate: Callable[[Any], Footprint],
    knobs: Callable[[], tuple[tuple[str, tuple[int, ...]], ...]] = tuple,
) -> Fitted:
    """The run with gradient checkpointing resolved, fitted under `cap` bytes.

    `estimate(run)` gives a run's footprint; `knobs()` the train settings the fit may lower,
    in order, each with the values it tries from the largest down (values not below the run's
    own are skipped; asked for only when checkpointing alone does not fit; the setting with
    every knob at its smallest is estimated first, and a run over the cap there is refused
    at once). Only `"auto"` is fitted: a run that says `true` or `false` is estimated as it
    is, and refused if over."""
    asked = run.train.gradient_checkpointing
    if asked != "auto":
        fixed = _with(run, gradient_checkpointing=bool(asked))
        footprint = estimate(fixed)
        if footprint.total > cap:
            raise DoesNotFit(_refusal(footprint, cap))
        return Fitted(fixed, footprint)
    plain = _with(run, gradient_checkpointing=False)
    footprint = estimate(plain)
    if footprint.total <= cap:
        return Fitted(plain, footprint)
    current = _with(run, gradient_checkpointing=True)
    changed = ["gradient checkpointing on"]
    footprint = estimate(current)
    lowered = knobs() if footprint.total > cap else ()
    # The smallest setting first: a run that fits no setting is refused after one more
    # estimate (a trace of its step) rather than one per value on the way down.
    smallest, said = current, list(changed)
    for name, values in lowered:
        own = getattr(current.train, name)
        if below := [v for v in values if v < own]:
            smallest = _with(smallest, **{name: min(below)})
            said.append(f"train.{name} {own} → {min(below)}")
    if smallest is not current and (least := estimate(smallest)).total > cap:
        raise DoesNotFit(_refusal(estimate(plain), cap, ", ".join(said), least))
    for name, values in lowered:
        if footprint.total <= cap:
            break
        own = getattr(current.train, name)
        for value in (v for v in values if v < own):
            trial = _with(current, **{name: value})
            trial_footprint = estimate(trial)
            current, footprint = trial, trial_footprint
            if trial_footprint.total <= cap:
                break
        if getattr(current.train, name) != own:
            changed.append(f"train.{name} {own} → {getattr(current.train, name)}")
    if footprint.total > cap:
        raise DoesNotFit(_refusal(estimate(plain), cap, ", ".join(changed), footprint))
    return Fitted(current, footprint, changed)


def _refusal(asked: Footprint, cap: int, tried: str = "", smallest: Footprint | None = None) -> str:
    said = f"does not fit its memory: {asked.line()} against a cap of {_gb(cap)} (train.cap)"
    if smallest is None:  # checkpointing was set by hand: the fit was not allowed to try
        return said + '; train.gradient_checkpointing = "auto" lets the run fit itself'
    return (
        f"{said}; the smallest setting the fit may choose ({tried}) needs {_gb(smallest.total)}: "
        "a cap that high, a lower adapter rank or a smaller base model would fit"
    )


def _with(run, **train) -> Any:
    return replace(run, train=replace(run.train, **train))


def _gb(n: int) -> str:
    return f"{n / GB:.2f} GB"


def fit_run(
    run, base_model, placement, base_fingerprint: str, cache, items=None, items_key: str = ""
) -> Fitted:
    """`fit` for a run of the adapters stage: its family's `MemoryModel` of `base_model` at the
    placement's dtype, the cap where it trains (`train.cap`, or three quarters of the
    device's memory). A family without one is not fitted ("auto" reads as off).

    `items`: the run's encoded rows, for a family whose step's shape follows them (the
    planner's longest song), with `items_key` naming them. A footprint depends only on the
    run's settings, the base model, the dtype and those items, so each is traced once and kept
    in `cache` (a JSON file), with the runtime."""
    from functools import cache as once

    from tunesmith import family as families
    from tunesmith.family import Family
    from tunesmith.store import content_key
    from tunesmith.store.atomic import atomic_write_json
    from tunesmith.train.config import computed
    from tunesmith.train.memory import MemoryCap

    family = families.get(run.family)
    if type(family).memory is Family.memory:  # the family does not estimate
        return Fitted(
            _with(run, gradient_checkpointing=run.train.gradient_checkpointing is True), None
        )
    device = placement.device if placement.backend == "torch" else "cpu"
    cap = MemoryCap(run.train.cap, device)
    saved = _read_json(cache)
    before = dict(saved)
    runtime = 0 if cap.cuda else machine_runtime_bytes()
    model = once(lambda: family.memory(run, base_model, _dtype(placement.dtype), items=items))

    def estimate(trial) -> Footprint:
        # the cap decides which footprint fits, never what one is: a run asked again with
        # another cap reads the footprints traced before
        unkeyed = replace(trial.train, steps=0, cap=None)
        settings = computed(replace(trial, train=unkeyed, demos=()))
        on = trial.train.gradient_checkpointing
        key = content_key(
            settings=settings, on=on, base=base_fingerprint, dtype=placement.dtype, items=items_key
        )
        if key not in saved:
            parts = model().estimate(trial).as_dict()
            saved[key] = {k: parts[k] for k in ("weights", "adapter", "step", "render")}
        return Footprint(runtime=runtime, checkpointing=on is True, **saved[key])

    try:
        return fit(run, cap.limit, estimate, lambda: model().knobs)
    finally:
        if saved != before:
            atomic_write_json(cache, saved)


def _dtype(name: str):
    import torch

    return getattr(torch, name)


def _read_json(path) -> dict:
    import json
    from pathlib import Path

    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
