"""Asking remotes what they hold without downloading it (for ``get --dry-run``)."""

from __future__ import annotations

import logging

from ._errors import RemoteError
from ._open import registry, remote_for
from ._paths import derivation_path

log = logging.getLogger(__name__)


def remote_has_derivation(store, key: str) -> str | None:
    """The first configured remote whose binary cache holds derivation ``key``, or None.

    Only the existence of ``derivations/<key>.json`` is checked; an unreachable remote counts as
    not having it, as it would for ``get``; a pull-only remote is never asked.
    """
    path = derivation_path(key)
    for config in (c for c in registry(store).all() if c.cache):
        try:
            with remote_for(config) as remote:
                remote.check_online()
                if path in remote.existing([path], remote.resolve(None)):
                    return config.name
        except RemoteError as exc:
            log.warning("binary cache %s skipped: %s", config.name, exc)
    return None
