"""What of a :class:`vbstore.Store` the modules beside it use, declared below them all.

``Store`` (``_store.py``) is made of its views (``_answers.py``, ``_runs.py``...) and uses the
maintenance functions (``_gc.py``, ``_fsck.py``...), which in turn take a store: each of them
annotates it as :class:`StoreBase`, the store's own base class, so that none imports
``_store`` and no import circle forms. :class:`StoreBase` declares the object database's
attributes and methods for the type checker only: at run time it is an empty class, and every
name resolves on ``Store``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sqlite3

    from ._objects import ObjectFiles
    from ._registry import Registry

Edges = Mapping[str, "str | Iterable[str]"]


@dataclass(frozen=True)
class ObjectInfo:
    """One registry row."""

    id: str
    kind: str
    size: int
    created: float
    last_used: float
    verified_at: float | None
    evicted_at: float | None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class StoreBase:
    """The attributes and methods of ``Store`` that the modules beside it use (declarations
    only)."""

    root: Path
    read_only: bool
    files: ObjectFiles
    # ("derivations" | "aliases", key, the id it gave or None) of each lookup, between
    # answers.watch and answers.record (the answer cache, _answers.py); None otherwise
    reads: list[tuple[str, str, str | None]] | None
    _has_origins: bool | None  # whether the registry's derivations keep their origin

    if TYPE_CHECKING:
        @property
        def db(self) -> Registry: ...
        def writable(self, doing: str) -> None: ...
        def close(self) -> None: ...
        def has(self, oid: str) -> bool: ...
        def path(self, oid: str) -> Path: ...
        def read_bytes(self, oid: str, verify: bool = False) -> bytes: ...
        def read_json(self, oid: str) -> dict[str, Any]: ...
        def touch(self, oids: Iterable[str]) -> None: ...
        def resolve(self, name: str) -> str: ...
        def info(self, oid: str) -> ObjectInfo: ...
        def live_leases(self) -> list[dict[str, Any]]: ...
        @staticmethod
        def _insert_edges(conn: sqlite3.Connection, parent: str, edges: Edges | None) -> None: ...
