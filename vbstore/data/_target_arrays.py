"""The built-in kinds' checks of a pooled task's targets as numpy arrays
(``TargetKind.check_rows``): what ``._target_rows`` checks on tensors, for a task that scores
stored rows without torch (``ZeroShotTask.array = "numpy"``, ``vbstore.tasks._rows``).

Each check takes ``(y, n, split, n_classes)`` and returns the targets as the task computes with
them; a torch tensor (a Python caller's) is converted without importing torch here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import TaskInputError


def array(y: Any, split: str) -> np.ndarray:
    """Targets as a numpy array (a tensor is detached and copied to the CPU)."""
    if hasattr(y, "detach") and hasattr(y, "numpy"):
        y = y.detach().cpu().numpy()
    if not isinstance(y, np.ndarray):
        raise TaskInputError(f"{split} targets must be an array, got {type(y).__name__}")
    return y


def class_index(y: Any, n: int, split: str, n_classes: int | None) -> np.ndarray:
    """Class indices as int64 (n,), each >= 0 and below ``n_classes`` when known."""
    y = array(y, split)
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
