"""The lineage behind ``vbstore why`` and one-line summaries of artifacts."""

from __future__ import annotations

import fnmatch
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
from ..store import encoding, read_safetensors_header


def summary(store, oid: str, kind: str) -> str:
    """A short description of an artifact's content, from the artifact itself."""
    if kind == "head" and store.has(oid):
        try:  # its compatibility record, in the safetensors header: no tensor is read
            head = HeadCompat.from_dict(head_record(store, oid))
        except (VbstoreError, ValueError):
            return ""
        tuned = (f"  fine-tuned {head.finetune['blocks']} blocks "
                 f"({head.finetune['weights'][:12]})" if head.finetune else "")
        return (f"{head.task} on backbone {head.backbone[:12]}  pooling {head.pooling}  "
                f"layers {head.layers}{tuned}")
    if kind in ("prefix", "finetuned", "tensors") and store.has(oid):
        return _tensor_summary(store, oid, kind)
    if encoding(kind) != "json" or not store.has(oid):
        return ""
    try:
        doc = store.read_json(oid)
    except VbstoreError:
        return "CORRUPT"
    try:
        return _summary(store, kind, doc)
    except SchemaError:  # a document this vbstore cannot read typed: no summary
        return ""


def _tensor_summary(store, oid: str, kind: str) -> str:
    """Fine-tuning's blobs, from their safetensors header (no tensor read)."""
    try:
        header, _ = read_safetensors_header(store.path(oid))
    except VbstoreError:
        return "CORRUPT"
    meta = header.get("__metadata__") or {}
    if kind == "tensors":  # a text-tower output (engine/_textcache.py), or a user's tensors
        return "  ".join(f"{name} {header[name].get('shape')}" for name in sorted(header)
                         if name != "__metadata__")
    if kind == "prefix":
        shape = header.get("activations", {}).get("shape", [])
        return (f"frozen prefix of backbone {meta.get('backbone', '?')[:12]} for the last "
                f"{meta.get('blocks', '?')} blocks  rows {shape[:1]} x {shape[1:]}")
    count = sum(1 for name in header if name != "__metadata__")
    return (f"{count} tensors of the last {meta.get('blocks', '?')} blocks fine-tuned "
            f"(backbone_lr {meta.get('backbone_lr', '?')}) from weights "
            f"{meta.get('weights', '?')[:12]}")


def _summary(store, kind: str, doc: dict[str, Any]) -> str:
    if kind == "result":
        result = ResultRecord.from_dict(doc)
        task, _, metrics = result.summary().partition(": ")
        if result.backbone and result.data:  # which backbone on which data, then the numbers
            columns = result_columns(store, result)
            tuned = "" if result.finetune is None else f", {columns['finetune']}"
            if result.pooling_requested not in (None, "default"):  # not the backbone's own
                tuned += f", pooling={result.pooling_requested}"
            task = (f"{task} on {columns['backbone']} ({columns['weights']}{tuned})  "
                    f"{columns['data']}")
        return f"{task}: {metrics}"
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


# manifest id -> its name, per process: a listing of many results on one large manifest reads
# its document once
_NAMES: dict[str, str] = {}


def data_name(store, manifest: str | None) -> str:
    """The data a manifest lists, by name: its named source (``hf:NAME``, ``cb:NAME``...), else
    the name it was last read under (``-d scenes``, a folder's name: ``store.data_names``), else
    its layout."""
    if not manifest:
        return ""
    if manifest in _NAMES:
        return _NAMES[manifest]
    if not store.has(manifest):
        return ""
    try:
        doc = store.read_json(manifest)
    except VbstoreError:
        return ""
    named = store.data_names.of(manifest)
    _NAMES[manifest] = ((doc.get("source") or {}).get("name") or (named[0] if named else None)
                        or doc.get("layout") or "")
    return _NAMES[manifest]


def data_label(store, part: dict[str, Any]) -> str:
    """A split as a reader names it: its source (a named source, else its layout), split and
    samples, e.g. ``scenes val (32)``; the manifest id is in ``--json``."""
    manifest = part.get("manifest")
    name = data_name(store, manifest)
    split = part.get("split")
    words = [w for w in (name, split) if w]
    return f"{' '.join(words) or (manifest or '')[:12]} ({part.get('samples', '?')})"


