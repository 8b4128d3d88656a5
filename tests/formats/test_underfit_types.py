"""Every underfit adapter type through the file: written, read back, validated, its rows in
underfit's order, and the weight stable-audio-3's loader computes from it.

A two-block toy under Stable Audio 3's real names (`families/stable_audio_3/files.py`), with a
differential fused `self_attn.to_qkv` whose rows the file reorders, a plain Linear and a Conv1d.
The base weights are built as U0·diag(S)·V0ᵀ with known, sign-canonical singular vectors, so the
-xs bases a loader recomputes are known without running an SVD here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from tunesmith.families.stable_audio_3 import files
from tunesmith.families.stable_audio_3.names import (
    qkv_rows_to_diffusers,
    qkv_rows_to_underfit,
    to_underfit,
)
from tunesmith.formats.underfit import (
    AdapterConfig,
    AdapterFileError,
    effective_weights,
    fingerprint_of,
    infer_adapter_type,
    validate_file,
)

TYPES = (
    "lora",
    "dora-rows",
    "dora-cols",
    "bora",
    "lora-xs",
    "dora-rows-xs",
    "dora-cols-xs",
    "bora-xs",
)
# underfit lora_validate.py's _ADAPTER_FINGERPRINTS read on each type's saved keys.
UNDERFIT_FINGERPRINT = {
    "lora": "lora",
    "dora-rows": "dora-rows",
    "dora-cols": "dora-rows",
    "bora": "bora",
    "lora-xs": "lora-xs",
    "dora-rows-xs": "dora-rows",
    "dora-cols-xs": "dora-rows",
    "bora-xs": "bora",
}
# The saved tensors per type (stable-audio-3 `get_lora_state_dict`: never U or V).
SAVED = {
    "lora": ("lora_A", "lora_B"),
    "dora-rows": ("lora_A", "lora_B", "magnitude", "baked_vnorm_row"),
    "dora-cols": ("lora_A", "lora_B", "magnitude"),
    "bora": ("lora_A", "lora_B", "magnitude_r", "magnitude_c"),
    "lora-xs": ("M_xs",),
    "dora-rows-xs": ("M_xs", "magnitude", "baked_vnorm_row"),
    "dora-cols-xs": ("M_xs", "magnitude"),
    "bora-xs": ("M_xs", "magnitude_r", "magnitude_c"),
}
# One entry per output row: what follows the fused QKV's rows (dora-cols' magnitude and
# magnitude_c are per input column, lora_A acts on the input side, M_xs is rank × rank).
ROWS = {"lora_B", "magnitude_r", "baked_vnorm_row"}
ROW_MAGNITUDE = {"dora-rows", "dora-rows-xs"}

RANK, ALPHA = 3, 6
SCALE = ALPHA / RANK
FUSED = {f"transformer.transformer_blocks.{i}.self_attn.to_qkv" for i in (0, 1)}
FUSED_0 = "transformer.transformer_blocks.0.self_attn.to_qkv"
# diffusers name → base weight shape ((out, in) or a Conv1d's (out, in, k))
LAYERS = {
    "transformer.transformer_blocks.0.self_attn.to_qkv": (10, 6),
    "transformer.transformer_blocks.1.self_attn.to_qkv": (10, 6),
    "transformer.transformer_blocks.0.ff.proj_out": (6, 8),
    "transformer.preprocess_conv": (6, 4, 3),
}
KEY = "parametrizations.weight.0"


def matrix_shape(name: str) -> tuple[int, int]:
    shape = LAYERS[name]
    return shape[0], int(torch.tensor(shape[1:]).prod())


def canonical_bases(out: int, fan_in: int, generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Orthonormal U0 (out, k), V0 (in, k), each column of U0 with its largest entry positive."""
    k = min(out, fan_in)
    u = torch.linalg.qr(torch.randn(out, k, generator=generator, dtype=torch.float64)).Q
    v = torch.linalg.qr(torch.randn(fan_in, k, generator=generator, dtype=torch.float64)).Q
    sign = u.gather(0, u.abs().argmax(dim=0)[None]).sign()
    return u * sign, v * sign


