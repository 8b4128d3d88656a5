"""The -xs adapters' SVD bases (stable-audio-3 `_canonicalize_svd_signs`) and their cache."""

from __future__ import annotations

import json
import struct

import pytest
import torch
from safetensors import safe_open

from tunesmith.adapters.svd_bases import BasesCache, BasesError, canonical_bases


def weight(out=6, fan_in=9, seed=0, dtype=torch.float32) -> torch.Tensor:
    torch.manual_seed(seed)
    return torch.randn(out, fan_in, dtype=dtype)


@pytest.mark.parametrize("shape", [(6, 9), (9, 6), (6, 4, 3)], ids=["wide", "tall", "conv1d"])
def test_each_u_column_has_its_largest_entry_positive_and_the_bases_are_orthonormal(shape):
    torch.manual_seed(1)
    w = torch.randn(shape)
    u, v = canonical_bases(w, 4)
    fan_in = w[0].numel()
    assert u.shape == (shape[0], 4) and v.shape == (fan_in, 4)
    assert u.dtype == v.dtype == torch.float32 and u.device.type == "cpu"
    for j in range(4):
        column = u[:, j]
        assert column[column.abs().argmax()] > 0
    torch.testing.assert_close(u.T @ u, torch.eye(4), rtol=0, atol=1e-5)
    torch.testing.assert_close(v.T @ v, torch.eye(4), rtol=0, atol=1e-5)


def test_the_signs_follow_the_weight_not_the_solver():
    # W = Q1·diag(S)·Q2ᵀ with known singular vectors: each pair comes back with the sign that
    # makes the largest |U| entry positive, whatever sign the SVD picked.
    torch.manual_seed(2)
    q1 = torch.linalg.qr(torch.randn(6, 6, dtype=torch.float64))[0]
    q2 = torch.linalg.qr(torch.randn(8, 6, dtype=torch.float64))[0]
    s = torch.tensor([6.0, 5.0, 4.0, 3.0, 2.0, 1.0], dtype=torch.float64)
    w = q1 @ torch.diag(s) @ q2.T
    signs = torch.sign(q1[q1.abs().argmax(dim=0), torch.arange(6)])
    u, v = canonical_bases(w, 6)
    torch.testing.assert_close(u.double(), q1 * signs, rtol=0, atol=1e-5)
    torch.testing.assert_close(v.double(), q2 * signs, rtol=0, atol=1e-5)
    # Negating W negates U or V of each pair, never the canonical U.
    u_neg, v_neg = canonical_bases(-w, 6)
    torch.testing.assert_close(u_neg, u, rtol=0, atol=1e-5)
    torch.testing.assert_close(v_neg, -v, rtol=0, atol=1e-5)


def test_permuting_rows_permutes_u_and_keeps_v():
    # Why M_xs needs no permutation where a fused projection's rows are reordered.
    w = weight(out=8, fan_in=6, seed=3)
    permutation = torch.randperm(8, generator=torch.Generator().manual_seed(0))
    u, v = canonical_bases(w, 5)
    u_p, v_p = canonical_bases(w[permutation], 5)
    torch.testing.assert_close(u_p, u[permutation], rtol=0, atol=1e-5)
    torch.testing.assert_close(v_p, v, rtol=0, atol=1e-5)


@pytest.mark.parametrize("rank", [6, 3])
def test_u_s_vt_truncated_reconstructs_the_weight(rank):
    w = weight(seed=4)
    u, v = canonical_bases(w, rank)
    s = torch.linalg.svdvals(w)
    reconstruction = u @ torch.diag(s[:rank]) @ v.T
    # The best rank-r approximation: the error is the norm of the dropped singular values.
    error = torch.linalg.matrix_norm(w - reconstruction)
    torch.testing.assert_close(error, s[rank:].norm(), rtol=1e-4, atol=1e-5)
    if rank == 6:
        torch.testing.assert_close(reconstruction, w, rtol=0, atol=1e-5)


def test_a_half_weight_is_decomposed_in_fp32():
    w = weight(dtype=torch.float16, seed=5)
    u, v = canonical_bases(w, 3)
    assert u.dtype == torch.float32
    expected_u, expected_v = canonical_bases(w.float(), 3)
    assert torch.equal(u, expected_u) and torch.equal(v, expected_v)


@pytest.mark.parametrize(
    ("w", "rank", "message"),
    [
        (torch.zeros(6, 4), 5, r"rank 5 is more than this 6x4 weight.*rank ≤ 4"),
        (torch.zeros(3, 2, 2), 4, r"rank 4 is more than this 3x4 weight.*rank ≤ 3"),
        (torch.zeros(6, 4), 0, "rank must be an integer ≥ 1"),
        (torch.zeros(6), 1, "no \\(out, fan_in\\) view"),
    ],
)
def test_bad_ranks_and_shapes_are_refused_with_a_clear_message(w, rank, message):
    with pytest.raises(BasesError, match=message):
        canonical_bases(w, rank)


