"""VisBench's result record: one JSON line per run, as its ``read_records`` loads it.

VisBench 0.27 (``visbench.results``, schema version 9) writes each run as one JSON object on one
line of an append-only file (``results/visbench.jsonl`` by default, ``--results FILE``), with
exactly these fields: :data:`VISBENCH_FIELDS`. Its reader refuses a line whose
``schema_version`` is not an int or is newer than its own, a line with a field it does not
know, and a line that lacks a required one -- so a vbstore result is written with every field
of version 9 and no other (:func:`visbench_record`); vbstore's own identity travels in the
fields that have a place for it:

- ``backbone`` is the spec; ``backbone_key`` (VisBench's weights-and-resolution identity) is
  ``vbstore:`` and the backbone object's id, which names the weights and the preprocessing.
- ``dataset_fingerprint`` (VisBench's short hash of the file list) is ``vbstore:`` and the
  first 16 characters of the evaluation manifest's id: a hash of a different list than
  VisBench's, so the prefix keeps a vbstore record from ever grouping with a VisBench record
  by accident of format; equal prefixes mean the same samples and labels.
- ``visbench_version`` is ``vbstore <version>``: the tool that made the number, not a VisBench.
- ``pooling`` is resolved (a CNN's ``gap`` is VisBench's ``mean``); a probe that reads dense
  maps records ``mean`` for both ``pooling`` and ``pooling_requested``, as VisBench's dense
  probes do, so the two tools' records of one dense probe key alike.
- ``timestamp`` and ``duration_seconds`` come from the registry's run log (when the result was
  computed, and how long), ``hardware`` from its device; none of them is in vbstore's hashed
  document, which is why the export reads the store and not the document alone.

What is left out: the result's vbstore id (VisBench has no field for it; ``backbone_key`` and
``dataset_fingerprint`` lead back to the store) and everything VisBench does not record
(baseline, sample intervals, per-seed metrics).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..records import BackboneRecord, ResultRecord

if TYPE_CHECKING:
    from ..store import RunInfo, Store

VISBENCH_SCHEMA_VERSION = 9
# every field of VisBench 0.27's ResultRecord (schema 9), in its order; its reader refuses others
VISBENCH_FIELDS = (
    "backbone", "backbone_key", "task", "level", "dataset", "split", "pooling", "feature_mode",
    "metrics", "timestamp", "visbench_version", "schema_version", "dataset_size",
    "dataset_fingerprint", "pooling_requested", "task_params", "dataset_params", "layer",
    "layers", "finetune", "training", "hardware", "seed", "duration_seconds", "notes",
)
# VisBench records one feature mode for every probe vbstore shares with it (the grid alone)
_FEATURE_MODE = "dense_only"
# vbstore's pooling names as VisBench writes them (a CNN's global average is its "mean")
_POOLINGS = {"gap": "mean"}


def _iso(seconds: float) -> str:
    """UTC ISO 8601, as VisBench's ``utc_timestamp`` writes it."""
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat()


def _layers(record: ResultRecord, backbone: BackboneRecord | None) -> list[int] | None:
    """The blocks read, resolved against the backbone's depth as VisBench records them; None
    for the last block alone (VisBench's default request) or a depth vbstore cannot name."""
    layers = (record.extractor or {}).get("layers") or [-1]
    if list(layers) == [-1]:
        return None
    depth = (backbone.geometry or {}).get("num_blocks") if backbone is not None else None
    if any(i < 0 for i in layers) and not isinstance(depth, int):
        return None
    return [i if i >= 0 else depth + i for i in layers]  # type: ignore[operator]


def _hardware(record: ResultRecord, run: RunInfo | None) -> dict[str, Any] | None:
    """``{"device", "gpu", "torch"}`` from the run log's device (``cuda:NAME``, ``cpu:ARCH``)."""
    device = run.device if run is not None else record.device
    if not device:
        return None
    kind, _, name = device.partition(":")
    out: dict[str, Any] = {"device": kind}
    if kind == "cuda" and name:
        out["gpu"] = name
    torch_version = (record.versions or {}).get("torch")
    if torch_version:
        out["torch"] = torch_version
    return out


