"""underfit's `lora` and `dora-rows` adapters in MLX, for nn.Linear: the torch path's math.

The formula is `tunesmith.adapters.torch_lora`'s (its docstring has the derivation). For a
base weight W (out, fan_in), A: (rank, fan_in), B: (out, rank), s = alpha/rank, strength g:

    lora       y = W·x + b + g·s·B·(A·x)
    dora-rows  y = (m_g / (‖W + g·s·B·A‖_row + 1e-12)) ⊙ (W·x + g·s·B·(A·x)) + b
               ‖·‖_row over the input axis, one value per output row, NOT detached (underfit;
               mlx-lm's DoRALinear and PEFT detach it, which changes the gradients of A and B)
               m_g = m if g = 1, else ‖W‖_row + g·(m − ‖W‖_row)
    both       y = W·x + b exactly when g = 0

A and B are stored as the torch path stores them (PEFT's and underfit's layout), not
transposed as mlx-lm's `lora_a` (in, r) / `lora_b` (r, out): a file tensor is a parameter
here, with no transpose at the boundary. Init: A ~ U(±1/√fan_in) (PEFT's
kaiming_uniform(a=√5) bound), B = 0, m = ‖W‖_row at attach time. Adapter parameters are
float32 over a half-precision base (underfit's `base_precision`); the casts follow the torch
path: the base runs in its dtype, the input is cast to the adapter dtype for A and B, the
sum is formed in the adapter dtype and cast back to the base output's dtype.

Names. `attach` takes diffusers module names under a root module whose children are the
pipeline components (`transformer.transformer_blocks.0.self_attn.to_qkv`,
`duration_embedder.linear`); an index under an MLX `nn.Sequential` is looked up in its
`.layers` (`transformer.to_cond_embed.0` is MLX's `transformer.to_cond_embed.layers.0`).
`adapter_state` gives `<diffusers name>.parametrizations.weight.0.<lora_A|lora_B|magnitude>`
as torch tensors, the keys and shapes of `torch_lora.adapter_state`, so the underfit-format
writer and reader (with `sa3_names` and the QKV row permutation) serve both backends.

Not handled: nn.Conv1d (MLX's conv weight is (out, k, in), torch's (out, in, k); the fan-in
order of A would differ, and underfit's default selection has no conv), quantized bases,
dropout on the adapter (underfit uses none), stacked adapters, `baked_vnorm_row`.
"""

from __future__ import annotations

import math

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import torch
from mlx.utils import tree_flatten

from tunesmith.adapters.torch_lora import ADAPTER_TYPES, DORA_EPS, PARAM_PREFIX, AdapterError


def adapter_dtype(base_dtype: mx.Dtype) -> mx.Dtype:
    """float32 over a half-precision base, float32 over float32 (MLX has no float64 on GPU)."""
    return mx.float32 if base_dtype in (mx.float16, mx.bfloat16, mx.float32) else base_dtype


class LoRALinear(nn.Module):
    """`lora` around a frozen nn.Linear: y = linear(x) + g·s·B·(A·x)."""

    @classmethod
    def from_base(cls, linear: nn.Linear, rank: int, alpha: float) -> LoRALinear:
        return cls(linear, rank, alpha)

    def __init__(self, linear: nn.Linear, rank: int, alpha: float) -> None:
        super().__init__()
        _check(linear, rank, alpha)
        self.linear = linear
        self.linear.freeze()
        out_features, fan_in = linear.weight.shape
        dtype = adapter_dtype(linear.weight.dtype)
        self.rank, self.alpha, self.scale = rank, alpha, alpha / rank
        self.strength = 1.0  # a Python float: set it before compiling a step, not inside
        bound = 1.0 / math.sqrt(fan_in)
        self.lora_A = mx.random.uniform(-bound, bound, (rank, fan_in)).astype(dtype)
        self.lora_B = mx.zeros((out_features, rank), dtype=dtype)

    @property
    def weight(self) -> mx.array:
        """The base weight, for code that reads a layer's dtype or shape (as torch_lora)."""
        return self.linear.weight

    def _delta_out(self, x: mx.array) -> mx.array:
        """g·s·B·(A·x) in the adapter dtype."""
        xa = x.astype(self.lora_A.dtype) @ self.lora_A.T
        return (self.scale * self.strength) * (xa @ self.lora_B.T)

    def __call__(self, x: mx.array) -> mx.array:
        result = self.linear(x)
        if self.strength == 0:
            return result
        return (result.astype(self.lora_A.dtype) + self._delta_out(x)).astype(result.dtype)

    def merged_weight(self) -> mx.array:
        """W + g·s·B·A in the adapter dtype."""
        base = self.linear.weight.astype(self.lora_A.dtype)
        return base + (self.scale * self.strength) * (self.lora_B @ self.lora_A)


