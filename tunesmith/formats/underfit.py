"""underfit's adapter checkpoint: one `.safetensors` file, written, read and validated, for all
of underfit's adapter types; and what stable-audio-3's loader computes from such a file.

One file on purpose (longer than most): writing, reading and validating share the key grammar,
the per-type tensor sets and the row-order hook below, and a reader that drifted from the
writer would load a file wrongly without an error; keeping them side by side keeps them one
contract.

The format, from stable-audio-3 `models/lora/utils.py` (`get_lora_state_dict`,
`save_lora_safetensors`, `prepare_dora_state_dict`, `resolve_adapter_type`), underfit
`training/lora.py` (`save_lora_step`), `training/loop.py` (`_ckpt_filename`, the run label) and
`utils/lora_validate.py`:

- keys `<layer>.parametrizations.weight.0.<param>`, the layer named as in the reference
  checkpoint under two roots: `model.` (the DiT) and `conditioners.` (the conditioner); the
  params per adapter type are `TYPE_PARAMS` (the trained tensors: lora_A, lora_B, M_xs,
  magnitude, magnitude_r, magnitude_c; an -xs type's fixed bases U, V are never saved, a loader
  recomputes them from the base weight);
- tensors in fp16, except `baked_vnorm_row` (dora-rows and dora-rows-xs only, optional: the
  layer's ‖W + s·delta‖_row at strength 1), kept in fp32; a `magnitude` may be 2-D in old files
  ((out, 1) or (1, in)) and is squeezed on reading, as `prepare_dora_state_dict` does;
- metadata `lora_config`, a JSON object: rank, alpha, adapter_type, include, exclude, then step,
  epoch, base_model (and baked_norms, norm_base when norms are baked); the legacy type "dora"
  reads as dora-cols when its first magnitude is (1, in), else as dora-rows;
- the file name `{run}-step={step}-epoch={epoch}.safetensors`, the run name less a trailing
  `-YYYYMMDDhhmmss`.

The layer names in memory are diffusers' and the rows of some fused weights are in another
order; the family passes the translation (`to_checkpoint_name`, `to_diffusers_name`: Stable
Audio 3's `names.py`) and an optional `permute_rows(checkpoint_layer_name, tensor, direction)`
hook, called on every row-indexed tensor of the file's type (`ROW_PARAMS`: one entry per output
row of the weight) and returning it in the other order.

`effective_weights` is stable-audio-3's loader (`models/lora/model.py`, `LoRAParametrization`)
read as a formula: from a file and the base weights it gives each adapted layer's weight,
computed here from the file alone, apart from tunesmith's own adapter modules.

Only `.safetensors` is ever opened; nothing here unpickles. Where stricter than underfit's
validator, on purpose (each is a file that would load wrongly or not at all): unknown keys,
keys that contradict `adapter_type`, incomplete layers, a rank that disagrees with the tensor
shapes and magnitudes of the wrong length are errors, not notes. Not handled: stacked adapters
(index > 0).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from safetensors import safe_open
from safetensors.torch import load_file

from tunesmith.formats import FormatError
from tunesmith.store.tensors import write_safetensors

Direction = Literal["to_checkpoint", "to_diffusers"]
PermuteRows = Callable[[str, torch.Tensor, Direction], torch.Tensor]

ROOTS = ("model.", "conditioners.")  # get_lora_state_dict(model.model) / (model.conditioner)
BAKED_NORM = "baked_vnorm_row"
# Every underfit adapter type and the tensors its file holds per layer (stable-audio-3
# utils.py `_get_adapter_param_names`); "dora" is the legacy name of dora-rows/-cols.
TYPE_PARAMS = {
    "lora": {"lora_A", "lora_B"},
    "dora": {"lora_A", "lora_B", "magnitude"},
    "dora-rows": {"lora_A", "lora_B", "magnitude"},
    "dora-cols": {"lora_A", "lora_B", "magnitude"},
    "bora": {"lora_A", "lora_B", "magnitude_r", "magnitude_c"},
    "lora-xs": {"M_xs"},
    "dora-rows-xs": {"M_xs", "magnitude"},
    "dora-cols-xs": {"M_xs", "magnitude"},
    "bora-xs": {"M_xs", "magnitude_r", "magnitude_c"},
}
SUPPORTED_TYPES = tuple(t for t in TYPE_PARAMS if t != "dora")  # written and read by tunesmith
# The tensors with one entry per output row of the weight (stable-audio-3 model.py), which
# follow a reordering of the weight's rows: P·W' needs P·B, P·magnitude (a row norm moves with
# its row), P·U and P·baked norm. Every other tensor stays: lora_A and V act on the input side,
# dora-cols' magnitude and magnitude_c are per input column (‖P·V‖_col = ‖V‖_col), and M_xs is
# unchanged because the U of P·W is P·U with the same signs (the largest entry of a column
# moves with it). U is never in a file; it is listed for the families' converters.
ROW_PARAMS = {
    "lora": {"lora_B"},
    "dora-rows": {"lora_B", "magnitude", BAKED_NORM},
    "dora-cols": {"lora_B"},
    "bora": {"lora_B", "magnitude_r"},
    "lora-xs": {"U"},
    "dora-rows-xs": {"U", "magnitude", BAKED_NORM},
    "dora-cols-xs": {"U"},
    "bora-xs": {"U", "magnitude_r"},
}
_BAKED_TYPES = ("dora-rows", "dora-rows-xs")  # row norms are baked for these only (utils.py)
_VECTORS = ("magnitude", "magnitude_r", "magnitude_c", BAKED_NORM)  # one entry per row or column
_KEY = re.compile(r"^(?P<layer>.+)\.parametrizations\.weight\.(?P<index>\d+)\.(?P<param>\w+)$")
# underfit lora_validate.py: what counts as a parametrization key, and the fingerprints, in order.
_LORA_KEY = re.compile(
    r"\.parametrizations\.weight\.\d+\.(lora_A|lora_B|magnitude|magnitude_r|magnitude_c|M_xs|U|V)$"
)
_FINGERPRINTS = (
    ("lora-xs", {"M_xs"}, {"magnitude", "magnitude_r", "magnitude_c"}),
    ("bora", {"magnitude_r", "magnitude_c"}, set()),
    ("dora-rows", {"magnitude"}, {"magnitude_r", "magnitude_c"}),
    ("lora", {"lora_A", "lora_B"}, set()),
)
_RUN_TIMESTAMP = re.compile(r"-\d{14}$")
EPS = 1e-12  # stable-audio-3's DoRA/BoRA norm epsilon


class AdapterFileError(FormatError):
    """A file that breaks one rule of the format; the message names the file and the rule."""

    def __init__(self, path: str | os.PathLike, rule: str, detail: str) -> None:
        super().__init__(f"{path}: {rule}: {detail}")
        self.path, self.rule = Path(path), rule


@dataclass(frozen=True)
class AdapterConfig:
    """The `lora_config` metadata. Empty include/exclude mean "no filter"."""

    rank: int
    alpha: float
    adapter_type: str
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    step: int | None = None
    epoch: int | None = None
    base_model: str | None = None

    def to_json(self, baked_norms: int = 0) -> str:
        """underfit's key order. An empty include is written `null`, never `[]`: stable-audio-3's
        `add_lora` reads `include=[]` as "adapt nothing" (and `load_and_apply_loras` passes it)."""
        config: dict[str, Any] = {
            "rank": self.rank,
            "alpha": int(self.alpha) if float(self.alpha).is_integer() else self.alpha,
            "adapter_type": self.adapter_type,
            "include": list(self.include) or None,
            "exclude": list(self.exclude) or None,
        }
        for key in ("step", "epoch", "base_model"):
            if getattr(self, key) is not None:
                config[key] = getattr(self, key)
        if baked_norms:
            config["baked_norms"] = baked_norms
            if self.base_model:
                config["norm_base"] = self.base_model
        return json.dumps(config)


@dataclass(frozen=True)
class AdapterInfo:
    """What `validate_file` learned from a file's header (no tensor data is read)."""

    path: Path
    config: AdapterConfig  # adapter_type resolved ("dora" → dora-rows / dora-cols)
    inferred_adapter_type: str  # from the key names, underfit's fingerprints
    lora_config: dict[str, Any]  # as stored, with underfit's back-fill (alpha, include, ...)
    metadata: dict[str, str] = field(default_factory=dict)  # every other metadata entry
    keys: tuple[str, ...] = ()


