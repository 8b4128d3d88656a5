"""The fixed bases U, V of underfit's `-xs` adapters, and a safetensors cache of them.

The formula is stable-audio-3 `models/lora/model.py` (`_canonicalize_svd_signs` and the `-xs`
branches of `LoRAParametrization.__init__`); underfit precomputes the same decomposition for a
whole checkpoint in `underfit/utils/compute_svd.py`. For a base weight viewed 2-D as
(out, fan_in) and a rank r:

    U_full, S, Vhᵀ_full = svd(W.float(), full_matrices=False)   on the CPU, in fp32
    sign_j = sign(U_full[argmax_i |U_full[i, j]|, j])             (0 → +1; the first maximum)
    U_full ← U_full · diag(sign),  Vh_full ← diag(sign) · Vh_full
    U = U_full[:, :r]  (out, r),   V = Vh_full[:r, :]ᵀ  (fan_in, r)

The sign rule makes the bases a function of the weight alone (an SVD's singular vectors are
defined up to a sign per pair), so an adapter's M_xs means the same thing wherever U and V are
rebuilt. The SVD runs on the CPU whatever the weight's device, as stable-audio-3's does: another
LAPACK (cuSOLVER) gives other fp32 roundings.

The cache. A base model's SVD takes minutes on the CPU and does not change, so the bases of one
base model at one rank are kept in one `.safetensors` file (never a pickle):

- tensors `<layer>.U` (out, r) and `<layer>.V` (fan_in, r), float32, the layer under the
  caller's names (the module names `torch_lora.attach` takes);
- metadata `format` = "tunesmith.svd-bases", `version` = "1", `fingerprint` (the base model's,
  as the caller identifies it) and `rank`;
- written whole to a temporary file beside it and renamed over it, so a reader never sees half
  a file (two writers at once: the last rename wins, and a layer only the other computed is
  computed again next time).

underfit's precomputed file (a `torch.save` pickle, which tunesmith does not read) keeps U and V
in fp16 and every singular vector; this cache keeps fp32 at one rank, so a cached run and one
that computes its bases at attach time start from the same U and V, bit for bit.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

FORMAT = "tunesmith.svd-bases"
VERSION = "1"

Bases = tuple[torch.Tensor, torch.Tensor]  # (U (out, r), V (fan_in, r))


class BasesError(ValueError):
    """A rank the weight cannot give, or a cache file that is not this model's at this rank."""


def canonical_bases(weight: torch.Tensor, rank: int) -> Bases:
    """(U (out, rank), V (fan_in, rank)), fp32 on the CPU: the module docstring's formula.

    `weight` is a Linear's (out, in) or a Conv1d's (out, in/groups, k), viewed as
    (out, in/groups·k). A rank above min(out, fan_in) is refused: the SVD has no more vectors.
    """
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise BasesError(f"rank must be an integer ≥ 1, got {rank!r}")
    if weight.dim() < 2:
        raise BasesError(f"a weight of shape {tuple(weight.shape)} has no (out, fan_in) view")
    w = weight.detach().reshape(weight.shape[0], -1).to(device="cpu", dtype=torch.float32)
    out_features, fan_in = w.shape
    if rank > min(out_features, fan_in):
        raise BasesError(
            f"rank {rank} is more than this {out_features}x{fan_in} weight has singular vectors "
            f"(min(out, fan_in) = {min(out_features, fan_in)}); use a rank ≤ "
            f"{min(out_features, fan_in)} or leave the layer out"
        )
    u, _, vh = torch.linalg.svd(w, full_matrices=False)
    columns = torch.arange(u.shape[1])
    signs = u[u.abs().argmax(dim=0), columns].sign()
    signs[signs == 0] = 1
    u = u * signs.unsqueeze(0)
    vh = vh * signs.unsqueeze(1)
    return u[:, :rank].contiguous(), vh[:rank, :].T.contiguous()


@dataclass(frozen=True)
class CachedBases:
    """What `BasesCache.get_or_compute` gives: the bases of the layers asked for, and how many
    came from the file and how many were computed (and stored)."""

    bases: dict[str, Bases]
    cached: int
    computed: int