class Base:
    """The toy's base weights in underfit's names and rows, and each layer's diffusers-order
    matrix and -xs bases."""

    def __init__(self) -> None:
        generator = torch.Generator().manual_seed(0)
        self.checkpoint: dict[str, torch.Tensor] = {}  # underfit `<layer>.weight` → fp32
        self.matrix, self.u, self.v = {}, {}, {}  # diffusers name → float64, diffusers rows
        for name, shape in LAYERS.items():
            out, fan_in = matrix_shape(name)
            u, v = canonical_bases(out, fan_in, generator)
            singular = torch.linspace(3.0, 1.0, min(out, fan_in), dtype=torch.float64)
            weight_u = (u * singular) @ v.T  # underfit's rows
            self.checkpoint[f"{to_underfit(name)}.weight"] = weight_u.float().reshape(shape)
            weight = weight_u.float().double()  # what the loader starts from
            if name in FUSED:  # diffusers' rows: U follows them, V and the signs do not change
                weight, u = qkv_rows_to_diffusers(weight), qkv_rows_to_diffusers(u)
            self.matrix[name], self.u[name], self.v[name] = weight, u[:, :RANK], v[:, :RANK]


def make_state(adapter_type: str, seed: int = 1) -> dict[str, torch.Tensor]:
    """Random fp16-exact tensors of the type's shapes, under diffusers' names and rows."""
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for name in LAYERS:
        out, fan_in = matrix_shape(name)
        shapes = {
            "lora_A": (RANK, fan_in),
            "lora_B": (out, RANK),
            "M_xs": (RANK, RANK),
            "magnitude": (out,) if adapter_type in ROW_MAGNITUDE else (fan_in,),
            "magnitude_r": (out,),
            "magnitude_c": (fan_in,),
            "baked_vnorm_row": (out,),
        }
        for param in SAVED[adapter_type]:
            values = torch.randn(shapes[param], generator=generator)
            if param.startswith(("magnitude", "baked")):
                values = values.abs() + 0.5
            dtype = torch.float32 if param == "baked_vnorm_row" else torch.float16
            state[f"{name}.{KEY}.{param}"] = values.to(dtype).float()
    return state


def write(tmp_path: Path, adapter_type: str, state: dict[str, torch.Tensor]) -> Path:
    config = AdapterConfig(rank=RANK, alpha=ALPHA, adapter_type=adapter_type, step=5, epoch=1)
    path = tmp_path / f"{adapter_type}-step=5-epoch=1.safetensors"
    return files.write_adapter(path, state, config, differential=True, metadata={"a": "b"})


def expected_weight(adapter_type, params, base: Base, name: str, strength: float):
    """lora_math's W' in float64, diffusers' rows."""
    w0, u, v = base.matrix[name], base.u[name], base.v[name]
    p = {k: t.double() for k, t in params.items()}
    delta = p["lora_B"] @ p["lora_A"] if "lora_A" in p else u @ p["M_xs"] @ v.T
    direction = w0 + strength * SCALE * delta
    kind = adapter_type.removesuffix("-xs")
    if kind == "lora":
        return direction
    if strength == 0:
        return w0

    def blended(magnitude, dim):
        norm = w0.norm(dim=dim)
        return norm + strength * (magnitude - norm)

    if kind == "dora-rows":
        m = blended(p["magnitude"], 1)
        return m[:, None] * direction / (direction.norm(dim=1, keepdim=True) + 1e-12)
    if kind == "dora-cols":
        m = blended(p["magnitude"], 0)
        return m[None, :] * direction / (direction.norm(dim=0, keepdim=True) + 1e-12)
    rows = blended(p["magnitude_r"], 1)[:, None] * direction
    rows = rows / (direction.norm(dim=1, keepdim=True) + 1e-12)
    return blended(p["magnitude_c"], 0)[None, :] * rows / (rows.norm(dim=0, keepdim=True) + 1e-12)