def checkpoint_filename(run: str, step: int, epoch: int) -> str:
    """`{run}-step={step}-epoch={epoch}.safetensors`, underfit's name (loop.py)."""
    if "/" in run or os.sep in run:
        raise ValueError(f"run name {run!r} must not contain a path separator")
    label = _RUN_TIMESTAMP.sub("", run)
    name = f"step={int(step)}-epoch={int(epoch)}.safetensors"
    return f"{label}-{name}" if label else name


def parse_checkpoint_filename(name: str | os.PathLike) -> tuple[int | None, int | None]:
    """(step, epoch) from a file name's `step=` / `epoch=` tokens, None where absent."""
    base = os.path.basename(name)
    step, epoch = re.search(r"step=(\d+)", base), re.search(r"epoch=(\d+)", base)
    return (int(step.group(1)) if step else None, int(epoch.group(1)) if epoch else None)


def infer_adapter_type(keys: list[str] | tuple[str, ...]) -> str | None:
    """underfit's fingerprint of the key names; dora-cols and *-xs variants read as their class."""
    suffixes = {m.group(1) for k in keys if (m := _LORA_KEY.search(k))}
    for name, must, must_not in _FINGERPRINTS:
        if must <= suffixes and not must_not & suffixes:
            return name
    return None


def fingerprint_of(adapter_type: str) -> str | None:
    """The type underfit's validator infers from a file of `adapter_type` (e.g. dora-cols-xs →
    dora-rows)."""
    return infer_adapter_type(
        [f"x.parametrizations.weight.0.{p}" for p in TYPE_PARAMS[adapter_type]]
    )


