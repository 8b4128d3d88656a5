"""The golden comparison: bytes first, then values within rounding, never looser than that."""

from __future__ import annotations

import copy

from tests.test_golden import RTOL, differences

RECORDED = {
    "metadata": {"ss_network_dim": "4", "tunesmith.config": '{"lr": 0.001, "steps": 6}'},
    "tensors": {
        "a.lora_B.weight": {
            "dtype": "torch.float16",
            "shape": [4, 8],
            "rms": 0.5,
            "mean": 0.01,
            "picks": [0.5, -0.25, 0.75, 0.0],
        },
    },
}


def _moved(change) -> list[str]:
    found = copy.deepcopy(RECORDED)
    change(found)
    return differences(RECORDED, found)


def test_rounding_passes_and_a_changed_computation_does_not():
    def last_bits(f):
        f["tensors"]["a.lora_B.weight"]["picks"][1] += 1e-6

    def scaled(f):
        f["tensors"]["a.lora_B.weight"]["picks"] = [
            v * 1.1 for v in RECORDED["tensors"]["a.lora_B.weight"]["picks"]
        ]

    def one_value(f):
        f["tensors"]["a.lora_B.weight"]["picks"][2] += 3 * RTOL * 0.5

    assert _moved(last_bits) == []
    assert _moved(scaled) and _moved(one_value)


def test_structure_and_settings_must_match_exactly():
    def other_lr(f):
        f["metadata"]["tunesmith.config"] = '{"lr": 0.002, "steps": 6}'

    def other_steps(f):
        f["metadata"]["tunesmith.config"] = '{"lr": 0.001, "steps": 7}'

    def other_dtype(f):
        f["tensors"]["a.lora_B.weight"]["dtype"] = "torch.bfloat16"

    def other_shape(f):
        f["tensors"]["a.lora_B.weight"]["shape"] = [8, 4]

    def other_key(f):
        f["tensors"]["b.lora_B.weight"] = f["tensors"].pop("a.lora_B.weight")

    def other_rank(f):
        f["metadata"]["ss_network_dim"] = "8"

    for change in (other_lr, other_steps, other_dtype, other_shape, other_key, other_rank):
        assert _moved(change), change.__name__


def test_pixels_may_move_by_rounding_only():
    png = {"mode": "RGB", "shape": [2, 2, 3], "rms": 100.0, "mean": 90.0, "picks": [10.0, 200.0]}
    nudged = {**png, "picks": [11.0, 200.0]}
    wrong = {**png, "picks": [30.0, 200.0]}
    assert differences(png, nudged, "samples/0-0.png") == []
    assert differences(png, wrong, "samples/0-0.png")
