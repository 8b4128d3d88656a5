"""underfit's eight adapter types in MLX, for nn.Linear: the torch path's math.

The math is stable-audio-3 `models/lora/model.py` (`LoRAParametrization`), as
`tunesmith.adapters.torch_lora` implements it. For a base weight W (out, fan_in), s = alpha/rank,
strength g (1 while training), eps = 1e-12, the update δ is

    B·A          lora, dora-rows, dora-cols, bora      A: (rank, fan_in), B: (out, rank)
    U·M_xs·Vᵀ    the -xs types                         M_xs: (rank, rank); U: (out, rank) and
                                                       V: (fan_in, rank) fixed (not trained)

and with V_g = W + g·s·δ the effective weight W' is

    lora(-xs)        W' = V_g
    dora-rows(-xs)   W' = m_g[:, None] · V_g / (‖V_g‖_row + eps)
    dora-cols(-xs)   W' = m_g[None, :] · V_g / (‖V_g‖_col + eps)
    bora(-xs)        R  = mr_g[:, None] · V_g / (‖V_g‖_row + eps)
                     W' = mc_g[None, :] · R / (‖R‖_col + eps)

‖·‖_row: L2 over the input axis (one value per output row, `magnitude` / `magnitude_r`, (out,));
‖·‖_col: L2 over the output axis (one value per input column, `magnitude` of dora-cols and
`magnitude_c`, (fan_in,)). No norm is detached (underfit; mlx-lm's DoRALinear and PEFT detach
it, which changes the gradients). At g ≠ 1 each magnitude is blended with the base's norm along
its own axis (underfit's `_blend_magnitude`): m_g = ‖W‖ + g·(m − ‖W‖); m_g = m at g = 1. At
g = 0 every type is the base layer exactly.

Init: A ~ U(±1/√fan_in) (PEFT's kaiming_uniform(a=√5) bound), B = 0, M_xs = 0, each magnitude
the base's norm along its axis at attach time (by the forward's own norm, so that W' = W bit for
bit at init). U, V: `svd_bases.canonical_bases` of the base weight (torch's fp32 SVD on the CPU,
signs canonical: underfit `utils/compute_svd.py`), the torch path's own function, so that both
backends build the same bases bit for bit; or the bases `attach` is given, truncated to rank.
They are fixed: kept out of the parameters (an attribute with a leading underscore is no MLX
parameter), so neither trained, nor saved, nor loaded; a loader rebuilds them from the base
weight, as underfit does.

Forward: the torch path's, in activation space, as a correction to the base layer's own output.
With r the row factor m_g/(‖V_g‖_row + eps) and c the column factor (each 1 for a type without
that magnitude), W'·x = r ⊙ (V_g·(c ⊙ x)), so

    y = base(c ⊙ x) + (r − 1) ⊙ (base(c ⊙ x) − b) + r ⊙ (g·s·δ·(c ⊙ x))

δ·x is the low-rank chain (A then B; Vᵀ then M_xs then U); the norms need a dense V_g, whose
cost has no token factor. At init (δ = 0, r and c exactly 1) this is the base's output bit for
bit. Dtypes: adapter tensors (and U, V) are float32 over a half-precision base (underfit's
`base_precision`); the base runs in its dtype (on c ⊙ x rounded to the input's dtype for the
column types), the update and the combination in the adapter dtype, and the sum is cast back to
the base output's dtype.

A, B are stored as the torch path stores them (PEFT's and underfit's layout), not transposed as
mlx-lm's `lora_a` (in, r) / `lora_b` (r, out): a file tensor is a parameter here, with no
transpose at the boundary.

Names. `attach` takes diffusers module names under a root module whose children are the
pipeline components (`transformer.transformer_blocks.0.self_attn.to_qkv`,
`duration_embedder.linear`); an index under an MLX `nn.Sequential` is looked up in its
`.layers` (`transformer.to_cond_embed.0` is MLX's `transformer.to_cond_embed.layers.0`).
`adapter_state` gives `<diffusers name>.parametrizations.weight.0.<param>` (param: lora_A,
lora_B, M_xs, magnitude, magnitude_r, magnitude_c as the type has them) as torch tensors, the
keys, shapes and dtypes of `torch_lora.adapter_state`, so the underfit-format writer and reader
(with `sa3_names` and the QKV row permutation) serve both backends.

Not handled: nn.Conv1d (MLX's conv weight is (out, k, in), torch's (out, in, k); the fan-in
order of A and V would differ, and underfit's default selection has no conv), quantized bases,
dropout on the adapter (underfit uses none), stacked adapters, writing `baked_vnorm_row`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import torch
from mlx.utils import tree_flatten

from tunesmith.adapters.svd_bases import BasesError, canonical_bases
from tunesmith.adapters.torch_lora import (
    BAKED_NORM,
    BAKED_TYPES,
    DORA_EPS,
    PARAM_PREFIX,
    AdapterError,
)


def adapter_dtype(base_dtype: mx.Dtype) -> mx.Dtype:
    """float32 over a half-precision base, float32 over float32 (MLX has no float64 on GPU)."""
    return mx.float32 if base_dtype in (mx.float16, mx.bfloat16, mx.float32) else base_dtype


class AdapterLinear(nn.Module):
    """One of underfit's types around a frozen nn.Linear; the subclass names the type, its
    factorisation (`xs`) and its magnitudes (formula and forward: module docstring)."""

    adapter_type = ""
    xs = False  # δ = U·M_xs·Vᵀ (else B·A)
    row_magnitude: str | None = None  # the row magnitude's name, when the type has one
    col_magnitude: str | None = None  # the column magnitude's name, when the type has one

    @classmethod
    def from_base(cls, linear: nn.Linear, rank: int, alpha: float, bases=None) -> AdapterLinear:
        return cls(linear, rank, alpha, bases)

    def __init__(self, linear: nn.Linear, rank: int, alpha: float, bases=None) -> None:
        super().__init__()
        _check(linear, rank, alpha)
        self.linear = linear
        self.linear.freeze()
        out_features, fan_in = linear.weight.shape
        dtype = adapter_dtype(linear.weight.dtype)
        self.rank, self.alpha, self.scale = rank, alpha, alpha / rank
        self.strength = 1.0  # a Python float: set it before compiling a step, not inside
        if self.xs:
            u, v = _layer_bases(linear.weight, rank, bases)
            # A leading underscore keeps them out of parameters(): fixed, like a torch buffer.
            self._U, self._V = u.astype(dtype), v.astype(dtype)
            mx.eval(self._U, self._V)
            self.M_xs = mx.zeros((rank, rank), dtype=dtype)
        else:
            bound = 1.0 / math.sqrt(fan_in)
            self.lora_A = mx.random.uniform(-bound, bound, (rank, fan_in)).astype(dtype)
            self.lora_B = mx.zeros((out_features, rank), dtype=dtype)
        # ‖W‖ by the forward's own norm, so that at init every factor is exactly 1.
        base = self._base()
        if self.row_magnitude:
            setattr(self, self.row_magnitude, mx.linalg.norm(base, axis=1))
        if self.col_magnitude:
            setattr(self, self.col_magnitude, mx.linalg.norm(base, axis=0))

    @property
    def weight(self) -> mx.array:
        """The base weight, for code that reads a layer's dtype or shape (as torch_lora)."""
        return self.linear.weight

    @property
    def param_dtype(self) -> mx.Dtype:
        return adapter_dtype(self.linear.weight.dtype)

    @property
    def params(self) -> tuple[str, ...]:
        """The trained tensors' names in underfit's order: A, B or M_xs, then magnitudes."""
        factors = ("M_xs",) if self.xs else ("lora_A", "lora_B")
        return factors + tuple(m for m in (self.row_magnitude, self.col_magnitude) if m)

    @property
    def U(self) -> mx.array:  # noqa: N802 (underfit's name)  (out, rank), fixed
        return self._U

    @property
    def V(self) -> mx.array:  # noqa: N802  (fan_in, rank), fixed
        return self._V

    def _base(self) -> mx.array:
        return self.linear.weight.astype(self.param_dtype)

    def delta(self) -> mx.array:
        """The unscaled update B·A or U·M_xs·Vᵀ, (out, fan_in), in the adapter dtype."""
        if self.xs:
            return self._U @ self.M_xs @ self._V.T
        return self.lora_B @ self.lora_A

    def _low_rank(self, x: mx.array) -> mx.array:
        """δ·x on an input in the adapter dtype, without forming δ."""
        if self.xs:
            return ((x @ self._V) @ self.M_xs.T) @ self._U.T
        return (x @ self.lora_A.T) @ self.lora_B.T

    def _blend(self, name: str, base: mx.array, axis: int) -> mx.array:
        """underfit's `_blend_magnitude`: m at strength 1, ‖W‖ + g·(m − ‖W‖) otherwise."""
        magnitude = getattr(self, name)
        if self.strength == 1.0:
            return magnitude
        base_norm = mx.linalg.norm(base, axis=axis)
        return base_norm + self.strength * (magnitude - base_norm)

    def _factors(self) -> tuple[mx.array | None, mx.array | None, mx.array | None]:
        """(row factor (out,) or None, column factor (fan_in,) or None, V_g or None).

        V_g = W + g·s·δ is formed only when a norm needs it; no norm is detached (underfit).
        """
        if not (self.row_magnitude or self.col_magnitude):
            return None, None, None
        base = self._base()
        v = base + (self.scale * self.strength) * self.delta()
        rows = cols = None
        if self.row_magnitude:
            norm = mx.linalg.norm(v, axis=1)
            rows = self._blend(self.row_magnitude, base, 1) / (norm + DORA_EPS)
        if self.col_magnitude:
            scaled = v if rows is None else rows[:, None] * v  # bora: R = r ⊙_rows V_g
            norm = mx.linalg.norm(scaled, axis=0)
            cols = self._blend(self.col_magnitude, base, 0) / (norm + DORA_EPS)
        return rows, cols, v

    def merged_weight(self) -> mx.array:
        """W' (out, fan_in) in the adapter dtype, at the current strength."""
        base = self._base()
        if self.strength == 0:
            return base
        rows, cols, v = self._factors()
        if v is None:
            return base + (self.scale * self.strength) * self.delta()
        w = v if rows is None else rows[:, None] * v
        return w if cols is None else w * cols[None, :]

    def __call__(self, x: mx.array) -> mx.array:
        if self.strength == 0:
            return self.linear(x)
        rows, cols, _ = self._factors()
        dtype = self.param_dtype
        xa = x.astype(dtype)
        if cols is not None:  # W'·x = r ⊙ V_g·(c ⊙ x)
            xa = xa * cols
            result = self.linear(xa.astype(x.dtype))
        else:
            result = self.linear(x)  # W·x + b in the base dtype, as the base computes it
        update = (self.scale * self.strength) * self._low_rank(xa)
        full = result.astype(dtype)
        if rows is None:
            out = full + update
        else:
            # r ⊙ (W·x + g·s·δ·x) + b as a correction to the base output, as the torch path
            # writes it: at init (r exactly 1, δ = 0) this is the base output bit for bit.
            bias = self.linear.get("bias")
            plain = full if bias is None else full - bias.astype(dtype)  # W·x
            out = full + ((rows - 1) * plain + rows * update)
        return out.astype(result.dtype)


