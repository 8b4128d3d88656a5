"""The SDXL family's adapter types on the UNet and the text encoders: which layers, how each type
is attached, the names of its factors in each file, and its trained tensors.

The types (`[runs.adapter] type`):

    lora    PEFT's LoRA (`LoraConfig`, A kaiming-uniform, B zero, W·x + (alpha/r)·B·A·x): what
            the family trained before the other types, attached by the same calls, so a run at
            the defaults draws the same numbers
    dora    the same with PEFT's `use_dora`: a magnitude per output row (the norm of W at start)
            over the normalised W + (alpha/r)·B·A (DoRA; PEFT detaches the norm in backward,
            the paper's §4.3)
    locon   LyCORIS's `LoConModule`: LoRA, and on a Conv2d a down conv of the layer's kernel,
            stride and padding and a 1×1 up conv (kohya's LoCon); the same function and init as
            PEFT's LoRA (kaiming-uniform down, zero up), and so the same as lora with
            `conv_dim`, but trained as LyCORIS's kohya network trains it
    lokr    LyCORIS's `LokrModule`: ΔW = (alpha/dim)·kron(w1, w2), w2 split as w2_a·w2_b where
            dim < half its larger side; `factor` as LyCORIS's (-1: the most even split)
    loha    LyCORIS's `LohaModule`: ΔW = (alpha/dim)·(w1_a·w1_b) ⊙ (w2_a·w2_b)

Why LyCORIS's own modules for locon, lokr and loha and not PEFT's LoKr and LoHa, whose
function on a Linear is the same (the same Kronecker and Hadamard products, scaled by
alpha/r): the kohya-layout file of these types *is* the state dict of LyCORIS's modules
(`custom_state_dict`: names, shapes, a conv layer's flattened `w2_b` and `hada_w1_b`), which
LyCORIS's loader rebuilds from the shapes and ComfyUI and A1111 read in that layout; PEFT
splits some sizes the other way round (`tunesmith.adapters.torch_lokr.split_problems`), starts
LoKr with w1 zero and LoHa with another draw than kohya's LyCORIS runs, and gives no reader
here: neither diffusers' SDXL loader nor PEFT-on-diffusers reads an SDXL LoKr or LoHa file.
The ACE-Step LoKr layer (`torch_lokr.LoKrLinear`) adapts Linear layers only; these types
adapt the UNet's convolutions too.

A LyCORIS module trains in its bypass form (`LycorisLayer`: the base layer's output plus the
module's `bypass_forward_diff` of the input), not in LyCORIS's default one, which adds ΔW to
the base weight in the base's dtype: over a half-precision base a small ΔW is rounded away
there (bf16 keeps 8 bits: a ΔW under 1/256 of a weight vanishes), where this form computes the
adapter's part in float32 (its factors' dtype, as PEFT casts the input for LoRA) and adds it to
the base output. The two forms are the same function; the tests load the written files with
LyCORIS's default form and compare.

The layers (kohya sd-scripts' networks/lora.py and LyCORIS's kohya network, whose names the
files carry; `kohya_names.py`):

    UNet      every attention projection `to_q`, `to_k`, `to_v`, `to_out.0` (560 in SDXL base;
              diffusers' train_text_to_image_lora_sdxl.py targets, what the family trained
              before) for every type; with `conv_dim` > 0 also every Conv2d and Linear of the
              ResnetBlock2D, Downsample2D and Upsample2D blocks, as networks/lora.py adds them
              with `conv_dim` (UNET_TARGET_REPLACE_MODULE_CONV2D_3X3): 3×3 convolutions at
              `conv_dim` / `conv_alpha`, 1×1 convolutions (conv_shortcut) and Linear layers
              (time_emb_proj) at `rank` / `alpha`. lora and dora take them through PEFT's conv
              layers (`rank_pattern`, `alpha_pattern`): kohya's LoRA with conv_dim, and LyCORIS's
              DoRA with conv layers, whose magnitude is per output channel as PEFT's
    CLIP-L    with `train_text_encoder`: every Linear of each CLIPAttention and CLIPMLP
    OpenCLIP  (`q_proj`, `k_proj`, `v_proj`, `out_proj`, `fc1`, `fc2`: networks/lora.py's
              TEXT_ENCODER_TARGET_REPLACE_MODULE), each encoder at the run's type and rank

The files (`files.py` writes them):

    PEFT    `<component>.<module>.lora_A.weight` / `.lora_B.weight` (`.lora_magnitude_vector`
            for dora) with a LoraConfig per component: lora, dora and locon, which diffusers'
            `load_lora_weights` reads; a text encoder's modules by the published checkpoint's
            path (`text_encoder.text_model.encoder.layers.0.self_attn.q_proj`), which diffusers
            reads into transformers 5's CLIPTextModel too (it drops `text_model.` there)
    kohya   `lora_unet_<SGM module>`, `lora_te1_…`, `lora_te2_…` stems with each type's tensors:
            `lora_down.weight`, `lora_up.weight`, `alpha` (lora, locon), and `dora_scale` (the
            magnitude as LyCORIS's `dora_wd` keeps it, [out, 1]) for dora; LyCORIS's
            `lokr_w1`, `lokr_w2` or `lokr_w2_a`, `lokr_w2_b`, and `hada_w1_a` … `hada_w2_b`,
            each module's scale folded into its first factor and `alpha` = dim
            (`tunesmith/formats/lycoris.py` says why)

Not handled: Tucker (`use_tucker`), `decompose_both`, rank and module dropout, DoRA on LoKr
and LoHa (`dora_wd` with those algorithms), per-block ranks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from tunesmith.families.sdxl.adapter_spec import (
    PEFT_FILE_TYPES,
    AdapterError,
    AdapterSpec,
)
from tunesmith.families.sdxl.kohya_names import (
    TEXT_ENCODER_TARGETS,
    text_encoder_module,
    text_encoder_name,
    text_encoder_stem,
    unet_module,
    unet_stem,
)
from tunesmith.families.sdxl.sample import Renderer, render_demo
from tunesmith.formats import FormatError, lycoris

UNET_TARGETS = ("to_q", "to_k", "to_v", "to_out.0")  # diffusers' SDXL LoRA script's
CONV_BLOCKS = ("ResnetBlock2D", "Downsample2D", "Upsample2D")  # networks/lora.py's, with conv_dim
TEXT_ENCODERS = ("text_encoder", "text_encoder_2")  # CLIP-L, OpenCLIP-G (bigG)
COMPONENTS = ("unet", *TEXT_ENCODERS)
PEFT_ADAPTER = "default"  # the adapter's name inside PEFT's layers
# Each type's factor that starts at zero (so step 0 is the base model): the first step's check
# wants a gradient on it.
ZERO_FACTORS = {
    "lora": "lora_B",
    "dora": "lora_B",
    "locon": "lora_up.weight",
    "lokr": ("lokr_w2", "lokr_w2_b"),
    "loha": "hada_w2_a",
}


def adapter_dtype(base: torch.dtype) -> torch.dtype:
    """The factors' dtype: float32 over a half-precision base, the base's own otherwise."""
    return torch.promote_types(base, torch.float32)


# -- which layers -----------------------------------------------------------------------------


def unet_targets(unet: nn.Module, spec: AdapterSpec) -> dict[str, tuple[int, float]]:
    """The UNet's adapted layers in module order, each with its (dim, alpha) (module docstring)."""
    targets, ends = {}, tuple(f".{t}" for t in UNET_TARGETS)
    for name, module in unet.named_modules():
        if name.endswith(ends) and isinstance(_base(module), nn.Linear):
            targets[name] = (spec.rank, spec.alpha)
        elif spec.conv_dim > 0 and type(module).__name__ in CONV_BLOCKS:
            found: list[str] = []  # a layer, not the insides of an adapter already on it
            for child, layer in module.named_modules():
                base = _base(layer)
                if not child or any(child.startswith(f"{f}.") for f in found):
                    continue
                if not isinstance(base, nn.Linear | nn.Conv2d):
                    continue
                found.append(child)
                if isinstance(base, nn.Linear) or base.kernel_size == (1, 1):
                    targets[f"{name}.{child}"] = (spec.rank, spec.alpha)
                else:
                    targets[f"{name}.{child}"] = (spec.conv_dim, spec.conv_alpha)
    if not targets:
        raise AdapterError(f"{type(unet).__name__} has no {', '.join(UNET_TARGETS)} layers")
    return targets


