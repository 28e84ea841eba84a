"""The built-in kinds' checks of a pooled task's targets (``TargetKind.check_targets``):
refuse targets that do not fit the feature rows before they become numbers.

Each check takes ``(y, n, split, n_classes)``: the targets as the task receives them, the
number of feature rows, the split's name for the message and the class count when known; it
returns the targets as the task computes with them. Called only inside task calls, where torch
is loaded already: this module imports it at its top and is itself imported only there.
"""

from __future__ import annotations

from typing import Any

import torch

from ..errors import TaskInputError
from . import _target_arrays


def tensor(y: Any, split: str) -> torch.Tensor:
    """Targets are a tensor (every kind that reads them from the manifest)."""
    if not isinstance(y, torch.Tensor):
        raise TaskInputError(f"{split} targets must be a torch.Tensor, got {type(y).__name__}")
    return y


def rows(y: Any, n: int, split: str, n_classes: int | None) -> torch.Tensor:
    """A kind that declares no check of its own: a tensor with one finite row per feature row."""
    y = tensor(y, split)
    if y.ndim == 0 or len(y) != n:
        raise TaskInputError(f"{split} targets must have one row per feature row ({n}), got "
                             f"shape {tuple(y.shape)}")
    if y.is_floating_point() and not bool(torch.isfinite(y).all()):
        raise TaskInputError(f"{split} targets hold NaN or Inf")
    return y.detach()


def captions(y: Any, n: int, split: str, n_classes: int | None) -> None:
    if y is not None:
        raise TaskInputError(
            f"{split} targets must be None for an image-caption task",
            hint="pass the captions as context['captions']",
        )
    return None


def _in_numpy(check: Any, y: Any, n: int, split: str, n_classes: int | None) -> torch.Tensor:
    """``check`` (one of :mod:`._target_arrays`: the checks are written once, in numpy) on a
    tensor's values, its answer back as a tensor on the tensor's device."""
    y = tensor(y, split)
    # numpy has no bfloat16: the same values as float32 (a float, refused or taken as before)
    values = y.float() if y.dtype == torch.bfloat16 else y
    return torch.from_numpy(check(values, n, split, n_classes)).to(y.device)


def class_index(y: Any, n: int, split: str, n_classes: int | None) -> torch.Tensor:
    return _in_numpy(_target_arrays.class_index, y, n, split, n_classes)


def multi_hot(y: Any, n: int, split: str, n_classes: int | None) -> torch.Tensor:
    return _in_numpy(_target_arrays.multi_hot, y, n, split, n_classes)


def triplets(y: Any, n: int, split: str, n_classes: int | None) -> torch.Tensor:
    y = tensor(y, split)
    if y.numel() == 0:
        raise TaskInputError(f"the {split} data holds no triplets",
                             hint="give 2AFC triplets: a folder with a NIGHTS-style data.csv, "
                                  "or the generated triplets")
    if y.ndim != 2 or y.shape[1] != 5 or len(y) == 0:
        raise TaskInputError(
            f"{split} triplets must be (T>=1, 5) [ref, left, right, left_vote, right_vote], "
            f"got shape {tuple(y.shape)}"
        )
    if y.is_floating_point() or y.is_complex() or y.dtype == torch.bool:
        raise TaskInputError(f"{split} triplets must be integers, got {y.dtype}")
    y = y.detach().to(torch.int64)
    if int(y.min()) < 0 or int(y[:, :3].max()) >= n:
        raise TaskInputError(f"{split} triplets index images outside the {n} feature rows "
                             "or hold a negative vote")
    return y


def pairs(y: Any, n: int, split: str, n_classes: int | None) -> torch.Tensor:
    y = tensor(y, split)
    if y.numel() == 0:
        raise TaskInputError(f"the {split} data holds no pairs",
                             hint="give view pairs: a folder with a pairs.csv, or scenes")
    if y.ndim != 2 or y.shape[1] != 9:
        raise TaskInputError(
            f"{split} pairs must be (P>=1, 9) [a, b, qw, qx, qy, qz, tx, ty, tz], "
            f"got shape {tuple(y.shape)}"
        )
    if not y.is_floating_point() or not bool(torch.isfinite(y).all()):
        raise TaskInputError(f"{split} pairs must be finite floats, got {y.dtype}")
    y = y.detach().to(torch.float64)
    index = y[:, :2]
    if bool((index != index.round()).any()) or int(index.min()) < 0 or int(index.max()) >= n:
        raise TaskInputError(f"{split} pairs index images outside the {n} feature rows")
    norms = y[:, 2:6].norm(dim=1)
    if bool(((norms - 1).abs() > 1e-3).any()):
        raise TaskInputError(f"{split} pair rotations must be unit quaternions")
    return y
