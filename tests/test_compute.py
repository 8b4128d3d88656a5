"""Compute placement: the auto rules, pins and their precedence, and the Dagster resource.

The real detection is checked against the libraries' own answers; the tests that assume a
machine with no accelerator (as CI and the developers' machines are) skip elsewhere. Every
accelerator rule is tested with `Accelerators` built by hand.
"""

import dagster as dg
import mlx.core as mx
import pytest
import torch

from resources.compute import GPU_POOL, ComputeResource
from tunesmith.backends.placement import Accelerators, Placement, place

TORCH_ONLY = frozenset({"torch"})
BOTH = frozenset({"torch", "mlx"})
MLX_ONLY = frozenset({"mlx"})

NONE = Accelerators(torch_cuda=False, torch_mps=False, mlx_metal=False, mlx_cuda=False)
APPLE = Accelerators(torch_cuda=False, torch_mps=True, mlx_metal=True, mlx_cuda=False)
MPS_ONLY = Accelerators(torch_cuda=False, torch_mps=True, mlx_metal=False, mlx_cuda=False)
CUDA = Accelerators(
    torch_cuda=True, torch_mps=False, mlx_metal=False, mlx_cuda=False, torch_cuda_bf16=True
)
CUDA_NO_BF16 = Accelerators(torch_cuda=True, torch_mps=False, mlx_metal=False, mlx_cuda=False)
CUDA_BOTH = Accelerators(
    torch_cuda=True, torch_mps=False, mlx_metal=False, mlx_cuda=True, torch_cuda_bf16=True
)
METAL_AND_CUDA = Accelerators(torch_cuda=True, torch_mps=False, mlx_metal=True, mlx_cuda=False)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    # A developer's shell may pin these; every test starts from "nothing set".
    for name in ("TUNESMITH_BACKEND", "TUNESMITH_DEVICE", "TUNESMITH_DTYPE"):
        monkeypatch.delenv(name, raising=False)


# --- this machine ---------------------------------------------------------------------------

REAL = (
    torch.cuda.is_available(),
    torch.backends.mps.is_available(),
    mx.metal.is_available(),
    mx.cuda.is_available(),
)
cpu_only = pytest.mark.skipif(any(REAL), reason="this machine has an accelerator")


def test_detection_agrees_with_the_libraries():
    found = Accelerators.detect()
    assert (found.torch_cuda, found.torch_mps, found.mlx_metal, found.mlx_cuda) == REAL
    assert Accelerators.detect() is found  # cached per process


@cpu_only
@pytest.mark.parametrize("backends", [TORCH_ONLY, BOTH], ids=["torch-only", "torch+mlx"])
def test_auto_on_this_machine_is_torch_cpu_float32(backends):
    placement = place("adapters", "sdxl", backends)
    assert str(placement) == "torch/cpu/float32"
    assert placement.as_dict() == {"backend": "torch", "device": "cpu", "dtype": "float32"}
    assert placement.reason == (
        "auto: no accelerator found (torch cuda: no, mps: no; mlx metal: no, cuda: no)"
    )


def test_mlx_only_stage_runs_mlx_on_cpu_without_an_accelerator():
    assert str(place("adapters", "sdxl", MLX_ONLY, accelerators=NONE)) == "mlx/cpu/float32"


# --- the auto rules -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("accelerators", "backends", "expected"),
    [
        (METAL_AND_CUDA, BOTH, "mlx/metal/bfloat16"),
        (METAL_AND_CUDA, TORCH_ONLY, "torch/cuda/float16"),
        (APPLE, BOTH, "mlx/metal/bfloat16"),
        (APPLE, TORCH_ONLY, "torch/mps/float16"),
        (MPS_ONLY, BOTH, "torch/mps/float16"),
        (MPS_ONLY, MLX_ONLY, "mlx/cpu/float32"),
        (CUDA, BOTH, "torch/cuda/bfloat16"),
        (CUDA_NO_BF16, BOTH, "torch/cuda/float16"),
        (CUDA_BOTH, BOTH, "mlx/cuda/bfloat16"),
        (CUDA_BOTH, TORCH_ONLY, "torch/cuda/bfloat16"),
        (NONE, BOTH, "torch/cpu/float32"),
    ],
)
def test_auto_rule(accelerators, backends, expected):
    assert str(place("adapters", "sdxl", backends, accelerators=accelerators)) == expected


def test_accelerator_the_stage_cannot_use_is_named_in_the_reason():
    placement = place(
        "encoded", "sdxl", TORCH_ONLY, accelerators=Accelerators(False, False, True, False)
    )
    assert str(placement) == "torch/cpu/float32"
    assert placement.reason.startswith("auto: no accelerator that torch can use")


def test_placement_as_dict_leaves_out_the_reason():
    placement = Placement(backend="mlx", device="metal", dtype="bfloat16", reason="why")
    assert placement.as_dict() == {"backend": "mlx", "device": "metal", "dtype": "bfloat16"}
    assert str(placement) == "mlx/metal/bfloat16"