class LoRALinear(AdapterLinear):
    """`lora`: y = linear(x) + g·s·B·(A·x)."""

    adapter_type = "lora"


class DoRARowsLinear(AdapterLinear):
    """`dora-rows`: lora_A, lora_B, magnitude (out,)."""

    adapter_type = "dora-rows"
    row_magnitude = "magnitude"


class DoRAColsLinear(AdapterLinear):
    """`dora-cols`: lora_A, lora_B, magnitude (fan_in,)."""

    adapter_type = "dora-cols"
    col_magnitude = "magnitude"


class BoRALinear(AdapterLinear):
    """`bora`: lora_A, lora_B, magnitude_r (out,), magnitude_c (fan_in,)."""

    adapter_type = "bora"
    row_magnitude, col_magnitude = "magnitude_r", "magnitude_c"


class LoRAXSLinear(AdapterLinear):
    """`lora-xs`: M_xs (rank, rank) between the fixed bases U and V."""

    adapter_type = "lora-xs"
    xs = True


class DoRARowsXSLinear(AdapterLinear):
    """`dora-rows-xs`: M_xs, magnitude (out,)."""

    adapter_type = "dora-rows-xs"
    xs, row_magnitude = True, "magnitude"


class DoRAColsXSLinear(AdapterLinear):
    """`dora-cols-xs`: M_xs, magnitude (fan_in,)."""

    adapter_type = "dora-cols-xs"
    xs, col_magnitude = True, "magnitude"