# --- writing ---------------------------------------------------------------------------------


def write_adapter_file(
    path: str | os.PathLike,
    state: Mapping[str, torch.Tensor],
    config: AdapterConfig,
    *,
    to_checkpoint_name: Callable[[str], str],
    permute_rows: PermuteRows | None = None,
    extra_metadata: Mapping[str, str] | None = None,
) -> Path:
    """Write `state` as an underfit file of `config.adapter_type`; returns the path.

    `state` has keys `<diffusers layer>.parametrizations.weight.0.<param>` with exactly the
    type's params (`TYPE_PARAMS`, plus an optional `baked_vnorm_row` for dora-rows and
    dora-rows-xs), magnitudes 1-D. Atomic: a temporary name in the same folder, then a rename.
    """
    path = Path(path)
    if path.suffix != ".safetensors":
        raise AdapterFileError(path, "file name", "an underfit adapter file ends in .safetensors")
    adapter_type = config.adapter_type
    if adapter_type not in SUPPORTED_TYPES:
        raise AdapterFileError(
            path, "lora_config.adapter_type", f"{adapter_type!r} is not one of {SUPPORTED_TYPES}"
        )
    if isinstance(config.rank, bool) or not isinstance(config.rank, int) or config.rank < 1:
        raise AdapterFileError(path, "lora_config.rank", f"an integer ≥ 1, got {config.rank!r}")
    metadata = dict(extra_metadata or {})
    if "lora_config" in metadata:
        raise AdapterFileError(path, "metadata", "'lora_config' is written from `config`")
    for key, value in metadata.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise AdapterFileError(path, "metadata", f"{key!r}: keys and values must be strings")

    allowed = TYPE_PARAMS[adapter_type] | ({BAKED_NORM} if adapter_type in _BAKED_TYPES else set())
    layers: dict[str, dict[str, torch.Tensor]] = {}
    sources: dict[tuple[str, str], str] = {}  # (checkpoint layer, param) → the state's key
    for key, value in state.items():
        layer, param = _split_key(path, key, allowed, adapter_type)
        name = to_checkpoint_name(layer)
        if not name.startswith(ROOTS):
            raise AdapterFileError(
                path, "key roots", f"{layer!r} became {name!r}, outside the roots {ROOTS}"
            )
        if (name, param) in sources:
            raise AdapterFileError(
                path, "unique keys", f"two layers map to {name}.parametrizations.weight.0.{param}"
            )
        sources[name, param] = key
        layers.setdefault(name, {})[param] = value.detach().cpu()
    if not layers:
        raise AdapterFileError(path, "at least one parametrization key", "the state is empty")
    _check_layers(path, layers, adapter_type, config.rank, written=True)

    rows = ROW_PARAMS[adapter_type]
    tensors: dict[str, torch.Tensor] = {}
    for name, params in layers.items():
        for param, tensor in params.items():
            if permute_rows is not None and param in rows:
                tensor = _permuted(path, permute_rows, name, param, tensor, "to_checkpoint")
            dtype = torch.float32 if param == BAKED_NORM else torch.float16
            tensor = tensor.to(dtype=dtype, copy=True).contiguous()
            if not torch.isfinite(tensor).all():
                raise AdapterFileError(
                    path,
                    "finite values",
                    f"{sources[name, param]} has NaN or inf values in {dtype} (not written)",
                )
            tensors[f"{name}.parametrizations.weight.0.{param}"] = tensor
    baked = sum(BAKED_NORM in params for params in layers.values())
    metadata["lora_config"] = config.to_json(baked_norms=baked)
    return write_safetensors(path, tensors, metadata)