# --- the cache ----------------------------------------------------------------------------------


def test_a_second_get_or_compute_reads_the_file_and_computes_nothing(tmp_path):
    path = tmp_path / "cache" / "sa3-r3.safetensors"
    cache = BasesCache(path, fingerprint="abc123")
    layers = {"a.to_q": weight(seed=6), "b.conv": weight(6, 12, seed=7).view(6, 4, 3)}
    first = cache.get_or_compute(layers, 3)
    assert (first.cached, first.computed) == (0, 2)
    assert list(first.bases) == ["a.to_q", "b.conv"]
    for name, w in layers.items():
        expected = canonical_bases(w, 3)
        assert all(torch.equal(a, b) for a, b in zip(first.bases[name], expected, strict=True))

    calls = []

    def never() -> torch.Tensor:
        calls.append(1)
        raise AssertionError("a cached layer's weight is not needed")

    second = BasesCache(path, "abc123").get_or_compute({"a.to_q": never, "b.conv": never}, 3)
    assert (second.cached, second.computed) == (2, 0) and not calls
    for name in layers:
        assert all(
            torch.equal(a, b) for a, b in zip(second.bases[name], first.bases[name], strict=True)
        )


def test_the_file_is_safetensors_with_its_metadata_and_nothing_else(tmp_path):
    path = tmp_path / "bases.safetensors"
    BasesCache(path, "abc123").get_or_compute({"layer": weight(seed=8)}, 2)
    raw = path.read_bytes()
    (header_length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + header_length])  # a safetensors header, not a pickle
    assert header["__metadata__"] == {
        "format": "tunesmith.svd-bases",
        "version": "1",
        "fingerprint": "abc123",
        "rank": "2",
    }
    with safe_open(path, framework="pt") as f:
        assert sorted(f.keys()) == ["layer.U", "layer.V"]
        assert f.get_tensor("layer.U").shape == (6, 2) and f.get_tensor("layer.V").shape == (9, 2)
        assert f.get_tensor("layer.U").dtype == torch.float32
    assert [p.name for p in tmp_path.iterdir()] == ["bases.safetensors"]  # no temporary left


def test_a_missing_layer_is_computed_and_appended(tmp_path):
    path = tmp_path / "bases.safetensors"
    cache = BasesCache(path, "abc123")
    first = cache.get_or_compute({"one": weight(seed=9), "two": weight(seed=10)}, 3)
    result = cache.get_or_compute({"two": lambda: weight(seed=10), "three": weight(seed=11)}, 3)
    assert (result.cached, result.computed) == (1, 1)
    assert list(result.bases) == ["two", "three"]
    stored = cache.read(3)
    assert sorted(stored) == ["one", "three", "two"]
    assert torch.equal(stored["one"][0], first.bases["one"][0])
    assert torch.equal(stored["three"][1], canonical_bases(weight(seed=11), 3)[1])
    assert [p.name for p in tmp_path.iterdir()] == ["bases.safetensors"]


def test_another_models_or_ranks_file_is_refused_not_overwritten(tmp_path):
    path = tmp_path / "bases.safetensors"
    BasesCache(path, "abc123").get_or_compute({"layer": weight(seed=12)}, 3)
    before = path.read_bytes()
    with pytest.raises(BasesError, match=r"not an SVD bases cache of 'other' at rank 3"):
        BasesCache(path, "other").get_or_compute({"layer": weight(seed=12)}, 3)
    with pytest.raises(BasesError, match=r"at rank 4 .*'rank': '3'"):
        BasesCache(path, "abc123").get_or_compute({"layer": weight(seed=12)}, 4)
    with pytest.raises(BasesError, match=r"cached for a 6x9 weight, this one is 9x6"):
        BasesCache(path, "abc123").get_or_compute({"layer": weight(9, 6, seed=12)}, 3)
    assert path.read_bytes() == before


def test_the_cache_is_a_safetensors_path_of_a_named_model(tmp_path):
    with pytest.raises(BasesError, match=r"is a \.safetensors file"):
        BasesCache(tmp_path / "bases.pt", "abc123")
    with pytest.raises(BasesError, match="fingerprint is empty"):
        BasesCache(tmp_path / "bases.safetensors", "")
    assert BasesCache(tmp_path / "absent.safetensors", "abc123").read(3) == {}
