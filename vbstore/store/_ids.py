"""How the registry spells an id: 32 raw bytes in the hot tables, 64 hex digits everywhere else.

The hot tables (``objects``, ``edges``, ``feature_rows``, ``file_state``) hold ids as BLOBs, half
the bytes of the hex text and compared with one ``memcmp``; every id that leaves the store layer
(Python API, CLI, JSON) is hex. These two functions are the only conversion, in both directions.
A value that is not a 64-hex id (none is written today, but a registry may hold one) is kept as
the text it is, so the conversion never loses a row; the raw-byte order equals the hex order, so
``ORDER BY id`` and prefix ranges give what they gave on hex text.
"""

from __future__ import annotations

import re

_HEX64 = re.compile(r"[0-9a-f]{64}")


def db_id(oid: str) -> bytes | str:
    """The registry's form of ``oid``: its 32 bytes when it is a 64-hex id, else ``oid`` itself."""
    return bytes.fromhex(oid) if _HEX64.fullmatch(oid) else oid


def hex_id(value: bytes | str) -> str:
    """The hex id a registry value stands for (the inverse of :func:`db_id`)."""
    return value.hex() if isinstance(value, bytes) else value


def prefix_range(prefix: str) -> tuple[bytes, bytes]:
    """The lowest and highest 32-byte id starting with the hex ``prefix`` (any length ≤ 64)."""
    return bytes.fromhex(prefix.ljust(64, "0")), bytes.fromhex(prefix.ljust(64, "f"))
