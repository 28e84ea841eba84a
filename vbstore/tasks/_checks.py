"""Input and output checks shared by every task: refuse bad tensors before they become numbers.

Imported only inside task calls, because it imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch

from ..data import _target_rows, get_target_kind
from ..errors import UsageError
from ._arrays import class_names, seed  # noqa: F401  (torch-free; tasks call _checks.seed)
from ._declare import metrics_out  # noqa: F401  (the shapes call it as _checks.metrics_out)
from ._errors import TaskInputError

if TYPE_CHECKING:
    from ._base import HeadState


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
    """Check targets of ``kind`` for ``n`` rows; ``n_classes`` bounds them when known. The
    kind's own check (``TargetKind.check_targets``) decides; a kind that declares none takes a
    tensor with one finite row per feature row."""
    check = get_target_kind(kind).check_targets or _target_rows.rows
    return check(y, n, split, n_classes)


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
