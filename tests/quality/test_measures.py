"""The measures against their formulas: similarity, Fréchet distance, split-half floor."""

from __future__ import annotations

import numpy as np
import pytest

from tunesmith.quality.measures import frechet, paired_similarity, similarity, split_half_floor


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _frechet_by_definition(a: np.ndarray, b: np.ndarray) -> float:
    """The textbook form, with the matrix square root of S_a S_b from its eigenvectors
    (S_a S_b is diagonalisable with non-negative eigenvalues for PSD S_a, S_b)."""
    ca = np.cov(a, rowvar=False, bias=True)
    cb = np.cov(b, rowvar=False, bias=True)
    values, vectors = np.linalg.eig(ca @ cb)
    root = (vectors * np.sqrt(np.clip(values.real, 0, None))) @ np.linalg.inv(vectors)
    d = a.mean(0) - b.mean(0)
    return float(d @ d + np.trace(ca + cb - 2 * root.real))


def test_frechet_matches_its_definition_and_is_zero_on_itself():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(40, 6))
    b = rng.normal(loc=0.5, scale=1.5, size=(30, 6))
    assert frechet(a, b) == pytest.approx(_frechet_by_definition(a, b), rel=1e-6)
    assert frechet(a, a) == pytest.approx(0.0, abs=1e-9)
    assert frechet(a, b) == pytest.approx(frechet(b, a), rel=1e-9)


def test_frechet_of_gaussians_with_known_distance():
    # N(m1, s1^2 I) against N(m2, s2^2 I): |m1-m2|^2 + d (s1 - s2)^2
    rng = np.random.default_rng(1)
    a = rng.normal(0.0, 1.0, size=(20000, 3))
    b = rng.normal(2.0, 0.5, size=(20000, 3))
    assert frechet(a, b) == pytest.approx(3 * 4.0 + 3 * 0.25, rel=0.02)


def test_frechet_with_few_rows_stays_real_and_finite():
    rng = np.random.default_rng(2)
    renders = _unit(rng.normal(size=(2, 64)))  # two renders in 64 dimensions: rank one
    items = _unit(rng.normal(size=(5, 64)))
    value = frechet(renders, items)
    assert np.isfinite(value) and value > 0
    one = frechet(renders[:1], items)
    mean = renders[0] - items.mean(0)
    spread = np.trace(np.cov(items, rowvar=False, bias=True))
    assert one == pytest.approx(mean @ mean + spread, rel=1e-9)  # one row: no covariance


def test_similarities_and_floor():
    a = _unit(np.array([[1.0, 0.0], [1.0, 1.0]]))
    b = _unit(np.array([[1.0, 0.0], [0.0, 1.0]]))
    assert similarity(a, b) == pytest.approx(np.array([[1.0, 0.0], [2**-0.5, 2**-0.5]]))
    assert paired_similarity(a, b) == pytest.approx(np.array([1.0, 2**-0.5]))
    assert split_half_floor(a) is None
    rows = np.random.default_rng(3).normal(size=(8, 4))
    assert split_half_floor(rows) == pytest.approx(frechet(rows[0::2], rows[1::2]))
