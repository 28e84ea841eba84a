"""Heads shared through a remote: ``push_head``, ``pull_head``, and a head's check at the gate.

Every head that arrives from outside passes :func:`arrival_problems` (the gate's check of kind
``head``, ``vbstore.records.gate.ARRIVALS``), whatever path brought it: its record must be a
head's, its fine-tuned weights (when they came with it or are here) must name the parent the
record names, and the backbone record it names (when here) must give the weights and input size
it was trained on. Before a pulled head gets a local name, :func:`pull_head` checks it as the
command line does (a required field it lacks, fine-tuned weights that did not come with it, and,
given a backbone, each way it differs from what that backbone gives it); a plain
``vbstore.remotes.pull`` of a head runs the same check, strictly (:func:`refuse_unfit`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import HeadMismatch, UsageError
from ..records import StoreReader, finetuned_differences
from ..remotes import PullResult, PushResult, list_remotes, pull, push
from ..store import read_safetensors_header
from ._files import hub_files
from ._record import (
    head_dependencies,
    head_metadata,
    head_problems,
    head_record,
    link_backbone,
)

# what a head for a backbone is checked against: a stored backbone's id or ref, its record
# and id, or a function giving them once the head is here (a spec resolved only then)
Backbone = str | tuple[Mapping[str, Any], str] | Callable[[], tuple[Mapping[str, Any], str]]


@dataclass(frozen=True)
class HeadPush:
    """What ``push_head`` sent: the push, and the records the head needs that this store
    lacks (not sent: a receiver checks the head against its own backbone)."""

    head: str
    push: PushResult
    not_here: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PulledHead:
    """What ``pull_head`` brought in: the pull, the head's record and (not strict) how it
    differs from what it was checked against."""

    pull: PullResult
    record: dict[str, Any]
    mismatch: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return str(self.pull.id)

    def as_dict(self) -> dict[str, Any]:
        return {**self.pull.as_dict(), "compat": self.record, "mismatch": list(self.mismatch)}


def push_head(store, name: str, to: str, *, private: bool | None = None,
              metrics_from: str | None = None, with_lineage: bool = False) -> HeadPush:
    """Push head ``name`` (a ref) to remote ``to`` with its backbone and weights records and
    fine-tuned weights; on the Hub, a browsable model repository (``metrics_from``: a result
    computed with this head, for its model card).

    Raises:
        UsageError: not a head, an id rather than a name, or ``metrics_from`` off the Hub.
        UnknownRemote, RemoteOffline, RemoteConflict: from the push.
    """
    head_id = store.resolve(name)
    kind = store.info(head_id).kind
    if kind != "head":
        raise UsageError(f"{name} is a {kind}, not a head", hint="push it with `vbstore push ref`")
    if name not in store.refs():
        raise UsageError(f"{name!r} is an id; heads are pushed by name",
                         hint=f"name it first: vbstore tag NAME {head_id[:12]}")
    config = next((c for c in list_remotes(store) if c.name == to), None)
    on_hub = config is not None and config.model_card
    if metrics_from is not None and not on_hub:
        raise UsageError("--metrics-from writes a Hub model card; this remote has none",
                         hint="push to an hf:// remote, or drop --metrics-from")
    extra = hub_files(store, head_id, name, to, metrics_from) if on_hub else None
    options = None if private is None else {"private": "true" if private else "false"}
    include = None if with_lineage else head_dependencies(store, head_id)
    not_here = [oid for oid in include or [] if not store.has(oid)]
    result = push(store, to, name, extra_files=extra, options=options, include=include)
    return HeadPush(head_id, result, not_here)


def pull_head(store, target: str, *, revision: str | None = None, as_name: str | None = None,
              force: bool = False, backbone: Backbone | None = None,
              strict: bool = True) -> PulledHead:
    """Pull head ``REMOTE/NAME``, verified blob by blob, and name it only when it fits.

    ``backbone`` (a stored backbone's id or ref, its ``(record, id)``, or a function giving
    them, called once the head is here) refuses a head trained for other weights or input
    size. Not ``strict``: a mismatch is kept in ``mismatch`` instead of refused.

    ```python
    pulled = pull_head(store, "team/heads/linear", backbone=result.record.inputs["backbone"])
    ```

    Raises:
        HeadMismatch: ``strict`` and the head lacks a required field, came without its
            fine-tuned weights, or does not fit ``backbone``; local refs are unchanged.
        NotAHead: the ref names no head. Pull errors: see :func:`vbstore.remotes.pull`.
    """
    problems: list[str] = []
    records: list[dict[str, Any]] = []

    def accept(pulled: PullResult) -> None:
        records.append(head_record(store, str(pulled.id)))  # NotAHead whatever the ref says
        record, backbone_id = _backbone(store, backbone)
        problems.extend(head_problems(store, str(pulled.id), record, backbone_id))
        if problems and strict:
            raise HeadMismatch(problems)

    result = pull(store, target, revision=revision, as_name=as_name, force=force,
                  accept=accept, kind="head")
    if result.id is not None:
        link_backbone(store, result.id)  # so gc keeps the records it was pulled with
    return PulledHead(result, records[0], problems)


def _backbone(store, backbone: Backbone | None
              ) -> tuple[Mapping[str, Any] | None, str | None]:
    if backbone is None:
        return None, None
    if callable(backbone):
        return backbone()
    if isinstance(backbone, tuple):
        return backbone
    oid = store.resolve(backbone)
    kind = store.info(oid).kind
    if kind != "backbone":
        raise UsageError(f"{backbone} is a {kind}, not a backbone record",
                         hint="pass the backbone id a result names (record.inputs['backbone'])")
    return store.read_json(oid), oid


def refuse_unfit(store, head_id: str) -> None:
    """A plain pull's check of a head before it is named: what ``pull_head`` refuses with no
    backbone given (a required field missing, fine-tuned weights that did not come with it).

    Raises:
        HeadMismatch: naming each problem.
    """
    problems = head_problems(store, head_id)
    if problems:
        raise HeadMismatch(problems)


def arrival_problems(reader: StoreReader, oid: str) -> list[str]:
    """The gate's check of an arriving head: how its record contradicts the fine-tuned weights
    and backbone record staged with it or already here (a missing field is not a
    contradiction: ``pull_head`` reports it, and refuses it unless told not to)."""
    metadata = head_metadata(read_safetensors_header(reader.path(oid))[0])
    if metadata is None:
        return ["it is not a vbstore head (no compatibility record)"]
    # read as a document, not a HeadCompat: a missing field is not this check's to refuse
    compat = json.loads(metadata.compat_json)
    if not isinstance(compat, dict):
        return ["its compatibility record is not an object"]
    out = finetuned_differences(compat, reader)
    backbone = compat.get("backbone")
    if isinstance(backbone, str) and reader.present(backbone):
        doc = reader.json(backbone)
        weights = doc.get("weights")
        if isinstance(weights, str) and reader.present(weights):
            declared = reader.json(weights).get("tensor_hash")
            if compat.get("weights") != declared:
                out.append(f"it names backbone {backbone[:12]}, whose weights are not the ones "
                           "it says it was trained on")
        size = (doc.get("preprocessing") or {}).get("input_size")
        if "input_size" in compat and size is not None and compat["input_size"] != size:
            out.append(f"it names backbone {backbone[:12]}, whose input size is {size}, not "
                       f"{compat['input_size']}")
    return out