def _split_key(path: Path, key: str, allowed: set[str], adapter_type: str) -> tuple[str, str]:
    match = _KEY.match(key)
    if match is None or match["param"] not in allowed:
        why = (
            "; U and V are not saved (a loader recomputes them from the base weight)"
            if match is not None and match["param"] in ("U", "V")
            else ""
        )
        raise AdapterFileError(
            path,
            "key names",
            f"{key!r} is not <layer>.parametrizations.weight.0.<param> with param in "
            f"{sorted(allowed)} ({adapter_type}){why}",
        )
    if match["index"] != "0":
        raise AdapterFileError(
            path, "key names", f"{key!r}: stacked adapters (index > 0) are not supported"
        )
    return match["layer"], match["param"]


def _permuted(
    path: Path, permute: PermuteRows, name: str, param: str, tensor: torch.Tensor, way: Direction
) -> torch.Tensor:
    out = permute(name, tensor, way)
    if tuple(out.shape) != tuple(tensor.shape):
        raise AdapterFileError(
            path,
            "row permutation",
            f"{name}.{param}: the hook changed the shape {tuple(tensor.shape)}",
        )
    return out


def _vector_length(shape: list[int], param: str, written: bool) -> int | None:
    """The entries of a magnitude or norm vector: [n], or for an old file's `magnitude` (and a
    norm) [n, 1] or [1, n], which the loader squeezes; None for any other shape."""
    if len(shape) == 1:
        return shape[0]
    if not written and param in ("magnitude", BAKED_NORM) and len(shape) == 2 and 1 in shape:
        return shape[1] if shape[0] == 1 else shape[0]
    return None


