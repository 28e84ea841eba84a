"""A head's compatibility record: storing a head with it, reading it back without the tensors,
and every check of a head against the features it would meet (``check_compat``, ``head_problems``),
with the words a mismatch is told in."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .. import canonical
from ..errors import NotAHead, SchemaError, field_ref
from ..records import (
    BackboneRecord,
    HeadCompat,
    HeadMetadata,
    StoreReader,
    WeightsRecord,
    finetuned_differences,
)
from ..store import read_safetensors_header, validate

HEAD_FORMAT = "vbstore.head.v1"


def save_head(store, state: Mapping[str, Any], compat: Mapping[str, Any],
              edges: Mapping[str, Any] | None = None) -> str:
    """Store a head's tensors with its compatibility record; return its id."""
    validate("head.compat", dict(compat))
    metadata = {"format": HEAD_FORMAT, "vbstore.compat": canonical.dumps(dict(compat)).decode()}
    return store.put_tensors(dict(state), "head", metadata, edges=edges)


def head_metadata(header: Mapping[str, Any]) -> HeadMetadata | None:
    """The head metadata in a safetensors header; None when it is not a vbstore head's (another
    format, or no compatibility record)."""
    try:
        metadata = HeadMetadata.from_dict(header.get("__metadata__") or {})
    except SchemaError:
        return None
    return metadata if metadata.format == HEAD_FORMAT else None


def head_record(store, head_id: str) -> dict[str, Any]:
    """The compatibility record of a stored head (no tensors loaded), as stored: complete or not
    (a pulled head's is checked field by field before it is refused; :func:`head_compat` reads
    a complete one typed)."""
    metadata = head_metadata(read_safetensors_header(store.path(head_id))[0])
    if metadata is None:
        raise NotAHead(head_id)
    return json.loads(metadata.compat_json)


def head_compat(store, head_id: str) -> HeadCompat:
    """The typed compatibility record of a stored head (no tensors loaded).

    Raises:
        NotAHead: the object is not a vbstore head.
        SchemaError: its record lacks a required field (a head made elsewhere).
    """
    return HeadCompat.from_dict(head_record(store, head_id))


def head_dependencies(store, head_id: str) -> list[str]:
    """What a pushed head needs to be checked and used elsewhere: its backbone and weights
    records (the compatibility record travels inside the head), and the fine-tuned weights of
    a head trained with the backbone's last blocks (without them it fits no features)."""
    compat = head_compat(store, head_id)
    needed = [compat.backbone]
    if store.has(compat.backbone):
        needed.append(BackboneRecord.from_dict(store.read_json(compat.backbone)).weights)
    if compat.finetune:
        needed.append(str(compat.finetune["weights"]))
    return needed


def link_backbone(store, head_id: str) -> None:
    """Record the edge from a head to the backbone record it names, when that record is here.

    A pulled head arrives without the features it was trained on, which are what reach its
    backbone in the store that trained it: without this edge nothing keeps the backbone and
    weights records pulled with it, and gc removes them (a push from here would then send the
    head alone). ``fsck --rebuild`` draws the same edge from the compatibility record.
    """
    backbone = head_record(store, head_id).get("backbone")
    if isinstance(backbone, str) and store.has(backbone):
        store.add_edges(head_id, {"backbone": backbone})


def check_compat(record: Mapping[str, Any], expected: Mapping[str, Any]) -> list[str]:
    """The differences between a head's record and the features it would be applied to.

    A record missing a required compatibility field differs in that field.
    """
    try:
        return HeadCompat.from_dict(record).differences(expected)
    except SchemaError as exc:
        return [f"{exc.field} is missing from the head"]


def backbone_expectation(store, backbone: Mapping[str, Any] | BackboneRecord,
                         backbone_id: str | None = None) -> dict[str, Any]:
    """What a head for ``backbone`` (a backbone record) must have been trained on.

    Only what the backbone alone fixes (weights, input size); the task's feature settings are
    checked when the head is applied. With ``backbone_id`` a mismatch can name the backbone.
    """
    if not isinstance(backbone, BackboneRecord):
        backbone = BackboneRecord.from_dict(backbone)
    weights = WeightsRecord.from_dict(store.read_json(backbone.weights))
    expected = {"weights": weights.tensor_hash,
                "input_size": backbone.preprocessing["input_size"]}
    if backbone_id is not None:
        expected["backbone"] = backbone_id  # not compared (CHECKED), only named
    return expected


