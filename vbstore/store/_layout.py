"""Facts about a store's files that the fastest path reads without loading the store.

The answer cache (:mod:`._answers`) answers a repeated ``get result`` with the standard library
and blake3 alone; the store's own modules take these facts from here too, so each is said once.
"""

from __future__ import annotations

import os

# The newest registry migration: ``_registry.MIGRATIONS`` ends with it (checked on import there).
REGISTRY_VERSION = 11
# A file state younger than this may change again within one timestamp: it is never trusted.
RACY_SECONDS = 0.1


def default_home() -> str:
    """``VBSTORE_HOME``, else ``~/.cache/vbstore`` (user folders expanded)."""
    home = os.environ.get("VBSTORE_HOME")
    return os.path.expanduser(home) if home else os.path.expanduser("~/.cache/vbstore")


def object_path(root: str, oid: str) -> str:
    """Where the blob ``oid`` lies under the store ``root``: fanned out by its first two chars."""
    return os.path.join(root, "objects", oid[:2], oid[2:])