def text_encoder_targets(encoder: nn.Module, spec: AdapterSpec) -> dict[str, tuple[int, float]]:
    """A CLIP text encoder's adapted layers (module docstring), in module order."""
    targets = {}
    for name, module in encoder.named_modules():
        last = name.rsplit(".", 1)[-1]
        if isinstance(_base(module), nn.Linear) and last in TEXT_ENCODER_TARGETS:
            text_encoder_name(name)  # a layer kohya could not name is an error here
            targets[name] = (spec.rank, spec.alpha)
    if not targets:
        raise AdapterError(f"{type(encoder).__name__} has no CLIP attention or MLP layers")
    return targets


def _base(module: nn.Module) -> nn.Module:
    """The layer itself, or the one a PEFT layer wraps (an adapter found attached)."""
    return getattr(module, "base_layer", module)


# -- LyCORIS's modules as layers of the model ---------------------------------------------------


class LycorisLayer(nn.Module):
    """A frozen nn.Linear or nn.Conv2d and a LyCORIS module on it, in the bypass form: the base
    layer's output plus g·Δ(x), Δ computed by the module in its factors' dtype (module
    docstring); g is the strength (1: as trained, 0: exactly the base layer)."""

    def __init__(self, base_layer: nn.Module, algo: str, dim: int, alpha: float, factor: int = -1):
        from lycoris.modules.locon import LoConModule
        from lycoris.modules.loha import LohaModule
        from lycoris.modules.lokr import LokrModule

        super().__init__()
        # The base first: diffusers' `ModelMixin.dtype` is the first parameter's dtype.
        self.base_layer = base_layer
        weight = base_layer.weight
        kinds = {"locon": LoConModule, "lokr": LokrModule, "loha": LohaModule}
        extra = {"factor": factor} if algo == "lokr" else {}
        # Made on the CPU in float32 (what a seed draws the same everywhere), then moved.
        with torch.device("cpu"):
            module = kinds[algo]("", base_layer, 1.0, dim, alpha, **extra)
        self.adapter = module.to(weight.device, adapter_dtype(weight.dtype))
        self.algo, self.dim, self.strength = algo, dim, 1.0

    @property
    def weight(self) -> torch.Tensor:
        return self.base_layer.weight

    @property
    def bias(self) -> torch.Tensor | None:
        return self.base_layer.bias

    def factors(self) -> dict[str, nn.Parameter]:
        """The trained tensors by LyCORIS's names (`lokr_w1`, `lora_down.weight`, ...)."""
        return dict(self.adapter.named_parameters())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        result = self.base_layer(x)
        if self.strength == 0:
            return result
        dtype = next(self.adapter.parameters()).dtype
        delta = self.adapter.bypass_forward_diff(x.to(dtype), scale=self.strength)
        return (result + delta).to(result.dtype)  # PEFT's order: the sum, then the base dtype

    def file_tensors(self, dtype: torch.dtype | None = None) -> dict[str, torch.Tensor]:
        """The module's tensors as its file holds them (`lycoris.folded`)."""
        alpha = float(self.adapter.alpha)  # LyCORIS's: = dim where LoKr's factors are both full
        return lycoris.folded(self.factors(), self.algo, alpha, self.dim, dtype)


