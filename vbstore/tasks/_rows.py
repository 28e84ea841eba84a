"""Scoring stored feature rows in numpy, without torch: the checks a row-scoring task runs on
its inputs, and similarities that are the same bits on every machine and library.

A zero-shot task that declares ``array = "numpy"`` (retrieval) is handed its eval rows as
numpy arrays read straight from the packs, so a second task on stored features loads no torch
(``import torch`` alone is ~2 s). Its numbers must not depend on which library multiplied the
rows: float32 matrix products differ in their last bits between BLAS libraries (torch's MKL,
numpy's OpenBLAS) and between CPU generations of one library (on a 500 x 3000 product of unit
rows, 89 % of the elements differ, by up to 7e-7), and a ranking over such similarities can swap
two near-tied images. So the similarities here are exact:

- each row is scaled by a power of two (exactly) to L2 norm at most 1 and its coordinates are
  rounded onto a grid of ``2**-GRID_BITS``: integers ``k`` with ``|k| <= 2**GRID_BITS``;
- rows of such integers are multiplied in float64: every product and every partial sum of a row
  pair is an integer below ``2**53`` (Cauchy-Schwarz bounds the sum of ``|k_a k_b|`` by the
  product of the norms), so whatever order or fused multiply-add a BLAS uses, each dot product
  (and each squared norm) is exact;
- the cosine is that dot product over the product of the two norms, each step one correctly
  rounded operation, then rounded to float32 (values closer than a float32 step tie, as float32
  similarities always did). Cosines equal in exact arithmetic between rows of one norm (a
  duplicate, a row scaled by a power of two) are equal bits.

Imported only inside task calls, because it imports numpy.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..data import as_array as _array
from ..data import get_target_kind
from ..errors import TaskInputError
from ._blocks import row_blocks

__all__ = ["GRID_BITS", "L2_GRID_BITS", "average_precisions_ranked", "cosine",
           "cosine_grid", "descending_order", "features", "l2_grid", "negative_squared_distance",
           "row_blocks", "row_sums", "targets"]

# Grid of a row's coordinates (scaled to norm <= 1) for cosine similarity: 2**-26 (the exact
# dot product of two grid rows needs 2 * 26 + 1 bits, within float64's 53).
GRID_BITS = 26
# Grid of the Euclidean ranking's coordinates (rows scaled by one power of two to norm <= 1):
# |a|^2 + |b|^2 - 2 a.b needs two bits more than a dot product.
L2_GRID_BITS = 25


def features(x: Any, split: str) -> np.ndarray:
    """Pooled features as float32 (N, C), N >= 1, all finite (the checks of
    ``tasks._checks.features``, in numpy)."""
    x = _array(x)
    if not isinstance(x, np.ndarray):
        raise TaskInputError(f"{split} features must be an array, got {type(x).__name__}")
    if x.ndim != 2:
        raise TaskInputError(
            f"{split} features must be pooled (N, C), got shape {tuple(x.shape)}",
            hint="extract with pooling (feature mode 'pooled')",
        )
    if not np.issubdtype(x.dtype, np.floating):
        raise TaskInputError(f"{split} features must be floating point, got {x.dtype}")
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise TaskInputError(f"{split} features are empty (shape {tuple(x.shape)})")
    finite = np.isfinite(x).all(axis=1)
    if not finite.all():
        raise TaskInputError(f"{split} features hold NaN or Inf (first at row "
                             f"{int(np.flatnonzero(~finite)[0])})")
    return np.ascontiguousarray(x, dtype=np.float32)


def row_sums(values: np.ndarray) -> np.ndarray:
    """Each row's sum, added in a fixed pairwise order (columns padded with zeros to a power of
    two, then halved): elementwise additions only, so the bits do not depend on the library."""
    width = 1 << max(0, (values.shape[1] - 1).bit_length())
    out = np.zeros((len(values), width), dtype=np.float64)
    out[:, :values.shape[1]] = values
    while out.shape[1] > 1:
        out = out[:, 0::2] + out[:, 1::2]
    return out[:, 0]


def cosine_grid(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row scaled by a power of two to norm at most 1 (exactly) and rounded onto the
    ``GRID_BITS`` grid (float64 integers), and each grid row's norm (the square root of an exact
    sum of squares, correctly rounded); an all-zero row stays zero."""
    x64 = x.astype(np.float64)
    norms = np.sqrt(row_sums(x64 * x64))  # fixed order: only its power of two is used
    exponents = np.frexp(norms)[1]  # norm <= 2**exponent (0 for a zero row)
    grid = np.rint(np.ldexp(x64, (GRID_BITS - exponents)[:, None]))
    return grid, np.sqrt((grid * grid).sum(axis=1))  # integers below 2**53: exact in any order


