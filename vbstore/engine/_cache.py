"""The remote binary cache, asked before anything is computed, and the check of every answer
against its question before it is served."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..records import StoreReader, check_answer
from ..store import Made

# Local imports: the remotes package (urllib.request, http.client: ~15 ms) loads only for a store
# that has remotes.


def remote_fetch(store, answered: dict[str, str] | None = None
                 ) -> Callable[[str], str | None] | None:
    """A fetcher over the store's remotes, or None when it has none (no remote code imported).

    Remotes are asked in their configured order; the first that answers is put in
    ``answered["remote"]``, so a caller can say where a cached answer came from.
    """
    if not (store.root / "remotes.json").is_file():
        return None

    def fetch(key: str) -> str | None:
        from ..remotes import fetch_derivation, list_remotes

        for config in list_remotes(store):
            if not config.cache:
                continue
            oid = fetch_derivation(store, key, remotes=[config.name])
            if oid is not None:
                if answered is not None:
                    answered["remote"] = config.name
                return oid
        return None

    return fetch


def remote_has(store, key: str) -> str | None:
    """The name of a remote whose binary cache answers ``key`` (nothing downloaded), or None."""
    if not (store.root / "remotes.json").is_file():
        return None
    from ..remotes import remote_has_derivation

    return remote_has_derivation(store, key)


@dataclass(frozen=True)
class Derived:
    """What a derivation gave: its output and where it came from.

    Attributes:
        id: The output.
        source: ``computed`` (now, by this call), ``store`` (found stored, or computed meanwhile
            by another process) or ``remote`` (a remote's binary cache answered).
        remote: The remote that answered (source ``remote``).
        made: What the computation built beside the id (source ``computed``): a result's typed
            record, a featureset's extraction counts; None when the answer was recorded.
    """

    id: str
    source: str
    remote: str | None = None
    made: Any = None

    @property
    def computed(self) -> bool:
        return self.source == "computed"


def derive(store, spec: Mapping[str, Any], compute: Callable[[], str | Made[Any]], *,
           key: str | None = None, timeout: float | None = None,
           valid: Callable[[str], bool] | None = None,
           known: Mapping[str, dict[str, Any]] | None = None) -> Derived:
    """``store.derive`` with the remotes' binary caches asked before computing, and every
    recorded answer checked against ``spec`` before it is served (``known``: documents already
    read): the output, where it came from, and what computing it built (``compute`` returning
    :class:`~vbstore.store.Made`), as one value. ``key``: ``spec``'s key, made by the plan."""
    answered: dict[str, str] = {}  # filled by the fetcher when a remote answers
    got = store.derive(spec, compute, timeout=timeout, valid=valid, key=key,
                       fetch=remote_fetch(store, answered),
                       check=answer_check(store, spec, known))
    if got.computed:
        return Derived(got.id, "computed", made=got.made)
    remote = answered.get("remote")
    return Derived(got.id, "remote" if remote is not None else "store", remote)


def answer_check(store, spec: Mapping[str, Any],
                 known: Mapping[str, dict[str, Any]] | None = None
                 ) -> Callable[[str, Any], None]:
    """``check(output, source)`` for :meth:`Store.derive`: refuses a recorded output that
    declares another question than ``spec`` (``known``: documents already read; ``source``: a
    name, or a callable giving it, asked only for the error)."""

    def check(output: str, source: Any) -> None:
        check_answer(spec, output, StoreReader(store, known), source)

    return check
