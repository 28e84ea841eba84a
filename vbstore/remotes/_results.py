"""``push_results``: stored results to a remote, each as ``results/<id>``, and what was sent.

A result is shared for its number and its lineage, and as a cache answer (its derivation's
inputs are the backbone record and the data manifests). By default a push sends the result
records and their lineage documents (the weights, backbone and manifest records); the feature
packs and featuresets, heads and the images behind manifests are what make a push large
(one result's closure can be 25 MB of packs), so each goes only when asked by name. The
summary counts what was sent, object by object and byte by byte, per kind.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .._progress import progress
from ..errors import UsageError
from ._closure import Entry, closure
from ._push import push

# What `push results` sends by default: the results and the documents of their lineage.
LINEAGE_KINDS = ("result", "manifest", "backbone", "weights")
# What ``with_`` may add, by name: a fine-tuned head travels with the fine-tuned weights it is
# applied through (``finetuned``), and features with the stored prefix activations, the
# text-tower outputs a zero-shot result read (``tensors``) and the captions a model wrote
# (``captions``: a blob, counted apart from the images, see :func:`sent_kind`).
EXTRA_KINDS = {"features": ("featureset", "pack", "prefix", "tensors", "captions"),
               "heads": ("head", "finetuned"),
               "images": ("blob",)}


def sent_kind(entry: Entry) -> str:
    """What ``entry`` counts as in a results push: its kind, or ``captions`` for the captions
    blob a ``generate`` task stored (vbstore.engine._captions), which is the model's output
    and no file behind a manifest."""
    spec = (entry.derivation or {}).get("spec") or {}
    return "captions" if entry.kind == "blob" and spec.get("op") == "captions" else entry.kind


@dataclass
class ResultsPush:
    """What one ``push results`` sent: per kind, objects and bytes."""

    remote: str
    results: list[str] = field(default_factory=list)
    sent: dict[str, dict[str, int]] = field(default_factory=dict)
    already_there: int = 0
    left_out: dict[str, dict[str, int]] = field(default_factory=dict)
    derivations: int = 0
    kinds: list[str] = field(default_factory=list)

    @property
    def objects(self) -> int:
        return sum(v["objects"] for v in self.sent.values())

    @property
    def bytes(self) -> int:
        return sum(v["bytes"] for v in self.sent.values())

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "objects": self.objects, "bytes": self.bytes}


def result_kinds(with_: Iterable[str] = ()) -> tuple[str, ...]:
    """The kinds a results push sends with the extras named in ``with_``.

    Raises:
        UsageError: an extra that is not one of ``features``, ``heads``, ``images``.
    """
    kinds = list(LINEAGE_KINDS)
    for name in with_:
        if name not in EXTRA_KINDS:
            raise UsageError(f"--with {name!r} is not something a results push can add",
                             hint=f"one or more of: {', '.join(EXTRA_KINDS)}")
        kinds += [k for k in EXTRA_KINDS[name] if k not in kinds]
    return tuple(kinds)


def push_results(store, remote: str, ids: Iterable[str], with_: Iterable[str] = ()
                 ) -> ResultsPush:
    """Push each result of ``ids`` as ``results/<first 16 hex>`` with the kinds chosen.

    Raises:
        UsageError: an unknown extra (see :func:`result_kinds`).
        UnknownRemote, RemoteOffline, RemoteConflict, CorruptObject: see :func:`push`.
    """
    kinds = result_kinds(with_)
    ids = list(ids)
    summary = ResultsPush(remote, kinds=list(kinds))
    counted: set[str] = set()
    there: set[str] = set()
    with progress(f"pushing results to {remote}", len(ids), "result") as shown:
        for oid in ids:
            entries = closure(store, oid)
            keep = [e.id for e in entries if sent_kind(e) in kinds]
            result = push(store, remote, oid, name=f"results/{oid[:16]}", include=keep)
            summary.results.append(oid)
            summary.derivations += result.derivations
            by_id = {e.id: e for e in entries}
            for sent in result.uploaded:
                if sent not in counted:
                    counted.add(sent)
                    _count(summary.sent, sent_kind(by_id[sent]), by_id[sent].size)
            there.update(i for i in keep if i not in result.uploaded and i not in result.skipped)
            for entry in entries:
                if sent_kind(entry) not in kinds and entry.id not in counted:
                    counted.add(entry.id)
                    _count(summary.left_out, sent_kind(entry), entry.size)
            shown.update(1)
    summary.already_there = len(there - counted)
    return summary


def _count(table: dict[str, dict[str, int]], kind: str, size: int) -> None:
    row = table.setdefault(kind, {"objects": 0, "bytes": 0})
    row["objects"] += 1
    row["bytes"] += max(size, 0)
