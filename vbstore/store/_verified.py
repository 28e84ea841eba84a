"""The verified-scores cache: what each evaluation blob says, recorded in the registry by blob id.

A leaderboard ranks the numbers of each ranked row's evaluation blob, never the row's copy of
them, so that a row edited in SQL cannot rank. Reading and re-hashing one blob per ranked row
made a board of 100k evaluations 3.3x a plain read of its rows. So what a board checks of a blob
(suite, checkpoint, label, weights, state, whether its verdict ranks, evidence, scores) is
recorded once in ``verified_scores``, keyed by the blob's id: when the blob's document is judged
and indexed (``vbstore.suites``' ``index_evaluation``), or when a board has re-hashed it. A board
then compares each row with the record of its blob and reads the blob only where there is none.

The record is the blob's, never the row's: a row edited in SQL still differs from it and is
listed unranked. ``fsck`` compares every record with its blob (:func:`verified_faults`) and
``--repair`` forgets one that differs or whose blob is gone; the next board reads the blob again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

# the registry migration that added the table: an older read-only store has no records, and
# its boards read every ranked blob as before
VERIFIED_FROM = 11

# the columns, in the order :func:`verified_claims` gives them (after the id)
VERIFIED_COLUMNS = ("suite", "checkpoint", "label", "weights", "state", "ranked", "evidence",
                    "scores")


def verified_claims(doc: Mapping[str, Any]) -> tuple:
    """What an evaluation document says, as the cache and the ``evaluations`` table hold it
    (``scores`` as ``index_evaluation`` writes them: JSON with sorted keys).

    Raises:
        KeyError, TypeError: ``doc`` is not an evaluation document.
    """
    checkpoint, verdict = doc["checkpoint"], doc["verdict"]
    return (doc["suite"], checkpoint["id"], checkpoint["label"], checkpoint["weights"],
            verdict["state"], int(verdict["ranked"] is True), doc["evidence"],
            json.dumps(verdict["scores"], sort_keys=True))


def remember_verified(conn, found: Iterable[tuple[str, tuple]]) -> None:
    """Record ``(blob id, claims)`` pairs, each read from its blob (in the caller's write
    transaction). A blob never changes, so a record already there is replaced by the same."""
    conn.executemany(
        f"INSERT OR REPLACE INTO verified_scores(id, {', '.join(VERIFIED_COLUMNS)}) "  # noqa: S608 - fixed names
        f"VALUES (?{',?' * len(VERIFIED_COLUMNS)})", [(oid, *values) for oid, values in found])


def verified_faults(store) -> list[dict[str, Any]]:
    """Records whose blob is gone or says otherwise: ``{"table", "key", "id", "why"}`` each."""
    if store.db.version < VERIFIED_FROM:
        return []
    out: list[dict[str, Any]] = []
    query = f"SELECT id, {', '.join(VERIFIED_COLUMNS)} FROM verified_scores"  # noqa: S608 - fixed names
    for oid, *values in store.db.query(query):
        if not store.has(oid):
            why = "its evaluation blob is not here"
        else:
            try:
                expected = verified_claims(store.read_json(oid))
            except (ValueError, KeyError, TypeError) as exc:
                why = f"its blob cannot be read as an evaluation ({exc})"
            else:
                differ = [name for name, value, truth
                          in zip(VERIFIED_COLUMNS, values, expected, strict=True)
                          if _value(name, value) != _value(name, truth)]
                if not differ:
                    continue
                why = f"its {', '.join(differ)} differ from the blob's"
        out.append({"table": "verified_scores", "key": oid, "id": oid, "why": why})
    return out


def _value(name: str, value: Any) -> Any:
    """A column's value as compared: the scores by their numbers, not their text."""
    return json.loads(value) if name == "scores" and isinstance(value, str) else value