def visbench_record(record: ResultRecord, *, created: float,
                    backbone: BackboneRecord | None = None, run: RunInfo | None = None,
                    dataset: str | None = None, notes: str | None = None) -> dict[str, Any]:
    """A vbstore ``result`` record as the line VisBench 0.27 writes for one run.

    Args:
        record: The result record.
        created: When the result was stored (seconds since the epoch), for ``timestamp`` when
            the run log has no row.
        backbone: Its backbone record (resolves ``layers``; ``backbone_key`` needs only the id).
        run: The newest run-log row of the result (time, duration, device).
        dataset: The name the eval data was read under, when the record carries none.
        notes: The result's notes (the registry's), newest first joined by ``; ``.

    ```python
    line = json.dumps(visbench_record(record, created=info.created), sort_keys=True)
    ```
    """
    extractor = record.extractor or {}
    eval_data = (record.data or {}).get("eval", {})
    manifest = eval_data.get("manifest") or record.inputs.get("eval_manifest", "")
    pooling = extractor.get("pooling") or "mean"
    requested = record.pooling_requested
    if extractor.get("mode") == "dense":  # VisBench's dense probes name their maps "mean"
        pooling = requested = "mean"
    task_params: dict[str, Any] = dict(record.params)
    if record.protocol:
        task_params["protocol"] = record.protocol
    finetune = None
    if record.finetune:
        finetune = {"blocks": record.finetune.get("blocks"),
                    "backbone_lr": record.finetune.get("backbone_lr")}
    metrics = {k: float(v) for k, v in record.metrics.items()
               if isinstance(v, (int, float)) and not isinstance(v, bool)
               and math.isfinite(float(v))}
    doc: dict[str, Any] = {
        "backbone": (record.backbone or {}).get("spec", ""),
        "backbone_key": f"vbstore:{record.inputs.get('backbone', '')}",
        "task": record.task,
        "level": f"{record.level or 'high'}_level",
        "dataset": record.dataset or dataset or manifest[:12],
        "split": eval_data.get("split") or "all",
        "pooling": _POOLINGS.get(pooling, pooling),
        "feature_mode": _FEATURE_MODE,
        "metrics": metrics,
        "timestamp": _iso(run.recorded if run is not None else created),
        "visbench_version": f"vbstore {__version__}",
        "schema_version": VISBENCH_SCHEMA_VERSION,
        "dataset_size": eval_data.get("samples"),
        "dataset_fingerprint": f"vbstore:{manifest[:16]}" if manifest else None,
        "pooling_requested": requested,
        "task_params": task_params,
        "dataset_params": dict(record.dataset_params or {}),
        "layer": None,
        "layers": _layers(record, backbone),
        "finetune": finetune,
        "training": dict(record.train_metrics) if record.train_metrics else None,
        "hardware": _hardware(record, run),
        "seed": record.seed,
        "duration_seconds": run.seconds if run is not None else None,
        "notes": notes,
    }
    return {name: doc[name] for name in VISBENCH_FIELDS}


def visbench_export(store: Store, result_ids: Iterable[str]) -> list[dict[str, Any]]:
    """One VisBench record per stored result: ``{"id", "record"}``, in id order.

    ```python
    lines = [json.dumps(row["record"], sort_keys=True) for row in visbench_export(store, ids)]
    ```
    """
    out = []
    for oid in sorted(set(result_ids)):
        record = ResultRecord.from_dict(store.read_json(oid))
        backbone_id = record.inputs.get("backbone")
        backbone = (BackboneRecord.from_dict(store.read_json(backbone_id))
                    if backbone_id and store.has(backbone_id) else None)
        manifest = ((record.data or {}).get("eval", {}).get("manifest")
                    or record.inputs.get("eval_manifest"))
        named = store.data_names.of(manifest) if manifest else []
        notes = store.notes.of(oid) or ([record.notes] if record.notes else [])
        doc = visbench_record(record, created=store.info(oid).created, backbone=backbone,
                              run=store.runs.last(oid), dataset=named[0] if named else None,
                              notes="; ".join(notes) or None)
        out.append({"id": oid, "record": doc})
    return out


def visbench_lines(rows: Iterable[Mapping[str, Any]]) -> str:
    """The JSONL text of :func:`visbench_export` rows, one line each (VisBench's writer's form:
    keys sorted)."""
    return "".join(json.dumps(row["record"], sort_keys=True) + "\n" for row in rows)
