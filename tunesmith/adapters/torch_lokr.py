"""LoKr on nn.Linear for training: ΔW = s·kron(w1, w2), applied without ever forming ΔW.

For a base weight W (out, in), `dim` r, `alpha` and `factor`, the shapes are PEFT's (its
`tuners/lokr/layer.py`, `LoKrLayer.update_layer`) and LyCORIS's (`modules/lokr.py`):

    out = a1·b1, in = a2·b2      (a1, b1) = factorization(out, factor),
                                 (a2, b2) = factorization(in, factor)
    w1   (a1, a2)                the small factor, always a full matrix
    w2   (b1, b2)                full when r ≥ max(b1, b2)/2, else w2 = w2_a·w2_b with
                                 w2_a (b1, r), w2_b (r, b2)
    W'   = W + g·s·kron(w1, w2)  s = alpha/r (PEFT's scaling), g the strength

`factorization` is PEFT's own function: for a factor that divides the dimension it is
(factor, dim/factor); for one that does not, the largest divisor m ≤ factor with m ≤ dim/m
(HOT-Step's default factor 6 splits 2048 as 4 x 512). A layer the rule cannot split, or splits
differently in PEFT and LyCORIS (PEFT keeps (factor, dim/factor) where LyCORIS swaps it when
factor > dim/factor), is refused with the nearest factor that works: a file written for it
would not load in both.

Init is LyCORIS's (what Side-Step trains with, and PEFT's `init_weights="lycoris"`): w1 and w2_a
kaiming-uniform(a=√5), w2 (or w2_b) zero, so ΔW = 0 at step 0. PEFT's default zeroes w1 instead.

The forward. W·x for W = kron(w1, w2) is vec(w1·X·w2ᵀ) with X = x viewed as (a2, b2), row-major.
`kron_matvec` contracts the two factors one after the other as plain 2-D matmuls, the token axis
folded into the rows of each (x: (N, in) → (N·a2, b2) → ...): never a batched matmul over tokens.
The other way round (tokens as the batch axis of a matmul whose other operand is a 2-D factor)
makes the factor's gradient a per-token product summed afterwards; HOT-Step measured its LoKr step
16.4x slower than a LoRA step that way, and free to fix by folding.

Why not PEFT's LoKr layer for training: it materialises ΔW = s·kron(w1, w2), a full weight
(out x in, in the adapter dtype), at every forward, and F.linear keeps it for the backward, so
each adapted layer holds one more weight's worth of memory until the backward. Measured by
`bench/lokr_step.py` on one 2048 x 2048 projection (ACE-Step 1.5's width) with a 344-token
crop, beyond the weights and the input: 16 MiB kept by PEFT's layer, 2.7 MiB by this one (the
activation-sized intermediate, which grows with the crop where ΔW does not), and PEFT's
forward+backward took about 1.8x as long. LyCORIS's bypass mode (`functional/lokr.py`,
`kron_bypass`) computes the same contraction, but it patches the wrapped module's forward, keeps
the factors in a separate network, and picks a kernel backend by what is installed; this layer
is a plain module holding its base layer, like PEFT's. The parameters and their names are
PEFT's and LyCORIS's, so `lokr_files.py` writes files both load, and tests show the same outputs.

Dtypes as in `torch_lora`: factors in fp32 over a half base (its own dtype over fp32/fp64), the
input cast to the factors' dtype, the sum cast back to the input's dtype (PEFT's order).
Not handled: Conv layers, decompose_both (w1 factored), Tucker, rank/module dropout, DoRA.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from peft.tuners.lokr.layer import factorization
from torch import nn

from tunesmith.adapters.torch_lora import AdapterError, adapter_dtype

W2_NAMES = ("lokr_w2", "lokr_w2_a", "lokr_w2_b")


def split_problems(out_features: int, in_features: int, factor: int) -> list[str]:
    """Why `factor` cannot split a (out, in) layer for both PEFT and LyCORIS; [] when it can."""
    problems = []
    for side, size in (("output", out_features), ("input", in_features)):
        small, _ = factorization(size, factor)
        if small == 1 and size > 1:
            problems.append(f"its {side} size {size} has no divisor in 2..{factor}")
        elif factor > 0 and size % factor == 0 and factor > size // factor:
            problems.append(
                f"PEFT splits its {side} size {size} as {factor} x {size // factor}, "
                f"LyCORIS as {size // factor} x {factor}"
            )
    return problems


def nearest_factor(out_features: int, in_features: int, factor: int) -> int | None:
    """The factor closest to `factor` (the smaller first on a tie) that splits the layer."""
    for distance in range(1, max(out_features, in_features) + 1):
        for candidate in (factor - distance, factor + distance):
            if candidate >= 2 and not split_problems(out_features, in_features, candidate):
                return candidate
    return None


def kron_matvec(x: torch.Tensor, w1: torch.Tensor, w2: tuple, w2_first: bool) -> torch.Tensor:
    """kron(w1, W2)·x over the last axis of `x`, W2 = w2[0] or w2[0]·w2[1], without forming
    the Kronecker product (module docstring). `w2_first` picks the cheaper order."""
    a1, a2 = w1.shape
    lead, n = x.shape[:-1], x.numel() // x.shape[-1]
    b2 = x.shape[-1] // a2

    def apply_w2(rows: torch.Tensor) -> torch.Tensor:  # rows (M, b2) → (M, b1)
        return F.linear(rows, w2[0]) if len(w2) == 1 else F.linear(F.linear(rows, w2[1]), w2[0])

    if w2_first:
        z = apply_w2(x.reshape(n * a2, b2))  # (N·a2, b1): tokens folded into the rows
        b1 = z.shape[-1]
        z = z.reshape(n, a2, b1).transpose(1, 2).reshape(n * b1, a2)  # a copy: a2 last
        y = F.linear(z, w1).reshape(n, b1, a1).transpose(1, 2)  # (N, a1, b1)
    else:
        z = x.reshape(n, a2, b2).transpose(1, 2).reshape(n * b2, a2)
        z = F.linear(z, w1).reshape(n, b2, a1).transpose(1, 2).reshape(n * a1, b2)
        y = apply_w2(z)  # (N·a1, b1)
    return y.reshape(*lead, -1)


class _LoKrParameters(nn.Module):
    def __init__(self, tensors: dict[str, torch.Tensor]) -> None:
        super().__init__()
        for name, tensor in tensors.items():
            self.register_parameter(name, nn.Parameter(tensor))


class LoKrLinear(nn.Module):
    """LoKr around a frozen nn.Linear (formula and init: module docstring)."""

    def __init__(self, base_layer: nn.Linear, dim: int, alpha: float, factor: int) -> None:
        super().__init__()
        self.base_layer = base_layer  # first, so a model's first parameter stays a base weight
        out_features, in_features = base_layer.out_features, base_layer.in_features
        problems = split_problems(out_features, in_features, factor)
        if problems:
            nearest = nearest_factor(out_features, in_features, factor)
            hint = f"the nearest factor that does is {nearest}" if nearest else "no factor does"
            raise AdapterError(
                f"factor {factor} does not split this {in_features}→{out_features} layer: "
                f"{'; '.join(problems)}; {hint}"
            )
        a1, b1 = factorization(out_features, factor)
        a2, b2 = factorization(in_features, factor)
        self.dim, self.alpha, self.factor = dim, alpha, factor
        self.scaling, self.strength = alpha / dim, 1.0
        dtype, device = adapter_dtype(base_layer.weight.dtype), base_layer.weight.device
        tensors = {"lokr_w1": torch.empty(a1, a2, dtype=dtype, device=device)}
        nn.init.kaiming_uniform_(tensors["lokr_w1"], a=math.sqrt(5))
        if dim >= max(b1, b2) / 2:  # PEFT's and LyCORIS's rule for a full w2
            tensors["lokr_w2"] = torch.zeros(b1, b2, dtype=dtype, device=device)
            w2_cost = b1 * b2
        else:
            tensors["lokr_w2_a"] = torch.empty(b1, dim, dtype=dtype, device=device)
            nn.init.kaiming_uniform_(tensors["lokr_w2_a"], a=math.sqrt(5))
            tensors["lokr_w2_b"] = torch.zeros(dim, b2, dtype=dtype, device=device)
            w2_cost = dim * (b1 + b2)
        self.adapter = _LoKrParameters(tensors)
        # Multiply-adds per token of the two orders; the cheaper is taken.
        self.w2_first = a2 * w2_cost + b1 * a2 * a1 <= b2 * a2 * a1 + a1 * w2_cost

    def factors(self) -> dict[str, nn.Parameter]:
        """`lokr_w1` and `lokr_w2` or `lokr_w2_a`, `lokr_w2_b`, by PEFT's and LyCORIS's names."""
        return dict(self.adapter.named_parameters())

    def _w2(self) -> tuple:
        p = self.adapter
        return (p.lokr_w2,) if hasattr(p, "lokr_w2") else (p.lokr_w2_a, p.lokr_w2_b)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        result = self.base_layer(x)
        if self.strength == 0:
            return result
        w1 = self.adapter.lokr_w1
        # The scale goes into the small factor: one multiply of a1·a2 numbers, not of N·out.
        delta = kron_matvec(
            x.to(w1.dtype), w1 * (self.scaling * self.strength), self._w2(), self.w2_first
        )
        return (result + delta).to(x.dtype)

    def delta_weight(self) -> torch.Tensor:
        """g·s·kron(w1, w2) materialised (out, in), in the factors' dtype: merges and tests."""
        w2 = self._w2()
        full = w2[0] if len(w2) == 1 else w2[0] @ w2[1]
        return self.scaling * self.strength * torch.kron(self.adapter.lokr_w1, full)

    @property
    def weight(self) -> torch.Tensor:
        return self.base_layer.weight

    @property
    def bias(self) -> torch.Tensor | None:
        return self.base_layer.bias

    def extra_repr(self) -> str:
        shapes = ", ".join(f"{n}={list(p.shape)}" for n, p in self.factors().items())
        return f"dim={self.dim}, alpha={self.alpha}, factor={self.factor}, {shapes}"


