"""The checks and ranking metrics of a pooled task that computes in numpy (``array = "numpy"``:
the linear probes), torch-free: a new head on stored rows loads no torch. The plain checks
(a seed, class names) are here too, for every task (``._checks`` re-exports them).

Imported only inside task calls, because it imports numpy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..data import as_array
from ..errors import TaskInputError, UsageError
from ._blocks import row_blocks
from ._rows import average_precisions_ranked, descending_order


def seed(value: Any) -> int:
    """A seed is a non-negative int (bool refused: ``seed=True`` is a mistake)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"seed must be a non-negative integer, got {value!r}")
    return value


def class_names(names: Any) -> list[str]:
    """A non-empty list of distinct strings."""
    if isinstance(names, str) or not isinstance(names, Sequence):
        raise TaskInputError(f"class_names must be a list of strings, got {type(names).__name__}")
    names = list(names)
    if not names or not all(isinstance(n, str) for n in names):
        raise TaskInputError("class_names must be a non-empty list of strings")
    if len(set(names)) != len(names):
        raise TaskInputError("class_names hold a duplicate name")
    return names


def head_in(head: Any) -> dict[str, np.ndarray]:
    """A head state as numpy arrays: a mapping of str -> array (numpy, or torch tensors as a
    Python caller gives them)."""
    if not isinstance(head, Mapping) or not all(isinstance(k, str) for k in head):
        raise TaskInputError("a head state must map names to tensors")
    out = {k: as_array(v) for k, v in head.items()}
    if not all(isinstance(v, np.ndarray) for v in out.values()):
        raise TaskInputError("a head state must map names to tensors")
    return out


def head_out(head: Any) -> dict[str, np.ndarray]:
    """Contiguous numpy arrays by name, so the state serialises to safetensors as is."""
    return {k: np.ascontiguousarray(v) for k, v in sorted(head_in(head).items())}


def topk_hits(scores: np.ndarray, targets: np.ndarray, ks: Sequence[int]) -> list[np.ndarray]:
    """For each ``k``, (N,) bool: whether ``targets[i]`` is among the ``k`` best columns of row
    ``i``, ranked by a stable descending sort (ties to the lower column: the tasks' tie rule,
    ``._metrics.ranking``)."""
    out = [np.empty(len(scores), dtype=bool) for _ in ks]
    for rows in row_blocks(*scores.shape):
        order = descending_order(scores[rows])
        for hits, k in zip(out, ks, strict=True):
            hits[rows] = (order[:, :min(k, scores.shape[1])] == targets[rows, None]).any(axis=1)
    return out


def macro_average_precision(scores: np.ndarray, targets: np.ndarray) -> float | None:
    """Mean over the labels (columns) with a positive of each label's average precision,
    ranking the rows by its scores (ties one threshold, as scikit-learn's); ``None`` when no
    label has a positive."""
    present = np.flatnonzero(targets.sum(axis=0) > 0)
    if len(present) == 0:
        return None
    aps: list[float] = []
    for rows in row_blocks(len(present), len(scores)):
        columns = present[rows]
        by_label = np.ascontiguousarray(scores[:, columns].T)
        order = descending_order(by_label)
        relevant = np.take_along_axis(targets[:, columns].T > 0, order, axis=1)
        aps += average_precisions_ranked(np.take_along_axis(by_label, order, axis=1), relevant)
    return float(np.mean(aps))
