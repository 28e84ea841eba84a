"""Writing the browse snapshot: one SQLite file of readable tables from the store's records."""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from ..errors import VbstoreError
from ..heads import head_record
from ..tasks import get_task

# table -> (columns, description shown by Datasette)
TABLES: dict[str, tuple[tuple[str, ...], str]] = {
    "results": (("id", "task", "level", "backbone", "weights", "input_size", "eval_manifest",
                 "split", "samples", "seeds", "headline_metric", "headline", "metrics", "params",
                 "head", "comparable", "created"),
                "Every stored result: task, backbone, data, settings and headline metric."),
    "heads": (("id", "names", "task", "backbone", "weights", "pooling", "layers", "embed_dim",
               "train_manifest", "train_metrics", "created"),
              "Trained probe heads with their compatibility record."),
    "refs": (("name", "id", "kind"), "Named artifacts (vbstore tag), gc roots."),
    "lineage": (("artifact", "kind", "role", "input", "input_kind"),
                "What each artifact was made from (vbstore why, one edge per row)."),
}

# the table names and column counts are this module's constants, never user input
_INSERT = {table: f"INSERT INTO {table} VALUES ({', '.join('?' * len(columns))})"  # noqa: S608
           for table, (columns, _) in TABLES.items()}


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True)


def _headline(task: str) -> str | None:
    try:
        return get_task(task).headline
    except VbstoreError:  # a task no longer registered: its record still shows
        return None


def _level(task: str) -> str | None:
    try:
        return get_task(task).level
    except VbstoreError:
        return None


def _result_row(info, record: dict[str, Any]) -> tuple:
    evaluation = record.get("data", {}).get("eval", {})
    metric = _headline(record["task"])
    return (info.id, record["task"], record.get("level") or _level(record["task"]),
            record.get("backbone", {}).get("spec"), record.get("weights_kind"),
            record.get("extractor", {}).get("input_size"), evaluation.get("manifest"),
            evaluation.get("split"), evaluation.get("samples"),
            len(record.get("seeds", [record.get("seed")])), metric,
            record.get("metrics", {}).get(metric), _dumps(record.get("metrics")),
            _dumps(record.get("params")), record.get("inputs", {}).get("head"),
            record.get("comparable"), info.created)


def _head_row(store, info, names: list[str]) -> tuple:
    record = head_record(store, info.id)
    return (info.id, ", ".join(names) or None, record.get("task"), record.get("backbone"),
            record.get("weights"), record.get("pooling"), _dumps(record.get("layers")),
            record.get("embed_dim"), record.get("train_manifest"),
            _dumps(record.get("train_metrics")), info.created)


def build_snapshot(store, path: str | Path) -> Path:
    """Write the browse tables for ``store`` to ``path`` (replaced atomically); return it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".db")
    os.close(handle)
    infos = {info.id: info for info in store.ls()}
    names: dict[str, list[str]] = {}
    for name, oid in store.refs().items():
        names.setdefault(oid, []).append(name)
    try:
        with sqlite3.connect(tmp) as db:
            for table, (columns, _) in TABLES.items():
                db.execute(f"CREATE TABLE {table} ({', '.join(columns)})")
            for info in infos.values():
                if not store.has(info.id):
                    continue
                if info.kind == "result":
                    db.execute(_INSERT["results"], _result_row(info, store.read_json(info.id)))
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
