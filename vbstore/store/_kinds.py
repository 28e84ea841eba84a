"""The artifact kinds and how each is encoded."""

from __future__ import annotations

from ..errors import UnknownKind

JSON_KINDS = ("weights", "backbone", "manifest", "featureset", "result", "suite", "evaluation")
TENSOR_KINDS = ("pack", "head", "tensors", "prefix", "finetuned")
RAW_KINDS = ("blob",)
KINDS = JSON_KINDS + TENSOR_KINDS + RAW_KINDS

# Collected by `gc` only when unreachable; never evicted by `gc --max-size`.
PRECIOUS = ("weights", "manifest", "result", "suite", "evaluation")
# What `gc --max-size` may evict, in this order, least recently used first (a fine-tuned
# weights artifact is not: remaking it is a training run).
EVICTABLE = ("pack", "prefix", "head")
# Always roots of the reachability walk.
ROOT_KINDS = ("result", "suite", "evaluation")


def check_kind(kind: str) -> str:
    """Return ``kind`` or raise :class:`UnknownKind` listing the known ones."""
    if kind not in KINDS:
        raise UnknownKind(f"unknown artifact kind {kind!r}", hint=f"use one of: {', '.join(KINDS)}")
    return kind


def encoding(kind: str) -> str:
    """``json``, ``safetensors`` or ``raw``."""
    check_kind(kind)
    if kind in JSON_KINDS:
        return "json"
    if kind in TENSOR_KINDS:
        return "safetensors"
    return "raw"
