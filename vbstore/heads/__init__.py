"""Probe heads: safetensors artifacts that carry the record of what they fit.

A head's ``__metadata__`` holds ``vbstore.kind = head``, ``format = vbstore.head.v1`` and
``vbstore.compat``: the canonical JSON compatibility record (backbone id, weights tensor hash,
input size, extractor key, pooling, layers, feature mode, embed dim, task and its version, params,
seed, class names, train manifest, train metrics). Heads are plain tensors: loading one never
unpickles anything and never runs code from where it came from. ``export_head``/``import_head``
move one as a file (``_files``).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from typing import Any

from .. import canonical
from ..errors import VbstoreError

HEAD_FORMAT = "vbstore.head.v1"
# What must agree between a head and the features it is applied to.
CHECKED = ("task", "task_op_version", "weights", "input_size", "pooling", "feature_mode", "layers",
           "embed_dim")


class HeadMismatch(VbstoreError, ValueError):
    """A head was trained for other features than the ones it is applied to."""

    exit_code = 5

    def __init__(self, differences: list[str]) -> None:
        super().__init__(
            "head does not match the backbone: " + "; ".join(differences),
            hint="use a head trained for this backbone, or --no-strict to apply it anyway "
                 "(its results are then comparable with nothing)",
        )
        self.differences = differences


class HeadMismatchWarning(UserWarning):
    """A mismatched head was applied because strict checking was turned off."""


def save_head(store, state: Mapping[str, Any], compat: Mapping[str, Any],
              edges: Mapping[str, Any] | None = None) -> str:
    """Store a head's tensors with its compatibility record; return its id."""
    from ..store._schemas import validate

    validate("head.compat", dict(compat))
    metadata = {"format": HEAD_FORMAT, "vbstore.compat": canonical.dumps(dict(compat)).decode()}
    return store.put_tensors(dict(state), "head", metadata, edges=edges)


def head_record(store, head_id: str) -> dict[str, Any]:
    """The compatibility record of a stored head (no tensors loaded)."""
    from ..store._tensors import read_safetensors_header

    header, _ = read_safetensors_header(store.path(head_id))
    metadata = header.get("__metadata__") or {}
    if metadata.get("format") != HEAD_FORMAT or "vbstore.compat" not in metadata:
        raise VbstoreError(f"object {head_id[:12]} is not a vbstore head",
                           hint="heads are written by `vbstore get head` or vbstore.save_head")
    return json.loads(metadata["vbstore.compat"])


def check_compat(record: Mapping[str, Any], expected: Mapping[str, Any]) -> list[str]:
    """The differences between a head's record and the features it would be applied to."""
    problems = []
    for field in CHECKED:
        if field in expected and field in record and record[field] != expected[field]:
            problems.append(
                f"{field} is {record.get(field)!r} in the head, {expected[field]!r} here")
    return problems


def load_head(store, head_id: str, expected: Mapping[str, Any] | None = None,
              strict: bool = True) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """Load a head's tensors after checking it fits ``expected`` features.

    Returns:
        ``(state, record, compatible)``; ``compatible`` is False only when ``strict`` is off
        and something differed (a warning was issued).

    Raises:
        HeadMismatch: ``strict`` and the backbone weights, input size, pooling, feature mode,
            layers or embedding width differ.
    """
    from safetensors.torch import load

    record = head_record(store, head_id)
    problems = check_compat(record, expected or {})
    if problems and strict:
        raise HeadMismatch(problems)
    if problems:
        warnings.warn("applying a mismatched head: " + "; ".join(problems), HeadMismatchWarning,
                      stacklevel=2)
    state = load(store.read_bytes(head_id, verify=True))
    return state, record, not problems


# heads as files build on the record functions above, so they load after them
from ._files import (  # noqa: E402, F401
    ImportedHead,
    evaluation_metrics,
    export_head,
    import_head,
)
