"""The measures on embeddings: similarity and the Fréchet distance between two sets.

Embeddings are rows of unit length (`tunesmith.quality.embedders`), so a similarity is a dot
product. The Fréchet distance is the one FAD (audio) and FID (pictures) use, between Gaussians
fitted to two sets of rows:

    |mu_a - mu_b|^2 + Tr(S_a + S_b - 2 (S_a S_b)^(1/2))

computed with symmetric eigendecompositions only (Tr (S_a S_b)^(1/2) is the sum of the square
roots of the eigenvalues of S_a^(1/2) S_b S_a^(1/2)), so it needs numpy alone and stays real
for the rank-deficient covariances a handful of renders give. With so few rows the number is a
biased estimate of the distance between the distributions; it is comparable between
checkpoints of a run (same renders' seeds, same references), which is what it is used for,
and against the split-half floor of the dataset itself.
"""

from __future__ import annotations

import numpy as np

MIN_FLOOR_ITEMS = 4  # fewer dataset items than this: no split-half floor (two rows a half)


def similarity(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of every row of `a` [n, d] to every row of `b` [m, d]: [n, m]."""
    return np.asarray(a, np.float64) @ np.asarray(b, np.float64).T


def paired_similarity(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of row i of `a` to row i of `b`: [n]."""
    return np.einsum("nd,nd->n", np.asarray(a, np.float64), np.asarray(b, np.float64))


def frechet(a: np.ndarray, b: np.ndarray) -> float:
    """The Fréchet distance between Gaussians fitted to the rows of `a` and of `b` (the
    population covariance, so one row has a covariance of zero)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    mean = a.mean(axis=0) - b.mean(axis=0)
    cov_a, cov_b = _covariance(a), _covariance(b)
    root_a = _sqrt_psd(cov_a)
    product = np.linalg.eigvalsh(root_a @ cov_b @ root_a)
    cross = np.sqrt(np.clip(product, 0.0, None)).sum()
    value = mean @ mean + np.trace(cov_a) + np.trace(cov_b) - 2.0 * cross
    return float(max(value, 0.0))


def split_half_floor(rows: np.ndarray) -> float | None:
    """The dataset's distance to itself: the Fréchet distance between its even and odd rows
    (in the order given, which the caller fixes). A render set cannot be expected to come
    closer to the dataset than the dataset's own halves are to each other. None under
    `MIN_FLOOR_ITEMS` rows."""
    rows = np.asarray(rows, np.float64)
    if len(rows) < MIN_FLOOR_ITEMS:
        return None
    return frechet(rows[0::2], rows[1::2])


def _covariance(rows: np.ndarray) -> np.ndarray:
    centred = rows - rows.mean(axis=0)
    return centred.T @ centred / len(rows)


def _sqrt_psd(matrix: np.ndarray) -> np.ndarray:
    values, vectors = np.linalg.eigh(matrix)
    return (vectors * np.sqrt(np.clip(values, 0.0, None))) @ vectors.T