class BoRAXSLinear(AdapterLinear):
    """`bora-xs`: M_xs, magnitude_r (out,), magnitude_c (fan_in,)."""

    adapter_type = "bora-xs"
    xs, row_magnitude, col_magnitude = True, "magnitude_r", "magnitude_c"


ADAPTER_CLASSES = {
    cls.adapter_type: cls
    for cls in (
        LoRALinear,
        DoRARowsLinear,
        DoRAColsLinear,
        BoRALinear,
        LoRAXSLinear,
        DoRARowsXSLinear,
        DoRAColsXSLinear,
        BoRAXSLinear,
    )
}
ADAPTER_TYPES = tuple(ADAPTER_CLASSES)  # torch_lora.ADAPTER_TYPES, in its order
AdapterLayer = AdapterLinear


def _check(layer, rank: int, alpha: float) -> None:
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise AdapterError(f"rank must be an integer ≥ 1, got {rank!r}")
    if not (isinstance(alpha, int | float) and math.isfinite(alpha) and alpha > 0):
        raise AdapterError(f"alpha must be a finite number > 0, got {alpha!r}")
    if isinstance(layer, AdapterLinear) or type(layer) is not nn.Linear:
        raise AdapterError(
            f"cannot adapt a {type(layer).__name__}: the MLX path adapts nn.Linear only"
        )


