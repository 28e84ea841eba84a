"""Choosing the device extraction runs on, with a clear error for one that cannot be used."""

from __future__ import annotations

from ..errors import UsageError, field_ref


def resolve_device(device: str | None) -> str:
    """``device`` checked against this machine (default: cuda when available, else cpu).

    Raises:
        UsageError: a malformed device string, or a CUDA device this machine does not have.
    """
    # torch: only when a computation needs a device
    import torch

    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError):
        raise UsageError(f"unknown device {device!r}", hint="use cpu, cuda or cuda:N") from None
    if parsed.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0 or (parsed.index or 0) >= count:
            raise UsageError(f"device {device!r} is not available on this machine "
                             f"({count} CUDA devices)", hint=f"use {field_ref('device')} cpu")
    elif parsed.type not in ("cpu", "mps"):
        raise UsageError(f"device type {parsed.type!r} is not supported", hint="use cpu or cuda")
    return str(parsed)
