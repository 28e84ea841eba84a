"""Probe heads: safetensors artifacts that carry the record of what they fit.

A head's ``__metadata__`` holds ``vbstore.kind = head``, ``format = vbstore.head.v1`` and
``vbstore.compat``: the canonical JSON compatibility record (backbone id, weights tensor hash,
input size, extractor key, pooling, layers, feature mode, embed dim, task and its version, params,
seed, class names, train manifest, train metrics). Heads are plain tensors: loading one never
unpickles anything and never runs code from where it came from.

This module is the package's face; the code lives in its rooms:

- ``_record``: storing a head with its record, reading the record, every compatibility check
  and the words a mismatch is told in;
- ``_load``: a head's tensors, loaded after those checks;
- ``_files``: a head as a file (``export_head``/``import_head``) and what a Hub repository holds;
- ``_share``: a head through a remote (``push_head``/``pull_head``, the command line's checks)
  and a head's check at the gate (``vbstore.records.gate``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..errors import HeadMismatch, HeadMismatchWarning
from ._load import check_values, load_head
from ._record import (
    FLAGS,
    HEAD_FORMAT,
    backbone_differences,
    backbone_expectation,
    backbone_name,
    check_compat,
    head_compat,
    head_dependencies,
    head_problems,
    head_record,
    head_summary,
    link_backbone,
    name_backbones,
    reading_flags,
    save_head,
)

if TYPE_CHECKING:
    from ._files import ImportedHead, evaluation_metrics, export_head, hub_files, import_head
    from ._share import HeadPush, PulledHead, pull_head, push_head

# loaded on first use: heads as files and through remotes (the remotes package, urllib, ssl) are
# not on the compute path, which trains, stores and loads heads
_LAZY = {"ImportedHead": "._files", "evaluation_metrics": "._files", "export_head": "._files",
         "hub_files": "._files", "import_head": "._files", "HeadPush": "._share",
         "PulledHead": "._share", "pull_head": "._share", "push_head": "._share"}

__all__ = [
    "FLAGS", "HEAD_FORMAT", "HeadMismatch", "HeadMismatchWarning", "HeadPush", "ImportedHead",
    "PulledHead",
    "backbone_differences", "backbone_expectation", "backbone_name", "check_compat",
    "check_values", "evaluation_metrics", "export_head", "head_compat", "head_dependencies",
    "head_problems", "head_record", "head_summary", "hub_files", "import_head", "link_backbone",
    "load_head", "name_backbones", "pull_head", "push_head", "reading_flags", "save_head",
]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'vbstore.heads' has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name], __name__), name)