def _check_layers(
    path: Path,
    layers: Mapping[str, Mapping[str, Any]],
    adapter_type: str,
    rank: int,
    written: bool = False,
) -> None:
    """Each layer has its type's full set of tensors, with shapes that agree with the rank and
    with each other: lora_A [rank, in], lora_B [out, rank], M_xs [rank, rank], each magnitude
    one entry per row (out) or per column (in) as the type says, a baked norm one per row.

    Values are tensors or header shapes (lists); only their shapes are read. `written`: the
    writer's input, whose vectors must be 1-D (underfit writes them so).
    """
    needed = TYPE_PARAMS[adapter_type]
    rows_of = ROW_PARAMS[adapter_type]
    for name, params in layers.items():
        missing = needed - set(params)
        if missing:
            raise AdapterFileError(
                path, "complete layers", f"{name} lacks {sorted(missing)} ({adapter_type})"
            )
        shapes = {p: list(getattr(v, "shape", v)) for p, v in params.items()}
        a, b = shapes.get("lora_A"), shapes.get("lora_B")
        if (
            a is not None
            and b is not None
            and (len(a) != 2 or len(b) != 2 or a[0] != rank or b[1] != rank)
        ):
            raise AdapterFileError(
                path,
                "rank matches tensor shapes",
                f"{name}: lora_A {a} and lora_B {b} do not fit rank {rank} "
                f"(lora_A is [rank, in], lora_B [out, rank])",
            )
        if "M_xs" in shapes and shapes["M_xs"] != [rank, rank]:
            raise AdapterFileError(
                path,
                "rank matches tensor shapes",
                f"{name}: M_xs {shapes['M_xs']} is not [rank, rank] = [{rank}, {rank}]",
            )
        # Every source of the weight's row count (out) and column count (in) must agree.
        seen: dict[str, tuple[str, int]] = {}
        if b is not None:
            seen["rows"] = ("lora_B", b[0])
        if a is not None:
            seen["columns"] = ("lora_A", a[1])
        for param in _VECTORS:
            if param not in shapes:
                continue
            length = _vector_length(shapes[param], param, written)
            if length is None:
                raise AdapterFileError(
                    path,
                    "magnitudes are vectors",
                    f"{name}: {param} has shape {shapes[param]}, not [n]"
                    + ("" if written else " (or [n, 1] / [1, n] for magnitude)"),
                )
            axis = "rows" if param in rows_of else "columns"
            other, expected = seen.setdefault(axis, (param, length))
            if length != expected:
                raise AdapterFileError(
                    path,
                    "one magnitude entry per row or column",
                    f"{name}: {param} {shapes[param]} has {length} entries but {other} "
                    f"{shapes[other]} gives {expected} {axis} ({adapter_type}'s {param} has one "
                    f"entry per {axis[:-1]} of the weight)",
                )


# --- reading and validating ------------------------------------------------------------------


def validate_file(path: str | os.PathLike) -> AdapterInfo:
    """underfit's validation contract (lora_validate.py), from the header alone.

    Rules, in order: `.safetensors` only (other files are refused unopened); a readable
    safetensors header; at least one parametrization key; `lora_config` metadata, a JSON object
    with `rank` and `adapter_type` (underfit's back-fill: alpha := the stored rank, missing
    include/exclude := [], a rank ≤ 0 := the first lora_A's or M_xs' first dimension); the
    adapter type inferable from the key names; then tunesmith's: no unknown keys, keys and
    shapes that agree with `adapter_type` and `rank`.
    """
    path = Path(path)
    if path.suffix.lower() != ".safetensors":
        raise AdapterFileError(
            path,
            "only .safetensors is accepted",
            f"got {path.suffix or 'no suffix'!r}; .pt/.ckpt/.bin files are pickles and are "
            f"never opened (convert them with the tool that made them)",
        )
    if not path.is_file():
        raise AdapterFileError(path, "file exists", "no such file")
    try:
        with safe_open(str(path), framework="pt", device="cpu") as f:
            keys = list(f.keys())
            metadata = dict(f.metadata() or {})
            shapes = {k: list(f.get_slice(k).get_shape()) for k in keys}
    except Exception as e:  # safetensors raises its own error types for a bad header
        raise AdapterFileError(
            path, "a readable safetensors file", f"{type(e).__name__}: {e}"
        ) from e

    if not any(_LORA_KEY.search(k) for k in keys):
        raise AdapterFileError(
            path,
            "at least one parametrization key",
            f"none of its {len(keys)} keys ends in '.parametrizations.weight.<N>.lora_A' (or "
            f"lora_B, magnitude, …): a base model or VAE file, not an adapter"
            + (f"; first keys: {keys[:3]}" if keys else ""),
        )
    raw = metadata.pop("lora_config", None)
    if raw is None:
        raise AdapterFileError(path, "lora_config metadata", "missing (rank/alpha unknowable)")
    try:
        lora_config = json.loads(raw)
    except json.JSONDecodeError as e:
        raise AdapterFileError(path, "lora_config metadata", f"not valid JSON: {e}") from e
    if not isinstance(lora_config, dict):
        raise AdapterFileError(
            path, "lora_config metadata", f"a JSON object, got {type(lora_config).__name__}"
        )
    config = _parse_config(path, lora_config, shapes)

    inferred = infer_adapter_type(keys)
    if inferred is None:
        raise AdapterFileError(
            path,
            "adapter type inferable from key names",
            f"the tensor names ({sorted({k.rsplit('.', 1)[-1] for k in keys})}) fit no "
            f"underfit adapter type",
        )
    layers: dict[str, dict[str, list[int]]] = {}
    known = set().union(*TYPE_PARAMS.values(), {"U", "V", BAKED_NORM})
    for key in keys:
        match = _KEY.match(key)
        if match is None or match["param"] not in known:
            raise AdapterFileError(
                path, "no unknown keys", f"{key!r} is not an adapter tensor of any underfit type"
            )
        layer = f"{match['layer']}.parametrizations.weight.{match['index']}"
        layers.setdefault(layer, {})[match["param"]] = shapes[key]
    adapter_type = config.adapter_type
    expected = fingerprint_of(adapter_type)
    params_seen = {p for params in layers.values() for p in params} - {"U", "V", BAKED_NORM}
    if inferred != expected or not params_seen <= TYPE_PARAMS[adapter_type]:
        raise AdapterFileError(
            path,
            "keys match lora_config.adapter_type",
            f"keys look like {inferred!r} ({sorted(params_seen)}) but lora_config says "
            f"{adapter_type!r} ({sorted(TYPE_PARAMS[adapter_type])})",
        )
    extra = {p for params in layers.values() for p in params} & {"U", "V", BAKED_NORM}
    if BAKED_NORM in extra and adapter_type not in _BAKED_TYPES:
        raise AdapterFileError(
            path,
            "keys match lora_config.adapter_type",
            f"{BAKED_NORM} tensors belong to {_BAKED_TYPES}, not {adapter_type!r}",
        )
    if extra & {"U", "V"} and not adapter_type.endswith("-xs"):
        raise AdapterFileError(
            path,
            "keys match lora_config.adapter_type",
            f"U and V are the bases of an -xs type, not of {adapter_type!r}",
        )
    _check_layers(path, layers, adapter_type, config.rank)
    return AdapterInfo(path, config, inferred, lora_config, metadata, tuple(keys))


