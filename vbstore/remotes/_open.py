"""Opening a configured remote by name; its scheme (``._schemes``) opens it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from ._base import Remote
from ._config import RemoteConfig, RemoteRegistry
from ._schemes import get_scheme


def remote_for(config: RemoteConfig) -> Remote:
    """A :class:`Remote` for ``config``; its scheme imports the client libraries only here."""
    return get_scheme(config.scheme).open(config)


def store_root(store_or_root) -> Path:
    """The directory of a :class:`vbstore.Store`, or a store directory given as a path."""
    if isinstance(store_or_root, (str, os.PathLike)):
        return Path(store_or_root)  # a Path has a `.root` too ("/"): never read it
    return Path(store_or_root.root)


def registry(store_or_root) -> RemoteRegistry:
    """The remotes configured for a store."""
    return RemoteRegistry(store_root(store_or_root))


def open_remote(store_or_root, name: str, options: Mapping[str, str] | None = None) -> Remote:
    """The remote called ``name`` in this store's configuration, ready for one operation.

    ``options`` override configured options for this operation only (``private`` on a push).

    Raises:
        UnknownRemote: no such remote is configured.
    """
    config = registry(store_or_root).get(name)
    if options:
        config = replace(config, options={**config.options, **options})
    return remote_for(config)


def list_remote_refs(store_or_root, name: str, revision: str | None = None) -> list[str]:
    """The ref names held by remote ``name`` (at ``revision`` on the Hub).

    Raises:
        RemoteOffline: the remote cannot be reached.
    """
    with open_remote(store_or_root, name) as remote:
        remote.check_online()
        return remote.list_refs(remote.resolve(revision))


def add_remote(store, name: str, url: str, options: Mapping[str, str] | None = None,
               replace: bool = False, cache: bool | None = None) -> RemoteConfig:
    """Configure remote ``name`` for ``store`` (see :meth:`RemoteRegistry.add`)."""
    return registry(store).add(name, url, options, replace=replace, cache=cache)


def remove_remote(store, name: str) -> None:
    """Forget remote ``name`` (nothing on the remote is touched)."""
    registry(store).remove(name)


def list_remotes(store) -> list[RemoteConfig]:
    """The configured remotes, by name."""
    return registry(store).all()
