"""The Dagster face of compute placement: config and environment in, `place()` out.

The rules live in `tunesmith.backends.placement`; this file only decides which pin applies.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import replace

import dagster as dg
from pydantic import Field

from tunesmith.backends.placement import Placement, place

# The Dagster pool GPU assets share (`@dg.asset(pool=GPU_POOL)`); its limit, 1 by default,
# lives in dagster.yaml so two trainings never fight over one accelerator.
GPU_POOL = "gpu"

ENV_BACKEND = "TUNESMITH_BACKEND"
ENV_DEVICE = "TUNESMITH_DEVICE"
ENV_DTYPE = "TUNESMITH_DTYPE"


class ComputeResource(dg.ConfigurableResource):
    """Answers where a stage runs: backend, device and dtype.

    Each setting is taken from the first of these that is set (an empty string is unset):

    1. backend only: `stages[stage]`, a per-stage pin in config, e.g. {"adapters": "mlx"};
    2. the config field (`backend`, `device`, `dtype`); "auto" here counts as set, so it
       overrides an environment pin;
    3. the environment: `TUNESMITH_BACKEND`, `TUNESMITH_DEVICE`, `TUNESMITH_DTYPE`.
       `TUNESMITH_BACKEND` is one value for every stage ("mlx") or per stage
       ("adapters=mlx,encoded=torch"); a bare value among per-stage ones is the default for
       stages not listed ("torch,adapters=mlx");
    4. "auto".

    Environment variables are read each time `placement()` is called, not when the resource
    is built. A pin the stage or machine cannot honour raises ValueError naming where the pin
    came from, except one environment value for every stage ("TUNESMITH_BACKEND=mlx"): a
    stage without that backend is placed automatically and its placement's reason says so.
    """

    backend: str = Field(
        default="",
        description='"torch", "mlx" or "auto" for every stage; empty: use TUNESMITH_BACKEND.',
    )
    device: str = Field(
        default="",
        description='"cuda", "mps", "metal", "cpu" or "auto"; empty: use TUNESMITH_DEVICE. '
        "A device this machine lacks is an error, never a fallback.",
    )
    dtype: str = Field(
        default="",
        description='"float32", "float16", "bfloat16" or "auto"; empty: use TUNESMITH_DTYPE.',
    )
    stages: dict[str, str] = Field(
        default={},
        description='Per-stage backend pins, e.g. {"adapters": "mlx"}; beat `backend`.',
    )
    workers: int = Field(
        default=0,
        description="Processes for the manifest's hashing and the labels stage's analysis; "
        "0: one a core. A property of the machine, not of a dataset, so it lives here.",
    )

    encode_workers: int = Field(
        default=1,
        description="Processes the `encoded` stage shares a family's items over, each loading "
        "the encoders (on CUDA, one GPU each in turn); the entries are the same bytes as with "
        "one.",
    )

    def pool_size(self) -> int:
        """`workers`, with 0 read as this machine's core count."""
        from tunesmith.dataset.workers import pool_size

        return pool_size(self.workers)

    def placement(self, stage: str, family: str | None, backends: Iterable[str]) -> Placement:
        backends = frozenset(backends)
        env_value, env_for_every_stage = _env_backend(stage)
        backend, backend_from = _first(
            (self.stages.get(stage, ""), f"config stages[{stage!r}]"),
            (self.backend, "config backend"),
            (env_value, ENV_BACKEND),
        )
        note = ""
        if (
            backend_from == ENV_BACKEND
            and env_for_every_stage
            and backend not in backends | {"auto"}
        ):
            # One value for every stage ("TUNESMITH_BACKEND=mlx") means "where a stage has it":
            # a stage without that backend is placed automatically, and its placement says so.
            note = f"; {ENV_BACKEND}={backend} skipped: no {backend} implementation of {stage}"
            backend, backend_from = "auto", "default"
        device, device_from = _first(
            (self.device, "config device"), (os.environ.get(ENV_DEVICE, ""), ENV_DEVICE)
        )
        dtype, dtype_from = _first(
            (self.dtype, "config dtype"), (os.environ.get(ENV_DTYPE, ""), ENV_DTYPE)
        )
        try:
            chosen = place(stage, family, backends, backend=backend, device=device, dtype=dtype)
            return replace(chosen, reason=chosen.reason + note) if note else chosen
        except ValueError as err:
            raise ValueError(
                f"{err} [backend={backend!r} from {backend_from}, "
                f"device={device!r} from {device_from}, dtype={dtype!r} from {dtype_from}]"
            ) from err


def _first(*candidates: tuple[str, str]) -> tuple[str, str]:
    """The first non-empty value and where it came from; ("auto", "default") if none is."""
    for value, source in candidates:
        if value.strip():
            return value.strip(), source
    return "auto", "default"


def _env_backend(stage: str) -> tuple[str, bool]:
    """This stage's backend from TUNESMITH_BACKEND ("mlx", or "adapters=mlx,encoded=torch"),
    and whether it is the value for every stage rather than this stage's own."""
    raw = os.environ.get(ENV_BACKEND, "")
    default, per_stage = "", {}
    for entry in (e.strip() for e in raw.split(",")):
        if not entry:
            continue
        name, sep, value = (part.strip() for part in entry.partition("="))
        if not sep:
            if default:
                raise ValueError(f"{ENV_BACKEND}={raw!r} has more than one value without a stage")
            default = name
        elif not name or not value or name in per_stage:
            raise ValueError(
                f"{ENV_BACKEND}={raw!r}: {entry!r} must be stage=backend with each stage once"
            )
        else:
            per_stage[name] = value
    if stage in per_stage:
        return per_stage[stage], False
    return default, True