def attach(
    model: nn.Module, targets: list[str], dim: int, alpha: float, factor: int
) -> dict[str, LoKrLinear]:
    """Freeze `model` and wrap each named nn.Linear in a LoKrLinear; returns them by name.

    Every layer is checked before any is wrapped, and every bad one is named in one error.
    """
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise AdapterError(f"attach: dim must be an integer ≥ 1, got {dim!r}")
    if not (isinstance(alpha, int | float) and math.isfinite(alpha) and alpha > 0):
        raise AdapterError(f"attach: alpha must be a finite number > 0, got {alpha!r}")
    if isinstance(factor, bool) or not isinstance(factor, int) or not (factor == -1 or factor >= 2):
        raise AdapterError(
            f"attach: factor must be -1 (automatic) or an integer ≥ 2, got {factor!r}"
        )
    if not targets or len(set(targets)) != len(targets):
        raise AdapterError("attach: give each target layer once, and at least one")
    layers, errors = {}, []
    for name in targets:
        try:
            layer = model.get_submodule(name)
        except AttributeError:
            errors.append(f"{name!r}: {type(model).__name__} has no such layer")
            continue
        if not isinstance(layer, nn.Linear):
            errors.append(f"{name!r}: a {type(layer).__name__}, LoKr here adapts nn.Linear")
            continue
        problems = split_problems(layer.out_features, layer.in_features, factor)
        if problems:
            nearest = nearest_factor(layer.out_features, layer.in_features, factor)
            hint = f"nearest factor that splits it: {nearest}" if nearest else "no factor does"
            errors.append(f"{name!r}: factor {factor}: {'; '.join(problems)} ({hint})")
        layers[name] = layer
    if errors:
        raise AdapterError("attach: cannot adapt " + "\n  ".join(["", *errors]).lstrip())
    model.requires_grad_(False)
    attached = {}
    for name, layer in layers.items():
        adapter = LoKrLinear(layer, dim, alpha, factor)
        parent, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, child, adapter)
        attached[name] = adapter
    for module in adapter_layers(model).values():
        module.adapter.requires_grad_(True)
    return attached