# -- an attached adapter ------------------------------------------------------------------------


@dataclass
class Layer:
    component: str  # "unet", "text_encoder", "text_encoder_2"
    name: str  # its module path in the component, as the live model names it
    module: nn.Module  # PEFT's LoRA layer, or a LycorisLayer
    dim: int
    alpha: float


class Adapter:
    """An adapter of one type attached to the UNet and, where given, the text encoders.

    `models` maps components ("unet", "text_encoder", "text_encoder_2") to their modules; each
    is frozen and gets its layers (`unet_targets`, `text_encoder_targets`) in that order, the
    initial factors drawn under `seed` (the same every time: a lora UNet draws exactly what the
    family drew before). The factors are float32 over a half-precision model."""

    def __init__(
        self,
        spec: AdapterSpec,
        models: Mapping[str, nn.Module],
        seed: int = 0,
        attached: Mapping[str, object] | None = None,
    ) -> None:
        """`attached`: the LoraConfig per component of PEFT layers already on `models` (lora,
        dora), found and named here; nothing is attached or drawn then."""
        problems = spec.problems()
        if problems:
            raise AdapterError("; ".join(problems))
        unknown = sorted(set(models) - set(COMPONENTS))
        if unknown or "unet" not in models:
            raise AdapterError(f"components {sorted(models)}: the UNet and {TEXT_ENCODERS}")
        self.spec, self.models = spec, dict(models)
        self.configs: dict[str, object] = {}  # PEFT types: the LoraConfig per component
        self.layers: list[Layer] = []
        if attached is not None:
            if not spec.peft:
                raise AdapterError(f"{spec.type}: only PEFT's adapters are found attached")
            for component, model in self.models.items():
                self.configs[component] = attached[component]
                self._collect(component, model, self._targets(component, model))
            return
        for model in self.models.values():
            model.requires_grad_(False)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)  # the initial factors: the same every time
            for component in COMPONENTS:
                if component in self.models:
                    self._attach(component, self.models[component])
        for p in self.parameters():
            p.data = p.data.float()  # the factors (and so their gradients) in float32
            p.requires_grad_(True)
        if spec.type == "dora":
            self._magnitudes_again()

    def _magnitudes_again(self) -> None:
        """PEFT sets DoRA's magnitude to ‖W‖ as it attaches, in the factors' dtype then, the
        base's (bf16 keeps 8 bits of the norm); its forward divides by ‖W‖ in float32, so over a
        half-precision base step 0 would be ~1e-4 off the base model. PEFT's own
        `update_layer` sets it again now that the factors are float32: m/‖W‖ is exactly 1."""
        for layer in self.layers:
            module = layer.module
            module.lora_magnitude_vector[PEFT_ADAPTER].update_layer(
                base_layer=module.get_base_layer(),
                lora_A=module.lora_A[PEFT_ADAPTER].weight,
                lora_B=module.lora_B[PEFT_ADAPTER].weight,
                scaling=module.scaling[PEFT_ADAPTER],
            )

    # -- attaching ----------------------------------------------------------------------------

    def _targets(self, component: str, model: nn.Module) -> dict[str, tuple[int, float]]:
        if component == "unet":
            return unet_targets(model, self.spec)
        return text_encoder_targets(model, self.spec)

    def _collect(self, component: str, model: nn.Module, targets: dict) -> None:
        """The PEFT layers on `model`'s targets, in module order."""
        for name, module in model.named_modules():
            if name in targets and PEFT_ADAPTER in getattr(module, "lora_A", {}):
                self.layers.append(Layer(component, name, module, *targets[name]))
        missing = sorted(set(targets) - {layer.name for layer in self._of(component)})
        if missing:
            raise AdapterError(f"{component}: no PEFT adapter on {', '.join(missing[:3])}")

    def _attach(self, component: str, model: nn.Module) -> None:
        spec = self.spec
        unet = component == "unet"
        targets = self._targets(component, model)
        ends = tuple(f".{t}" for t in (UNET_TARGETS if unet else TEXT_ENCODER_TARGETS))
        if spec.peft:
            from peft import LoraConfig

            names = list(UNET_TARGETS if unet else TEXT_ENCODER_TARGETS)
            convs = {n: dim_alpha for n, dim_alpha in targets.items() if not n.endswith(ends)}
            patterns = {}
            if convs:  # conv_dim: the conv layers by name, theirs rank and alpha where they differ
                names += sorted(convs)
                odd = {
                    n: (d, a) for n, (d, a) in convs.items() if (d, a) != (spec.rank, spec.alpha)
                }
                patterns = {
                    "rank_pattern": {n: d for n, (d, _) in odd.items()},
                    "alpha_pattern": {n: a for n, (_, a) in odd.items()},
                }
            config = LoraConfig(
                r=spec.rank,
                lora_alpha=spec.alpha,
                target_modules=names,
                init_lora_weights=True,  # A: kaiming-uniform, B: zero
                **({"use_dora": True} if spec.type == "dora" else {}),
                **patterns,
            )
            if unet:  # diffusers' own call, as the family made its LoRA before
                model.add_adapter(config, adapter_name=PEFT_ADAPTER)
            else:  # transformers' add_adapter wants a newer PEFT; PEFT's own injection
                from peft import inject_adapter_in_model

                inject_adapter_in_model(config, model, adapter_name=PEFT_ADAPTER)
            self.configs[component] = config
            self._collect(component, model, targets)
            return
        for name, (dim, alpha) in targets.items():
            base = model.get_submodule(name)
            layer = LycorisLayer(base, spec.type, dim, alpha, spec.factor)
            parent, _, child = name.rpartition(".")
            setattr(model.get_submodule(parent) if parent else model, child, layer)
            self.layers.append(Layer(component, name, layer, dim, alpha))

    def _of(self, component: str) -> list[Layer]:
        return [layer for layer in self.layers if layer.component == component]

    # -- the factors ----------------------------------------------------------------------------

    def factors(self, layer: Layer) -> dict[str, nn.Parameter]:
        """One layer's trained tensors by its type's names: PEFT's `lora_A`, `lora_B`
        (`lora_magnitude_vector`) or LyCORIS's."""
        module = layer.module
        if isinstance(module, LycorisLayer):
            return module.factors()
        out = {
            "lora_A": module.lora_A[PEFT_ADAPTER].weight,
            "lora_B": module.lora_B[PEFT_ADAPTER].weight,
        }
        if self.spec.type == "dora":
            out["lora_magnitude_vector"] = module.lora_magnitude_vector[PEFT_ADAPTER].weight
        return out

    def parameters(self) -> list[nn.Parameter]:
        """Every trained tensor, layer by layer in the order attached: the optimizer's input
        and the state's order."""
        return [p for layer in self.layers for p in self.factors(layer).values()]

    def zero_factors(self) -> dict[str, nn.Parameter]:
        """`<component>.<module>` → the factor that starts at zero, per layer."""
        names = ZERO_FACTORS[self.spec.type]
        names = (names,) if isinstance(names, str) else names
        out = {}
        for layer in self.layers:
            factors = self.factors(layer)
            found = next(factors[n] for n in names if n in factors)
            out[f"{layer.component}.{layer.name}"] = found
        return out

    def named_factors(self, component: str = "unet") -> dict[str, tuple[nn.Parameter, ...]]:
        """module → (A, B) of one component's PEFT layers (lora, dora), in module order."""
        if not self.spec.peft:
            raise AdapterError(f"{self.spec.type} has no (A, B) pairs")
        return {
            layer.name: (self.factors(layer)["lora_A"], self.factors(layer)["lora_B"])
            for layer in self._of(component)
        }

    def targets(self) -> list[str]:
        """`<module>` for the UNet's layers, `<component>.<module>` for the text encoders': the
        run's identity (a lora run on the UNet lists its modules as it did)."""
        return [
            layer.name if layer.component == "unet" else f"{layer.component}.{layer.name}"
            for layer in self.layers
        ]

    def set_strength(self, strength: float) -> None:
        """Scale every layer (1: as trained, 0: exactly the base model)."""
        for layer in self.layers:
            if isinstance(layer.module, LycorisLayer):
                layer.module.strength = float(strength)
            else:
                layer.module.set_scale(PEFT_ADAPTER, float(strength))

    # -- the files' names and tensors -------------------------------------------------------

    def file_name(self, layer: Layer) -> str:
        """The layer's module path in a PEFT file: the UNet's own, a text encoder's as the
        published checkpoint spells it."""
        return layer.name if layer.component == "unet" else text_encoder_name(layer.name)

    def kohya_stem(self, layer: Layer) -> str:
        if layer.component == "unet":
            return unet_stem(layer.name, self.models["unet"].config)
        return text_encoder_stem(layer.component, layer.name)

    def peft_tensors(self) -> dict[str, torch.Tensor]:
        """`<component>.<module>.lora_A.weight` [r, in(, k, k)], `.lora_B.weight`
        [out, r(, 1, 1)] (and the magnitude [out]) float32, as diffusers' `save_lora_weights`
        names PEFT's state: lora, dora, locon."""
        if self.spec.type not in PEFT_FILE_TYPES:
            raise AdapterError(f"diffusers reads no {self.spec.type} file for SDXL")
        out = {}
        for layer in self.layers:
            stem = f"{layer.component}.{self.file_name(layer)}"
            if isinstance(layer.module, LycorisLayer):  # LoCon: LyCORIS's down and up
                factors = layer.module.factors()
                a, b = factors["lora_down.weight"], factors["lora_up.weight"]
                named = {"lora_A.weight": a, "lora_B.weight": b}
            else:
                factors = self.factors(layer)
                named = {"lora_A.weight": factors["lora_A"], "lora_B.weight": factors["lora_B"]}
                if "lora_magnitude_vector" in factors:
                    # PEFT (the UNet's loader) reads the magnitude as `lora_magnitude_vector`;
                    # transformers' load_adapter, which diffusers loads text encoders with, as
                    # `lora_magnitude_vector.weight` (it puts the adapter's name before a last
                    # `.weight`, and the bare name loads nothing there)
                    key = "lora_magnitude_vector" + ("" if layer.component == "unet" else ".weight")
                    named[key] = factors["lora_magnitude_vector"]
            for suffix, value in named.items():
                out[f"{stem}.{suffix}"] = value.detach().float().cpu().contiguous()
        return out

    def peft_configs(self):
        """{component: LoraConfig} for the PEFT file: the config each component was attached
        with (lora, dora); for locon one that names every layer, with the conv layers' rank and
        alpha as patterns where they differ."""
        from peft import LoraConfig

        if self.spec.peft:
            return dict(self.configs)
        if self.spec.type != "locon":
            raise AdapterError(f"diffusers reads no {self.spec.type} file for SDXL")
        configs = {}
        for component in self.models:
            layers = self._of(component)
            odd = [(x.name, x.dim, x.alpha) for x in layers if x.dim != self.spec.rank]
            # the UNet's layers by name; a text encoder's by their last name (the module paths
            # differ between transformers' CLIP classes, the names do not)
            names = [x.name for x in layers] if component == "unet" else TEXT_ENCODER_TARGETS
            configs[component] = LoraConfig(
                r=self.spec.rank,
                lora_alpha=self.spec.alpha,
                target_modules=sorted(names),
                rank_pattern={name: dim for name, dim, _ in odd},
                alpha_pattern={name: alpha for name, _, alpha in odd},
                init_lora_weights=True,
            )
        return configs

    def kohya_tensors(self) -> dict[str, torch.Tensor]:
        """`<stem>.<tensor>` float32 as kohya's and LyCORIS's networks write each type (module
        docstring; `tunesmith/formats/kohya.py` has the layouts)."""
        out = {}
        for layer in self.layers:
            stem = self.kohya_stem(layer)
            if isinstance(layer.module, LycorisLayer):
                named = layer.module.file_tensors()
            else:
                factors = self.factors(layer)
                named = {
                    "lora_down.weight": factors["lora_A"],
                    "lora_up.weight": factors["lora_B"],
                    "alpha": torch.tensor(layer.alpha, dtype=torch.float32),
                }
                if "lora_magnitude_vector" in factors:
                    magnitude = factors["lora_magnitude_vector"]
                    rows = layer.module.get_base_layer().weight.dim() - 1
                    # LyCORIS's [out, 1] ([out, 1, 1, 1] on a conv); PEFT's is [out] ([1, out,
                    # 1, 1]): the same norms per output, in order
                    named["dora_scale"] = magnitude.reshape(-1, *[1] * rows)
            for suffix, value in named.items():
                out[f"{stem}.{suffix}"] = value.detach().float().cpu().contiguous()
        return out