# --- pins in place() ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("accelerators", "pins", "expected"),
    [
        (METAL_AND_CUDA, {"backend": "torch"}, "torch/cuda/float16"),
        (APPLE, {"backend": "torch"}, "torch/mps/float16"),
        (CUDA, {"backend": "mlx"}, "mlx/cpu/float32"),  # MLX on CPU for parity runs
        (CUDA, {"device": "cpu"}, "torch/cpu/float32"),
        (APPLE, {"device": "metal"}, "mlx/metal/bfloat16"),
        (APPLE, {"device": "mps"}, "torch/mps/float16"),
        (CUDA_BOTH, {"device": "cuda", "backend": "torch"}, "torch/cuda/bfloat16"),
        (CUDA, {"dtype": "float16"}, "torch/cuda/float16"),
        (NONE, {"dtype": "bfloat16"}, "torch/cpu/bfloat16"),
    ],
)
def test_pins_are_honoured(accelerators, pins, expected):
    assert str(place("adapters", "sdxl", BOTH, accelerators=accelerators, **pins)) == expected


def test_pinned_backend_the_stage_lacks_names_stage_family_and_implemented():
    with pytest.raises(ValueError, match=r"stage 'encoded' of family 'sdxl'.*implemented: torch"):
        place("encoded", "sdxl", TORCH_ONLY, backend="mlx", accelerators=APPLE)


def test_pinned_device_that_is_absent_is_an_error_not_a_fallback():
    with pytest.raises(ValueError, match=r"no cuda usable by torch or mlx.*torch cuda: no"):
        place("adapters", "sdxl", BOTH, device="cuda", accelerators=APPLE)
    # torch has CUDA here, but MLX does not: pinning both must not quietly pick torch.
    with pytest.raises(ValueError, match=r"no cuda usable by mlx.*torch cuda: yes"):
        place("adapters", "sdxl", BOTH, backend="mlx", device="cuda", accelerators=CUDA)


@pytest.mark.parametrize(
    ("backends", "pins", "message"),
    [
        (
            TORCH_ONLY,
            {"device": "metal"},
            "needs backend mlx, but stage 'encoded' implements only torch",
        ),
        (BOTH, {"device": "metal", "backend": "torch"}, "needs backend mlx, but backend='torch'"),
        (
            MLX_ONLY,
            {"device": "mps"},
            "needs backend torch, but stage 'encoded' implements only mlx",
        ),
    ],
)
def test_device_implies_backend(backends, pins, message):
    with pytest.raises(ValueError, match=message):
        place("encoded", None, backends, accelerators=APPLE, **pins)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"backend": "cuda"}, "backend='cuda' is not one of: auto, torch, mlx"),
        ({"device": "gpu"}, "device='gpu' is not one of: auto, cuda, mps, metal, cpu"),
        ({"dtype": "fp16"}, "dtype='fp16' is not one of: auto, float32, float16, bfloat16"),
    ],
)
def test_unknown_values_list_the_allowed_ones(kwargs, message):
    with pytest.raises(ValueError, match=message):
        place("adapters", "sdxl", BOTH, accelerators=NONE, **kwargs)


def test_stage_backends_are_checked():
    with pytest.raises(ValueError, match="non-empty subset of torch, mlx"):
        place("adapters", "sdxl", {"jax"}, accelerators=NONE)
    with pytest.raises(ValueError, match="non-empty subset"):
        place("adapters", "sdxl", set(), accelerators=NONE)
    with pytest.raises(TypeError, match="not a string"):
        place("adapters", "sdxl", "torch", accelerators=NONE)  # type: ignore[arg-type]


# --- the resource: config, environment, precedence ------------------------------------------


@cpu_only
def test_resource_defaults_to_auto():
    assert str(ComputeResource().placement("adapters", "sdxl", BOTH)) == "torch/cpu/float32"


@cpu_only
def test_resource_config_fields_pin():
    compute = ComputeResource(backend="mlx", dtype="float16")
    assert str(compute.placement("adapters", "sdxl", BOTH)) == "mlx/cpu/float16"


def test_resource_per_stage_pin_applies_to_that_stage_only():
    compute = ComputeResource(stages={"adapters": "mlx"})
    assert compute.placement("adapters", "sdxl", BOTH).backend == "mlx"
    assert compute.placement("encoded", "sdxl", BOTH).backend == "torch"


