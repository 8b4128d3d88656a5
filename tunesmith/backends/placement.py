"""Where a stage runs: backend (torch or mlx), device and dtype.

`place()` answers one question: given a stage, the backends that implement it and what this
machine really has, which backend, device and dtype should it run on? The rule
(docs/design.md, "Compute placement"): MLX where MLX has an accelerator and the stage has an MLX
implementation, then torch CUDA, then torch MPS, then CPU.

Accelerators are found by asking each library whether the device is there
(`torch.cuda.is_available()`, `mx.metal.is_available()`, ...), never by whether the library
imports: on Linux `mlx` imports fine and has only the CPU.

A pin that cannot be honoured (a backend the stage lacks, a device this machine lacks) is an
error, never a silent fallback: the placement is part of the cache key, so falling back would
quietly produce different results under a different key.

Not handled here: several devices of one kind (always the default device) and Dagster config
(`resources/compute.py` reads config and environment variables and calls `place`).
"""

from __future__ import annotations

import ctypes
import functools
import sys
from collections.abc import Iterable
from dataclasses import dataclass

BACKENDS = ("torch", "mlx")
DEVICES = ("cuda", "mps", "metal", "cpu")
DTYPES = ("float32", "float16", "bfloat16")

# The auto order, first present wins. Filtering it by the allowed backends and a pinned device
# gives every rule: mlx on cpu is last, so it is picked only for an mlx-only stage or a pin.
_ORDER = (
    ("mlx", "metal"),
    ("mlx", "cuda"),
    ("torch", "cuda"),
    ("torch", "mps"),
    ("torch", "cpu"),
    ("mlx", "cpu"),
)


@dataclass(frozen=True)
class Placement:
    backend: str  # "torch" | "mlx"
    device: str  # torch: cuda/mps/cpu; mlx: metal/cuda/cpu
    dtype: str  # "float32" | "float16" | "bfloat16"
    reason: str  # one line: why this was picked; not part of the cache key

    def as_dict(self) -> dict[str, str]:
        """What goes into cache keys and metadata: the reason is left out, it may change
        wording without changing results."""
        return {"backend": self.backend, "device": self.device, "dtype": self.dtype}

    def __str__(self) -> str:
        return f"{self.backend}/{self.device}/{self.dtype}"


@dataclass(frozen=True)
class Accelerators:
    """What this machine really has. `detect()` asks the libraries; tests build one by hand."""

    torch_cuda: bool
    torch_mps: bool
    mlx_metal: bool
    mlx_cuda: bool
    # Native bf16 on the torch CUDA device (Ampere and newer); decides the auto dtype there.
    torch_cuda_bf16: bool = False

    @classmethod
    def detect(cls) -> Accelerators:
        return _detect()

    def has(self, backend: str, device: str) -> bool:
        if device == "cpu":
            return True
        return {
            ("torch", "cuda"): self.torch_cuda,
            ("torch", "mps"): self.torch_mps,
            ("mlx", "metal"): self.mlx_metal,
            ("mlx", "cuda"): self.mlx_cuda,
        }.get((backend, device), False)

    def summary(self) -> str:
        """One line for errors and reasons: "torch cuda: no, mps: no; mlx metal: no, cuda: no"."""

        def yn(flag: bool) -> str:
            return "yes" if flag else "no"

        return (
            f"torch cuda: {yn(self.torch_cuda)}, mps: {yn(self.torch_mps)}; "
            f"mlx metal: {yn(self.mlx_metal)}, cuda: {yn(self.mlx_cuda)}"
        )


@functools.cache
def _detect() -> Accelerators:
    # Each check is guarded on its own: a library that fails to import, or is too old to have
    # the attribute, means "no" for that accelerator and says nothing about the others.
    torch_cuda = torch_mps = torch_cuda_bf16 = mlx_metal = mlx_cuda = False
    ask_torch = _torch_may_see_a_gpu()
    try:
        if ask_torch:
            import torch

            torch_cuda = bool(torch.cuda.is_available())
            if torch_cuda:
                torch_cuda_bf16 = bool(torch.cuda.is_bf16_supported(including_emulation=False))
    except Exception:
        pass
    try:
        if ask_torch:
            import torch

            torch_mps = bool(torch.backends.mps.is_available())
    except Exception:
        pass
    try:
        import mlx.core as mx

        mlx_metal = bool(mx.metal.is_available())
    except Exception:
        pass
    try:
        import mlx.core as mx

        mlx_cuda = bool(mx.cuda.is_available())
    except Exception:
        pass
    return Accelerators(
        torch_cuda=torch_cuda,
        torch_mps=torch_mps,
        mlx_metal=mlx_metal,
        mlx_cuda=mlx_cuda,
        torch_cuda_bf16=torch_cuda_bf16,
    )