# -- reading a kohya-layout LyCORIS file back onto a pipeline -----------------------------------


class LycorisFile:
    """A kohya-layout file of any type, its modules rebuilt by LyCORIS's own loader
    (`lycoris.modules.get_module`, `make_module`: what `create_lycoris_from_weights` does per
    module) on the pipeline's UNet and text encoders, and hooked in as LyCORIS does
    (`apply_to`); `set_strength` is LyCORIS's multiplier (0: the base model exactly).

    Each stem is found by its kohya name (`kohya_names`), so the file's SGM names land on
    diffusers' modules; a key of no module is an error naming the file."""

    def __init__(self, path: Path, pipe) -> None:
        from lycoris.modules import get_module, make_module
        from safetensors.torch import load_file

        path = Path(path)
        tensors = load_file(path)
        stems = sorted({key.split(".", 1)[0] for key in tensors})
        self.modules = []
        for stem in stems:
            try:
                model, name = self._locate(pipe, stem)
            except (ValueError, AttributeError) as exc:
                raise FormatError(f"{path}: {stem}: {exc}") from None
            algo, params = get_module(tensors, stem)
            if algo is None:
                raise FormatError(f"{path}: {stem} holds no tensors LyCORIS recognises")
            base = model.get_submodule(name)
            weight = base.weight
            with torch.random.fork_rng(devices=[]):  # its init draws are overwritten
                module = make_module(algo, params, stem, base)
            module.to(weight.device, adapter_dtype(weight.dtype))
            module.apply_to()
            self.modules.append(module)

    @staticmethod
    def _locate(pipe, stem: str) -> tuple[nn.Module, str]:
        if stem.startswith("lora_unet_"):
            return pipe.unet, unet_module(stem, pipe.unet.config)
        component, name = text_encoder_module(stem)
        encoder = getattr(pipe, component)
        if not hasattr(encoder, "text_model"):  # transformers 5's CLIPTextModel
            name = name.removeprefix("text_model.")
        return encoder, name

    def set_strength(self, strength: float) -> None:
        for module in self.modules:
            module.multiplier = float(strength)

    def restore(self) -> None:
        for module in reversed(self.modules):
            module.restore()


