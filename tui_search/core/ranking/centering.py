"""The direction every chunk vector of an index shares, taken out of semantic-mode cosines.

A static model's vectors share a large common component (their mean, and the first principal
direction around it), so raw cosines run high and close together whatever the text. Semantic
mode compares the query with each candidate after removing both: ``v -> normalise(v - mean)``,
then the principal direction's component out, then normalised again (the "all but the top"
post-processing, one component). The mean and the direction come from an even sample of the
index's own vectors; nothing is stored, and the stored vectors are not changed. Hybrid mode
keeps the plain cosine (docs/ranking.md#centering)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Vectors read to estimate the mean and the direction (evenly spaced over the index).
SAMPLE_SIZE = 2048
#: Power iteration on the sample's second-moment matrix: at most this many steps, stopping once the
#: direction moves less than ``TOLERANCE`` (a few dozen steps on every judged set).
MAX_ITERATIONS = 1000
TOLERANCE = 1e-9


def even_sample(count: int, size: int = SAMPLE_SIZE) -> np.ndarray:
    """``size`` indices spread evenly over ``range(count)`` (all of them when fewer)."""
    if count <= size:
        return np.arange(count)
    return np.linspace(0, count - 1, size).round().astype(np.int64)


@dataclass(frozen=True, slots=True)
class Centering:
    mean: np.ndarray
    direction: np.ndarray

    @classmethod
    def from_vectors(cls, vectors: np.ndarray) -> Centering | None:
        """The mean of ``vectors`` and the first principal direction of the centred vectors,
        each scaled to unit length first (the direction ``project`` then removes from unit
        rows): the first eigenvector of their second-moment matrix, by power iteration from a
        fixed start, so one sample always gives one answer. None for fewer than two vectors
        or vectors that do not vary."""
        x = np.asarray(vectors, dtype=np.float64)
        if x.ndim != 2 or len(x) < 2:
            return None
        mean = x.mean(axis=0)
        centred = x - mean
        centred /= np.maximum(np.linalg.norm(centred, axis=1, keepdims=True), 1e-12)
        covariance = centred.T @ centred / len(x)
        if float(np.trace(covariance)) <= 1e-12:
            return None
        direction = np.full(x.shape[1], 1.0 / np.sqrt(x.shape[1]))
        for _ in range(MAX_ITERATIONS):
            step = covariance @ direction
            norm = float(np.linalg.norm(step))
            if norm <= 1e-15:
                return None
            step /= norm
            done = float(np.linalg.norm(step - direction)) < TOLERANCE
            direction = step
            if done:
                break
        return cls(mean.astype(np.float32), direction.astype(np.float32))

    def project(self, rows: np.ndarray) -> np.ndarray:
        """``rows`` (n, dim) centred, normalised, without the direction, normalised again."""
        out = np.atleast_2d(np.asarray(rows, dtype=np.float32)) - self.mean
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        out -= np.outer(out @ self.direction, self.direction)
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out

    def cosines(self, query: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The cosine of each of ``rows`` with ``query``, both projected."""
        return self.project(rows) @ self.project(query)[0]