def adapter_layers(model: nn.Module) -> dict[str, LoKrLinear]:
    """Every LoKrLinear in `model`, by module name, in module order."""
    return {n: m for n, m in model.named_modules() if isinstance(m, LoKrLinear)}


def named_adapter_parameters(model: nn.Module) -> list[tuple[str, nn.Parameter]]:
    """(`<layer>.lokr_w1`, parameter), ... in module order: the optimizer's input."""
    return [
        (f"{name}.{factor}", param)
        for name, module in adapter_layers(model).items()
        for factor, param in module.factors().items()
    ]


def adapter_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """`<layer>.lokr_w1` (and `.lokr_w2` or `.lokr_w2_a`, `.lokr_w2_b`) → a detached copy."""
    return {name: p.detach().clone() for name, p in named_adapter_parameters(model)}


def load_adapter_state(model: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Copy an `adapter_state`-shaped dict into the attached adapters; strict on keys and shapes."""
    live = dict(named_adapter_parameters(model))
    if not live:
        raise AdapterError("load_adapter_state: the model has no LoKr adapters; attach them first")
    missing, unexpected = sorted(set(live) - set(state)), sorted(set(state) - set(live))
    if missing or unexpected:
        raise AdapterError(
            f"load_adapter_state: the state does not fit the attached adapters ({len(missing)} "
            f"missing, e.g. {missing[:3]}; {len(unexpected)} unexpected, e.g. {unexpected[:3]})"
        )
    for key, param in live.items():
        if tuple(state[key].shape) != tuple(param.shape):
            raise AdapterError(
                f"load_adapter_state: {key} has shape {tuple(state[key].shape)}, the adapter "
                f"expects {tuple(param.shape)}"
            )
    with torch.no_grad():
        for key, param in live.items():
            param.copy_(state[key].to(param.dtype))


def set_strength(model: nn.Module, strength: float) -> None:
    """Scale every LoKr adapter in `model` (1.0 = as trained, 0.0 = exactly the base model)."""
    for module in adapter_layers(model).values():
        module.strength = float(strength)


def merge(model: nn.Module) -> None:
    """Replace every LoKrLinear by its base layer holding W + g·s·kron(w1, w2)."""
    for name, module in adapter_layers(model).items():
        base = module.base_layer
        with torch.no_grad():
            merged = base.weight.to(module.adapter.lokr_w1.dtype) + module.delta_weight()
            base.weight.copy_(merged.to(base.weight.dtype))
        parent, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, child, base)
