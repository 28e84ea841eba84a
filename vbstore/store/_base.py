"""What :mod:`._derive` may use of the :class:`vbstore.Store` it is part of.

Derivations and leases are the store's own (how a derived artifact is named, as a ref names
one by hand), kept in their own module: :class:`_StoreBase` declares what of the object
database they use, for the type checker only. At run time it is an empty class, and every name
resolves on ``Store``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite3

    from ._registry import Registry

Edges = Mapping[str, "str | Iterable[str]"]


class _StoreBase:
    """Attributes and methods of ``Store`` that its derivations use (declarations only)."""

    root: Path
    read_only: bool
    # ("derivations" | "aliases", key, the id it gave or None) of each lookup, between
    # answers.watch and answers.record (the answer cache, _answers.py); None otherwise
    reads: list[tuple[str, str, str | None]] | None
    _has_origins: bool | None  # whether the registry's derivations keep their origin

    if TYPE_CHECKING:
        @property
        def db(self) -> Registry: ...
        def writable(self, doing: str) -> None: ...
        def has(self, oid: str) -> bool: ...
        def read_bytes(self, oid: str, verify: bool = False) -> bytes: ...
        def touch(self, oids: Iterable[str]) -> None: ...
        @staticmethod
        def _insert_edges(conn: sqlite3.Connection, parent: str, edges: Edges | None) -> None: ...