def finetune_label(record: ResultRecord) -> str:
    """``frozen``, or ``blocks=N backbone_lr=LR``: a fine-tuned result is never a frozen one."""
    tuned = record.finetune
    if not tuned:
        return "frozen"
    return f"blocks={tuned.get('blocks')} backbone_lr={tuned.get('backbone_lr')}"


def result_columns(store, record: ResultRecord) -> dict[str, Any]:
    """What tells two results apart in a listing: backbone, weights, data (eval, and train
    when a head was trained) with the manifest ids, pooling and fine-tuning."""
    data = record.data or {}
    label = data_label(store, data.get("eval", {}))
    if "train" in data:
        label += f" <- {data_label(store, data['train'])}"
    return {"backbone": record.spec, "weights": record.weights_kind or "",
            "data": label, "eval_manifest": data.get("eval", {}).get("manifest"),
            "train_manifest": data.get("train", {}).get("manifest"),
            "pooling": (record.extractor or {}).get("pooling"),
            "finetune": finetune_label(record)}


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
    run = store.runs.last(oid) if kind == "result" else None
    if run is not None:  # when, where and how long: the run log
        node["run"] = run.as_dict()
    notes = store.notes.of(oid) if kind == "result" else []
    if notes:  # what a user attached to it: the registry's, not the content
        node["notes"] = notes
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


def weights_of_tensor_hash(store, prefix: str) -> list[str]:
    """The weights records whose ``tensor_hash`` (the hash of the tensors' content that a
    head-mismatch message prints; not an object id) starts with ``prefix``."""
    prefix = prefix.lower()
    if len(prefix) < 4:
        return []
    found = []
    for info in store.ls("weights"):
        if not store.has(info.id):
            continue
        try:
            if str(store.read_json(info.id).get("tensor_hash", "")).startswith(prefix):
                found.append(info.id)
        except VbstoreError:
            continue
    return found


def head_rows(store, pattern: str = "*") -> list[dict[str, Any]]:
    """Every stored head whose task matches ``pattern`` (fnmatch), newest first: what it was
    fit on (task, backbone, weights, training data) and how it reads features, from each head's
    compatibility record (no tensor is read). A head whose blob was evicted says so."""
    refs: dict[str, list[str]] = {}
    for name, oid in store.refs().items():
        refs.setdefault(oid, []).append(name)
    rows = []
    for info in sorted(store.ls("head"), key=lambda i: i.created, reverse=True):
        row: dict[str, Any] = {"id": info.id, "created": info.created, "size": info.size,
                               "refs": refs.get(info.id, []), "evicted": bool(info.evicted_at)}
        try:
            head = HeadCompat.from_dict(head_record(store, info.id))
        except (VbstoreError, ValueError):
            if pattern == "*":  # evicted or unreadable: listed, with nothing more to say
                rows.append({**row, "task": "", "backbone": "", "weights": "", "data": ""})
            continue
        if not fnmatch.fnmatchcase(head.task, pattern):
            continue
        manifest = head.train_manifest
        part: dict[str, Any] = {"manifest": manifest}
        if manifest and store.has(manifest):
            doc = ManifestRecord.from_dict(store.read_json(manifest))
            part.update(split=doc.split, samples=len(doc))
        name, weights = _backbone_of(store, head.backbone)
        row.update(task=head.task, backbone=name, weights=weights, data=data_label(store, part),
                   backbone_id=head.backbone, train_manifest=manifest, pooling=head.pooling,
                   layers=head.layers, feature_mode=head.feature_mode, seed=head.seed,
                   params=head.params or {}, train_metrics=head.train_metrics or {})
        rows.append(row)
    return rows


def _backbone_of(store, oid: str) -> tuple[str, str]:
    """A backbone's name and its weights' origin (``pretrained``, ``random``...)."""
    try:
        backbone = BackboneRecord.from_dict(store.read_json(oid))
    except (VbstoreError, ValueError):
        return oid[:12], ""
    try:
        return backbone.name, WeightsRecord.from_dict(store.read_json(backbone.weights)).origin
    except (VbstoreError, ValueError):
        return backbone.name, ""