# The GPU drivers torch reaches a device through: NVIDIA's (CUDA builds) and AMD's HIP runtime
# (ROCm builds, which answer through torch.cuda as well).
_GPU_DRIVERS = ("libcuda.so.1", "libcuda.so", "libamdhip64.so", "libamdhip64.so.6")


def _torch_may_see_a_gpu() -> bool:
    """False only where torch cannot see a device whatever its build: Linux with no GPU driver
    library to load. Importing torch takes seconds, and every stage's placement (part of its
    cache keys) is decided even when the stage computes nothing; on such a machine the answer
    is known without it. Elsewhere (a driver present, macOS with MPS) torch is asked."""
    if not sys.platform.startswith("linux"):
        return True
    for name in _GPU_DRIVERS:
        try:
            ctypes.CDLL(name)
            return True
        except OSError:
            continue
    return False


def place(
    stage: str,
    family: str | None,
    backends: frozenset[str] | set[str],
    *,
    backend: str = "auto",
    device: str = "auto",
    dtype: str = "auto",
    accelerators: Accelerators | None = None,
) -> Placement:
    """Pick backend, device and dtype for `stage` of `family`, which `backends` implement.

    `backend`, `device` and `dtype` are "auto" or a pin. A pin the stage or the machine cannot
    honour raises ValueError. `accelerators` defaults to what this machine has.
    """
    where = f"stage {stage!r}" + (f" of family {family!r}" if family else "")
    implemented = _check_backends(backends, where)
    _check_choice("backend", backend, ("auto", *BACKENDS))
    _check_choice("device", device, ("auto", *DEVICES))
    _check_choice("dtype", dtype, ("auto", *DTYPES))
    acc = accelerators if accelerators is not None else Accelerators.detect()
    impl = ", ".join(b for b in BACKENDS if b in implemented)

    if backend != "auto" and backend not in implemented:
        raise ValueError(
            f"backend={backend!r} is pinned, but {where} has no {backend} implementation "
            f"(implemented: {impl})"
        )
    allowed = implemented if backend == "auto" else {backend}
    rows = [(b, d) for b, d in _ORDER if b in allowed and (device == "auto" or d == device)]
    if not rows:
        # Only a device that no allowed backend runs gets here: metal is mlx-only, mps torch-only.
        runs_on = " or ".join(b for b, d in _ORDER if d == device)
        given = (
            f"backend={backend!r} is pinned for {where}"
            if backend != "auto"
            else f"{where} implements only {impl}"
        )
        raise ValueError(f"device={device!r} needs backend {runs_on}, but {given}")
    present = [(b, d) for b, d in rows if acc.has(b, d)]
    if not present:
        usable_by = " or ".join(b for b in BACKENDS if b in allowed)
        raise ValueError(
            f"device={device!r} is pinned for {where}, but no {device} usable by {usable_by} "
            f"is present on this machine (found: {acc.summary()})"
        )
    chosen_backend, chosen_device = present[0]

    return Placement(
        backend=chosen_backend,
        device=chosen_device,
        dtype=dtype if dtype != "auto" else _auto_dtype(chosen_backend, chosen_device, acc),
        reason=_reason(chosen_backend, chosen_device, backend, device, impl, acc),
    )


def _auto_dtype(backend: str, device: str, acc: Accelerators) -> str:
    if device == "cpu":
        return "float32"  # half precision on CPU is slow in torch and partial in mlx
    if backend == "mlx":
        return "bfloat16"  # metal and cuda both run bf16 natively in mlx
    if device == "cuda":
        return "bfloat16" if acc.torch_cuda_bf16 else "float16"
    return "float16"  # mps: bf16 needs macOS 14+, fp16 runs everywhere


def _reason(
    backend: str,
    device: str,
    pinned_backend: str,
    pinned_device: str,
    impl: str,
    acc: Accelerators,
) -> str:
    pins = [f"{k}={v}" for k, v in (("backend", pinned_backend), ("device", pinned_device))]
    pins = [p for p in pins if not p.endswith("=auto")]
    how = "pinned " + ", ".join(pins) if pins else "auto"
    if device != "cpu":
        what = f"{backend} {device} is present"
    elif pins:
        what = f"{backend} on cpu"
    elif not (acc.torch_cuda or acc.torch_mps or acc.mlx_metal or acc.mlx_cuda):
        what = "no accelerator found"
    else:
        what = f"no accelerator that {impl} can use"
    return f"{how}: {what} ({acc.summary()})"


def _check_choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is not one of: {', '.join(allowed)}")


def _check_backends(backends: Iterable[str], where: str) -> frozenset[str]:
    if isinstance(backends, str):
        raise TypeError(f"backends for {where} must be a set such as {{'torch'}}, not a string")
    implemented = frozenset(backends)
    unknown = sorted(implemented - set(BACKENDS))
    if unknown or not implemented:
        raise ValueError(
            f"backends for {where} must be a non-empty subset of {', '.join(BACKENDS)}; "
            f"got {sorted(implemented)}"
        )
    return implemented
