"""Registry rows that carry numbers, checked against the blobs they stand for.

A blob's bytes are checked by its hash, but some registry rows say what a blob holds without
being part of it: ``feature_rows`` (this pack row holds that image's features), ``derivations``
(this output answers that spec) and ``evaluations`` (a leaderboard's scores, copied from the
evaluation blob). A row edited in SQL would change numbers while every blob stays whole, so
``fsck`` compares each with its blob and calls such a row a fault; ``fsck --repair`` forgets it
(feature rows and derivations are found or computed again; an evaluation's row is indexed again
from its blob). The verified-scores cache (:mod:`._verified`) is checked the same way.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .. import canonical
from ._ids import db_id, hex_id
from ._rows import pack_index
from ._verified import verified_faults

# what an evaluation blob holds for each column of its leaderboard row (as
# vbstore.suites' index_evaluation writes it)
_EVALUATION_COLUMNS = {
    "suite": lambda d: d["suite"],
    "checkpoint": lambda d: d["checkpoint"]["id"],
    "label": lambda d: d["checkpoint"]["label"],
    "weights": lambda d: d["checkpoint"]["weights"],
    "state": lambda d: d["verdict"]["state"],
    "ranked": lambda d: int(d["verdict"]["ranked"]),
    "evidence": lambda d: d["evidence"],
    "scores": lambda d: d["verdict"]["scores"],
    "reasons": lambda d: d["verdict"]["reasons"],
    # the settings its suite leaves open (the board's row per variant)
    "variant": lambda d: (canonical.dumps(d["verdict"]["variant"]).decode()
                          if d["verdict"].get("variant") else ""),
}
_JSON_COLUMNS = ("scores", "reasons")


def cross_check(store, answers: Callable[[dict[str, Any], str], list[str]] | None = None
                ) -> list[dict[str, Any]]:
    """Rows whose blob says otherwise: ``{"table", "key", "id", "why"}`` each.

    ``answers(spec, output)`` lists what an output declares that its spec does not ask
    (:func:`vbstore.records.answer_differences`); without it derivations are not compared.
    """
    found = feature_row_faults(store) + evaluation_faults(store) + verified_faults(store)
    if answers is not None:
        found += derivation_faults(store, answers)
    return found


def feature_row_faults(store) -> list[dict[str, Any]]:
    """Feature rows whose pack's header names another image (or another extractor) there."""
    out: list[dict[str, Any]] = []
    rows = store.db.query(
        "SELECT e.key, f.image, p.oid, f.row FROM feature_rows f "
        "JOIN extractors e ON e.id = f.extractor JOIN packs p ON p.id = f.pack ORDER BY f.pack")
    headers: dict[str, tuple[str, list[str]] | None] = {}
    for extractor, image, pack, row in rows:
        pack, extractor, image = hex_id(pack), hex_id(extractor), hex_id(image)
        if not store.has(pack):  # an evicted pack's rows count for nothing
            continue
        if pack not in headers:
            headers[pack] = pack_index(store.path(pack))
        header = headers[pack]
        if header is None or header[0] != extractor:
            why = "its pack was not made by this extractor"
        elif not 0 <= row < len(header[1]) or header[1][row] != image:
            why = f"row {row} of pack {pack[:12]} holds another image"
        else:
            continue
        out.append({"table": "feature_rows", "key": [extractor, image], "id": pack, "why": why})
    return out


def evaluation_faults(store) -> list[dict[str, Any]]:
    """Leaderboard rows that differ from their evaluation blob."""
    out: list[dict[str, Any]] = []
    names = list(_EVALUATION_COLUMNS)
    query = f"SELECT id, superseded_by, {', '.join(names)} FROM evaluations"  # noqa: S608 - fixed names
    for oid, superseded_by, *values in store.db.query(query):
        if not store.has(oid):
            continue
        try:
            doc = store.read_json(oid)
            differ = []
            for name, value in zip(names, values, strict=True):
                if name in _JSON_COLUMNS:
                    value = json.loads(value) if value is not None else None
                expected = _EVALUATION_COLUMNS[name](doc)
                if name == "ranked" and superseded_by:  # a correction took it off the board
                    expected = 0
                if value != expected:
                    differ.append(name)
            # a correction names the evaluation it corrects; a re-judged copy stands for the
            # original it was judged from (``rejudged_from``)
            if superseded_by and not (store.has(superseded_by) and store.read_json(
                    superseded_by).get("supersedes") in {oid, doc.get("rejudged_from")} - {None}):
                differ.append("superseded_by")
        except (ValueError, KeyError, TypeError) as exc:
            differ = [f"its blob cannot be read ({exc})"]
        if differ:
            out.append({"table": "evaluations", "key": oid, "id": oid,
                        "why": f"its {', '.join(differ)} differ from the blob's"})
    return out


def derivation_faults(store, answers: Callable[[dict[str, Any], str], list[str]]
                      ) -> list[dict[str, Any]]:
    """Derivation rows whose output declares another question than their spec."""
    out: list[dict[str, Any]] = []
    for key, spec, output in store.db.query("SELECT key, spec, output FROM derivations"):
        if not store.has(output):
            continue
        try:
            differ = answers(json.loads(spec), output)
        except Exception as exc:  # any unreadable answer is a fault to report
            differ = [f"it cannot be read ({exc})"]
        if differ:
            out.append({"table": "derivations", "key": key, "id": output,
                        "why": "; ".join(differ[:3])})
    return out


def forget_rows(conn, found: list[dict[str, Any]]) -> None:
    """Drop the rows of ``found`` (inside the caller's write transaction)."""
    for fault in found:
        if fault["table"] == "feature_rows":
            extractor, image = fault["key"]
            conn.execute("DELETE FROM feature_rows WHERE image = ? AND extractor = "
                         "(SELECT id FROM extractors WHERE key = ?)",
                         (db_id(image), db_id(extractor)))
        elif fault["table"] == "derivations":
            conn.execute("DELETE FROM derivations WHERE key = ?", (fault["key"],))
        elif fault["table"] == "evaluations":
            conn.execute("DELETE FROM evaluations WHERE id = ?", (fault["key"],))
        elif fault["table"] == "verified_scores":  # the next board reads the blob again
            conn.execute("DELETE FROM verified_scores WHERE id = ?", (fault["key"],))