def layer_params(state: dict[str, torch.Tensor], name: str) -> dict[str, torch.Tensor]:
    prefix = f"{name}.{KEY}."
    return {k.removeprefix(prefix): t for k, t in state.items() if k.startswith(prefix)}


# --- write, read, validate ----------------------------------------------------------------------


@pytest.mark.parametrize("adapter_type", TYPES)
def test_every_type_is_written_and_read_back_and_validates(tmp_path, adapter_type):
    state = make_state(adapter_type)
    path = write(tmp_path, adapter_type, state)
    with safe_open(str(path), framework="pt") as f:
        stored = {k: f.get_tensor(k) for k in f.keys()}
        lora_config = json.loads(f.metadata()["lora_config"])
    assert set(stored) == {
        f"{to_underfit(name)}.{KEY}.{param}" for name in LAYERS for param in SAVED[adapter_type]
    }
    for key, tensor in stored.items():
        assert tensor.dtype == (torch.float32 if "baked" in key else torch.float16), key
    assert lora_config["adapter_type"] == adapter_type
    assert lora_config.get("baked_norms", 0) == (
        len(LAYERS) if "baked_vnorm_row" in SAVED[adapter_type] else 0
    )

    back, info = files.read_adapter(path)
    assert set(back) == set(state)
    for key, tensor in state.items():
        assert back[key].dtype == (torch.float32 if "baked" in key else torch.float16), key
        assert torch.equal(back[key].float(), tensor), key
    assert info == validate_file(path)
    assert info.config.adapter_type == adapter_type and info.config.rank == RANK
    assert info.metadata == {"a": "b"}
    assert info.inferred_adapter_type == UNDERFIT_FINGERPRINT[adapter_type]
    assert fingerprint_of(adapter_type) == UNDERFIT_FINGERPRINT[adapter_type]
    assert infer_adapter_type(list(stored)) == UNDERFIT_FINGERPRINT[adapter_type]


@pytest.mark.parametrize("adapter_type", TYPES)
def test_the_fused_qkv_reorders_exactly_the_row_tensors_of_the_type(tmp_path, adapter_type):
    state = make_state(adapter_type)
    path = write(tmp_path, adapter_type, state)
    rows = ROWS | ({"magnitude"} if adapter_type in ROW_MAGNITUDE else set())
    with safe_open(str(path), framework="pt") as f:
        for name in LAYERS:
            for param, tensor in layer_params(state, name).items():
                stored = f.get_tensor(f"{to_underfit(name)}.{KEY}.{param}").float()
                if name in FUSED and param in rows:
                    assert torch.equal(stored, qkv_rows_to_underfit(tensor)), param
                    assert not torch.equal(stored, tensor), param  # the order did change
                else:
                    assert torch.equal(stored, tensor), (name, param)


# --- what stable-audio-3's loader computes ------------------------------------------------------


def test_the_toy_bases_need_the_sign_rule():
    """torch's SVD alone gives some of these columns the other sign, so a loader that skipped
    the canonical signs would get another lora-xs weight below."""
    flipped = 0
    for weight in Base().checkpoint.values():
        u = torch.linalg.svd(weight.reshape(weight.shape[0], -1), full_matrices=False).U
        flipped += int((u.gather(0, u.abs().argmax(dim=0)[None]) < 0).sum())
    assert flipped > 0


