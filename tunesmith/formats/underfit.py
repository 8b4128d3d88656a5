"""underfit's adapter checkpoint: one `.safetensors` file, written, read and validated.

One file on purpose (longer than most): writing, reading and validating share the key grammar
and the row-order hook below, and a reader that drifted from the writer would load a file
wrongly without an error; keeping the three side by side keeps them one contract.

The format, from stable-audio-3 `models/lora/utils.py` (`get_lora_state_dict`,
`save_lora_safetensors`, `prepare_dora_state_dict`), underfit `training/lora.py`
(`save_lora_step`), `training/loop.py` (`_ckpt_filename`, the run label) and
`utils/lora_validate.py`:

- keys `<layer>.parametrizations.weight.0.<lora_A|lora_B|magnitude>`, the layer named as in the
  reference checkpoint under two roots: `model.` (the DiT) and `conditioners.` (the conditioner);
- tensors in fp16, except `baked_vnorm_row` (a dora-rows layer's ‖W + s·B·A‖_row, optional),
  kept in fp32; a dora magnitude may be 2-D in old files and is squeezed on reading;
- metadata `lora_config`, a JSON object: rank, alpha, adapter_type, include, exclude, then step,
  epoch, base_model (and baked_norms, norm_base when norms are baked);
- the file name `{run}-step={step}-epoch={epoch}.safetensors`, the run name less a trailing
  `-YYYYMMDDhhmmss`.

The layer names in memory are diffusers' and the rows of some fused weights are in another
order; the family passes the translation (`to_checkpoint_name`, `to_diffusers_name`: Stable
Audio 3's `names.py`) and an optional `permute_rows(checkpoint_layer_name, tensor, direction)`
hook, called on every row-indexed tensor (lora_B, magnitude, baked_vnorm_row) and returning it
in the other order.

Only `.safetensors` is ever opened; nothing here unpickles. Where stricter than underfit's
validator, on purpose (each is a file that would load wrongly or not at all): unknown keys,
keys that contradict `adapter_type`, incomplete layers and a rank that disagrees with the
tensor shapes are errors, not notes. Not handled: reading other adapter types than `lora` and
`dora-rows` into tensors (`validate_file` still accepts every underfit type), stacked adapters
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
SUPPORTED_TYPES = ("lora", "dora-rows")  # what tunesmith trains and loads
_BAKED_TYPES = ("dora-rows", "dora-rows-xs")  # row norms are baked for these only (utils.py)
_ROW_PARAMS = {"lora_B", "magnitude", BAKED_NORM}  # one entry per output row (lora, dora-rows)
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
    lora_config: dict[str, Any]  # as stored, with alpha/include/exclude back-filled
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


def _fingerprint_of(adapter_type: str) -> str | None:
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
    """Write `state` (torch_lora.adapter_state keys, diffusers names) as an underfit file.

    Atomic: a temporary name in the same folder, then a rename. Returns the path.
    """
    path = Path(path)
    if path.suffix != ".safetensors":
        raise AdapterFileError(path, "file name", "an underfit adapter file ends in .safetensors")
    if config.adapter_type not in SUPPORTED_TYPES:
        raise AdapterFileError(
            path,
            "lora_config.adapter_type",
            f"{config.adapter_type!r} is not one of {SUPPORTED_TYPES}",
        )
    if isinstance(config.rank, bool) or not isinstance(config.rank, int) or config.rank < 1:
        raise AdapterFileError(path, "lora_config.rank", f"an integer ≥ 1, got {config.rank!r}")
    metadata = dict(extra_metadata or {})
    if "lora_config" in metadata:
        raise AdapterFileError(path, "metadata", "'lora_config' is written from `config`")
    for key, value in metadata.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise AdapterFileError(path, "metadata", f"{key!r}: keys and values must be strings")

    baked_ok = config.adapter_type in _BAKED_TYPES
    allowed = TYPE_PARAMS[config.adapter_type] | ({BAKED_NORM} if baked_ok else set())
    tensors: dict[str, torch.Tensor] = {}
    layers: dict[str, dict[str, torch.Tensor]] = {}
    for key, value in state.items():
        layer, param = _split_key(path, key, allowed, config.adapter_type)
        name = to_checkpoint_name(layer)
        if not name.startswith(ROOTS):
            raise AdapterFileError(
                path, "key roots", f"{layer!r} became {name!r}, outside the roots {ROOTS}"
            )
        tensor = value.detach().cpu()
        if permute_rows is not None and param in _ROW_PARAMS:
            tensor = _permuted(path, permute_rows, name, param, tensor, "to_checkpoint")
        dtype = torch.float32 if param == BAKED_NORM else torch.float16
        tensor = tensor.to(dtype=dtype, copy=True).contiguous()
        if not torch.isfinite(tensor).all():
            raise AdapterFileError(
                path, "finite values", f"{key} has NaN or inf values in {dtype} (not written)"
            )
        out_key = f"{name}.parametrizations.weight.0.{param}"
        if out_key in tensors:
            raise AdapterFileError(path, "unique keys", f"two layers map to {out_key!r}")
        tensors[out_key] = tensor
        layers.setdefault(name, {})[param] = tensor
    if not tensors:
        raise AdapterFileError(path, "at least one parametrization key", "the state is empty")
    _check_layers(path, layers, config.adapter_type, config.rank)
    baked = sum(BAKED_NORM in params for params in layers.values())
    metadata["lora_config"] = config.to_json(baked_norms=baked)
    return write_safetensors(path, tensors, metadata)


def _split_key(path: Path, key: str, allowed: set[str], adapter_type: str) -> tuple[str, str]:
    match = _KEY.match(key)
    if match is None or match["param"] not in allowed:
        raise AdapterFileError(
            path,
            "key names",
            f"{key!r} is not <layer>.parametrizations.weight.0.<param> with param in "
            f"{sorted(allowed)} ({adapter_type})",
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


def _check_layers(
    path: Path, layers: Mapping[str, Mapping[str, Any]], adapter_type: str, rank: int
) -> None:
    """Each layer has its type's full set of tensors, with shapes that agree with the rank.

    Values are tensors or header shapes (lists); only their shapes are read.
    """
    needed = TYPE_PARAMS[adapter_type]
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
                f"{name}: M_xs {shapes['M_xs']} is not [rank, rank]",
            )
        rows = b[0] if b is not None else None
        for param in ("magnitude", BAKED_NORM):
            if param in shapes and adapter_type == "dora-rows" and rows is not None:
                if math.prod(shapes[param]) != rows:
                    raise AdapterFileError(
                        path,
                        "rank matches tensor shapes",
                        f"{name}: {param} {shapes[param]} has not one entry per row of lora_B {b}",
                    )


# --- reading and validating ------------------------------------------------------------------


def validate_file(path: str | os.PathLike) -> AdapterInfo:
    """underfit's validation contract (lora_validate.py), from the header alone.

    Rules, in order: `.safetensors` only (other files are refused unopened); a readable
    safetensors header; at least one parametrization key; `lora_config` metadata, a JSON object
    with `rank` and `adapter_type` (alpha := rank, include/exclude := [] back-filled); the
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
    expected = _fingerprint_of(config.adapter_type)
    params_seen = {p for params in layers.values() for p in params} - {"U", "V", BAKED_NORM}
    if inferred != expected or not params_seen <= TYPE_PARAMS[config.adapter_type]:
        raise AdapterFileError(
            path,
            "keys match lora_config.adapter_type",
            f"keys look like {inferred!r} ({sorted(params_seen)}) but lora_config says "
            f"{config.adapter_type!r}",
        )
    baked = any(BAKED_NORM in params for params in layers.values())
    if baked and config.adapter_type not in _BAKED_TYPES:
        raise AdapterFileError(
            path,
            "keys match lora_config.adapter_type",
            f"{BAKED_NORM} tensors belong to {_BAKED_TYPES}, not {config.adapter_type!r}",
        )
    _check_layers(path, layers, config.adapter_type, config.rank)
    return AdapterInfo(path, config, inferred, lora_config, metadata, tuple(keys))


