"""underfit's `lora` and `dora-rows` adapters on PyTorch, for nn.Linear and nn.Conv1d.

The math is that of stable-audio-3 `models/lora/model.py` (`LoRAParametrization`), which underfit
attaches to every nn.Linear and nn.Conv1d it selects (`underfit/training/lora.py`). For a base
weight W viewed as 2-D (out, fan_in) — a Conv1d's (out, in/groups, k) flattened to
(out, in/groups·k) — with A: (rank, fan_in), B: (out, rank), s = alpha/rank and a strength g:

    lora       W' = W + g·s·B·A
    dora-rows  V  = W + g·s·B·A
               W' = m_g ⊙_rows V / (‖V‖_row + 1e-12)    ‖·‖_row: L2 over the input axis (dim 1),
                                                        one value per output row, NOT detached
               m_g = m                         if g = 1
                     ‖W‖_row + g·(m − ‖W‖_row) otherwise (underfit's `_blend_magnitude`)
               W' = W exactly                  if g = 0

Init (both): A ~ kaiming_uniform(a=√5) (bound 1/√fan_in), B = 0, and for dora-rows
m = ‖W‖_row of the weight at attach time. The bias is never adapted.

PEFT. `lora` *is* PEFT's LoRA layer here: `LoraConfig(r=rank, lora_alpha=alpha,
init_lora_weights=True, lora_dropout=0, use_dora=False)` computes W·x + s·B·(A·x), the same
function with the same init and the same scale, in activation space. PEFT's `use_dora=True` is
NOT underfit's `dora-rows`: its magnitude is also per output row with the same init and its
forward is the same function (without the 1e-12), but it detaches ‖V‖_row (DoRA paper §4.3), so
the gradients of A and B differ. tests/adapters/test_torch_lora.py shows both facts. dora-rows
is therefore implemented here (`DoRARows`), in activation space like PEFT's DoRA:

    y = (m_g / (‖V‖_row + 1e-12)) ⊙ (W·x + g·s·B·(A·x)) + b

computed as a correction to the base layer's own output, so that it is the base's output bit
for bit at init. On nn.Linear this never forms a dense weight gradient (the base is frozen);
‖V‖_row needs a dense V, whose cost has no token factor. On nn.Conv1d the update B·A is applied
as a convolution weight of the base's shape (any stride, padding, dilation, groups).

Dtypes. Adapter parameters live in fp32 over a fp16/bf16 base (underfit's `base_precision`),
and in the base's dtype when that is fp32 or fp64. The casts:
- the base layer runs as it is: W·x + b in the base dtype, on the input as given;
- the input is cast to the adapter dtype for A and B (PEFT's `_cast_input_dtype` for `lora`);
- dora-rows upcasts W to build V and its row norms, and upcasts the base output (and b, to
  recover W·x) to combine it with the adapter output; both types add in the adapter dtype and
  cast the sum back to the base output's dtype.
The casts are explicit, so no autocast is needed; under autocast torch recasts the small adapter
matmuls to half precision, as underfit's "16-mixed" does.

Not handled: dropout on the adapter (underfit uses none), the other underfit types (dora-cols,
bora, *-xs), grouped or dilated convolutions for `lora` (PEFT's conv LoRA is a different
function there; `dora-rows` handles them), stacked adapters.
"""

from __future__ import annotations

import math

import peft
import torch
import torch.nn.functional as F
from peft.tuners.lora import layer as peft_lora
from torch import nn

ADAPTER_TYPES = ("lora", "dora-rows")
ADAPTABLE = (nn.Linear, nn.Conv1d)  # underfit's target types (training/lora.py)
PEFT_ADAPTER = "default"  # the adapter name inside PEFT's layers
PARAM_PREFIX = "parametrizations.weight.0"  # underfit's key: <layer>.parametrizations.weight.0.X
DORA_EPS = 1e-12  # added to ‖V‖_row, as stable-audio-3's dora_forward does


class AdapterError(ValueError):
    """Bad adapter settings, a layer that cannot be adapted, or a state that does not fit."""


def adapter_dtype(base_dtype: torch.dtype) -> torch.dtype:
    """fp32 over a half-precision base, the base's own dtype over fp32/fp64."""
    return torch.promote_types(base_dtype, torch.float32)


class _DoRAParameters(nn.Module):
    """A, B and m of one layer, in a child module: see DoRARows.__init__."""

    def __init__(self, lora_A: torch.Tensor, lora_B: torch.Tensor, magnitude: torch.Tensor) -> None:
        super().__init__()
        self.lora_A = nn.Parameter(lora_A)
        self.lora_B = nn.Parameter(lora_B)
        self.magnitude = nn.Parameter(magnitude)


