"""underfit's eight adapter types on PyTorch, for nn.Linear and nn.Conv1d.

The math is that of stable-audio-3 `models/lora/model.py` (`LoRAParametrization`), which underfit
attaches to every nn.Linear and nn.Conv1d it selects (`underfit/training/lora.py`). For a base
weight W viewed as 2-D (out, fan_in) — a Conv1d's (out, in/groups, k) flattened to
(out, in/groups·k) — s = alpha/rank, a strength g and eps = 1e-12:

    delta = B·A          A: (rank, fan_in), B: (out, rank)             lora, dora-*, bora
            U·M·Vᵀ       M (M_xs): (rank, rank); U: (out, rank), V: (fan_in, rank) fixed   *-xs
    V     = W + g·s·delta
    lora, lora-xs    W' = V
    dora-rows(-xs)   W' = m_g ⊙_rows V / (‖V‖_row + eps)      magnitude (out,)
    dora-cols(-xs)   W' = m_g ⊙_cols V / (‖V‖_col + eps)      magnitude (fan_in,)
    bora(-xs)        R  = r_g ⊙_rows V / (‖V‖_row + eps)      magnitude_r (out,)
                     W' = c_g ⊙_cols R / (‖R‖_col + eps)      magnitude_c (fan_in,)

‖·‖_row is the L2 norm over the input axis (dim 1, one value per output row), ‖·‖_col over the
output axis (dim 0, one value per input column); no norm is detached. A magnitude is blended
toward the base weight's own norm along its axis when g ≠ 1 (underfit's `_blend_magnitude`):
m_g = m at g = 1, ‖W‖ + g·(m − ‖W‖) otherwise; and W' = W exactly at g = 0, for every type.

Init: A ~ kaiming_uniform(a=√5) (bound 1/√fan_in), B = 0, M = 0; each magnitude the norm of W
along its axis at attach time; U, V the sign-canonical truncated SVD of W (`svd_bases`), given
or computed at attach time. The bias is never adapted. Trained: lora_A, lora_B, magnitude,
magnitude_r, magnitude_c, M_xs (each type's own); U and V are fixed buffers, not in the adapter
state (underfit's file leaves them out; a loader rebuilds them from the base weight).

PEFT. `lora` *is* PEFT's LoRA layer here: `LoraConfig(r=rank, lora_alpha=alpha,
init_lora_weights=True, lora_dropout=0, use_dora=False)` computes W·x + s·B·(A·x), the same
function with the same init and the same scale, in activation space. PEFT's `use_dora=True` is
NOT underfit's `dora-rows`: its magnitude is also per output row with the same init and its
forward is the same function (without the 1e-12), but it detaches ‖V‖_row (DoRA paper §4.3), so
the gradients of A and B differ. tests/adapters/test_torch_lora.py shows both facts. PEFT has
no column or two-sided magnitude and no fixed-basis core (dora-cols, bora, the -xs types), so
every type but `lora` is this module's own (`UnderfitAdapter` and its subclasses).

The forward, in activation space where it can be, as a correction to the base layer's own
output. With r the row factor m_g/(‖V‖_row + eps) (1 for a type without a row magnitude) and c
the column factor (1 for a type without a column magnitude), W'·x = r ⊙ (V·(c ⊙ x)), so

    y = base(c ⊙ x) + (r − 1) ⊙ (base(c ⊙ x) − b) + r ⊙ (g·s·delta·(c ⊙ x))

At init (B = 0 or M = 0; r and c exactly 1, which holds in fp32 and half precision where
‖W‖ ≫ 1e-12 relative to the dtype's precision) this is the base's output bit for bit. On
nn.Linear delta·x is the low-rank chain (A then B; Vᵀ then M then U), so no dense weight
gradient is ever formed (the base is frozen); the norms need a dense V, whose cost has no token
factor, and lora-xs needs nothing dense. On nn.Conv1d delta is applied as a convolution weight
of the base's shape (any stride, padding, dilation, groups); a column factor there scales an
(input channel, tap) pair, which is no scaling of the input, so dora-cols(-xs) and bora(-xs) on
a Conv1d form W' and convolve with it cast to the base dtype, as underfit's parametrization
does (also the base's output bit for bit at init: W' is then W exactly).

Dtypes. Adapter parameters (and U, V) live in fp32 over a fp16/bf16 base (underfit's
`base_precision`), and in the base's dtype when that is fp32 or fp64. The casts:
- the base layer runs as it is: W·x + b in the base dtype, on the input as given (times c,
  rounded to the input's dtype, for the column types on nn.Linear);
- the input is cast to the adapter dtype for the low-rank chain (PEFT's `_cast_input_dtype`
  for `lora`);
- the factors upcast W to build V and its norms, and upcast the base output (and b, to recover
  W·x) to combine it with the adapter output; the sum is formed in the adapter dtype and cast
  back to the base output's dtype. underfit adds lora-xs' update to W in the base dtype instead;
  the two agree to the base dtype's rounding.
In fp64 the factors are not exactly 1 at init (‖W‖/(‖W‖ + 1e-12)), so there the normed types
differ from the base by ~1e-12/‖W‖ relative, as in stable-audio-3. The casts are explicit, so no
autocast is needed; under autocast torch recasts the small adapter matmuls to half precision, as
underfit's "16-mixed" does.

Not handled: dropout on the adapter (underfit uses none), grouped or dilated convolutions for
`lora` (PEFT's conv LoRA is a different function there; every other type handles them),
stacked adapters.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import ClassVar

import peft
import torch
import torch.nn.functional as F
from peft.tuners.lora import layer as peft_lora
from torch import Tensor, nn

from tunesmith.adapters.svd_bases import Bases, BasesError, canonical_bases
from tunesmith.adapters.underfit_types import ADAPTER_TYPES, BAKED_TYPES, XS_TYPES

BAKED_NORM = "baked_vnorm_row"
ADAPTABLE = (nn.Linear, nn.Conv1d)  # underfit's target types (training/lora.py)
PEFT_ADAPTER = "default"  # the adapter name inside PEFT's layers
PARAM_PREFIX = "parametrizations.weight.0"  # underfit's key: <layer>.parametrizations.weight.0.X
DORA_EPS = 1e-12  # added to every norm a magnitude divides by, as stable-audio-3's forwards do


class AdapterError(ValueError):
    """Bad adapter settings, a layer that cannot be adapted, or a state that does not fit."""


def adapter_dtype(base_dtype: torch.dtype) -> torch.dtype:
    """fp32 over a half-precision base, the base's own dtype over fp32/fp64."""
    return torch.promote_types(base_dtype, torch.float32)