def _parse_config(
    path: Path, lora_config: dict[str, Any], shapes: dict[str, list[int]]
) -> AdapterConfig:
    for required in ("rank", "adapter_type"):
        if required not in lora_config:
            raise AdapterFileError(path, f"lora_config.{required}", "missing (required)")
    rank = lora_config["rank"]
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise AdapterFileError(path, "lora_config.rank", f"an integer ≥ 1, got {rank!r}")
    # underfit's back-fill; null include/exclude read as [] too (both mean "no filter" here).
    lora_config.setdefault("alpha", rank)
    for key in ("include", "exclude"):
        if lora_config.get(key) is None:
            lora_config[key] = []
    alpha = lora_config["alpha"]
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not math.isfinite(alpha):
        raise AdapterFileError(path, "lora_config.alpha", f"a finite number, got {alpha!r}")
    for key in ("include", "exclude"):
        value = lora_config[key]
        if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
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
        include=tuple(lora_config["include"]),
        exclude=tuple(lora_config["exclude"]),
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
    """Validate, then load a `lora` or `dora-rows` file as (state, info).

    `state` has torch_lora.adapter_state's keys (diffusers names, rows in diffusers' order) and
    the tensors as stored (fp16; baked norms fp32), magnitudes squeezed to 1-D.
    """
    info = validate_file(path)
    if info.config.adapter_type not in SUPPORTED_TYPES:
        raise AdapterFileError(
            info.path,
            "supported adapter type",
            f"{info.config.adapter_type!r}: tunesmith loads {', '.join(SUPPORTED_TYPES)}",
        )
    allowed = TYPE_PARAMS[info.config.adapter_type] | {BAKED_NORM}
    state: dict[str, torch.Tensor] = {}
    for key, tensor in load_file(str(info.path)).items():
        name, param = _split_key(info.path, key, allowed, info.config.adapter_type)
        if param == "magnitude" and tensor.dim() == 2:
            tensor = tensor.squeeze(1) if tensor.shape[1] == 1 else tensor  # (out, 1) → (out,)
        if permute_rows is not None and param in _ROW_PARAMS:
            tensor = _permuted(info.path, permute_rows, name, param, tensor, "to_diffusers")
        out_key = f"{to_diffusers_name(name)}.parametrizations.weight.0.{param}"
        if out_key in state:
            raise AdapterFileError(info.path, "unique keys", f"two layers map to {out_key!r}")
        state[out_key] = tensor
    return state, info