def _parse_config(
    path: Path, lora_config: dict[str, Any], shapes: dict[str, list[int]]
) -> AdapterConfig:
    for required in ("rank", "adapter_type"):
        if required not in lora_config:
            raise AdapterFileError(path, f"lora_config.{required}", "missing (required)")
    rank = lora_config["rank"]
    if isinstance(rank, bool) or not isinstance(rank, int):
        raise AdapterFileError(path, "lora_config.rank", f"an integer ≥ 1, got {rank!r}")
    # underfit's back-fill, in its order: alpha from the stored rank, include/exclude where
    # missing, then a rank ≤ 0 recovered from the first lora_A or M_xs ([rank, ...]); so such a
    # file without alpha reads with alpha ≤ 0, as underfit seeds a run from it.
    lora_config.setdefault("alpha", rank)
    lora_config.setdefault("include", [])
    lora_config.setdefault("exclude", [])
    if rank <= 0:
        sample = next((s for k, s in shapes.items() if k.endswith(("lora_A", "M_xs"))), None)
        if sample is not None and len(sample) >= 2 and sample[0] > 0:
            lora_config["rank"] = rank = sample[0]
    if rank < 1:
        raise AdapterFileError(
            path, "lora_config.rank", f"an integer ≥ 1 (nor one in lora_A/M_xs), got {rank!r}"
        )
    alpha = lora_config["alpha"]
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not math.isfinite(alpha):
        raise AdapterFileError(path, "lora_config.alpha", f"a finite number, got {alpha!r}")
    for key in ("include", "exclude"):  # null, as stable-audio-3 writes "unset", is no filter
        value = lora_config[key]
        if value is not None and (
            not isinstance(value, list) or not all(isinstance(p, str) for p in value)
        ):
            raise AdapterFileError(path, f"lora_config.{key}", f"a list of strings, got {value!r}")
    for key in ("step", "epoch"):
        value = lora_config.get(key)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 0
        ):
            raise AdapterFileError(path, f"lora_config.{key}", f"an integer ≥ 0, got {value!r}")
    base_model = lora_config.get("base_model")
    if base_model is not None and not isinstance(base_model, str):
        raise AdapterFileError(path, "lora_config.base_model", f"a string, got {base_model!r}")
    adapter_type = lora_config["adapter_type"]
    if adapter_type not in TYPE_PARAMS:
        raise AdapterFileError(
            path,
            "lora_config.adapter_type",
            f"{adapter_type!r} is not one of {sorted(TYPE_PARAMS)}",
        )
    if adapter_type == "dora":  # stable-audio-3 resolve_adapter_type / detect_dora_variant
        magnitudes = [s for k, s in shapes.items() if k.endswith(".magnitude")]
        cols = magnitudes and len(magnitudes[0]) == 2 and magnitudes[0][0] == 1
        adapter_type = "dora-cols" if cols else "dora-rows"
    return AdapterConfig(
        rank=rank,
        alpha=alpha,
        adapter_type=adapter_type,
        include=tuple(lora_config["include"] or ()),
        exclude=tuple(lora_config["exclude"] or ()),
        step=lora_config.get("step"),
        epoch=lora_config.get("epoch"),
        base_model=base_model,
    )