# --- SVD bases ---------------------------------------------------------------------------------


def _numpy(value) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().float().numpy()
    if isinstance(value, mx.array):
        return np.array(value.astype(mx.float32))
    return np.asarray(value, dtype=np.float32)


def _layer_bases(weight: mx.array, rank: int, bases) -> tuple[mx.array, mx.array]:
    """U, V for one layer: `bases` (U (out, ≥ rank), V (fan_in, ≥ rank)) truncated to rank
    when given, else `svd_bases.canonical_bases` of the weight: the torch path's own function
    (torch's fp32 SVD on the CPU), so that both backends build the same U, V bit for bit."""
    out_features, fan_in = weight.shape
    if rank > min(out_features, fan_in):
        raise AdapterError(
            f"rank {rank} exceeds min(out, fan_in) = {min(out_features, fan_in)} of this "
            f"{out_features}x{fan_in} weight (its SVD has no more vectors); lower the rank or "
            f"exclude the layer"
        )
    if bases is None:
        try:
            u, v = canonical_bases(torch.from_numpy(_numpy(weight)), rank)
        except BasesError as e:
            raise AdapterError(str(e)) from e
        return mx.array(u.numpy()), mx.array(v.numpy())
    u, v = (_numpy(b) for b in bases)
    for label, b, rows in (("U", u, out_features), ("V", v, fan_in)):
        if b.ndim != 2 or b.shape[0] != rows or b.shape[1] < rank:
            raise AdapterError(
                f"basis {label} has shape {tuple(b.shape)}, expected ({rows}, ≥ {rank})"
            )
    return mx.array(u[:, :rank]), mx.array(v[:, :rank])


