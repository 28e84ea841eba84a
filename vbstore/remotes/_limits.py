"""How much parsing a remote's document may cost: bytes and values, per kind.

JSON parsing amplifies: three bytes of ``{},`` become a 64-byte dict, so a 63 MiB ref of empty
objects cost 1.7 GB of memory on a plain ``get`` with a cache remote. Every document a remote
serves is therefore bounded twice before ``json.loads`` sees it: by its bytes (the download stops
there) and by the values it could hold, counted as the ``{``, ``[`` and ``,`` bytes in it (one
pass in C, no parse). A closure is further bounded by its entry count. The limits are
documented in docs/remotes.md.
"""

from __future__ import annotations

from ..errors import TamperedBlob

# Refs and derivation records: one object's closure (a result's is a few dozen entries; a
# featureset over a million images a few hundred packs).
MAX_DOCUMENT_BYTES = 16 << 20
MAX_DOCUMENT_VALUES = 1_000_000
MAX_CLOSURE_ENTRIES = 50_000

# JSON records by kind: a manifest lists every sample (a million images is ~150 MiB and ~5
# million values), a featureset every pack; the others are a few KiB.
MAX_RECORD_BYTES = {"manifest": 256 << 20, "featureset": 256 << 20, "suite": 64 << 20}
MAX_RECORD_VALUES = {"manifest": 8_000_000, "featureset": 8_000_000, "suite": 2_000_000}
DEFAULT_RECORD_BYTES = 16 << 20
# A shared board (refs/boards/SLUG@V.json) lists every evaluation of one suite version, about
# 110 bytes and 4 values each: a million evaluations is ~110 MiB.
MAX_BOARD_BYTES = 256 << 20
MAX_BOARD_VALUES = 8_000_000
DEFAULT_RECORD_VALUES = 1_000_000


def record_bytes(kind: str) -> int:
    """The most bytes a pulled JSON record of ``kind`` may have."""
    return MAX_RECORD_BYTES.get(kind, DEFAULT_RECORD_BYTES)


def values(data: bytes) -> int:
    """An upper bound on the JSON values ``data`` holds (containers plus separators)."""
    return data.count(b"{") + data.count(b"[") + data.count(b",")


def check_values(remote: str, what: str, data: bytes, limit: int) -> None:
    """Refuse ``data`` before it is parsed when it could hold more than ``limit`` values.

    Raises:
        TamperedBlob: naming the document and the limit.
    """
    if values(data) > limit:
        raise TamperedBlob(remote, what, f"it holds over {limit} JSON values in "
                                         f"{len(data)} bytes (the limit for its kind)", what=what)


def check_record(remote: str, oid: str, kind: str, data: bytes) -> None:
    """Refuse a pulled JSON record over its kind's bytes or values.

    Raises:
        TamperedBlob: naming the record and the limit.
    """
    if len(data) > record_bytes(kind):
        raise TamperedBlob(remote, oid, f"a {kind} record of {len(data)} bytes is over the "
                                        f"{record_bytes(kind)} bytes allowed")
    check_values(remote, f"{kind} {oid[:12]}", data,
                 MAX_RECORD_VALUES.get(kind, DEFAULT_RECORD_VALUES))