@cpu_only
def test_env_backend_mlx_on_this_machine_is_mlx_cpu(monkeypatch):
    monkeypatch.setenv("TUNESMITH_BACKEND", "mlx")
    assert str(ComputeResource().placement("adapters", "sdxl", BOTH)) == "mlx/cpu/float32"
    # one value for every stage applies where a stage has it; the others say why not
    placed = ComputeResource().placement("encoded", "sdxl", TORCH_ONLY)
    assert str(placed) == "torch/cpu/float32"
    assert "TUNESMITH_BACKEND=mlx skipped: no mlx implementation of encoded" in placed.reason
    # a pin for that very stage is still an error
    monkeypatch.setenv("TUNESMITH_BACKEND", "encoded=mlx")
    with pytest.raises(ValueError, match=r"no mlx implementation.*from TUNESMITH_BACKEND"):
        ComputeResource().placement("encoded", "sdxl", TORCH_ONLY)


def test_env_backend_per_stage(monkeypatch):
    monkeypatch.setenv("TUNESMITH_BACKEND", "adapters=mlx, encoded=torch")
    compute = ComputeResource()
    assert compute.placement("adapters", "sdxl", BOTH).backend == "mlx"
    assert compute.placement("encoded", "sdxl", BOTH).backend == "torch"
    assert compute.placement("renders", "sdxl", MLX_ONLY).backend == "mlx"  # not listed: auto


def test_env_backend_bare_value_is_the_default_among_per_stage_ones(monkeypatch):
    monkeypatch.setenv("TUNESMITH_BACKEND", "mlx,encoded=torch")
    compute = ComputeResource()
    assert compute.placement("adapters", "sdxl", BOTH).backend == "mlx"
    assert compute.placement("encoded", "sdxl", BOTH).backend == "torch"


@pytest.mark.parametrize("value", ["adapters=mlx,adapters=torch", "mlx,torch", "=mlx", "x="])
def test_malformed_env_backend_is_an_error(monkeypatch, value):
    monkeypatch.setenv("TUNESMITH_BACKEND", value)
    with pytest.raises(ValueError, match="TUNESMITH_BACKEND"):
        ComputeResource().placement("adapters", "sdxl", BOTH)


@cpu_only
def test_env_device_cuda_on_this_machine_names_what_was_found(monkeypatch):
    monkeypatch.setenv("TUNESMITH_DEVICE", "cuda")
    with pytest.raises(ValueError) as err:
        ComputeResource().placement("adapters", "sdxl", BOTH)
    message = str(err.value)
    assert "device='cuda' is pinned" in message
    assert "found: torch cuda: no, mps: no; mlx metal: no, cuda: no" in message
    assert "from TUNESMITH_DEVICE" in message


def test_env_dtype(monkeypatch):
    monkeypatch.setenv("TUNESMITH_DTYPE", "bfloat16")
    assert ComputeResource().placement("adapters", "sdxl", BOTH).dtype == "bfloat16"


@cpu_only
def test_precedence_stage_pin_over_field_over_env_over_auto(monkeypatch):
    monkeypatch.setenv("TUNESMITH_BACKEND", "mlx")
    monkeypatch.setenv("TUNESMITH_DEVICE", "cuda")  # would fail if it won
    monkeypatch.setenv("TUNESMITH_DTYPE", "bfloat16")
    assert str(ComputeResource(device="cpu").placement("a", None, BOTH)) == "mlx/cpu/bfloat16"
    compute = ComputeResource(backend="torch", device="cpu", dtype="float16")
    assert str(compute.placement("a", None, BOTH)) == "torch/cpu/float16"
    compute = ComputeResource(backend="torch", device="cpu", stages={"a": "mlx"})
    assert compute.placement("a", None, BOTH).backend == "mlx"
    assert compute.placement("b", None, BOTH).backend == "torch"
    # "auto" in config counts as set: it overrides the environment's pin.
    assert ComputeResource(backend="auto", device="cpu").placement("a", None, BOTH).backend == (
        "torch"
    )


def test_gpu_pool_name():
    assert GPU_POOL == "gpu"


# --- inside Dagster -------------------------------------------------------------------------


@dg.asset(pool=GPU_POOL)
def placed(compute: ComputeResource) -> dg.MaterializeResult:
    placement = compute.placement("adapters", "sdxl", BOTH)
    return dg.MaterializeResult(metadata={**placement.as_dict(), "reason": placement.reason})


def _metadata(compute: ComputeResource) -> dict:
    result = dg.materialize([placed], resources={"compute": compute})
    assert result.success
    [event] = result.get_asset_materialization_events()
    return {k: v.value for k, v in event.materialization.metadata.items()}


@cpu_only
def test_resource_in_a_materialization_reports_its_placement():
    metadata = _metadata(ComputeResource())
    assert {k: metadata[k] for k in ("backend", "device", "dtype")} == {
        "backend": "torch",
        "device": "cpu",
        "dtype": "float32",
    }
    assert metadata["reason"].startswith("auto: no accelerator found")


@cpu_only
def test_resource_config_reaches_the_materialization():
    metadata = _metadata(ComputeResource(stages={"adapters": "mlx"}, dtype="float16"))
    assert (metadata["backend"], metadata["device"], metadata["dtype"]) == (
        "mlx",
        "cpu",
        "float16",
    )
