"""Input and output checks shared by every task: refuse bad tensors before they become numbers.

Imported only inside task calls, because it imports torch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from ..errors import UsageError
from ._errors import TaskInputError, UndefinedMetric

if TYPE_CHECKING:
    from ._base import HeadState, Metric, Task


def seed(value: Any) -> int:
    """A seed is a non-negative int (bool refused: ``seed=True`` is a mistake)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"seed must be a non-negative integer, got {value!r}")
    return value


def _first_bad_row(x: torch.Tensor) -> int:
    bad = ~torch.isfinite(x).reshape(len(x), -1).all(dim=1)
    return int(bad.nonzero()[0, 0])


def features(x: Any, split: str) -> torch.Tensor:
    """Pooled features as float32 (N, C), N >= 1, all finite.

    float16 packs are widened here so every sum runs in float32 at least.
    """
    if not isinstance(x, torch.Tensor):
        raise TaskInputError(f"{split} features must be a torch.Tensor, got {type(x).__name__}")
    if x.ndim != 2:
        raise TaskInputError(
            f"{split} features must be pooled (N, C), got shape {tuple(x.shape)}",
            hint="extract with pooling (feature mode 'pooled')",
        )
    if not x.is_floating_point():
        raise TaskInputError(f"{split} features must be floating point, got {x.dtype}")
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise TaskInputError(f"{split} features are empty (shape {tuple(x.shape)})")
    if not torch.isfinite(x).all():
        raise TaskInputError(f"{split} features hold NaN or Inf (first at row {_first_bad_row(x)})")
    return x.detach().to(torch.float32)


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


def context_class_names(task: str, context: Mapping[str, Any], hint: str) -> list[str]:
    """The class names a zero-shot task reads from its context (``class_names``), checked.

    Raises:
        UsageError: the context has none (``hint`` names the data that has them).
        TaskInputError: they are not a non-empty list of distinct strings.
    """
    if "class_names" not in context:
        raise UsageError(f"task {task!r} needs the class names in context['class_names']",
                         hint=hint)
    return class_names(context["class_names"])


def targets(kind: str, y: Any, n: int, split: str, n_classes: int | None) -> Any:
    """Check targets of ``kind`` for ``n`` rows; ``n_classes`` bounds them when known."""
    if kind == "captions":
        if y is not None:
            raise TaskInputError(
                f"{split} targets must be None for an image-caption task",
                hint="pass the captions as context['captions']",
            )
        return None
    if not isinstance(y, torch.Tensor):
        raise TaskInputError(f"{split} targets must be a torch.Tensor, got {type(y).__name__}")
    if kind == "class_index":
        if y.ndim != 1 or len(y) != n:
            raise TaskInputError(
                f"{split} targets must be class indices of shape ({n},), got {tuple(y.shape)}"
            )
        if y.is_floating_point() or y.is_complex() or y.dtype == torch.bool:
            raise TaskInputError(f"{split} targets must be integer class indices, got {y.dtype}")
        y = y.detach().to(torch.int64)
        if int(y.min()) < 0:
            raise TaskInputError(f"{split} targets hold a negative class index")
        if n_classes is not None and int(y.max()) >= n_classes:
            raise TaskInputError(
                f"{split} targets hold class {int(y.max())} but there are {n_classes} class names"
            )
        return y
    if kind == "multi_hot":
        if y.ndim != 2 or len(y) != n or y.shape[1] == 0:
            raise TaskInputError(
                f"{split} targets must be multi-hot (N={n}, K>=1), got shape {tuple(y.shape)}"
            )
        y = y.detach()
        if not ((y == 0) | (y == 1)).all():
            raise TaskInputError(f"{split} multi-hot targets must hold only 0 and 1")
        if n_classes is not None and y.shape[1] != n_classes:
            raise TaskInputError(
                f"{split} targets have {y.shape[1]} columns but there are {n_classes} class names"
            )
        return y.to(torch.float32)
    if kind == "triplets":
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
    if kind == "pairs":
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
    raise AssertionError(f"unknown target kind {kind!r}")


def head_in(head: Any) -> HeadState:
    """A head state is a mapping of str -> tensor."""
    if not isinstance(head, Mapping) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in head.items()
    ):
        raise TaskInputError("a head state must map names to tensors")
    return dict(head)


def head_tensor(
    head: HeadState, key: str, task: str, ndim: int, dim: tuple[int, int] | None = None
) -> torch.Tensor:
    """Fetch ``head[key]``, refusing a missing key or a wrong rank/feature size."""
    if key not in head:
        raise TaskInputError(
            f"head has no {key!r} tensor: it was not trained by task {task!r}",
            hint="use a head trained by this task",
        )
    value = head[key]
    if value.ndim != ndim:
        raise TaskInputError(f"head tensor {key!r} has rank {value.ndim}, expected {ndim}")
    if dim is not None and value.shape[dim[0]] != dim[1]:
        raise TaskInputError(
            f"head expects {value.shape[dim[0]]}-dim features but the features have {dim[1]}",
            hint="evaluate with the backbone and pooling the head was trained on",
        )
    return value


def head_out(head: Any) -> HeadState:
    """Contiguous CPU tensors, so the state serialises to safetensors as is."""
    state = head_in(head)
    return {k: v.detach().to("cpu").contiguous() for k, v in sorted(state.items())}


def metrics_out(
    task: Task, values: Mapping[str, Any], declared: Sequence[Metric]
) -> dict[str, float]:
    """Exactly the declared metrics, as finite Python floats, in declared order (a metric
    reported only from some class count on, ``Metric.min_classes``, may be absent)."""
    names = [m.name for m in declared if m.name in values or not m.min_classes]
    if set(values) != set(names):
        raise RuntimeError(
            f"task {task.name!r} returned metrics {sorted(values)}, declared {sorted(names)}"
        )
    out = {}
    for name in names:
        value = float(values[name])
        if not math.isfinite(value):
            raise UndefinedMetric(task.name, name, f"it evaluated to {value}")
        out[name] = value
    return out