@pytest.mark.parametrize("strength", [1.0, 0.5, 0.0])
@pytest.mark.parametrize("adapter_type", TYPES)
def test_effective_weights_are_the_formula_in_either_row_order(tmp_path, adapter_type, strength):
    base = Base()
    state = make_state(adapter_type)
    weights = effective_weights(write(tmp_path, adapter_type, state), base.checkpoint, strength)
    assert set(weights) == {to_underfit(name) for name in LAYERS}
    for name, shape in LAYERS.items():
        params = layer_params(state, name)
        expected = expected_weight(adapter_type, params, base, name, strength)
        if name in FUSED:  # computed in diffusers' rows; the file and the base are underfit's
            expected = qkv_rows_to_underfit(expected)
        got = weights[to_underfit(name)]
        assert got.shape == shape and got.dtype == torch.float32
        torch.testing.assert_close(
            got.double().reshape(expected.shape), expected, rtol=1e-5, atol=1e-5
        )
        if strength == 0:
            assert torch.equal(got, base.checkpoint[f"{to_underfit(name)}.weight"])
        if strength == 1:  # what each type's magnitudes mean, independent of the formula
            got = got.double().reshape(expected.shape)
            got = qkv_rows_to_diffusers(got) if name in FUSED else got
            kind = adapter_type.removesuffix("-xs")
            norm, magnitude = {
                "dora-rows": (got.norm(dim=1), params.get("magnitude")),
                "dora-cols": (got.norm(dim=0), params.get("magnitude")),
                "bora": (got.norm(dim=0), params.get("magnitude_c")),
            }.get(kind, (None, None))
            if magnitude is not None:
                torch.testing.assert_close(norm, magnitude.double(), rtol=1e-5, atol=0)


# --- refused ------------------------------------------------------------------------------------


def retyped(state, name, param, tensor):
    return {**state, f"{name}.{KEY}.{param}": tensor}


@pytest.mark.parametrize(
    ("adapter_type", "param", "shape", "rule"),
    [
        ("dora-rows", "magnitude", (6,), "one magnitude entry per row or column"),  # in, not out
        ("dora-cols", "magnitude", (10,), "one magnitude entry per row or column"),  # out, not in
        ("bora", "magnitude_c", (10,), "one magnitude entry per row or column"),
        ("bora", "magnitude_r", (10, 1), "magnitudes are vectors"),  # underfit writes 1-D
        ("dora-rows", "baked_vnorm_row", (6,), "one magnitude entry per row or column"),
        ("dora-rows-xs", "baked_vnorm_row", (6,), "one magnitude entry per row or column"),
        ("lora-xs", "M_xs", (RANK, RANK + 1), r"rank matches tensor shapes.*M_xs \[3, 4\]"),
        ("bora-xs", "M_xs", (RANK + 1, RANK + 1), "rank matches tensor shapes"),
        ("dora-cols", "lora_A", (RANK + 1, 6), "rank matches tensor shapes"),
    ],
)
def test_writing_refuses_shapes_that_do_not_fit_the_type(
    tmp_path, adapter_type, param, shape, rule
):
    name = "transformer.transformer_blocks.1.self_attn.to_qkv"  # out 10, in 6
    state = retyped(make_state(adapter_type), name, param, torch.ones(shape))
    with pytest.raises(AdapterFileError, match=rule) as error:
        write(tmp_path, adapter_type, state)
    assert "model.transformer.layers.1.self_attn.to_qkv" in str(error.value)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("adapter_type", "param", "message"),
    [
        ("lora-xs", "lora_A", r"key names.*\.lora_A'"),
        ("bora", "magnitude", r"key names.*\.magnitude'"),
        ("dora-cols", "baked_vnorm_row", r"key names.*\.baked_vnorm_row'"),
        ("bora-xs", "baked_vnorm_row", r"key names.*\.baked_vnorm_row'"),
        ("lora-xs", "U", "U and V are not saved"),
    ],
)
def test_writing_refuses_keys_of_another_type(tmp_path, adapter_type, param, message):
    state = retyped(make_state(adapter_type), FUSED_0, param, torch.ones(10))
    with pytest.raises(AdapterFileError, match=message):
        write(tmp_path, adapter_type, state)
    if len(SAVED[adapter_type]) > 1:  # one layer without its first tensor
        last = f"{FUSED_0}.{KEY}.{SAVED[adapter_type][0]}"
        partial = {k: v for k, v in make_state(adapter_type).items() if k != last}
        with pytest.raises(AdapterFileError, match="complete layers"):
            write(tmp_path, adapter_type, partial)