class _AdapterTensors(nn.Module):
    """One layer's trained tensors (underfit's names, in its order) and fixed U, V buffers."""

    def __init__(self, params: dict[str, torch.Tensor], bases: Bases | None) -> None:
        super().__init__()
        for name, tensor in params.items():
            self.register_parameter(name, nn.Parameter(tensor))
        if bases is not None:
            # Not persistent: derived from the base weight, so not in a state_dict (nor in
            # underfit's file).
            self.register_buffer("U", bases[0], persistent=False)
            self.register_buffer("V", bases[1], persistent=False)


class UnderfitAdapter(nn.Module):
    """One of underfit's types (not `lora`, which is PEFT's) around a frozen nn.Linear or
    nn.Conv1d; the subclass names the type (formula: module docstring)."""

    adapter_type: ClassVar[str]
    ROWS: ClassVar[str | None] = None  # the row magnitude's name, when the type has one
    COLS: ClassVar[str | None] = None  # the column magnitude's name, when the type has one
    XS: ClassVar[bool] = False  # delta = U·M·Vᵀ (else B·A)

    def __init__(
        self,
        base_layer: nn.Linear | nn.Conv1d,
        rank: int,
        alpha: float,
        bases: Bases | None = None,
    ) -> None:
        super().__init__()
        # The base first and the adapter in a child after it, so that a model's first parameter
        # stays a base weight (diffusers' `ModelMixin.dtype` is the first floating parameter's
        # dtype; a module's own parameters would come before its children's). PEFT's layers
        # are laid out the same way.
        self.base_layer = base_layer
        weight = base_layer.weight.detach()
        dtype, device = adapter_dtype(weight.dtype), weight.device
        out_features, fan_in = weight.shape[0], weight[0].numel()
        self.rank, self.alpha, self.scaling = rank, alpha, alpha / rank
        self.strength = 1.0
        params = {}
        if self.XS:
            params["M_xs"] = torch.zeros(rank, rank, dtype=dtype, device=device)
            if bases is None:
                bases = canonical_bases(weight, rank)
            u, v = bases
            if u.dim() != 2 or v.dim() != 2 or u.shape[0] != out_features or v.shape[0] != fan_in:
                raise AdapterError(
                    f"bases U {tuple(u.shape)}, V {tuple(v.shape)} do not fit a "
                    f"{out_features}x{fan_in} weight: U is (out, ≥rank), V (fan_in, ≥rank)"
                )
            if u.shape[1] < rank or v.shape[1] < rank:
                raise AdapterError(f"bases of rank {min(u.shape[1], v.shape[1])} < rank {rank}")
            # Truncated to the rank, as stable-audio-3 does with underfit's full precomputed
            # bases.
            bases = tuple(b[:, :rank].to(device=device, dtype=dtype).contiguous() for b in bases)
        else:
            params["lora_A"] = torch.empty(rank, fan_in, dtype=dtype, device=device)
            nn.init.kaiming_uniform_(params["lora_A"], a=math.sqrt(5))
            params["lora_B"] = torch.zeros(out_features, rank, dtype=dtype, device=device)
            bases = None
        # ‖W‖ of the weight as it is now, by the same norm as the forward's, so that at init
        # every factor m / ‖V‖ is exactly 1 (fp32, half). underfit takes the norm of the fp32
        # weights and casts the base to half afterwards, so over a half base its step 0
        # differs from the base model by the rounding of W.
        w2d = weight.reshape(out_features, -1).to(dtype)
        if self.ROWS:
            params[self.ROWS] = torch.linalg.vector_norm(w2d, dim=1)
        if self.COLS:
            params[self.COLS] = torch.linalg.vector_norm(w2d, dim=0)
        self.adapter = _AdapterTensors(params, bases)

    # underfit's tensor names; a type without one raises AttributeError.
    @property
    def lora_A(self) -> nn.Parameter:  # (rank, fan_in)
        return self.adapter.lora_A

    @property
    def lora_B(self) -> nn.Parameter:  # (out, rank)
        return self.adapter.lora_B

    @property
    def M_xs(self) -> nn.Parameter:  # (rank, rank)
        return self.adapter.M_xs

    @property
    def U(self) -> torch.Tensor:  # (out, rank), fixed
        return self.adapter.U

    @property
    def V(self) -> torch.Tensor:  # (fan_in, rank), fixed
        return self.adapter.V

    @property
    def magnitude(self) -> nn.Parameter:  # (out,) for the row types, (fan_in,) for the column
        return self.adapter.magnitude

    @property
    def magnitude_r(self) -> nn.Parameter:  # (out,)
        return self.adapter.magnitude_r

    @property
    def magnitude_c(self) -> nn.Parameter:  # (fan_in,)
        return self.adapter.magnitude_c

    @property
    def weight(self) -> torch.Tensor:
        return self.base_layer.weight

    @property
    def bias(self) -> torch.Tensor | None:
        return self.base_layer.bias

    @property
    def param_dtype(self) -> torch.dtype:
        """The adapter dtype (`adapter_dtype` of the base weight's at attach time)."""
        return next(self.adapter.parameters()).dtype

    def trained(self) -> dict[str, nn.Parameter]:
        """The trained tensors by underfit's names, in its order (A, B or M, then magnitudes)."""
        return dict(self.adapter.named_parameters())

    def delta(self) -> torch.Tensor:
        """The unscaled update B·A or U·M·Vᵀ, (out, fan_in), in the adapter dtype."""
        if self.XS:
            return self.U @ self.M_xs @ self.V.T
        return self.lora_B @ self.lora_A

    def _low_rank(self, x: torch.Tensor) -> torch.Tensor:
        """delta·x on an nn.Linear's input (adapter dtype), without forming delta."""
        if self.XS:
            return F.linear(F.linear(x @ self.V, self.M_xs), self.U)
        return F.linear(F.linear(x, self.lora_A), self.lora_B)

    def _base_2d(self) -> torch.Tensor:
        weight = self.base_layer.weight
        return weight.detach().reshape(weight.shape[0], -1).to(self.param_dtype)

    def _blend(self, magnitude: torch.Tensor, base: torch.Tensor, dim: int) -> torch.Tensor:
        """underfit's `_blend_magnitude`: m at strength 1, ‖W‖ + g·(m − ‖W‖) otherwise."""
        if self.strength == 1.0:
            return magnitude
        base_norm = torch.linalg.vector_norm(base, dim=dim)
        return base_norm + self.strength * (magnitude - base_norm)

    def _factors(
        self, dense: bool
    ) -> tuple[Tensor | None, Tensor | None, Tensor | None, Tensor | None, float]:
        """(row factor (out,) or None, column factor (fan_in,) or None, delta, V or None, g·s).

        delta and V = W + g·s·delta are formed when a norm needs them or `dense` asks for them.
        """
        g_s = self.scaling * self.strength
        if not (self.ROWS or self.COLS or dense):
            return None, None, None, None, g_s
        delta = self.delta()
        base = self._base_2d()
        v = base + g_s * delta
        rows = cols = None
        if self.ROWS:
            norm = torch.linalg.vector_norm(v, dim=1)  # not detached: underfit
            rows = self._blend(getattr(self.adapter, self.ROWS), base, 1) / (norm + DORA_EPS)
        if self.COLS:
            scaled = v if rows is None else rows.unsqueeze(1) * v  # bora: R = r ⊙_rows V
            norm = torch.linalg.vector_norm(scaled, dim=0)
            cols = self._blend(getattr(self.adapter, self.COLS), base, 0) / (norm + DORA_EPS)
        return rows, cols, delta, v, g_s

    def _dense(self) -> torch.Tensor:
        """W' (out, fan_in) in the adapter dtype at the current (non-zero) strength."""
        rows, cols, _, v, _ = self._factors(dense=True)
        w = v if rows is None else rows.unsqueeze(1) * v
        return w if cols is None else w * cols.unsqueeze(0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        base = self.base_layer
        if self.strength == 0:
            return base(x)
        conv = isinstance(base, nn.Conv1d)
        if conv and self.COLS:
            weight = self._dense().view(base.weight.shape).to(base.weight.dtype)
            return base._conv_forward(x, weight, base.bias)
        rows, cols, delta, _, g_s = self._factors(dense=conv)
        dtype = self.param_dtype
        xa = x.to(dtype)
        if cols is not None:  # nn.Linear: W'·x = r ⊙ V·(c ⊙ x)
            xa = xa * cols
            result = base(xa.to(x.dtype))
        else:
            result = base(x)  # W·x + b: the big matmul, in the base dtype, as the base runs it
        if conv:
            adapter_out = base._conv_forward(xa, delta.view(base.weight.shape), None)
            channel = None if rows is None else rows.unsqueeze(-1)  # (out, 1) against (…, out, L)
            bias = None if base.bias is None else base.bias.unsqueeze(-1)
        else:
            adapter_out = self._low_rank(xa)
            channel, bias = rows, base.bias
        full = result.to(dtype)
        if channel is None:
            out = full + g_s * adapter_out
        else:
            # r ⊙ (W·x + g·s·delta·x) + b, written as a correction to the base output (as
            # PEFT's DoRA does), so that at init (r exactly 1, a zero update) the output is
            # the base's bit for bit (see the module docstring for when r is exactly 1).
            plain = full if bias is None else full - bias.to(dtype)  # W·x
            out = full + ((channel - 1) * plain + channel * (g_s * adapter_out))
        return out.to(result.dtype)

    def merged_weight(self) -> torch.Tensor:
        """W' in the adapter dtype, shaped like the base weight (stable-audio-3's forwards)."""
        weight = self.base_layer.weight
        if self.strength == 0:
            return weight.detach().to(self.param_dtype)
        return self._dense().view(weight.shape)

    def baked_row_norm(self) -> torch.Tensor:
        """‖W + s·delta‖_row, fp32, strength 1, no eps: stable-audio-3's `baked_vnorm_row`."""
        base = self._base_2d().float()
        return torch.linalg.vector_norm(base + self.scaling * self.delta().float(), dim=1)

    def extra_repr(self) -> str:
        return (
            f"{self.adapter_type}, rank={self.rank}, alpha={self.alpha}, strength={self.strength}"
        )


class DoRARows(UnderfitAdapter):
    """underfit's `dora-rows`: lora_A, lora_B, magnitude (out,)."""

    adapter_type = "dora-rows"
    ROWS = "magnitude"


class DoRACols(UnderfitAdapter):
    """underfit's `dora-cols`: lora_A, lora_B, magnitude (fan_in,)."""

    adapter_type = "dora-cols"
    COLS = "magnitude"


class BoRA(UnderfitAdapter):
    """underfit's `bora`: lora_A, lora_B, magnitude_r (out,), magnitude_c (fan_in,)."""

    adapter_type = "bora"
    ROWS, COLS = "magnitude_r", "magnitude_c"


class LoRAXS(UnderfitAdapter):
    """underfit's `lora-xs`: M_xs (rank, rank) between the fixed bases U and V."""

    adapter_type = "lora-xs"
    XS = True


class DoRARowsXS(UnderfitAdapter):
    """underfit's `dora-rows-xs`: M_xs, magnitude (out,)."""

    adapter_type = "dora-rows-xs"
    ROWS, XS = "magnitude", True


class DoRAColsXS(UnderfitAdapter):
    """underfit's `dora-cols-xs`: M_xs, magnitude (fan_in,)."""

    adapter_type = "dora-cols-xs"
    COLS, XS = "magnitude", True


class BoRAXS(UnderfitAdapter):
    """underfit's `bora-xs`: M_xs, magnitude_r (out,), magnitude_c (fan_in,)."""

    adapter_type = "bora-xs"
    ROWS, COLS, XS = "magnitude_r", "magnitude_c", True


ADAPTER_CLASSES: dict[str, type[UnderfitAdapter]] = {
    cls.adapter_type: cls
    for cls in (DoRARows, DoRACols, BoRA, LoRAXS, DoRARowsXS, DoRAColsXS, BoRAXS)
}
# The trained tensors of each type, in order: underfit's `name_is_lora` names, what its file holds.
TYPE_PARAMS = {
    "lora": ("lora_A", "lora_B"),
    "dora-rows": ("lora_A", "lora_B", "magnitude"),
    "dora-cols": ("lora_A", "lora_B", "magnitude"),
    "bora": ("lora_A", "lora_B", "magnitude_r", "magnitude_c"),
    "lora-xs": ("M_xs",),
    "dora-rows-xs": ("M_xs", "magnitude"),
    "dora-cols-xs": ("M_xs", "magnitude"),
    "bora-xs": ("M_xs", "magnitude_r", "magnitude_c"),
}

AdapterLayer = UnderfitAdapter | peft_lora.LoraLayer


def _check_layer(layer: nn.Module, adapter_type: str, rank: int, alpha: float) -> None:
    if adapter_type not in ADAPTER_TYPES:
        hint = " (underfit's legacy 'dora' is 'dora-rows')" if adapter_type == "dora" else ""
        raise AdapterError(
            f"adapter_type {adapter_type!r} is not one of {', '.join(ADAPTER_TYPES)}{hint}"
        )
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise AdapterError(f"rank must be an integer ≥ 1, got {rank!r}")
    if not (isinstance(alpha, int | float) and math.isfinite(alpha) and alpha > 0):
        raise AdapterError(f"alpha must be a finite number > 0, got {alpha!r}")
    if not isinstance(layer, ADAPTABLE) or isinstance(layer, AdapterLayer):
        raise AdapterError(
            f"cannot adapt a {type(layer).__name__}: underfit adapts nn.Linear and nn.Conv1d"
        )
    if adapter_type in XS_TYPES:
        out_features, fan_in = layer.weight.shape[0], layer.weight[0].numel()
        if rank > min(out_features, fan_in):
            raise AdapterError(
                f"{adapter_type} needs rank ≤ min(out, fan_in) = {min(out_features, fan_in)} "
                f"for this {out_features}x{fan_in} weight (its SVD has no more vectors), got "
                f"rank {rank}; lower the rank or exclude the layer"
            )
    if adapter_type == "lora" and isinstance(layer, nn.Conv1d):
        # PEFT's conv A copies kernel, stride and padding only: other settings would change
        # the function (and grouped convs get a grouped B, not underfit's dense B·A).
        if not (layer.groups == 1 and layer.dilation == (1,) and layer.padding_mode == "zeros"):
            raise AdapterError(
                f"lora on a Conv1d with groups={layer.groups}, dilation={layer.dilation}, "
                f"padding_mode={layer.padding_mode!r} is not supported (PEFT's conv LoRA differs "
                f"from underfit's there); use dora-rows or exclude the layer"
            )


def from_base(
    layer: nn.Module, rank: int, alpha: float, adapter_type: str, bases: Bases | None = None
) -> AdapterLayer:
    """An adapter of `adapter_type` around `layer`, initialised as underfit does (B = 0, M = 0).

    `bases` (U, V) serve an -xs type (at least `rank` columns each; truncated to it); without
    them the SVD runs here. The base layer is frozen; the adapter's parameters are trainable.
    """
    _check_layer(layer, adapter_type, rank, alpha)
    layer.requires_grad_(False)
    if adapter_type in ADAPTER_CLASSES:
        try:
            return ADAPTER_CLASSES[adapter_type](layer, rank, alpha, bases)
        except BasesError as e:
            raise AdapterError(str(e)) from e
    # underfit `lora` == PEFT LoRA with lora_alpha=alpha, r=rank, kaiming A, zero B, no dropout.
    config = peft.LoraConfig(
        r=rank, lora_alpha=alpha, lora_dropout=0.0, init_lora_weights=True, use_dora=False
    )
    cls = peft_lora.Linear if isinstance(layer, nn.Linear) else peft_lora.Conv1d
    module = cls(layer, PEFT_ADAPTER, config=config, r=rank, lora_alpha=alpha)
    # PEFT moves new adapter weights to the base layer's dtype; underfit keeps them in fp32.
    # Over a half base, A was drawn and then rounded to half, so draw it again in fp32.
    dtype = adapter_dtype(layer.weight.dtype)
    if module.lora_A[PEFT_ADAPTER].weight.dtype != dtype:
        module.lora_A[PEFT_ADAPTER].to(dtype)
        module.lora_B[PEFT_ADAPTER].to(dtype)
        module.reset_lora_parameters(PEFT_ADAPTER, True)
    return module


def adapter_type_of(module: nn.Module) -> str:
    if isinstance(module, UnderfitAdapter):
        return module.adapter_type
    if isinstance(module, peft_lora.LoraLayer) and not module.lora_variant:
        return "lora"
    raise AdapterError(f"{type(module).__name__} is not a tunesmith underfit-type adapter")


def adapter_layers(model: nn.Module) -> dict[str, AdapterLayer]:
    """Every adapter in `model`, by module name, in module order."""
    return {
        name: module for name, module in model.named_modules() if isinstance(module, AdapterLayer)
    }


def attach(
    model: nn.Module,
    targets: list[str],
    rank: int,
    alpha: float,
    adapter_type: str,
    bases: Mapping[str, Bases] | None = None,
) -> dict[str, AdapterLayer]:
    """Freeze `model` and wrap each named layer (module names within `model`) in an adapter.

    Like underfit, the whole model is frozen; only adapter parameters train. For an -xs type,
    `bases` maps a layer name to its (U, V) (`svd_bases.BasesCache`); a layer it lacks gets
    its SVD computed here (underfit's fallback). Returns the new adapters by name, in the order
    given.
    """
    if not targets:
        raise AdapterError("attach: no target layers given")
    if len(set(targets)) != len(targets):
        raise AdapterError("attach: a target layer is named twice")
    model.requires_grad_(False)
    attached = {}
    for name in targets:
        try:
            layer = model.get_submodule(name)
        except AttributeError as e:
            raise AdapterError(f"attach: {type(model).__name__} has no layer {name!r}") from e
        if isinstance(layer, AdapterLayer):
            raise AdapterError(f"attach: layer {name!r} already has an adapter")
        layer_bases = bases.get(name) if bases is not None and adapter_type in XS_TYPES else None
        try:
            adapter = from_base(layer, rank, alpha, adapter_type, layer_bases)
        except AdapterError as e:
            raise AdapterError(f"attach: layer {name!r}: {e}") from e
        _replace(model, name, adapter)
        attached[name] = adapter
    for param in adapter_parameters(model):  # adapters attached by an earlier call stay trainable
        param.requires_grad_(True)
    return attached


def _replace(model: nn.Module, name: str, new: nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent_name) if parent_name else model, child, new)


