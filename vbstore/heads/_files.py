"""Heads as files, without a remote: ``export_head`` writes a head's exact bytes, ``import_head``
checks and stores them.

The file is the head artifact itself (safetensors, compatibility record in ``__metadata__``),
so an imported head has the id it had where it was trained, and no pickle is ever read. Import
checks everything before the store changes: the bytes are safetensors of kind ``head``, the
record is valid, and (given the features it is meant for) it fits them; a refused file leaves
the store and its refs as they were.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..canonical import digest
from ..errors import BadHead, HeadMismatch, SchemaError, UsageError, VbstoreError, field_ref
from ..records import (
    BackboneRecord,
    HeadCompat,
    HeadMetadata,
    ResultRecord,
    StagedReader,
    arrival_problems,
)
from ..store import parse_safetensors_header, validate
from ._load import check_values
from ._record import HEAD_FORMAT, check_compat, head_record, name_backbones


@dataclass(frozen=True)
class ImportedHead:
    """What ``import_head`` stored: the id, the local name, the record and any mismatch."""

    id: str
    name: str | None
    record: dict[str, Any]
    mismatch: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "compat": self.record,
                "mismatch": list(self.mismatch)}


def export_head(store, ref: str, path: str | Path) -> str:
    """Write head ``ref`` (a name or id) to ``path`` byte for byte; return its id.

    Raises:
        ObjectNotFound: no such object.
        UsageError: the object is not a head, or ``path`` cannot be written.
    """
    oid = store.resolve(ref)
    kind = store.info(oid).kind
    if kind != "head":
        raise UsageError(f"{ref} is a {kind}, not a head", hint="export a head's name or id")
    data = store.read_bytes(oid, verify=True)
    target = Path(path)
    try:
        handle, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}-")
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(tmp, target)  # a reader never sees half a head
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror or exc}") from None
    return oid


def _read_record(data: bytes, path: Path) -> dict[str, Any]:
    try:
        header = parse_safetensors_header(data)
    except VbstoreError as exc:
        raise UsageError(f"{path} is not a vbstore head ({exc.args[0]})",
                         hint="heads are safetensors files written by `vbstore export head`; "
                         "pickled .pt/.pth files are never read") from None
    metadata = header.get("__metadata__") or {}
    if metadata.get("format") != HEAD_FORMAT or metadata.get("vbstore.kind") != "head":
        raise UsageError(f"{path} is safetensors but not a vbstore head "
                         f"(format {metadata.get('format')!r})",
                         hint="heads are written by `vbstore export head`")
    try:
        record = json.loads(HeadMetadata.from_dict(metadata).compat_json)
    except (SchemaError, ValueError):
        raise UsageError(f"{path} has no readable compatibility record") from None
    validate("head.compat", record)
    return record


def _check_tensors(data: bytes, record: Mapping[str, Any], path: Path) -> None:
    """The checks a head meets where it is loaded (:func:`check_values`), on arrival.

    Raises:
        UsageError: the tensors cannot be read.
        BadHead: NaN or infinite values, or a class count past the head's outputs.
    """
    # torch: only when a head's tensors are read
    from safetensors import SafetensorError
    from safetensors.torch import load

    try:
        state = load(data)
    except (SafetensorError, ValueError, RuntimeError) as exc:
        raise UsageError(f"{path} is not a vbstore head (its tensors cannot be read: {exc})",
                         hint="heads are written by `vbstore export head`") from None
    # the task a head names says what its tensors must hold (tasks load with the head's tensors)
    from ..tasks import TaskInputError, UnknownTask, get_task

    oid = digest(data)
    try:
        check_values(oid, record, state)
        try:
            task = get_task(str(record.get("task")))
        except UnknownTask:  # a plugin's task not installed here: checked where it is applied
            task = None
        if task is not None:
            try:
                task.check_head(state)
            except TaskInputError as exc:
                raise BadHead(oid, str(exc.args[0])) from None
    except BadHead as exc:
        exc.hint = "nothing was imported; train the head again, or import one you trust"
        raise


def import_head(store, path: str | Path, *, name: str | None = None, force: bool = False,
                expected: Mapping[str, Any] | None = None, strict: bool = True) -> ImportedHead:
    """Store the head in ``path`` (written by :func:`export_head`) and name it.

    Args:
        name: The local ref to create (none when None).
        force: Move ``name`` when it already names another object.
        expected: What the head must fit (``weights`` tensor hash, ``input_size``, ...), as
            :func:`check_compat` compares; typically from the backbone it will be applied to.
        strict: Refuse a mismatch (else store it and report the differences).

    Raises:
        UsageError: unreadable file, not a vbstore head, or ``name`` taken without ``force``.
        SchemaError: the compatibility record is invalid.
        BadHead: its values cannot be right (NaN, a class count past its outputs, tensors its
            task could never use): refused here, not first when it is applied.
        HeadMismatch: ``strict`` and the head does not fit ``expected``, or contradicts what
            the store holds (the gate: fine-tuned weights naming another parent than its
            record, a named backbone record giving other weights).
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    record = _read_record(data, path)
    _check_tensors(data, record, path)
    problems = name_backbones(store, record, expected or {}, check_compat(record, expected or {}))
    # the gate's check of an arriving head: the parent its fine-tuned blocks had, the backbone
    # record it names (records.gate.ARRIVALS)
    staged = digest(data)
    problems += arrival_problems("head", staged, StagedReader(store, {staged: path}))
    if problems and strict:
        raise HeadMismatch(problems)
    taken = store.refs().get(name) if name is not None else None
    if taken is not None and taken != staged and not force:
        raise UsageError(f"{name!r} already names {taken[:12]}",
                         hint="choose another name with --as, or move it with --force")
    oid = store.put_parsed(data, "head")
    if name is not None:
        store.tag(name, oid)
    return ImportedHead(oid, name, record, problems)