def save(path: Path, params: dict[str, tuple[int, ...]], adapter_type: str) -> Path:
    layer = f"model.transformer.layers.0.self_attn.to_qkv.{KEY}"
    tensors = {f"{layer}.{p}": torch.ones(shape).half() for p, shape in params.items()}
    save_file(
        tensors,
        str(path),
        {"lora_config": json.dumps({"rank": RANK, "adapter_type": adapter_type})},
    )
    return path


@pytest.mark.parametrize(
    ("adapter_type", "params", "message"),
    [
        (  # a dora-cols file labelled as its -xs variant
            "dora-cols-xs",
            {"lora_A": (RANK, 6), "lora_B": (10, RANK), "magnitude": (6,)},
            "keys match lora_config.adapter_type.*says 'dora-cols-xs'",
        ),
        ("lora-xs", {"M_xs": (RANK, RANK), "magnitude": (10,)}, "keys look like 'dora-rows'"),
        (
            "bora-xs",
            {"M_xs": (RANK, RANK), "magnitude_r": (10, 1), "magnitude_c": (6,)},
            "magnitudes are vectors",
        ),
        (
            "dora-rows-xs",
            {"M_xs": (RANK, RANK), "magnitude": (10,), "baked_vnorm_row": (6,)},
            "one magnitude entry per row or column.*baked_vnorm_row",
        ),
        ("dora-cols-xs", {"M_xs": (RANK, 2), "magnitude": (6,)}, "rank matches tensor shapes"),
        (
            "dora-cols",
            {"lora_A": (RANK, 6), "lora_B": (10, RANK), "magnitude": (10, 1)},
            "one magnitude entry",
        ),
        (
            "lora",
            {"lora_A": (RANK, 6), "lora_B": (10, RANK), "U": (10, RANK)},
            "U and V are the bases of an -xs type",
        ),
    ],
)
def test_validation_refuses_files_that_contradict_their_type(
    tmp_path, adapter_type, params, message
):
    path = save(tmp_path / "a.safetensors", params, adapter_type)
    with pytest.raises(AdapterFileError, match=message) as error:
        validate_file(path)
    assert str(path) in str(error.value)


def test_an_xs_file_reads_with_2d_magnitudes_squeezed_as_the_loader_does(tmp_path):
    path = save(
        tmp_path / "a.safetensors", {"M_xs": (RANK, RANK), "magnitude": (1, 6)}, "dora-cols-xs"
    )
    state, info = files.read_adapter(path)
    assert info.config.adapter_type == "dora-cols-xs"
    assert state[f"{FUSED_0}.{KEY}.magnitude"].shape == (6,)


def test_effective_weights_needs_a_base_weight_that_fits(tmp_path):
    base = Base()
    path = write(tmp_path, "dora-cols-xs", make_state("dora-cols-xs"))
    conv = "model.preprocess_conv.weight"
    missing = {k: v for k, v in base.checkpoint.items() if k != conv}
    with pytest.raises(
        AdapterFileError, match="a base weight for every adapted layer.*preprocess_conv"
    ):
        effective_weights(path, missing)
    with pytest.raises(AdapterFileError, match="the adapter fits the base weight.*magnitude"):
        effective_weights(path, {**base.checkpoint, conv: torch.ones(6, 4, 2)})  # in 8, not 12
    thin = {**base.checkpoint, conv: torch.ones(6, 2, 1)}  # 2 singular vectors for rank 3
    with pytest.raises(AdapterFileError, match="rank 3 exceeds"):
        effective_weights(path, thin)
    path = write(tmp_path, "lora", make_state("lora"))
    with pytest.raises(AdapterFileError, match="the adapter fits the base weight.*lora_A"):
        effective_weights(path, {**base.checkpoint, conv: torch.ones(6, 4, 2)})