def _tensors(module: AdapterLayer) -> dict[str, torch.Tensor]:
    """The live adapter tensors of one layer, under underfit's names and shapes."""
    if isinstance(module, UnderfitAdapter):
        return module.trained()
    adapter_type_of(module)
    a, b = module.lora_A[PEFT_ADAPTER].weight, module.lora_B[PEFT_ADAPTER].weight
    # PEFT's conv A is (r, in, k) and B (out, r, 1); underfit's are (r, in·k) and (out, r).
    return {"lora_A": a.reshape(a.shape[0], -1), "lora_B": b.reshape(b.shape[0], -1)}


def adapter_state(model: nn.Module, *, baked_norms: bool = False) -> dict[str, torch.Tensor]:
    """`<layer>.parametrizations.weight.0.<tensor>` → a detached copy, per `TYPE_PARAMS`.

    Layer names are module names within `model`; shapes are underfit's: lora_A (rank, fan_in),
    lora_B (out, rank), M_xs (rank, rank), magnitude (out,) for dora-rows(-xs) and (fan_in,) for
    dora-cols(-xs), magnitude_r (out,), magnitude_c (fan_in,). U and V are not included. With
    `baked_norms`, each dora-rows and dora-rows-xs layer also gets `baked_vnorm_row` (fp32),
    which stable-audio-3's `save_lora_safetensors(model=...)` adds so a loader can rebuild W'
    without the base weights.
    """
    state = {}
    for name, module in adapter_layers(model).items():
        for param, tensor in _tensors(module).items():
            state[f"{name}.{PARAM_PREFIX}.{param}"] = tensor.detach().clone()
        if baked_norms and adapter_type_of(module) in BAKED_TYPES:
            state[f"{name}.{PARAM_PREFIX}.{BAKED_NORM}"] = module.baked_row_norm().detach()
    return state


