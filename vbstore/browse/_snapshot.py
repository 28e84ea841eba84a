"""Writing the browse snapshot: one SQLite file of readable tables from the store's records."""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from ..engine import run_fields
from ..errors import UsageError, VbstoreError
from ..heads import head_record
from ..records import HeadCompat, ResultRecord
from ..tasks import get_task

# table -> (columns, description shown by Datasette)
TABLES: dict[str, tuple[tuple[str, ...], str]] = {
    "results": (("id", "task", "level", "backbone", "weights", "input_size", "eval_manifest",
                 "split", "samples", "seeds", "headline_metric", "headline", "metrics", "params",
                 "head", "comparable", "created", "computed_at", "seconds", "device"),
                "Every stored result: task, backbone, data, settings and headline metric."),
    "heads": (("id", "names", "task", "backbone", "weights", "pooling", "layers", "embed_dim",
               "train_manifest", "train_metrics", "created"),
              "Trained probe heads with their compatibility record."),
    "refs": (("name", "id", "kind"), "Named artifacts (vbstore tag), gc roots."),
    "lineage": (("artifact", "kind", "role", "input", "input_kind"),
                "What each artifact was made from (vbstore why, one edge per row)."),
}

# SQLite's header field for the application that owns a file ("vbsb"): a snapshot says it is one,
# so `browse --snapshot PATH` rewrites a snapshot and nothing else
APPLICATION_ID = int.from_bytes(b"vbsb", "big")

# the table names and column counts are this module's constants, never user input
_INSERT = {table: f"INSERT INTO {table} VALUES ({', '.join('?' * len(columns))})"  # noqa: S608
           for table, (columns, _) in TABLES.items()}


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True)


def _headline(task: str, params: dict[str, Any]) -> str | None:
    try:
        return get_task(task).headline_for(params)
    except VbstoreError:  # a task no longer registered: its record still shows
        return None


def _level(task: str) -> str | None:
    try:
        return get_task(task).level
    except VbstoreError:
        return None


def _result_row(store, info) -> tuple:
    record = ResultRecord.from_dict(store.read_json(info.id))
    evaluation = record.eval_data
    metric = _headline(record.task, record.params)
    run = run_fields(store, info.id, record)
    return (info.id, record.task, record.level or _level(record.task), record.spec or None,
            record.weights_kind, (record.extractor or {}).get("input_size"),
            evaluation.get("manifest"), evaluation.get("split"), evaluation.get("samples"),
            len(record.seeds or [record.seed]), metric,
            record.metrics.get(metric) if metric else None,
            _dumps(record.metrics), _dumps(record.params), record.inputs.get("head"),
            record.comparable, info.created, run["computed_at"], run["seconds"], run["device"])


def _head_row(store, info, names: list[str]) -> tuple:
    record = HeadCompat.from_dict(head_record(store, info.id))
    return (info.id, ", ".join(names) or None, record.task, record.backbone, record.weights,
            record.pooling, _dumps(record.layers), record.embed_dim, record.train_manifest,
            _dumps(record.train_metrics), info.created)


def check_target(store, path: str | Path) -> Path:
    """``path`` when a snapshot may be written there: outside the store (but for its own
    ``browse/`` folder), and not an existing file other than a snapshot.

    Raises:
        UsageError: ``path`` is in the store (its registry, an object...) or an existing file
            that is not a browse snapshot: writing it would replace that file.
    """
    path = Path(path)
    real, root = Path(os.path.realpath(path)), Path(os.path.realpath(store.root))
    if real.is_relative_to(root) and not real.is_relative_to(root / "browse"):
        raise UsageError(f"--snapshot {path} is inside the store ({real.relative_to(root)}): "
                         "writing it would replace the store's own file",
                         hint="give a path outside the store, or leave --snapshot out "
                              "(<store>/browse/vbstore.db)")
    if real.exists() and not _is_snapshot(real):
        raise UsageError(f"--snapshot {path} exists and is not a browse snapshot: writing it "
                         "would replace it", hint="give a new path, or remove that file first")
    return path


def _is_snapshot(path: Path) -> bool:
    """Whether ``path`` is a browse snapshot: an SQLite file with the snapshot's application id
    in its header, or (written before the id) exactly the browse tables. Read-only look."""
    if not path.is_file():
        return False
    try:
        with open(path, "rb") as handle:
            header = handle.read(100)
        if header[:16] != b"SQLite format 3\x00":
            return False
        if int.from_bytes(header[68:72], "big") == APPLICATION_ID:
            return True
        db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
        try:
            names = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = "
                                                   "'table'")}
        finally:
            db.close()
    except (OSError, sqlite3.Error):
        return False
    return names == set(TABLES)


def build_snapshot(store, path: str | Path) -> Path:
    """Write the browse tables for ``store`` to ``path`` (replaced atomically); return it.

    Raises:
        UsageError: ``path`` is not a place for a snapshot (:func:`check_target`).
    """
    path = check_target(store, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".db")
    os.close(handle)
    infos = {info.id: info for info in store.ls()}
    names: dict[str, list[str]] = {}
    for name, oid in store.refs().items():
        names.setdefault(oid, []).append(name)
    try:
        with sqlite3.connect(tmp) as db:
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")  # what a snapshot is
            for table, (columns, _) in TABLES.items():
                db.execute(f"CREATE TABLE {table} ({', '.join(columns)})")
            for info in infos.values():
                if not store.has(info.id):
                    continue
                if info.kind == "result":
                    db.execute(_INSERT["results"], _result_row(store, info))
                elif info.kind == "head":
                    db.execute(_INSERT["heads"], _head_row(store, info, names.get(info.id, [])))
                for role, child in store.children(info.id):
                    kind = infos[child].kind if child in infos else None
                    db.execute(_INSERT["lineage"], (info.id, info.kind, role, child, kind))
            for name, oid in sorted(store.refs().items()):
                kind = infos[oid].kind if oid in infos else None
                db.execute(_INSERT["refs"], (name, oid, kind))
        db.close()
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