class LycorisRenderer(Renderer):
    """The renders of a lokr or loha run: the pipeline a user calls (`sample.Renderer`) with the
    kohya-layout file loaded by LyCORIS (`LycorisFile`), as kohya's and LyCORIS's users load
    one; its strength is LyCORIS's multiplier, and at 0 the render is the base model's."""

    def __init__(self, base_model: Path, placement, size: int, adapter: Path | None = None):
        super().__init__(base_model, placement, size, None)
        self.adapter = adapter
        self.loaded = LycorisFile(adapter, self.pipe) if adapter is not None else None

    def render(self, demo, strength: float):
        if self.loaded is None:
            return super().render(demo, strength)
        self.loaded.set_strength(strength)
        return render_demo(self.pipe, demo, self.size)


class DoraRenderer(Renderer):
    """The renders of a dora run: `sample.Renderer`, but at strength 0 with the adapter switched
    off (`disable_lora`). PEFT's DoRA at scale 0 still multiplies each row by its trained
    magnitude over ‖W‖ (its forward keeps `magnitude / ‖W + 0·BA‖`), 7 % off the base model's
    UNet output on the tiny model, where the renders' base picture must be the base model's bit
    for bit (every run's strength-0 render is cached as the one base picture). Other strengths
    are diffusers' `set_adapters`, PEFT's scale."""

    def render(self, demo, strength: float):
        if self.adapter is None or strength != 0:
            return super().render(demo, strength)
        self.pipe.disable_lora()
        try:
            return render_demo(self.pipe, demo, self.size)
        finally:
            self.pipe.enable_lora()


def layer_count(model: nn.Module) -> int:
    """Layers of `model` carrying an adapter: PEFT's LoRA layers and LycorisLayers."""
    from peft.tuners.lora import LoraLayer

    return sum(isinstance(m, LoraLayer | LycorisLayer) for m in model.modules())