def load_adapter_state(model: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Copy an `adapter_state`-shaped dict into the adapters already attached to `model`.

    Strict: every adapter tensor must be present with underfit's shape, and no key may be left
    over. `baked_vnorm_row` entries of dora-rows(-xs) layers are accepted and ignored (derived).
    Values are cast to each adapter's dtype.
    """
    layers = adapter_layers(model)
    if not layers:
        raise AdapterError("load_adapter_state: the model has no adapters; attach them first")
    expected = {}
    for name, module in layers.items():
        for param, tensor in _tensors(module).items():
            expected[f"{name}.{PARAM_PREFIX}.{param}"] = tensor
    derived = {
        f"{name}.{PARAM_PREFIX}.{BAKED_NORM}"
        for name, module in layers.items()
        if adapter_type_of(module) in BAKED_TYPES
    }
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected) - derived)
    if missing or unexpected:
        raise AdapterError(
            f"load_adapter_state: the state does not fit the attached adapters "
            f"({len(missing)} missing, e.g. {missing[:3]}; {len(unexpected)} unexpected, "
            f"e.g. {unexpected[:3]})"
        )
    with torch.no_grad():
        for key, live in expected.items():
            value = state[key]
            if tuple(value.shape) != tuple(live.shape):
                raise AdapterError(
                    f"load_adapter_state: {key} has shape {tuple(value.shape)}, the adapter "
                    f"expects {tuple(live.shape)}"
                )
            live.copy_(value.to(live.dtype))  # a reshape view of PEFT's conv weight writes through


def adapter_parameters(model: nn.Module) -> list[nn.Parameter]:
    """The trainable adapter parameters, in module order (per layer as `TYPE_PARAMS`)."""
    params = []
    for module in adapter_layers(model).values():
        if isinstance(module, UnderfitAdapter):
            params += list(module.trained().values())
        else:
            params += [module.lora_A[PEFT_ADAPTER].weight, module.lora_B[PEFT_ADAPTER].weight]
    return params


def set_strength(model: nn.Module, strength: float) -> None:
    """Scale every adapter in `model` (1.0 = as trained, 0.0 = exactly the base model)."""
    for module in adapter_layers(model).values():
        if isinstance(module, UnderfitAdapter):
            module.strength = float(strength)
        else:
            module.set_scale(PEFT_ADAPTER, float(strength))  # scaling = strength·alpha/rank


def merged_weight(module: AdapterLayer) -> torch.Tensor:
    """The effective weight W' (adapter dtype, the base weight's shape) at the current strength."""
    if isinstance(module, UnderfitAdapter):
        return module.merged_weight()
    adapter_type_of(module)
    weight = module.get_base_layer().weight
    a = module.lora_A[PEFT_ADAPTER].weight
    b = module.lora_B[PEFT_ADAPTER].weight
    delta = b.reshape(b.shape[0], -1) @ a.reshape(a.shape[0], -1)
    scaling = module.scaling[PEFT_ADAPTER]  # alpha/rank times the strength
    return weight.detach().to(a.dtype) + scaling * delta.view(weight.shape)


def merge(model: nn.Module) -> None:
    """Replace every adapter by its base layer holding W' (cast to the base dtype)."""
    for name, module in adapter_layers(model).items():
        base = module.base_layer if isinstance(module, UnderfitAdapter) else module.get_base_layer()
        with torch.no_grad():
            base.weight.copy_(merged_weight(module).to(base.weight.dtype))
        _replace(model, name, base)
