"""Notes a user attached to a result: ``result_notes`` rows beside the blobs.

VisBench's records carry ``notes``, free text a user gives with a run (``--notes "rerun for the
paper"``). A result is named by what was computed and from what, so a note is no part of it:
the same computation with another note is the same result, answered from the store, and one
computation is one id in any store. A note is a row of the ``result_notes`` table (registry
migration 9), one per distinct text attached to the object, the newest first. ``show``,
``why`` and ``export results`` read them; they are a log, not content: gc deletes
an object's rows with it, and a pushed result travels without them. A note is asked for, so it
is never dropped: a read-only store (a read-only mount, or a registry older than migration 9,
which is opened read-only) refuses it with :class:`~vbstore.errors.StoreReadOnly`, and a run
asks :meth:`Notes.check` before it computes anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._ids import db_id
from ._registry import now

if TYPE_CHECKING:
    from ._base import StoreBase

NOTES_FROM = 9  # the registry migration that made the result_notes table
_ATTACH = ("attach notes (they are rows of its registry; without notes the result is read as "
           "usual)")


class Notes:
    """The result notes of one store: ``store.notes``."""

    def __init__(self, store: StoreBase) -> None:
        self.store = store

    def check(self) -> None:
        """Raise :class:`~vbstore.errors.StoreReadOnly` where :meth:`add` could not write."""
        self.store.writable(_ATTACH)

    def add(self, oid: str, text: str) -> None:
        """Attach ``text`` to object ``oid`` (again: it becomes the newest); empty text says
        nothing.

        Raises:
            StoreReadOnly: the store is read-only (a writable one is always at migration 9).
        """
        if not text.strip():
            return
        self.check()
        with self.store.db.write() as conn:
            conn.execute("INSERT OR REPLACE INTO result_notes(object, text, recorded) "
                         "VALUES (?,?,?)", (db_id(oid), text, now()))

    def of(self, oid: str) -> list[str]:
        """Every note attached to ``oid``, newest first (none before migration 9)."""
        if self.store.db.version < NOTES_FROM:
            return []
        return [row[0] for row in self.store.db.query(
            "SELECT text FROM result_notes WHERE object=? ORDER BY recorded DESC, text",
            (db_id(oid),))]