class BasesCache:
    """One `.safetensors` file of U and V per layer, for one base model (`fingerprint`) and one
    rank (the file format: module docstring)."""

    def __init__(self, path: str | os.PathLike, fingerprint: str) -> None:
        self.path = Path(path)
        if self.path.suffix != ".safetensors":
            raise BasesError(f"{self.path}: an SVD bases cache is a .safetensors file")
        if not fingerprint:
            raise BasesError("BasesCache: the base model's fingerprint is empty")
        self.fingerprint = str(fingerprint)

    def _metadata(self, rank: int) -> dict[str, str]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "fingerprint": self.fingerprint,
            "rank": str(rank),
        }

    def read(self, rank: int) -> dict[str, Bases]:
        """Every layer in the file ({} when there is no file). A file of another model, rank or
        format is refused, not reused or overwritten: give each its own path."""
        if not self.path.exists():
            return {}
        with safe_open(self.path, framework="pt") as f:
            metadata = f.metadata() or {}
            expected = self._metadata(rank)
            wrong = {k: metadata.get(k) for k, v in expected.items() if metadata.get(k) != v}
            if wrong:
                raise BasesError(
                    f"{self.path}: not an SVD bases cache of {self.fingerprint!r} at rank {rank} "
                    f"(it has {wrong}); use another path for another model or rank"
                )
            tensors = {key: f.get_tensor(key) for key in f.keys()}
        bases = {}
        layers = {key.rpartition(".")[0] for key in tensors}
        for layer in sorted(layers):
            u, v = tensors.get(f"{layer}.U"), tensors.get(f"{layer}.V")
            if (
                u is None
                or v is None
                or u.dim() != 2
                or v.dim() != 2
                or u.shape[1] != rank
                or v.shape[1] != rank
                or u.dtype != torch.float32
                or v.dtype != torch.float32
            ):
                raise BasesError(
                    f"{self.path}: layer {layer!r} does not have float32 U (out, {rank}) and "
                    f"V (fan_in, {rank}) (keys {sorted(k for k in tensors if k.startswith(layer))})"
                )
            bases[layer] = (u, v)
        if len(tensors) != 2 * len(bases):
            raise BasesError(f"{self.path}: keys other than <layer>.U and <layer>.V")
        return bases

    def write(self, bases: Mapping[str, Bases], rank: int) -> None:
        """Replace the file by `bases`, atomically (a temporary file renamed over it)."""
        tensors = {}
        for layer, (u, v) in bases.items():
            tensors[f"{layer}.U"] = u.detach().to(device="cpu", dtype=torch.float32).contiguous()
            tensors[f"{layer}.V"] = v.detach().to(device="cpu", dtype=torch.float32).contiguous()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(
            dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp"
        )
        os.close(fd)
        try:
            save_file(tensors, temporary, metadata=self._metadata(rank))
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def get_or_compute(
        self,
        layers: Mapping[str, torch.Tensor | Callable[[], torch.Tensor]],
        rank: int,
    ) -> CachedBases:
        """The bases of each layer in `layers` (name → its weight, or a function that gives it,
        called only when the layer is not in the file): read from the file where present,
        computed by `canonical_bases` otherwise, and then stored with the file's other layers.

        A weight given as a tensor is checked against the cached bases' shapes.
        """
        stored = self.read(rank)
        bases, missing = {}, []
        for layer, weight in layers.items():
            if layer not in stored:
                missing.append(layer)
                continue
            u, v = stored[layer]
            if isinstance(weight, torch.Tensor):
                shape = (weight.shape[0], weight[0].numel())
                if (u.shape[0], v.shape[0]) != shape:
                    raise BasesError(
                        f"{self.path}: layer {layer!r} is cached for a {u.shape[0]}x{v.shape[0]} "
                        f"weight, this one is {shape[0]}x{shape[1]}: the file is another model's"
                    )
            bases[layer] = (u, v)
        for layer in missing:
            weight = layers[layer]
            bases[layer] = canonical_bases(
                weight if isinstance(weight, torch.Tensor) else weight(), rank
            )
        if missing:
            self.write({**stored, **{layer: bases[layer] for layer in missing}}, rank)
        ordered = {layer: bases[layer] for layer in layers}
        return CachedBases(ordered, cached=len(layers) - len(missing), computed=len(missing))
