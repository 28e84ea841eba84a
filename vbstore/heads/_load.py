"""Loading a head's tensors: checked against the features they meet, then against themselves."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from ..errors import BadHead, HeadMismatch, HeadMismatchWarning
from ._record import check_compat, head_record, name_backbones, reading_flags


def load_head(store, head_id: str, expected: Mapping[str, Any] | None = None,
              strict: bool = True, array: str = "torch"
              ) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """Load a head's tensors after checking it fits ``expected`` features.

    Args:
        array: ``torch`` tensors, or ``numpy`` arrays (read without torch, for a task that
            computes in numpy).

    Returns:
        ``(state, record, compatible)``; ``compatible`` is False only when ``strict`` is off
        and something differed (a warning was issued).

    Raises:
        HeadMismatch: ``strict`` and the backbone weights, input size, pooling, feature mode,
            layers or embedding width differ.
    """
    record = head_record(store, head_id)
    differences = check_compat(record, expected or {})
    problems = name_backbones(store, record, expected or {}, differences)
    if problems and strict:
        raise HeadMismatch(problems, reading_flags(record, expected or {}, differences))
    if problems:
        warnings.warn("applying a mismatched head: " + "; ".join(problems), HeadMismatchWarning,
                      stacklevel=2)
    data = store.read_bytes(head_id, verify=True)
    state: dict[str, Any]
    if array == "numpy":
        from safetensors.numpy import load as arrays  # numpy: a numpy task loads no torch

        state = arrays(data)
    else:
        from safetensors.torch import load  # torch: only when a head's tensors are loaded

        state = load(data)
    check_values(head_id, record, state)
    return state, record, not problems


def check_values(head_id: str, record: Mapping[str, Any], state: Mapping[str, Any]) -> None:
    """Refuse a head whose numbers cannot be right whatever features it meets: a NaN or
    infinite value (training refuses to store one, so it was made elsewhere), or a record whose
    class count is not a count or exceeds every output the head has.

    Raises:
        BadHead: naming the tensor or the count.
    """
    for key, value in sorted(state.items()):
        if not _finite(value):
            raise BadHead(head_id, f"tensor {key!r} holds NaN or infinite values")
    params = record.get("params")
    count = params.get("num_classes", 0) if isinstance(params, dict) else 0
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise BadHead(head_id, f"its record's num_classes is {count!r}, not a count")
    outputs = max((int(v.shape[0]) for v in state.values() if v.ndim >= 1), default=0)
    if count > outputs:
        raise BadHead(head_id, f"its record says num_classes {count} but its largest output "
                               f"has {outputs} rows")


def _finite(value: Any) -> bool:
    """Whether a head's tensor (torch) or array (numpy) holds no NaN or infinity."""
    if hasattr(value, "is_floating_point"):
        import torch  # the head's tensors are torch's: torch is already here

        return not value.is_floating_point() or bool(torch.isfinite(value).all())
    import numpy as np  # the head's arrays are numpy's: numpy is already here

    return not np.issubdtype(value.dtype, np.inexact) or bool(np.isfinite(value).all())