def evaluation_metrics(store, head_id: str, result_ref: str) -> tuple[dict[str, float], str]:
    """The metrics of result ``result_ref``, which must have applied head ``head_id``.

    Returns:
        ``(metrics, eval manifest id)``: what a model card reports beside training metrics.

    Raises:
        ObjectNotFound: no such result.
        UsageError: not a result, or a result of another head (its numbers would mislead).
    """
    oid = store.resolve(result_ref)
    kind = store.info(oid).kind
    if kind != "result":
        raise UsageError(f"{result_ref} is a {kind}, not a result")
    record = ResultRecord.from_dict(store.read_json(oid))
    if record.inputs.get("head") != head_id:
        raise UsageError(f"result {oid[:12]} was not computed with head {head_id[:12]}",
                         hint=f"evaluate this head: vbstore get result ... {field_ref('head')} "
                              "NAME")
    metrics = {k: v for k, v in record.metrics.items() if isinstance(v, (int, float))}
    return metrics, record.eval_data.get("manifest", "")


def hub_files(store, head_id: str, name: str, remote: str,
              metrics_from: str | None = None) -> dict[str, bytes]:
    """``model.safetensors``, ``vbstore.json`` and the model card (``README.md``) that make a
    Hub repository of head ``head_id`` browsable; ``metrics_from`` (a result computed with this
    head) puts its evaluation metrics on the card.

    Raises:
        UsageError: ``metrics_from`` is not a result of this head.
    """
    from ..remotes import write_model_card  # the remotes package: only for a Hub push

    record = HeadCompat.from_dict(head_record(store, head_id))
    metrics, evaluated_on = dict(record.train_metrics or {}), None
    if metrics_from is not None:
        evaluation, evaluated_on = evaluation_metrics(store, head_id, metrics_from)
        metrics.update(evaluation)
    backbone = BackboneRecord.from_dict(store.read_json(record.backbone))
    card = write_model_card({
        "name": name, "id": head_id, "backbone": backbone.name, "task": record.task,
        "pooling": record.pooling, "layers": record.layers, "feature_mode": record.feature_mode,
        "embed_dim": record.embed_dim, "classes": record.class_names,
        "train_manifest": record.train_manifest, "metrics": metrics,
        "evaluated_on": evaluated_on, "remote_ref": f"{remote}/{name}",
    })
    info = {"head": head_id, "compat": record.to_dict(), "backbone": backbone.to_dict(),
            "weights": store.read_json(backbone.weights)}
    return {"model.safetensors": store.read_bytes(head_id, verify=True),
            "vbstore.json": json.dumps(info, indent=2, sort_keys=True).encode(),
            "README.md": card.encode()}