def from_base(
    linear: nn.Linear, rank: int, alpha: float, adapter_type: str, bases=None
) -> AdapterLinear:
    """An adapter of `adapter_type` around `linear`, initialised as underfit does (δ = 0).
    `bases`: (U, V) for an -xs type (ignored by the others); computed from the weight if None."""
    if adapter_type not in ADAPTER_CLASSES:
        raise AdapterError(f"adapter_type {adapter_type!r} is not one of {ADAPTER_TYPES}")
    cls = ADAPTER_CLASSES[adapter_type]
    return cls.from_base(linear, rank, alpha, bases if cls.xs else None)


# --- names -----------------------------------------------------------------------------------


def _resolve(root: nn.Module, name: str) -> tuple[object, object, object]:
    """(parent container, key in it, module) for a diffusers module name under `root`.

    Through an nn.Sequential the index goes to its `.layers` list; a list of blocks is indexed.
    """
    parent, key, current = None, None, root
    for part in name.split("."):
        if isinstance(current, nn.Sequential) and part.isdigit():
            parent, key = current.layers, int(part)
        elif isinstance(current, list) and part.isdigit():
            parent, key = current, int(part)
        elif isinstance(current, nn.Module) and part in current:
            parent, key = current, part
        else:
            raise AdapterError(f"{type(root).__name__} has no layer {name!r} (at {part!r})")
        if isinstance(parent, list) and key >= len(parent):
            raise AdapterError(f"{type(root).__name__} has no layer {name!r} (index {key})")
        current = parent[key]
    return parent, key, current


def _diffusers_name(root: nn.Module, mlx_path: str) -> str:
    """MLX `transformer.to_cond_embed.layers.0` → diffusers `transformer.to_cond_embed.0`."""
    parts, out, current = mlx_path.split("."), [], root
    i = 0
    while i < len(parts):
        part = parts[i]
        if isinstance(current, nn.Sequential) and part == "layers":
            current = current.layers[int(parts[i + 1])]
            out.append(parts[i + 1])
            i += 2
            continue
        current = current[int(part)] if isinstance(current, list) else current[part]
        out.append(part)
        i += 1
    return ".".join(out)


def attach(
    root: nn.Module,
    targets: list[str],
    rank: int,
    alpha: float,
    adapter_type: str,
    bases: Mapping[str, tuple] | None = None,
) -> dict[str, AdapterLinear]:
    """Freeze `root` and wrap each named nn.Linear (diffusers names) in an adapter.

    Only the adapters' trained tensors (A, B, M_xs, magnitudes) are trainable afterwards. The
    initial A is drawn from MLX's global random state, in the order of `targets`: seed it
    first for a fixed init. `bases`: diffusers layer name → (U, V) (numpy, torch or MLX
    arrays, at least `rank` columns), used by the -xs types as given; a layer without an entry
    gets the canonical SVD bases of its weight.
    """
    if not targets:
        raise AdapterError("attach: no target layers given")
    if len(set(targets)) != len(targets):
        raise AdapterError("attach: a target layer is named twice")
    bases = bases or {}
    root.freeze()
    attached = {}
    for name in targets:
        parent, key, layer = _resolve(root, name)
        if isinstance(layer, AdapterLinear):
            raise AdapterError(f"attach: layer {name!r} already has an adapter")
        try:
            adapter = from_base(layer, rank, alpha, adapter_type, bases.get(name))
        except AdapterError as e:
            raise AdapterError(f"attach: layer {name!r}: {e}") from e
        parent[key] = adapter
        attached[name] = adapter
    return attached


