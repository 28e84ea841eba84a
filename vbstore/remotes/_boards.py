"""Shared boards on a remote: ``refs/boards/<slug>@<version>.json`` lists a suite's evaluations.

A board is not one object's closure (a ref) but a set that grows: every evaluation of one suite
version that any store pushed, each with its size and the time it was first recorded (the order
of attempts a leaderboard ranks by). The evaluation blobs and the suite's blob are ordinary
blobs in ``objects/``. The listing is swapped conditionally like a ref, so two pushes that merge
into one board never lose each other's evaluations: the one that loses the race reads the new
listing, merges again and retries.

Everything read back is untrusted: :func:`parse_board` checks the format, name, ids, sizes and
times before anything uses them, and :func:`fetch_record` checks a blob's hash, size, kind,
canonical form and schema. What an evaluation *means* (its suite, its verdict) is judged again
by :mod:`vbstore.suites` when it is pulled.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import blake3

from .. import __version__, canonical
from ..errors import CorruptObject, VbstoreError
from ..store import validate
from . import _limits
from ._base import Remote
from ._closure import BOARD_FORMAT, load_document, refuse
from ._errors import TamperedBlob
from ._paths import check_oid, check_ref, object_path


@dataclass(frozen=True)
class BoardListing:
    """What a remote's board lists: its suite and, per evaluation id, ``(size, recorded)``."""

    suite: str
    suite_id: str
    suite_size: int
    protocol_digest: str
    evaluations: dict[str, tuple[int, float]]


def board_ref(suite_ref: str) -> str:
    """The ref name a suite's board lives under (``boards/road-test@1``)."""
    return check_ref(f"boards/{suite_ref}")


def board_document(listing: BoardListing) -> bytes:
    """The canonical bytes of a board listing; equal content gives equal bytes."""
    return canonical.dumps({
        "format": BOARD_FORMAT, "suite": listing.suite, "suite_id": listing.suite_id,
        "suite_size": listing.suite_size, "protocol_digest": listing.protocol_digest,
        "evaluations": [[oid, size, recorded]
                        for oid, (size, recorded) in sorted(listing.evaluations.items())],
        "vbstore": __version__,
    })


def board_limit() -> int:
    """The most bytes a board listing may have (read at call time: tests lower it)."""
    return _limits.MAX_BOARD_BYTES


def parse_board(remote: str, suite_ref: str, data: bytes) -> BoardListing:
    """Check a downloaded board listing of ``suite_ref``.

    Raises:
        TamperedBlob: malformed, another suite's, or an entry with a bad size or time.
        UnsafeRemotePath: an id that is not a 64-hex id.
    """
    what = f"board {suite_ref}"
    doc = load_document(remote, what, data, BOARD_FORMAT, _limits.MAX_BOARD_VALUES)
    if doc.get("suite") != suite_ref:
        raise refuse(remote, what, f"the file lists suite {doc.get('suite')!r}")
    size, digest = doc.get("suite_size"), doc.get("protocol_digest")
    if not (isinstance(size, int) and _size(size) and isinstance(digest, str)
            and len(digest) == 64):
        raise refuse(remote, what, "bad suite size or protocol digest")
    raw = doc.get("evaluations")
    if not isinstance(raw, list):
        raise refuse(remote, what, "its evaluations are not a list")
    evaluations: dict[str, tuple[int, float]] = {}
    for item in raw:
        if not (isinstance(item, list) and len(item) == 3):
            raise refuse(remote, what, "an evaluation entry is not [id, size, recorded]")
        oid, length, recorded = check_oid(item[0], "evaluation id"), item[1], item[2]
        if not (_size(length) and isinstance(recorded, (int, float))
                and not isinstance(recorded, bool) and math.isfinite(recorded)
                and recorded >= 0):
            raise refuse(remote, what, f"bad size or time for evaluation {oid[:12]}")
        if oid in evaluations:
            raise refuse(remote, what, f"evaluation {oid[:12]} is listed twice")
        evaluations[oid] = (length, float(recorded))
    return BoardListing(suite_ref, check_oid(doc.get("suite_id"), "suite id"), size, digest,
                        evaluations)


