"""Forgetting a result on purpose: it stops being a gc root, and what only it kept goes with gc.

Every stored result is a root of gc's walk (so a result is never lost to a gc), which makes a
wrong experiment a root forever. ``forget(store, results)`` removes the result itself (its
blob, its row, the derivation that answers its question, its runs and notes) and reports what
only it kept: its features, heads and manifests that no other root reaches, which the next
``gc`` removes once they are older than its grace period (``--grace 0``: at once). A result
that a ref names or an evaluation cites is still needed and is refused, naming what keeps it;
the same question asked again computes it again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ._answers import Answers
from ._gc import _marks, _reachable_keys, _unlink_keys, forget_lookups
from ._ids import db_id, hex_id

if TYPE_CHECKING:
    from ._base import StoreBase


@dataclass
class ForgetReport:
    """What ``forget`` removed (or, with ``dry_run``, would remove) and what only it kept.

    Attributes:
        forgotten: The results removed, ``{"id", "task", "size"}`` each.
        released: What only those results kept, ``{"id", "kind", "size"}`` each: unreachable
            now, removed by the next gc past its grace period.
    """

    dry_run: bool
    forgotten: list[dict[str, Any]] = field(default_factory=list)
    released: list[dict[str, Any]] = field(default_factory=list)

    @property
    def released_bytes(self) -> int:
        return sum(o["size"] for o in self.released)

    def as_dict(self) -> dict[str, Any]:
        return {"dry_run": self.dry_run, "forgotten": self.forgotten, "released": self.released,
                "released_bytes": self.released_bytes}


def forget(store: StoreBase, refs: list[str], *, dry_run: bool = False) -> ForgetReport:
    """Remove the results ``refs`` (ids, prefixes) from the store, and so from gc's roots.

    Raises:
        ObjectNotFound: no such object.
        UsageError: not a result; a ref names it; an evaluation cites it (each named).
        StoreReadOnly: the store cannot be written (not with ``dry_run``).
    """
    if not dry_run:
        store.writable("forget a result (`forget --dry-run` says what would go)")
    oids = list(dict.fromkeys(store.resolve(ref) for ref in refs))
    for oid in oids:
        kind = store.info(oid).kind
        if kind != "result":
            raise UsageError(
                f"{oid[:12]} is a {kind}, not a result: forget removes results",
                hint="what no result, ref or suite keeps goes with `vbstore gc`")
    _check_unkept(store, oids)
    keys = [db_id(oid) for oid in oids]
    kept_now = _reachable_keys(store, None, False)
    kept_after = _reachable_keys(store, None, False, unrooted=set(keys))
    still = [hex_id(k) for k in keys if k in kept_after]
    if still:  # another root reaches it through an edge (an evaluation: checked above)
        raise UsageError(f"result {still[0][:12]} is still reached from another root",
                         hint=f"vbstore why {still[0][:12]} shows what it is part of")
    gone = (kept_now - kept_after) - set(keys)
    report = ForgetReport(dry_run)
    for oid in oids:
        doc = store.read_json(oid)
        report.forgotten.append({"id": oid, "task": doc.get("task"),
                                 "size": store.info(oid).size})
    released = list(gone)
    for i in range(0, len(released), 500):
        some = released[i : i + 500]
        report.released += [
            {"id": hex_id(key), "kind": kind, "size": size} for key, kind, size in
            store.db.query(f"SELECT id, kind, size FROM objects WHERE id IN ({_marks(some)})",  # noqa: S608
                           some)]
    report.released.sort(key=lambda o: (o["kind"], o["id"]))
    if dry_run:
        return report
    with store.db.write() as conn:
        conn.execute(f"DELETE FROM objects WHERE id IN ({_marks(keys)})", keys)  # noqa: S608
        forget_lookups(conn, keys)  # its derivation, aliases and runs
        for table in ("result_notes", "data_names"):
            conn.execute(f"DELETE FROM {table} WHERE object IN ({_marks(keys)})", keys)  # noqa: S608
        conn.execute(f"DELETE FROM edges WHERE parent IN ({_marks(keys)})", keys)  # noqa: S608
        # under the same lock as the rows, as gc unlinks: a put of the same bytes waits
        _unlink_keys(os.fspath(store.files.objects), keys)
    Answers(store).clear()  # no recorded answer may serve a forgotten result
    return report


def _check_unkept(store: StoreBase, oids: list[str]) -> None:
    """Refuse a result a ref names or an evaluation cites, naming it.

    Raises:
        UsageError: naming the ref or the evaluation.
    """
    for name, target in store.db.query("SELECT name, id FROM refs ORDER BY name"):
        if target in oids:
            raise UsageError(f"ref {name!r} names result {target[:12]}",
                             hint=f"remove the ref first: vbstore tag -d {name}")
    for oid in oids:
        cited = store.db.query(
            "SELECT e.parent FROM edges e JOIN objects o ON o.id = e.parent "
            "WHERE e.child = ? AND o.kind = 'evaluation'", (db_id(oid),))
        if cited:
            raise UsageError(
                f"result {oid[:12]} is a source of evaluation {hex_id(cited[0][0])[:12]}: "
                "an evaluation keeps the results it was judged on",
                hint="an evaluation is a recorded attempt; its results stay with it")