def adapter_layers(root: nn.Module) -> dict[str, AdapterLinear]:
    """Every adapter under `root`, by diffusers module name, in module order."""
    found = [(path, m) for path, m in root.named_modules() if isinstance(m, AdapterLinear)]
    # named_modules lists children after parents in reverse; sort by the tree's own order.
    order = {path: i for i, (path, _) in enumerate(tree_flatten(root.parameters()))}
    found.sort(key=lambda pm: order.get(f"{pm[0]}.linear.weight", 0))
    return {_diffusers_name(root, path): module for path, module in found}


def _tensors(module: AdapterLinear) -> dict[str, mx.array]:
    """The trained tensors of one layer under underfit's names (never U, V)."""
    return {param: getattr(module, param) for param in module.params}


def _to_torch(array: mx.array) -> torch.Tensor:
    """The same values; bfloat16 goes through float32 (exact), numpy has none."""
    if array.dtype == mx.bfloat16:
        return torch.from_numpy(np.array(array.astype(mx.float32))).to(torch.bfloat16)
    return torch.from_numpy(np.array(array))


def adapter_state(root: nn.Module) -> dict[str, torch.Tensor]:
    """`<diffusers layer>.parametrizations.weight.0.<param>` → a torch copy, the keys, shapes
    and dtypes of `torch_lora.adapter_state`: lora_A (rank, fan_in), lora_B (out, rank),
    M_xs (rank, rank), magnitude / magnitude_r (out,) by rows, magnitude / magnitude_c
    (fan_in,) by columns."""
    state = {}
    for name, module in adapter_layers(root).items():
        for param, array in _tensors(module).items():
            state[f"{name}.{PARAM_PREFIX}.{param}"] = _to_torch(array)
    return state


def state_from_tree(root: nn.Module, tree: dict) -> dict[str, mx.array]:
    """A tree shaped like `root.trainable_parameters()` (gradients, optimizer moments) keyed as
    `adapter_state`: `<diffusers layer>.parametrizations.weight.0.<param>`."""
    flat = dict(tree_flatten(tree))
    paths = {id(m): p for p, m in root.named_modules()}
    out = {}
    for name, module in adapter_layers(root).items():
        for param in _tensors(module):
            out[f"{name}.{PARAM_PREFIX}.{param}"] = flat[f"{paths[id(module)]}.{param}"]
    return out


def load_adapter_state(root: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Copy an `adapter_state`-shaped dict (torch or numpy values, any float dtype) into the
    adapters attached under `root`. Strict: every tensor present with its shape, no key left
    over (a `baked_vnorm_row` of a dora-rows(-xs) layer is derived and ignored)."""
    layers = adapter_layers(root)
    if not layers:
        raise AdapterError("load_adapter_state: no adapters are attached; attach them first")
    expected = {
        f"{name}.{PARAM_PREFIX}.{param}": (module, param, live)
        for name, module in layers.items()
        for param, live in _tensors(module).items()
    }
    derived = {
        f"{name}.{PARAM_PREFIX}.{BAKED_NORM}"
        for name, module in layers.items()
        if module.adapter_type in BAKED_TYPES
    }
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected) - derived)
    if missing or unexpected:
        raise AdapterError(
            f"load_adapter_state: the state does not fit the attached adapters "
            f"({len(missing)} missing, e.g. {missing[:3]}; {len(unexpected)} unexpected, "
            f"e.g. {unexpected[:3]})"
        )
    for key, (module, param, live) in expected.items():
        value = mx.array(_numpy(state[key])).astype(live.dtype)
        if tuple(value.shape) != tuple(live.shape):
            raise AdapterError(
                f"load_adapter_state: {key} has shape {tuple(value.shape)}, the adapter "
                f"expects {tuple(live.shape)}"
            )
        setattr(module, param, value)
    mx.eval(root.trainable_parameters())


def set_strength(root: nn.Module, strength: float) -> None:
    """Scale every adapter under `root` (1.0 = as trained, 0.0 = exactly the base model)."""
    for module in adapter_layers(root).values():
        module.strength = float(strength)
