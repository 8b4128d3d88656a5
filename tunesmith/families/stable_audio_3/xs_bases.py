"""The fixed SVD bases of a Stable Audio 3 run's `-xs` adapters, kept in the store.

underfit computes U and V of every adapted layer from the fp32 base weights, once per base
model (its `utils/compute_svd.py`, loaded through the model registry's `svd_bases_path`), and
falls back to an SVD per layer when attaching without them. tunesmith keeps them per base model
and rank in the store (`<store>/svd_bases/<fingerprint>-rank<r>.safetensors`, the format of
`tunesmith.adapters.svd_bases`), so a second run on the same base model and rank, whatever its
other settings, reads them instead of decomposing every layer again.

The decomposed weight is the one in the base model's files, upcast to fp32, whatever dtype the
run trains in: underfit decomposes before casting the base to half precision, and a cache
shared by runs of any precision must hold one answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors import safe_open
from torch import nn

from tunesmith.adapters.svd_bases import Bases, BasesCache
from tunesmith.config import Roots

FOLDER = "svd_bases"  # under the store root
WEIGHTS = "diffusion_pytorch_model.safetensors"  # diffusers' file of a model component


def is_xs(adapter_type: str) -> bool:
    return adapter_type.endswith("-xs")


def cache_path(store: Path, fingerprint: str, rank: int) -> Path:
    return Path(store) / FOLDER / f"{fingerprint}-rank{rank}.safetensors"


def run_bases(
    modules: nn.Module,
    targets: list[str],
    rank: int,
    base_model: Path,
    fingerprint: str | None,
    store: Path | None = None,
) -> tuple[dict[str, Bases] | None, str]:
    """(bases by target, a line saying where they came from) for an -xs run.

    Without a fingerprint (a model that is not a stage's base model: tests, the memory trace)
    nothing is cached and the adapters decompose at attach time, as underfit without a bases
    file does; on the `meta` device nothing is decomposed at all.
    """
    weights = {name: modules.get_submodule(name).weight for name in targets}
    if any(w.device.type == "meta" for w in weights.values()):  # shapes only: nothing to read
        return {n: _meta_bases(w, rank) for n, w in weights.items()}, "SVD bases: not on meta"
    if fingerprint is None:
        return None, "SVD bases computed at attach time (no store)"
    store = Roots.from_env().store if store is None else Path(store)
    cache = BasesCache(cache_path(store, fingerprint, rank), fingerprint)
    layers = {name: _file_weight(base_model, modules, name) for name in targets}
    found = cache.get_or_compute(layers, rank)
    return found.bases, (
        f"SVD bases at rank {rank}: {found.cached} layers from the store, "
        f"{found.computed} computed and stored ({cache.path})"
    )


def _meta_bases(weight: torch.Tensor, rank: int) -> Bases:
    out, fan_in = weight.shape[0], weight[0].numel()
    return torch.empty(out, rank, device="meta"), torch.empty(fan_in, rank, device="meta")


def _file_weight(base_model: Path, modules: nn.Module, name: str) -> Callable[[], torch.Tensor]:
    """A function that reads layer `name`'s weight (`<component>.<module path>`) from the
    base model's component file in its stored precision, as fp32."""
    component, _, path = name.partition(".")

    def read() -> torch.Tensor:
        folder = Path(base_model) / component
        key = f"{path}.weight"
        index = folder / f"{WEIGHTS}.index.json"
        if index.exists():  # a sharded component: the index names the shard of each tensor
            shard = json.loads(index.read_text(encoding="utf-8"))["weight_map"][key]
            file = folder / shard
        else:
            file = folder / WEIGHTS
        with safe_open(str(file), framework="pt") as f:
            weight = f.get_tensor(key)
        live = modules.get_submodule(name).weight
        if tuple(weight.shape) != tuple(live.shape):
            raise ValueError(
                f"{file}: {key} has shape {tuple(weight.shape)}, the loaded model's layer "
                f"{tuple(live.shape)}"
            )
        return weight.float()

    return read
