"""The remote binary cache, asked before anything is computed."""

from __future__ import annotations

from collections.abc import Callable


def remote_fetch(store) -> Callable[[str], str | None] | None:
    """A fetcher over the store's remotes, or None when it has none (no remote code imported)."""
    if not (store.root / "remotes.json").is_file():
        return None

    def fetch(key: str) -> str | None:
        from ..remotes import fetch_derivation, list_remotes

        return fetch_derivation(store, key) if list_remotes(store) else None

    return fetch


def remote_has(store, key: str) -> str | None:
    """The name of a remote whose binary cache answers ``key`` (nothing downloaded), or None."""
    if not (store.root / "remotes.json").is_file():
        return None
    from ..remotes import remote_has_derivation

    return remote_has_derivation(store, key)