class DoRARows(nn.Module):
    """underfit's `dora-rows` around a frozen nn.Linear or nn.Conv1d (formula: module docstring)."""

    def __init__(self, base_layer: nn.Linear | nn.Conv1d, rank: int, alpha: float) -> None:
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
        lora_A = torch.empty(rank, fan_in, dtype=dtype, device=device)
        nn.init.kaiming_uniform_(lora_A, a=math.sqrt(5))
        lora_B = torch.zeros(out_features, rank, dtype=dtype, device=device)
        # ‖W‖_row of the weight as it is now, by the same norm as the forward's, so that at
        # init factor = m / ‖V‖_row is exactly 1 (fp32, half). underfit takes the norm of the
        # fp32 weights and casts the base to half afterwards, so over a half base its step 0
        # differs from the base model by the rounding of W.
        magnitude = torch.linalg.vector_norm(weight.reshape(out_features, -1).to(dtype), dim=1)
        self.adapter = _DoRAParameters(lora_A, lora_B, magnitude)

    @property
    def lora_A(self) -> nn.Parameter:  # (rank, fan_in)
        return self.adapter.lora_A

    @property
    def lora_B(self) -> nn.Parameter:  # (out, rank)
        return self.adapter.lora_B

    @property
    def magnitude(self) -> nn.Parameter:  # (out,)
        return self.adapter.magnitude

    @property
    def weight(self) -> torch.Tensor:
        return self.base_layer.weight

    @property
    def bias(self) -> torch.Tensor | None:
        return self.base_layer.bias

    def _base_2d(self) -> torch.Tensor:
        weight = self.base_layer.weight
        return weight.detach().reshape(weight.shape[0], -1).to(self.lora_A.dtype)

    def _row_factor(self) -> tuple[torch.Tensor, torch.Tensor, float]:
        """(m_g / (‖V‖_row + eps), B·A, g·s): what both the forward and the merge need."""
        g_s = self.scaling * self.strength
        delta = self.lora_B @ self.lora_A
        base = self._base_2d()
        norm = torch.linalg.vector_norm(base + g_s * delta, dim=1)  # not detached: underfit
        magnitude = self.magnitude
        if self.strength != 1.0:
            base_norm = torch.linalg.vector_norm(base, dim=1)
            magnitude = base_norm + self.strength * (magnitude - base_norm)
        return magnitude / (norm + DORA_EPS), delta, g_s

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.strength == 0:
            return self.base_layer(x)
        base, weight = self.base_layer, self.base_layer.weight
        result = base(x)  # W·x + b: the big matmul, in the base dtype, as the base computes it
        factor, delta, g_s = self._row_factor()
        dtype = factor.dtype
        if isinstance(base, nn.Linear):
            adapter_out = F.linear(F.linear(x.to(dtype), self.lora_A), self.lora_B)
            channel, bias = factor, base.bias
        else:
            adapter_out = base._conv_forward(x.to(dtype), delta.view(weight.shape), None)
            channel = factor.unsqueeze(-1)  # (out, 1) against (N, out, L) or (out, L)
            bias = None if base.bias is None else base.bias.unsqueeze(-1)
        # factor ⊙ (W·x + g·s·B·A·x) + b, written as a correction to the base output (as PEFT's
        # DoRA does), so that at init (factor exactly 1, B = 0) the output is the base's bit
        # for bit. factor is exactly 1 there when ‖W‖_row ≫ 1e-12 relative to the dtype's
        # precision: true in fp32 and half, not in fp64 (the difference is then ~1e-12/‖W‖).
        full = result.to(dtype)
        plain = full if bias is None else full - bias.to(dtype)  # W·x
        out = full + ((channel - 1) * plain + channel * (g_s * adapter_out))
        return out.to(result.dtype)

    def merged_weight(self) -> torch.Tensor:
        """W' in the adapter dtype, shaped like the base weight (stable-audio-3's dora_forward)."""
        weight = self.base_layer.weight
        if self.strength == 0:
            return weight.detach().to(self.lora_A.dtype)
        factor, delta, g_s = self._row_factor()
        return (factor.unsqueeze(1) * (self._base_2d() + g_s * delta)).view(weight.shape)

    def baked_row_norm(self) -> torch.Tensor:
        """‖W + s·B·A‖_row in fp32 at strength 1, without eps: stable-audio-3's baked_vnorm_row."""
        base = self._base_2d().float()
        return torch.linalg.vector_norm(
            base + self.scaling * (self.lora_B @ self.lora_A).float(), dim=1
        )

    def extra_repr(self) -> str:
        return f"rank={self.rank}, alpha={self.alpha}, strength={self.strength}"


