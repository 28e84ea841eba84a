"""When, where and how long each computation of an object ran: ``runs`` rows beside the blobs.

A hashed document holds only what was computed and from what, so one computation is one id in
any store, and a shared cache dedupes it. What differs between two runs of that computation --
when it ran, on which host and device, how long each stage took, whether its features were
already stored -- is a row of the ``runs`` table (registry migration 5), one per computation:
a ``--recompute`` that reproduces a result adds a row, not an object. ``get``, ``show``,
``why``, ``export results`` and ``browse`` show the newest row.

The rows are a log, not content: gc deletes an object's rows with it, ``fsck --rebuild`` cannot
bring them back (no blob holds them), and a pushed or pulled result travels without them.
Results stored before migration 5 carry these fields in their documents instead
(:attr:`vbstore.records.ResultRecord.timings`), and are left as they were.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._ids import db_id
from ._objects import HOST
from ._registry import now

if TYPE_CHECKING:
    from ._base import StoreBase

RUNS_FROM = 5  # the registry migration that made the runs table


@dataclass(frozen=True)
class RunInfo:
    """One computation of a stored object, as the registry logged it.

    Attributes:
        recorded: When it was stored (seconds since the epoch).
        host: The machine that computed it (its node name).
        device: What computed it (``cpu:x86_64``, ``cuda:NVIDIA H200``), when known.
        seconds: Wall time of the whole request (planning included), when known.
        timings: Seconds per stage (``eval_features_s``, ``evaluate_s``...).
        features_from_cache: Whether no forward pass ran (every feature was stored).
    """

    recorded: float
    host: str
    device: str | None = None
    seconds: float | None = None
    timings: dict[str, float] = field(default_factory=dict)
    features_from_cache: bool | None = None

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (``--json`` outputs and exports)."""
        out: dict[str, Any] = {"recorded": self.recorded, "host": self.host,
                               "timings": dict(self.timings)}
        for name in ("device", "seconds", "features_from_cache"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    @classmethod
    def from_row(cls, row: tuple) -> RunInfo:
        recorded, host, device, seconds, timings, from_cache = row
        return cls(recorded, host, device, seconds, json.loads(timings),
                   None if from_cache is None else bool(from_cache))


RUN_COLUMNS = "recorded, host, device, seconds, timings, features_from_cache"


class RunLog:
    """The run log of one store: ``store.runs``."""

    def __init__(self, store: StoreBase) -> None:
        self.store = store

    def record(self, oid: str, *, device: str | None = None, seconds: float | None = None,
               timings: dict[str, float] | None = None,
               features_from_cache: bool | None = None) -> RunInfo | None:
        """Log one computation of ``oid``; None on a read-only store (nothing is logged)."""
        if self.store.read_only:
            return None
        run = RunInfo(now(), HOST, device, seconds, dict(timings or {}), features_from_cache)
        with self.store.db.write() as conn:
            conn.execute(
                f"INSERT OR REPLACE INTO runs(object, {RUN_COLUMNS}) VALUES (?,?,?,?,?,?,?)",  # noqa: S608 - a constant
                (db_id(oid), run.recorded, run.host, run.device, run.seconds,
                 json.dumps(run.timings, sort_keys=True),
                 None if features_from_cache is None else int(features_from_cache)))
        return run

    def of(self, oid: str) -> list[RunInfo]:
        """Every logged computation of ``oid``, newest first (none for a registry older than
        migration 5, which a read-only store may be)."""
        if self.store.db.version < RUNS_FROM:
            return []
        return [RunInfo.from_row(row) for row in self.store.db.query(
            f"SELECT {RUN_COLUMNS} FROM runs WHERE object=? ORDER BY recorded DESC",  # noqa: S608 - a constant
            (db_id(oid),))]

    def last(self, oid: str) -> RunInfo | None:
        """The newest logged computation of ``oid``, or None."""
        found = self.of(oid)
        return found[0] if found else None