def read_adapter_file(
    path: str | os.PathLike,
    *,
    to_diffusers_name: Callable[[str], str],
    permute_rows: PermuteRows | None = None,
) -> tuple[dict[str, torch.Tensor], AdapterInfo]:
    """Validate, then load a file of any underfit type as (state, info).

    `state` has the writer's keys (diffusers names, rows in diffusers' order) and the tensors
    as stored (fp16; baked norms fp32), a 2-D `magnitude` squeezed to 1-D.
    """
    info = validate_file(path)
    adapter_type = info.config.adapter_type
    allowed = TYPE_PARAMS[adapter_type] | ({BAKED_NORM} if adapter_type in _BAKED_TYPES else set())
    rows = ROW_PARAMS[adapter_type]
    state: dict[str, torch.Tensor] = {}
    for key, tensor in load_file(str(info.path)).items():
        name, param = _split_key(info.path, key, allowed, adapter_type)
        if param == "magnitude" and tensor.dim() == 2:  # (out, 1) or (1, in): checked above
            tensor = tensor.reshape(-1)
        if permute_rows is not None and param in rows:
            tensor = _permuted(info.path, permute_rows, name, param, tensor, "to_diffusers")
        out_key = f"{to_diffusers_name(name)}.parametrizations.weight.0.{param}"
        if out_key in state:
            raise AdapterFileError(info.path, "unique keys", f"two layers map to {out_key!r}")
        state[out_key] = tensor
    return state, info


# --- what stable-audio-3's loader computes ---------------------------------------------------