def backbone_differences(store, head_id: str, backbone: Mapping[str, Any],
                         backbone_id: str | None = None) -> list[str]:
    """How a stored head differs from what ``backbone`` (a backbone record) would give it;
    with ``backbone_id``, both backbones are named by spec when they differ."""
    record = head_record(store, head_id)
    expected = backbone_expectation(store, backbone, backbone_id)
    return name_backbones(store, record, expected, check_compat(record, expected))


def head_problems(store, head_id: str, backbone: Mapping[str, Any] | None = None,
                  backbone_id: str | None = None) -> list[str]:
    """Every way a stored head falls short: a required compatibility field it lacks, and, with
    ``backbone`` (a backbone record), each way it differs from what that backbone gives it.
    What ``pull head`` and ``import head`` check before a head gets a local name."""
    record = head_record(store, head_id)
    found = check_compat(record, {})
    tuned = record.get("finetune")
    if isinstance(tuned, dict) and not store.has(str(tuned.get("weights"))):
        found.append(f"its fine-tuned weights {str(tuned.get('weights'))[:12]} did not come "
                     "with it")
    found += finetuned_differences(record, StoreReader(store))  # the parent its blocks had
    if backbone is not None:
        found += backbone_differences(store, head_id, backbone, backbone_id)
    return list(dict.fromkeys(found))


def head_summary(record: Mapping[str, Any]) -> str:
    """``TASK, pooling P, layers L`` of a compatibility record, complete or not (a pulled
    head's is shown before it is refused)."""
    try:
        compat = HeadCompat.from_dict(record)
    except SchemaError:
        return ", ".join(f"{name} {record.get(name)!r}" for name in ("task", "pooling", "layers")
                         if name in record) or "no compatibility record"
    return f"{compat.task}, pooling {compat.pooling}, layers {compat.layers}"


def backbone_name(store, backbone_id: str) -> str:
    """A stored backbone as a person names it: ``source:architecture (origin weights ...)``.

    A head mismatch names both sides this way, not by weights tensor hashes that ``vbstore
    show`` cannot find (a tensor hash is not an object id).
    """
    if not isinstance(backbone_id, str) or not store.has(backbone_id):
        return f"backbone {str(backbone_id)[:12]} (not in this store)"
    backbone = BackboneRecord.from_dict(store.read_json(backbone_id))
    weights = (WeightsRecord.from_dict(store.read_json(backbone.weights))
               if store.has(backbone.weights) else None)
    origin = weights.origin if weights is not None else "unknown"
    detail = None if weights is None else {
        "pretrained": weights.upstream, "fixed": weights.upstream, "checkpoint": weights.path,
        "random": None if weights.seed is None else f"seed {weights.seed}"}.get(origin)
    size = backbone.preprocessing.get("input_size")
    where = f"{origin} weights" + (f" {detail}" if detail else "")
    return (f"{backbone.name} ({where}"
            + (f", input {size}" if size else "") + f"; backbone {backbone_id[:12]})")


def name_backbones(store, record: Mapping[str, Any], expected: Mapping[str, Any],
                   problems: list[str]) -> list[str]:
    """``problems`` plus, when the two backbones differ, both named by spec."""
    mine, theirs = record.get("backbone"), expected.get("backbone")
    if not problems or mine is None or theirs is None or mine == theirs:
        return problems
    return [*problems, f"the head was trained on {backbone_name(store, mine)}, these features "
                       f"come from {backbone_name(store, theirs)}"]


# the head's settings a command-line flag chooses for the features it is applied to
FLAGS = (("pooling", field_ref("pooling")), ("input_size", field_ref("input_size")),
         ("layers", field_ref("layers")))


def reading_flags(record: Mapping[str, Any], expected: Mapping[str, Any],
                  differences: list[str]) -> str | None:
    """``--pooling mean``: the flags that read the features a head was trained on, when they
    are all that differ (None otherwise: another backbone, task or weights)."""
    words = []
    for name, flag in FLAGS:
        if name in expected and record.get(name) is not None \
                and record[name] != expected[name]:
            value = record[name]
            said = ",".join(map(str, value)) if isinstance(value, list) else value
            words.append(f"{flag} {said}")
    return " ".join(words) if words and len(words) == len(differences) else None
