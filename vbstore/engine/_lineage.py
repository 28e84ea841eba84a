"""The lineage behind ``vbstore why`` and one-line summaries of artifacts."""

from __future__ import annotations

from typing import Any

from ..errors import SchemaError, VbstoreError
from ..heads import head_record
from ..records import (
    BackboneRecord,
    FeaturesetRecord,
    HeadCompat,
    ManifestRecord,
    ResultRecord,
    SuiteRecord,
    WeightsRecord,
)
from ..store import encoding


def summary(store, oid: str, kind: str) -> str:
    """A short description of an artifact's content, from the artifact itself."""
    if kind == "head" and store.has(oid):
        try:  # its compatibility record, in the safetensors header: no tensor is read
            head = HeadCompat.from_dict(head_record(store, oid))
        except (VbstoreError, ValueError):
            return ""
        return (f"{head.task} on backbone {head.backbone[:12]}  pooling {head.pooling}  "
                f"layers {head.layers}")
    if encoding(kind) != "json" or not store.has(oid):
        return ""
    try:
        doc = store.read_json(oid)
    except VbstoreError:
        return "CORRUPT"
    try:
        return _summary(kind, doc)
    except SchemaError:  # a document this vbstore cannot read typed: no summary
        return ""


def _summary(kind: str, doc: dict[str, Any]) -> str:
    if kind == "result":
        return ResultRecord.from_dict(doc).summary()
    if kind == "manifest":
        manifest = ManifestRecord.from_dict(doc)
        return f"{manifest.layout} split={manifest.split} samples={len(manifest)}"
    if kind == "backbone":
        return BackboneRecord.from_dict(doc).name
    if kind == "weights":
        weights = WeightsRecord.from_dict(doc)
        return f"{weights.origin} {weights.upstream or weights.path or ''}".strip()
    if kind == "featureset":
        return f"{len(FeaturesetRecord.from_dict(doc).packs)} packs"
    if kind == "suite":
        suite = SuiteRecord.from_dict(doc)
        return f"{suite.ref} {suite.name}"
    return ""


def lineage(store, oid: str, depth: int | None = None, _seen: set | None = None) -> dict[str, Any]:
    """The tree of inputs under ``oid``; shared subtrees appear once, then as references."""
    seen = set() if _seen is None else _seen
    try:
        info = store.info(oid)
        kind, present = info.kind, store.has(oid)
    except VbstoreError:
        kind, present = "unknown", False
    node: dict[str, Any] = {
        "id": oid,
        "kind": kind,
        "present": present,
        "summary": summary(store, oid, kind) if present else "",
    }
    spec = store.derivation_of(oid)
    if spec:
        node["op"] = f"{spec['op']} v{spec['op_version']}"
        node["origin"] = store.origin_of(oid) or "origin unknown"
    run = store.last_run(oid) if kind == "result" else None
    if run is not None:  # when, where and how long: the run log
        node["run"] = run.as_dict()
    if oid in seen:
        node["repeated"] = True
        return node
    seen.add(oid)
    if depth is not None and depth <= 0:
        return node
    node["inputs"] = [
        {"role": role, **lineage(store, child, None if depth is None else depth - 1, seen)}
        for role, child in store.children(oid)
    ]
    return node