def effective_weights(
    path: str | os.PathLike, base_weights: Mapping[str, torch.Tensor], strength: float = 1.0
) -> dict[str, torch.Tensor]:
    """What stable-audio-3's loader computes: each adapted layer's weight W' with the file's
    adapter at `strength` g, keyed by the file's layer name.

    `base_weights` holds the base model's weights under the file's names and row order
    (`<layer>.weight`, e.g. `model.transformer.layers.0.self_attn.to_qkv.weight`). With W0 the
    weight viewed as (out, in) in fp32 (a Conv1d's (out, in, k) as (out, in·k)), s = alpha/rank
    and the file's tensors in fp32 (the loader's parameters):

        delta = B·A, or U·M_xs·Vᵀ for an -xs type, U and V the rank leading singular vectors of
                W0 (fp32 SVD, each pair's sign making U's largest-magnitude entry positive:
                underfit `utils/compute_svd.py`), recomputed as a loader without bases does
        V     = W0 + g·s·delta
        lora(-xs)       W' = V
        dora-rows(-xs)  W' = m[:, None] · V / (‖V‖_row + eps)
        dora-cols(-xs)  W' = m[None, :] · V / (‖V‖_col + eps)
        bora(-xs)       R  = m_r[:, None] · V / (‖V‖_row + eps)
                        W' = m_c[None, :] · R / (‖R‖_col + eps)

    a magnitude at g ≠ 1 blended as ‖W0‖ + g·(m − ‖W0‖) along its own axis, and W' = W0 for a
    dora/bora type at g = 0; eps = 1e-12 (stable-audio-3 `models/lora/model.py`,
    `LoRAParametrization`, `_blend_magnitude`). W' is returned in the base's shape and dtype.
    Baked norms are not used: the loader recomputes ‖V‖ from the base weight.
    """
    state, info = read_adapter_file(path, to_diffusers_name=str)  # the file's names and rows
    config = info.config
    kind = config.adapter_type.removesuffix("-xs")
    scale = config.alpha / config.rank
    layers: dict[str, dict[str, torch.Tensor]] = {}
    for key, tensor in state.items():
        name, _, param = key.rpartition(".parametrizations.weight.0.")
        layers.setdefault(name, {})[param] = tensor.float()
    weights = {}
    for name, params in layers.items():
        base = base_weights.get(f"{name}.weight")
        if base is None or base.dim() < 2:
            raise AdapterFileError(
                info.path,
                "a base weight for every adapted layer",
                f"no 2-D or 3-D {name}.weight among the {len(base_weights)} base weights",
            )
        w0 = base.detach().reshape(base.shape[0], -1).float()
        _check_fits_base(info.path, name, params, config, w0.shape)
        if "M_xs" in params:
            u, v = _svd_bases(w0, config.rank)
            delta = u @ params["M_xs"] @ v.T
        else:
            delta = params["lora_B"] @ params["lora_A"]
        direction = w0 + strength * scale * delta
        if kind == "lora":
            weight = direction
        elif strength == 0:
            weight = w0
        elif kind == "dora-rows":
            magnitude = _blend(params["magnitude"], w0, 1, strength)
            weight = magnitude[:, None] * direction / (direction.norm(dim=1)[:, None] + EPS)
        elif kind == "dora-cols":
            magnitude = _blend(params["magnitude"], w0, 0, strength)
            weight = magnitude[None, :] * direction / (direction.norm(dim=0)[None, :] + EPS)
        else:  # bora: rows first, then columns
            rows = _blend(params["magnitude_r"], w0, 1, strength)
            cols = _blend(params["magnitude_c"], w0, 0, strength)
            scaled = rows[:, None] * direction / (direction.norm(dim=1)[:, None] + EPS)
            weight = cols[None, :] * scaled / (scaled.norm(dim=0)[None, :] + EPS)
        weights[name] = weight.to(base.dtype).reshape(base.shape)
    return weights


def _blend(magnitude: torch.Tensor, w0: torch.Tensor, dim: int, strength: float) -> torch.Tensor:
    """The magnitude at strength g: itself at g = 1, else ‖W0‖ + g·(m − ‖W0‖) along `dim`."""
    if strength == 1:
        return magnitude
    base = w0.norm(dim=dim)
    return base + strength * (magnitude - base)


def _svd_bases(weight: torch.Tensor, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """U (out, rank) and V (in, rank) of an fp32 weight, signs canonical (compute_svd.py)."""
    u, _, vh = torch.linalg.svd(weight, full_matrices=False)
    largest = u.abs().argmax(dim=0)
    sign = u[largest, torch.arange(u.shape[1])].sign()
    sign[sign == 0] = 1
    return (u * sign)[:, :rank], (vh * sign[:, None])[:rank].T


def _check_fits_base(
    path: Path,
    name: str,
    params: Mapping[str, torch.Tensor],
    config: AdapterConfig,
    shape: tuple[int, int],
) -> None:
    """Each tensor of the layer fits the base weight viewed as (out, in), as loading needs."""
    out, fan_in = shape
    if config.rank > min(out, fan_in) and "M_xs" in params:
        raise AdapterFileError(
            path,
            "the adapter fits the base weight",
            f"{name}: rank {config.rank} exceeds the {min(out, fan_in)} singular vectors of the "
            f"{out} × {fan_in} base weight",
        )
    rows = ROW_PARAMS[config.adapter_type]
    wanted = {"lora_A": (1, fan_in), "lora_B": (0, out)}
    for param, tensor in params.items():
        if param in ("lora_A", "lora_B"):
            dim, size = wanted[param]
        elif param in _VECTORS:
            dim, size = 0, out if param in rows else fan_in
        else:
            continue
        if tensor.shape[dim] != size:
            raise AdapterFileError(
                path,
                "the adapter fits the base weight",
                f"{name}: {param} {list(tensor.shape)} does not fit the base weight "
                f"({out} × {fan_in} as a matrix)",
            )