AdapterLayer = DoRARows | peft_lora.LoraLayer


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
    if not isinstance(layer, ADAPTABLE) or isinstance(layer, DoRARows | peft_lora.LoraLayer):
        raise AdapterError(
            f"cannot adapt a {type(layer).__name__}: underfit adapts nn.Linear and nn.Conv1d"
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


def from_base(layer: nn.Module, rank: int, alpha: float, adapter_type: str) -> AdapterLayer:
    """An adapter of `adapter_type` around `layer`, initialised as underfit does (B = 0).

    The base layer is frozen; the adapter's parameters are trainable.
    """
    _check_layer(layer, adapter_type, rank, alpha)
    layer.requires_grad_(False)
    if adapter_type == "dora-rows":
        return DoRARows(layer, rank, alpha)
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
    if isinstance(module, DoRARows):
        return "dora-rows"
    if isinstance(module, peft_lora.LoraLayer) and not module.lora_variant:
        return "lora"
    raise AdapterError(f"{type(module).__name__} is not a tunesmith lora or dora-rows adapter")


def adapter_layers(model: nn.Module) -> dict[str, AdapterLayer]:
    """Every adapter in `model`, by module name, in module order."""
    return {
        name: module
        for name, module in model.named_modules()
        if isinstance(module, DoRARows | peft_lora.LoraLayer)
    }


def attach(
    model: nn.Module, targets: list[str], rank: int, alpha: float, adapter_type: str
) -> dict[str, AdapterLayer]:
    """Freeze `model` and wrap each named layer (module names within `model`) in an adapter.

    Like underfit, the whole model is frozen; only adapter parameters train. Returns the new
    adapters by name, in the order given.
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
        if isinstance(layer, DoRARows | peft_lora.LoraLayer):
            raise AdapterError(f"attach: layer {name!r} already has an adapter")
        try:
            adapter = from_base(layer, rank, alpha, adapter_type)
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
    if isinstance(module, DoRARows):
        return {"lora_A": module.lora_A, "lora_B": module.lora_B, "magnitude": module.magnitude}
    adapter_type_of(module)
    a, b = module.lora_A[PEFT_ADAPTER].weight, module.lora_B[PEFT_ADAPTER].weight
    # PEFT's conv A is (r, in, k) and B (out, r, 1); underfit's are (r, in·k) and (out, r).
    return {"lora_A": a.reshape(a.shape[0], -1), "lora_B": b.reshape(b.shape[0], -1)}


def adapter_state(model: nn.Module, *, baked_norms: bool = False) -> dict[str, torch.Tensor]:
    """`<layer>.parametrizations.weight.0.<lora_A|lora_B|magnitude>` → a detached copy.

    Layer names are module names within `model`; shapes are underfit's: lora_A (rank, fan_in),
    lora_B (out, rank), magnitude (out,). With `baked_norms`, each dora-rows layer also gets
    `baked_vnorm_row` (fp32), which stable-audio-3's `save_lora_safetensors(model=...)` adds
    so a loader can rebuild W' without the base weights.
    """
    state = {}
    for name, module in adapter_layers(model).items():
        for param, tensor in _tensors(module).items():
            state[f"{name}.{PARAM_PREFIX}.{param}"] = tensor.detach().clone()
        if baked_norms and isinstance(module, DoRARows):
            state[f"{name}.{PARAM_PREFIX}.baked_vnorm_row"] = module.baked_row_norm().detach()
    return state


def load_adapter_state(model: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Copy an `adapter_state`-shaped dict into the adapters already attached to `model`.

    Strict: every adapter tensor must be present with underfit's shape, and no key may be left
    over. `baked_vnorm_row` entries of dora-rows layers are accepted and ignored (derived).
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
        f"{name}.{PARAM_PREFIX}.baked_vnorm_row"
        for name, module in layers.items()
        if isinstance(module, DoRARows)
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
    """The trainable adapter parameters, in module order (A, B, magnitude per layer)."""
    params = []
    for module in adapter_layers(model).values():
        if isinstance(module, DoRARows):
            params += [module.lora_A, module.lora_B, module.magnitude]
        else:
            params += [module.lora_A[PEFT_ADAPTER].weight, module.lora_B[PEFT_ADAPTER].weight]
    return params


def set_strength(model: nn.Module, strength: float) -> None:
    """Scale every adapter in `model` (1.0 = as trained, 0.0 = exactly the base model)."""
    for module in adapter_layers(model).values():
        if isinstance(module, DoRARows):
            module.strength = float(strength)
        else:
            module.set_scale(PEFT_ADAPTER, float(strength))  # scaling = strength·alpha/rank


def merged_weight(module: AdapterLayer) -> torch.Tensor:
    """The effective weight W' (adapter dtype, the base weight's shape) at the current strength."""
    if isinstance(module, DoRARows):
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
        base = module.base_layer if isinstance(module, DoRARows) else module.get_base_layer()
        with torch.no_grad():
            base.weight.copy_(merged_weight(module).to(base.weight.dtype))
        _replace(model, name, base)