class DoRARowsLinear(LoRALinear):
    """`dora-rows` around a frozen nn.Linear (formula: module docstring)."""

    @classmethod
    def from_base(cls, linear: nn.Linear, rank: int, alpha: float) -> DoRARowsLinear:
        return cls(linear, rank, alpha)

    def __init__(self, linear: nn.Linear, rank: int, alpha: float) -> None:
        super().__init__(linear, rank, alpha)
        # ‖W‖_row by the forward's own norm, so that at init the factor is exactly 1.
        self.magnitude = mx.linalg.norm(linear.weight.astype(self.lora_A.dtype), axis=1)

    def _factor(self) -> mx.array:
        """m_g / (‖W + g·s·B·A‖_row + eps), one value per output row; the norm keeps its
        gradient (underfit), unlike mlx-lm's stop_gradient."""
        base = self.linear.weight.astype(self.lora_A.dtype)
        g_s = self.scale * self.strength
        norm = mx.linalg.norm(base + g_s * (self.lora_B @ self.lora_A), axis=1)
        magnitude = self.magnitude
        if self.strength != 1.0:
            base_norm = mx.linalg.norm(base, axis=1)
            magnitude = base_norm + self.strength * (magnitude - base_norm)
        return magnitude / (norm + DORA_EPS)

    def __call__(self, x: mx.array) -> mx.array:
        result = self.linear(x)  # W·x + b in the base dtype, as the base computes it
        if self.strength == 0:
            return result
        factor = self._factor()
        full = result.astype(factor.dtype)
        bias = self.linear.get("bias")
        plain = full if bias is None else full - bias.astype(factor.dtype)  # W·x
        # factor ⊙ (W·x + g·s·B·A·x) + b as a correction to the base output, as the torch
        # path writes it: at init (factor 1, B = 0) this is the base output bit for bit.
        out = full + ((factor - 1) * plain + factor * self._delta_out(x))
        return out.astype(result.dtype)

    def merged_weight(self) -> mx.array:
        if self.strength == 0:
            return self.linear.weight.astype(self.lora_A.dtype)
        return self._factor()[:, None] * super().merged_weight()


ADAPTER_CLASSES = {"lora": LoRALinear, "dora-rows": DoRARowsLinear}
AdapterLayer = LoRALinear  # DoRARowsLinear is a subclass


def _check(layer, rank: int, alpha: float) -> None:
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise AdapterError(f"rank must be an integer ≥ 1, got {rank!r}")
    if not (isinstance(alpha, int | float) and math.isfinite(alpha) and alpha > 0):
        raise AdapterError(f"alpha must be a finite number > 0, got {alpha!r}")
    if isinstance(layer, LoRALinear) or type(layer) is not nn.Linear:
        raise AdapterError(
            f"cannot adapt a {type(layer).__name__}: the MLX path adapts nn.Linear only"
        )


def from_base(linear: nn.Linear, rank: int, alpha: float, adapter_type: str) -> LoRALinear:
    """An adapter of `adapter_type` around `linear`, initialised as underfit does (B = 0)."""
    if adapter_type not in ADAPTER_TYPES:
        raise AdapterError(f"adapter_type {adapter_type!r} is not one of {ADAPTER_TYPES}")
    return ADAPTER_CLASSES[adapter_type].from_base(linear, rank, alpha)


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
    root: nn.Module, targets: list[str], rank: int, alpha: float, adapter_type: str
) -> dict[str, LoRALinear]:
    """Freeze `root` and wrap each named nn.Linear (diffusers names) in an adapter.

    Only the adapters' A, B (and m) are trainable afterwards. The initial A is drawn from
    MLX's global random state, in the order of `targets`: seed it first for a fixed init.
    """
    if not targets:
        raise AdapterError("attach: no target layers given")
    if len(set(targets)) != len(targets):
        raise AdapterError("attach: a target layer is named twice")
    root.freeze()
    attached = {}
    for name in targets:
        parent, key, layer = _resolve(root, name)
        if isinstance(layer, LoRALinear):
            raise AdapterError(f"attach: layer {name!r} already has an adapter")
        try:
            adapter = from_base(layer, rank, alpha, adapter_type)
        except AdapterError as e:
            raise AdapterError(f"attach: layer {name!r}: {e}") from e
        parent[key] = adapter
        attached[name] = adapter
    return attached


def adapter_layers(root: nn.Module) -> dict[str, LoRALinear]:
    """Every adapter under `root`, by diffusers module name, in module order."""
    found = [(path, m) for path, m in root.named_modules() if isinstance(m, LoRALinear)]
    # named_modules lists children after parents in reverse; sort by the tree's own order.
    order = {path: i for i, (path, _) in enumerate(tree_flatten(root.parameters()))}
    found.sort(key=lambda pm: order.get(f"{pm[0]}.lora_A", 0))
    return {_diffusers_name(root, path): module for path, module in found}


def _tensors(module: LoRALinear) -> dict[str, mx.array]:
    tensors = {"lora_A": module.lora_A, "lora_B": module.lora_B}
    if isinstance(module, DoRARowsLinear):
        tensors["magnitude"] = module.magnitude
    return tensors


def _to_torch(array: mx.array) -> torch.Tensor:
    """The same values; bfloat16 goes through float32 (exact), numpy has none."""
    if array.dtype == mx.bfloat16:
        return torch.from_numpy(np.array(array.astype(mx.float32))).to(torch.bfloat16)
    return torch.from_numpy(np.array(array))


def adapter_state(root: nn.Module) -> dict[str, torch.Tensor]:
    """`<diffusers layer>.parametrizations.weight.0.<param>` → a torch copy, the keys, shapes
    and dtypes of `torch_lora.adapter_state` (A (rank, fan_in), B (out, rank), m (out,))."""
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
    over (a `baked_vnorm_row` of a dora-rows layer is derived and ignored)."""
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
        if isinstance(module, DoRARowsLinear)
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
        value = state[key]
        if isinstance(value, torch.Tensor):
            value = value.detach().cpu().float().numpy()
        value = mx.array(np.asarray(value, dtype=np.float32)).astype(live.dtype)
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