def read_board(remote: Remote, suite_ref: str, revision: str | None
               ) -> tuple[BoardListing | None, bytes | None, str | None]:
    """``(listing or None, its bytes, version)`` of the board of ``suite_ref`` on ``remote``."""
    data, version = remote.read_ref(board_ref(suite_ref), revision, limit=board_limit())
    if data is None:
        return None, None, version
    return parse_board(remote.name, suite_ref, data), data, version


def fetch_record(remote: Remote, oid: str, kind: str, size: int,
                 revision: str | None) -> tuple[bytes, dict[str, Any]] | None:
    """A JSON record's bytes and document from ``remote``, or None when it is not there.

    Read no further than its listed ``size`` (and its kind's cap), and refused unless it hashes
    to ``oid``, is canonical JSON of ``kind`` and valid under that kind's schema.

    Raises:
        TamperedBlob: any of those checks failed.
    """
    limit = min(size, _limits.record_bytes(kind))
    chunks = remote.download(object_path(oid), revision)
    if chunks is None:
        return None
    parts, taken = [], 0
    try:
        for chunk in chunks:
            taken += len(chunk)
            if taken > limit:
                raise TamperedBlob(remote.name, oid, f"it is larger than its listed size ({limit})")
            parts.append(chunk)
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
    data = b"".join(parts)
    document = check_record(remote.name, oid, kind, data)
    if len(data) != size:
        raise TamperedBlob(remote.name, oid, "its size differs from the listing")
    return data, document


def check_record(source: str, oid: str, kind: str, data: bytes) -> dict[str, Any]:
    """The document of ``data``, a JSON record of ``kind`` that came from ``source`` (a remote,
    or a store a crash left a blob in), once it is proven to be what ``oid`` names.

    Raises:
        TamperedBlob: it does not hash to ``oid``, is over its kind's cap, or is not canonical
            JSON of ``kind`` valid under that kind's schema.
    """
    digest = blake3.blake3(data).hexdigest()
    if digest != oid:
        raise TamperedBlob(source, oid, f"its bytes hash to {digest[:12]}")
    _limits.check_record(source, oid, kind, data)
    try:
        document = json.loads(data)
        if not isinstance(document, dict) or document.get("kind") != kind:
            raise VbstoreError(f"it is not a {kind} document")
        if canonical.dumps_parsed(document) != data:
            raise VbstoreError("it is not canonical JSON")
        validate(kind, document)
    except (VbstoreError, ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise TamperedBlob(source, oid, f"claims kind {kind} but {exc}") from None
    return document


def blobs_to_send(store, target: Remote, ids: Iterable[str], revision: str | None
                  ) -> tuple[dict[str, Path], int]:
    """``(remote path → local file, how many are already there)`` for the present blobs ``ids``.

    A file the remote holds under an id is sent again unless it matches ours byte for byte (see
    :meth:`Remote.unchanged`), so a file planted under an id is overwritten; each blob sent is
    re-hashed first, so a damaged one is never published.

    Raises:
        CorruptObject: a local blob no longer matches its id (run ``vbstore fsck``).
    """
    wanted = {object_path(oid): oid for oid in ids}
    there = target.existing(wanted, revision)
    ours = {path: store.path(oid) for path, oid in wanted.items()}
    same = target.unchanged({p: ours[p] for p in there}, revision)
    files: dict[str, Path] = {}
    for path in sorted(wanted):
        if path in same:
            continue
        if not store.verify(wanted[path]):
            raise CorruptObject(wanted[path], str(ours[path]))
        files[path] = ours[path]
    return files, len(same)


def sizes(files: Mapping[str, Path | bytes]) -> int:
    """The bytes of the files a push sends."""
    return sum(len(f) if isinstance(f, bytes) else f.stat().st_size for f in files.values())


def _size(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
