"""Pooled targets checked in numpy, for tasks that score stored rows without torch
(``TargetKind.check_array``); :mod:`._target_rows`' class-index and multi-hot checks, for
tasks that take tensors, are these on the tensor's values: each check is written once.

Imported only inside task calls, because it imports numpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import TaskInputError


def as_array(x: Any) -> Any:
    """A numpy view of ``x``: torch tensors (a caller of the Python API) are detached and
    copied to the CPU without importing torch here."""
    if hasattr(x, "detach") and hasattr(x, "numpy"):
        return x.detach().cpu().numpy()
    return x


def class_index(y: Any, n: int, split: str, n_classes: int | None = None) -> np.ndarray:
    """Class-index targets as int64 (n,), each >= 0 and below ``n_classes`` when known."""
    y = as_array(y)
    if not isinstance(y, np.ndarray):
        raise TaskInputError(f"{split} targets must be an array, got {type(y).__name__}")
    if y.ndim != 1 or len(y) != n:
        raise TaskInputError(
            f"{split} targets must be class indices of shape ({n},), got {tuple(y.shape)}")
    if not np.issubdtype(y.dtype, np.integer) or y.dtype == np.bool_:
        raise TaskInputError(f"{split} targets must be integer class indices, got {y.dtype}")
    y = y.astype(np.int64)
    if int(y.min()) < 0:
        raise TaskInputError(f"{split} targets hold a negative class index")
    if n_classes is not None and int(y.max()) >= n_classes:
        raise TaskInputError(
            f"{split} targets hold class {int(y.max())} but there are {n_classes} class names")
    return y


def multi_hot(y: Any, n: int, split: str, n_classes: int | None = None) -> np.ndarray:
    """Multi-hot targets as float32 (n, K), K >= 1, every entry 0 or 1, K the class count when
    known."""
    y = as_array(y)
    if not isinstance(y, np.ndarray):
        raise TaskInputError(f"{split} targets must be an array, got {type(y).__name__}")
    if y.ndim != 2 or len(y) != n or y.shape[1] == 0:
        raise TaskInputError(
            f"{split} targets must be multi-hot (N={n}, K>=1), got shape {tuple(y.shape)}")
    if not ((y == 0) | (y == 1)).all():
        raise TaskInputError(f"{split} multi-hot targets must hold only 0 and 1")
    if n_classes is not None and y.shape[1] != n_classes:
        raise TaskInputError(
            f"{split} targets have {y.shape[1]} columns but there are {n_classes} class names")
    return y.astype(np.float32)
