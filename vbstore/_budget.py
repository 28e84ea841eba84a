"""The memory budget: how much one allocation that the input decides may take.

A class count, a mask size or an output count comes from data or a flag; multiplied out it can
ask for terabytes, which torch answers with a raw ``RuntimeError`` after trying (or the kernel
answers by killing the process). Each such place estimates its largest allocation first and
calls :func:`check_memory`, which refuses it in one line naming the limit and how to raise it.
An input resolution is such a number too (:func:`check_input_size`): checked when a backbone is
asked for at that size, and again with the batch and patch size before features are extracted.
"""

from __future__ import annotations

import os
import re

from .errors import OverBudget, UsageError

MEMORY_ENV = "VBSTORE_MAX_MEMORY"
DEFAULT_MEMORY = 16 << 30  # enough for any published probe protocol's largest tensor


def default_limit() -> int:
    """:data:`DEFAULT_MEMORY`, or half of this machine's memory when that is less."""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not every platform says
        return DEFAULT_MEMORY
    return min(DEFAULT_MEMORY, physical // 2) if physical > 0 else DEFAULT_MEMORY
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*\Z", re.IGNORECASE)


def memory_limit() -> int:
    """``VBSTORE_MAX_MEMORY`` in bytes (a number of bytes, or ``500M``, ``64G``...), else
    :func:`default_limit`.

    Raises:
        UsageError: the variable is not a positive size.
    """
    text = os.environ.get(MEMORY_ENV)
    if text is None:
        return default_limit()
    match = _SIZE.match(text)
    value = 0
    if match:
        power = "kmgt".find(match.group(2).lower()) + 1 if match.group(2) else 0
        value = int(float(match.group(1)) * 1024**power)
    if value <= 0:
        raise UsageError(f"{MEMORY_ENV}={text!r} is not a positive size",
                         hint="unset it (default: 16G, or half the machine's memory) or give "
                              "e.g. 64G")
    return value


def check_memory(what: str, nbytes: int) -> None:
    """Refuse an allocation of about ``nbytes`` over :func:`memory_limit`.

    Raises:
        OverBudget: naming ``what``, the estimate and the limit.
    """
    limit = memory_limit()
    if nbytes > limit:
        raise OverBudget(what, int(nbytes), limit)


def input_bytes(input_size: int, *, batch: int = 1, patch_size: int | None = None,
                forward: bool = True) -> int:
    """A lower bound on what images at ``input_size`` px take: the batch as float32 pixels and,
    with ``forward``, the first activation of one image's forward pass: an attention map over a
    ViT's tokens, or a 32-channel stem at half resolution for a CNN (``patch_size`` None). One
    image's, not the batch's: a fused attention kernel may not hold a map per image."""
    nbytes = batch * 3 * input_size * input_size * 4
    if forward and patch_size:
        tokens = (input_size // patch_size) ** 2 + 1
        nbytes += tokens * tokens * 4
    elif forward:
        nbytes += 32 * (input_size // 2) ** 2 * 4
    return nbytes


def check_input_size(input_size: int, *, batch: int = 1, patch_size: int | None = None,
                     forward: bool = True) -> None:
    """Refuse an input resolution that cannot fit :func:`memory_limit` (see :func:`input_bytes`),
    before a model is built for it or run on it.

    Raises:
        OverBudget: naming the input size, the estimate and the limit.
    """
    what = f"an input size of {input_size} px" + (f" (batches of {batch})" if batch > 1 else "")
    check_memory(what, input_bytes(input_size, batch=batch, patch_size=patch_size,
                                   forward=forward))
