"""The names a manifest's data was read under: ``data_names`` rows beside the blobs.

A manifest is named by its content, so the same images in two folders are one manifest, and a
plain folder records no name in it. What a reader calls the data -- ``pets`` for
``-d ~/data/pets --split test`` -- is a row of the ``data_names`` table (registry migration 8),
one per name the manifest was listed under, the newest first. Exports (CLIP_benchmark's
``dataset`` field) and listings read it; it is a log, not content: gc deletes a manifest's rows
with it, and a pushed manifest travels without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._ids import db_id
from ._registry import now

if TYPE_CHECKING:
    from ._base import StoreBase

NAMES_FROM = 8  # the registry migration that made the data_names table


class DataNames:
    """The data names of one store: ``store.data_names``."""

    def __init__(self, store: StoreBase) -> None:
        self.store = store

    def add(self, oid: str, name: str) -> None:
        """Record that manifest ``oid`` was read as ``name`` (skipped on a read-only store, and
        when it is already its newest name)."""
        if self.store.read_only or not name or self.store.db.version < NAMES_FROM:
            return
        names = self.of(oid)
        if names and names[0] == name:
            return
        with self.store.db.write() as conn:
            conn.execute("INSERT OR REPLACE INTO data_names(object, name, recorded) "
                         "VALUES (?,?,?)", (db_id(oid), name, now()))

    def of(self, oid: str) -> list[str]:
        """Every name manifest ``oid`` was read under, newest first (none before migration
        8)."""
        if self.store.db.version < NAMES_FROM:
            return []
        return [row[0] for row in self.store.db.query(
            "SELECT name FROM data_names WHERE object=? ORDER BY recorded DESC", (db_id(oid),))]
