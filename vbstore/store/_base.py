"""What the :class:`vbstore.Store` mixins may use of the store and of one another.

Each mixin (derive, file state, feature rows, gc, fsck, rebuild) is one concern of the store,
but uses the blob layout, the registry and a few methods that :class:`~vbstore.store.Store`
or a sibling mixin defines. :class:`_StoreBase` declares them, for the type checker only: at
run time it is an empty class, and every name resolves on ``Store`` as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sqlite3

    from ._objects import ObjectFiles
    from ._registry import Registry

Edges = Mapping[str, "str | Iterable[str]"]


class _StoreBase:
    """Attributes and methods shared by ``Store`` and its mixins (declarations only)."""

    root: Path
    read_only: bool
    files: ObjectFiles
    _db: Registry | None
    # ("derivations" | "aliases", key, the id it gave or None) of each lookup, between
    # watch_reads and record_answer (the answer cache, _answers.py); None otherwise
    reads: list[tuple[str, str, str | None]] | None
    _has_origins: bool | None  # whether the registry's derivations keep their origin

    if TYPE_CHECKING:
        # defined by Store
        @property
        def db(self) -> Registry: ...
        def writable(self, doing: str) -> None: ...
        def close(self) -> None: ...
        def has(self, oid: str) -> bool: ...
        def path(self, oid: str) -> Path: ...
        def read_bytes(self, oid: str, verify: bool = False) -> bytes: ...
        def touch(self, oids: Iterable[str]) -> None: ...
        @staticmethod
        def _insert_edges(conn: sqlite3.Connection, parent: str, edges: Edges | None) -> None: ...

        # defined by one mixin, used by another
        def live_leases(self) -> list[dict[str, Any]]: ...
        @staticmethod
        def _forget(conn: sqlite3.Connection, keys: list, packs: list | None = None) -> None: ...
        def _quarantine(
            self, oids: list[str], refetch: Callable[[str], bool] | None
        ) -> tuple[list[str], list[str]]: ...
        def _registry_errors(self) -> list[str]: ...
        def _remove_dead_temps(self, dry_run: bool = False) -> list[tuple[str, int]]: ...
        def clear_answers(self) -> None: ...
        def resolve(self, name: str) -> str: ...
        def info(self, oid: str) -> Any: ...
        def read_json(self, oid: str) -> Any: ...
