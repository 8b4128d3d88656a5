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
bit at init). U, V: the first `rank` left and right singular vectors of the fp32 base weight,
each column's sign fixed so that its largest-magnitude entry of U is positive (underfit
`utils/compute_svd.py` `canonicalize_signs`), or the bases `attach` is given (underfit's
precomputed file, truncated to rank). They are fixed: kept out of the parameters (an attribute
with a leading underscore is no MLX parameter), so neither trained, nor saved, nor loaded; a
loader recomputes them from the base weight, as underfit does.

Forward. The base layer runs as it is (W·x + b in its dtype); the correction is formed in the
adapter dtype (float32 over a half base, as underfit's `base_precision`) and added to the base
output, so that at init the output is the base's bit for bit, then cast back to the base
output's dtype:

    lora(-xs)        y = W·x + b + g·s·δ·x                              (δ·x low rank)
    dora-rows(-xs)   y = W·x + b + (f − 1) ⊙ W·x + f ⊙ g·s·δ·x,  f = m_g / (‖V_g‖_row + eps)
    dora-cols, bora  y = W·x + b + (W' − W)·x                           (W' dense, as its norms)

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

from tunesmith.adapters.torch_lora import DORA_EPS, PARAM_PREFIX, AdapterError

ROWS, COLS = 1, 0  # the axis a norm reduces: over the inputs (per row), over the outputs
BAKED_TYPES = ("dora-rows", "dora-rows-xs")  # underfit bakes ‖V‖_row for these (ignored here)


def adapter_dtype(base_dtype: mx.Dtype) -> mx.Dtype:
    """float32 over a half-precision base, float32 over float32 (MLX has no float64 on GPU)."""
    return mx.float32 if base_dtype in (mx.float16, mx.bfloat16, mx.float32) else base_dtype


class AdapterLinear(nn.Module):
    """The part every type shares: the frozen nn.Linear, s, the strength, the magnitudes, the
    merged weight and the forward. A type is a factorisation (`LoRALinear` or `LoRAXSLinear`)
    and its `magnitudes`: (name, axis) pairs, applied in order (module docstring)."""

    adapter_type = ""
    factors: tuple[str, ...] = ()
    magnitudes: tuple[tuple[str, int], ...] = ()

    def __init__(self, linear: nn.Linear, rank: int, alpha: float) -> None:
        super().__init__()
        _check(linear, rank, alpha)
        self.linear = linear
        self.linear.freeze()
        self.rank, self.alpha, self.scale = rank, alpha, alpha / rank
        self.strength = 1.0  # a Python float: set it before compiling a step, not inside

    @property
    def weight(self) -> mx.array:
        """The base weight, for code that reads a layer's dtype or shape (as torch_lora)."""
        return self.linear.weight

    @property
    def param_dtype(self) -> mx.Dtype:
        return adapter_dtype(self.linear.weight.dtype)

    @property
    def params(self) -> tuple[str, ...]:
        """The trained tensors' names, in the order they are saved and optimised."""
        return self.factors + tuple(name for name, _ in self.magnitudes)

    def _base(self) -> mx.array:
        return self.linear.weight.astype(self.param_dtype)

    def _init_magnitudes(self) -> None:
        # ‖W‖ by the forward's own norm, so that at init every factor is exactly 1.
        base = self._base()
        for name, axis in self.magnitudes:
            setattr(self, name, mx.linalg.norm(base, axis=axis))

    def delta(self) -> mx.array:
        """δ (out, fan_in) in the adapter dtype."""
        raise NotImplementedError

    def _delta_out(self, x: mx.array) -> mx.array:
        """g·s·δ·x in the adapter dtype, through the low-rank factors."""
        raise NotImplementedError

    def _magnitude(self, name: str, axis: int, base: mx.array) -> mx.array:
        """m_g: the magnitude blended with the base's norm along its axis at g ≠ 1."""
        magnitude = getattr(self, name)
        if self.strength != 1.0:
            base_norm = mx.linalg.norm(base, axis=axis)
            magnitude = base_norm + self.strength * (magnitude - base_norm)
        return magnitude

    def _normalised(self, w: mx.array, name: str, axis: int, base: mx.array) -> mx.array:
        """m_g ⊙ w / (‖w‖ + eps) along `axis`; the norm keeps its gradient (underfit)."""
        norm = mx.linalg.norm(w, axis=axis)
        factor = self._magnitude(name, axis, base) / (norm + DORA_EPS)
        return mx.expand_dims(factor, axis) * w

    def merged_weight(self) -> mx.array:
        """W' (out, fan_in) in the adapter dtype, at the current strength."""
        base = self._base()
        if self.strength == 0:
            return base
        w = base + (self.scale * self.strength) * self.delta()
        for name, axis in self.magnitudes:
            w = self._normalised(w, name, axis, base)
        return w

    def _correction(self, x: mx.array, full: mx.array) -> mx.array:
        """y − (W·x + b) in the adapter dtype; `full` is the base output in that dtype."""
        raise NotImplementedError

    def __call__(self, x: mx.array) -> mx.array:
        result = self.linear(x)  # W·x + b in the base dtype, as the base computes it
        if self.strength == 0:
            return result
        full = result.astype(self.param_dtype)
        return (full + self._correction(x, full)).astype(result.dtype)


class _Plain:
    """No magnitude: y = W·x + b + g·s·δ·x."""

    def _correction(self, x: mx.array, full: mx.array) -> mx.array:
        return self._delta_out(x)


class _Dense:
    """A column magnitude (dora-cols, bora): y = W·x + b + (W' − W)·x. W' is dense anyway
    for its norms; at init W' = W bit for bit, so the correction is exactly 0."""

    def _correction(self, x: mx.array, full: mx.array) -> mx.array:
        base = self._base()
        return x.astype(base.dtype) @ (self.merged_weight() - base).T


class _Rows:
    """One magnitude per output row: f ⊙ (W·x + g·s·δ·x) + b without a dense W'·x."""

    magnitudes = (("magnitude", ROWS),)

    def _factor(self) -> mx.array:
        """m_g / (‖W + g·s·δ‖_row + eps), one value per output row, not detached."""
        base = self._base()
        norm = mx.linalg.norm(base + (self.scale * self.strength) * self.delta(), axis=ROWS)
        return self._magnitude("magnitude", ROWS, base) / (norm + DORA_EPS)

    def _correction(self, x: mx.array, full: mx.array) -> mx.array:
        factor = self._factor()
        bias = self.linear.get("bias")
        plain = full if bias is None else full - bias.astype(factor.dtype)  # W·x
        # As the torch path writes it: at init (factor 1, δ = 0) the correction is exactly 0.
        return (factor - 1) * plain + factor * self._delta_out(x)


class LoRALinear(_Plain, AdapterLinear):
    """`lora` around a frozen nn.Linear: y = linear(x) + g·s·B·(A·x)."""

    adapter_type = "lora"
    factors = ("lora_A", "lora_B")

    @classmethod
    def from_base(cls, linear: nn.Linear, rank: int, alpha: float, bases=None) -> LoRALinear:
        return cls(linear, rank, alpha)

    def __init__(self, linear: nn.Linear, rank: int, alpha: float) -> None:
        super().__init__(linear, rank, alpha)
        out_features, fan_in = linear.weight.shape
        dtype = self.param_dtype
        bound = 1.0 / math.sqrt(fan_in)
        self.lora_A = mx.random.uniform(-bound, bound, (rank, fan_in)).astype(dtype)
        self.lora_B = mx.zeros((out_features, rank), dtype=dtype)
        self._init_magnitudes()

    def delta(self) -> mx.array:
        return self.lora_B @ self.lora_A

    def _delta_out(self, x: mx.array) -> mx.array:
        xa = x.astype(self.lora_A.dtype) @ self.lora_A.T
        return (self.scale * self.strength) * (xa @ self.lora_B.T)


class DoRARowsLinear(_Rows, LoRALinear):
    """`dora-rows`: B·A, one magnitude per output row."""

    adapter_type = "dora-rows"


class DoRAColsLinear(_Dense, LoRALinear):
    """`dora-cols`: B·A, one magnitude per input column."""

    adapter_type = "dora-cols"
    magnitudes = (("magnitude", COLS),)


class BoRALinear(_Dense, LoRALinear):
    """`bora`: B·A, rows normalised to magnitude_r, then columns to magnitude_c."""

    adapter_type = "bora"
    magnitudes = (("magnitude_r", ROWS), ("magnitude_c", COLS))


class LoRAXSLinear(_Plain, AdapterLinear):
    """`lora-xs` around a frozen nn.Linear: y = linear(x) + g·s·U·M_xs·Vᵀ·x, U and V fixed."""

    adapter_type = "lora-xs"
    factors = ("M_xs",)

    @classmethod
    def from_base(cls, linear: nn.Linear, rank: int, alpha: float, bases=None) -> LoRAXSLinear:
        return cls(linear, rank, alpha, bases)

    def __init__(self, linear: nn.Linear, rank: int, alpha: float, bases=None) -> None:
        super().__init__(linear, rank, alpha)
        dtype = self.param_dtype
        u, v = _layer_bases(linear.weight, rank, bases)
        # A leading underscore keeps them out of parameters(): fixed, like a torch buffer.
        self._U, self._V = u.astype(dtype), v.astype(dtype)
        mx.eval(self._U, self._V)
        self.M_xs = mx.zeros((rank, rank), dtype=dtype)
        self._init_magnitudes()

    @property
    def U(self) -> mx.array:  # (out, rank)
        return self._U

    @property
    def V(self) -> mx.array:  # (fan_in, rank)
        return self._V

    def delta(self) -> mx.array:
        return self._U @ self.M_xs @ self._V.T

    def _delta_out(self, x: mx.array) -> mx.array:
        xv = x.astype(self.M_xs.dtype) @ self._V
        return (self.scale * self.strength) * ((xv @ self.M_xs.T) @ self._U.T)


class DoRARowsXSLinear(_Rows, LoRAXSLinear):
    """`dora-rows-xs`: U·M_xs·Vᵀ, one magnitude per output row."""

    adapter_type = "dora-rows-xs"


class DoRAColsXSLinear(_Dense, LoRAXSLinear):
    """`dora-cols-xs`: U·M_xs·Vᵀ, one magnitude per input column."""

    adapter_type = "dora-cols-xs"
    magnitudes = (("magnitude", COLS),)


class BoRAXSLinear(_Dense, LoRAXSLinear):
    """`bora-xs`: U·M_xs·Vᵀ, rows to magnitude_r, then columns to magnitude_c."""

    adapter_type = "bora-xs"
    magnitudes = (("magnitude_r", ROWS), ("magnitude_c", COLS))


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
ADAPTER_TYPES = tuple(ADAPTER_CLASSES)
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


def canonical_bases(weight: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """(U (out, rank), V (fan_in, rank)), float32: the fp32 SVD of the 2-D weight with each
    column's sign fixed by the largest-magnitude entry of U (0 counts as +), as underfit's
    `canonicalize_signs`. NumPy's float32 SVD (LAPACK gesdd), so that no torch op runs here;
    the torch path's SVD of the same weight agrees to its rounding, and a caller that needs the
    very same bases on both backends passes them to `attach`."""
    w = np.asarray(weight, dtype=np.float32).reshape(weight.shape[0], -1)
    u, _, vh = np.linalg.svd(w, full_matrices=False)
    signs = np.sign(u[np.abs(u).argmax(axis=0), np.arange(u.shape[1])])
    signs[signs == 0] = 1
    u, vh = u * signs[None, :], vh * signs[:, None]
    return u[:, :rank], vh[:rank].T


def _numpy(value) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().float().numpy()
    if isinstance(value, mx.array):
        return np.array(value.astype(mx.float32))
    return np.asarray(value, dtype=np.float32)


def _layer_bases(weight: mx.array, rank: int, bases) -> tuple[mx.array, mx.array]:
    """U, V for one layer: `bases` (U (out, ≥ rank), V (fan_in, ≥ rank)) truncated to rank
    when given, else the canonical bases of the weight in fp32."""
    out_features, fan_in = weight.shape
    if rank > min(out_features, fan_in):
        raise AdapterError(
            f"rank {rank} exceeds min(out, fan_in) = {min(out_features, fan_in)}: "
            f"an -xs adapter's bases have no more columns"
        )
    if bases is None:
        u, v = canonical_bases(np.array(weight.astype(mx.float32)), rank)
        return mx.array(u), mx.array(v)
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
    return ADAPTER_CLASSES[adapter_type].from_base(linear, rank, alpha, bases)


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
        f"{name}.{PARAM_PREFIX}.baked_vnorm_row"
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