def cosine(grid: np.ndarray, norms: np.ndarray, rows: slice) -> np.ndarray:
    """(rows, N) float32 cosine similarities of ``grid``'s rows (:func:`cosine_grid`) with all
    of its rows: an exact dot product over the product of the norms, correctly rounded; two
    similarities equal in exact arithmetic (a duplicate row, a row scaled by a power of two,
    rows of one norm with one dot product) are equal bits."""
    safe = np.where(norms > 0, norms, 1.0)  # a zero row has zero similarities
    dots = grid[rows] @ grid.T
    return (dots / (safe[rows, None] * safe[None, :])).astype(np.float32)


def l2_grid(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Raw rows scaled by one power of two (the largest norm at most 1) and rounded onto the
    ``L2_GRID_BITS`` grid, and each grid row's squared norm (exact)."""
    x64 = x.astype(np.float64)
    largest = float(np.sqrt(row_sums(x64 * x64)).max())
    exponent = np.frexp(largest)[1] if largest > 0 else 0  # largest <= 2**exponent
    grid = np.rint(np.ldexp(x64, L2_GRID_BITS - int(exponent)))
    return grid, (grid * grid).sum(axis=1)  # integers below 2**53: exact in any order


def negative_squared_distance(grid: np.ndarray, squares: np.ndarray, rows: slice) -> np.ndarray:
    """(rows, N) float64 ``-|a - b|^2`` on the grid (:func:`l2_grid`), exact: the Euclidean
    ranking with higher better."""
    return 2.0 * (grid[rows] @ grid.T) - (squares[rows, None] + squares[None, :])


def average_precisions_ranked(sorted_scores: np.ndarray, sorted_relevant: np.ndarray
                              ) -> list[float]:
    """Average precision of each row, rows already sorted by descending score, each with at
    least one relevant item (``tasks._metrics.average_precision_ranked``'s definition, in
    numpy): each relevant item counts the precision at the *end* of its tie group, so tied
    scores form one threshold whatever their order. Each row's precisions are summed correctly
    rounded (``math.fsum``), so the bits do not depend on a library's summation order."""
    n = sorted_scores.shape[1]
    tp = np.cumsum(sorted_relevant, axis=1, dtype=np.float64)  # exact: small integers
    index = np.broadcast_to(np.arange(n), sorted_scores.shape)
    is_end = np.ones(sorted_scores.shape, dtype=bool)
    is_end[:, :-1] = sorted_scores[:, :-1] != sorted_scores[:, 1:]
    # Index of the last member of each position's tie group: a reversed running minimum.
    ends = np.where(is_end, index, n)
    ends = np.minimum.accumulate(ends[:, ::-1], axis=1)[:, ::-1]
    precision_at_end = np.take_along_axis(tp, ends, axis=1) / (ends + 1).astype(np.float64)
    return [math.fsum(precisions[relevant]) / int(relevant.sum())
            for precisions, relevant in zip(precision_at_end, sorted_relevant, strict=True)]


def targets(kind: str, y: Any, n: int, split: str, n_classes: int | None = None) -> np.ndarray:
    """The targets of a numpy-array task, checked for ``n`` rows (and ``n_classes`` when known)
    by the numpy check its kind registers (``TargetKind.check_array``).

    Raises:
        TaskInputError: targets that do not fit, or a kind that registers no numpy check.
    """
    check = get_target_kind(kind).check_array
    if check is None:
        raise TaskInputError(f"{kind} targets have no numpy check",
                             hint="declare the task's array as torch")
    return check(y, n, split, n_classes)


def descending_order(scores: np.ndarray) -> np.ndarray:
    """Each row's column indices, best score first, equal scores in column order (a stable
    descending sort, as ``torch.sort(..., descending=True, stable=True)``).

    float32 scores are sorted as int64 keys (the float's order-preserving bits, then the
    column), which are distinct, so numpy's fast unstable sort gives the stable order (about
    twice as fast as a stable argsort); other dtypes take a stable argsort.
    """
    if scores.dtype != np.float32 or scores.shape[1] >= 1 << 31:
        return np.argsort(-scores, axis=1, kind="stable")
    bits = (scores + np.float32(0.0)).view(np.int32)  # -0.0 becomes 0.0: they are equal scores
    # negative floats: flip the magnitude bits, so that the integer order is the float order
    ordered = np.where(bits < 0, bits ^ np.int32(0x7FFFFFFF), bits).astype(np.int64)
    keys = ((-ordered - 1) << 32) | np.arange(scores.shape[1], dtype=np.int64)
    keys.sort(axis=1)
    return keys & 0xFFFFFFFF
