"""The ``feature_rows`` index: which pack row holds an image's features under an extractor.

It lets a dataset that shares images with another reuse their features instead of running the
backbone again. A row counts only while its pack blob is present.

At 10^8 images this is the registry's largest table, so a row is kept small: the image as 32
bytes, the extractor key and the pack as small integers (numbered once in ``extractors`` and
``packs``), in a ``WITHOUT ROWID`` table keyed by ``(extractor, image)``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import VbstoreError
from ._ids import db_id, hex_id
from ._tensors import read_safetensors_header

if TYPE_CHECKING:
    from ._base import StoreBase

_CHUNK = 500


class FeatureRows:
    """The feature-row index of one store: ``store.feature_rows``."""

    def __init__(self, store: StoreBase) -> None:
        self.store = store

    def find(self, extractor: str, images: Iterable[str]) -> dict[str, tuple[str, int]]:
        """``image id → (pack id, row)`` for the images already extracted by ``extractor``."""
        number = self.store.db.one("SELECT id FROM extractors WHERE key=?", (db_id(extractor),))
        if number is None:
            return {}
        keys = {db_id(image): image for image in images}
        # in key order: each chunk reads neighbouring pages of the table, not random ones
        wanted: list = sorted(k for k in keys if isinstance(k, bytes))
        if len(wanted) < len(keys):  # ids kept as text (none is written today) go last
            wanted += [k for k in keys if isinstance(k, str)]
        hits: list[tuple[bytes | str, int, int]] = []
        for i in range(0, len(wanted), _CHUNK):
            chunk = wanted[i : i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            hits += self.store.db.query(
                "SELECT image, pack, row FROM feature_rows "  # noqa: S608 - marks is a fixed "?" list
                f"WHERE extractor=? AND image IN ({marks})",
                [number[0], *chunk],
            )
        packs: dict[int, str | None] = {}
        for pack in {pack for _, pack, _ in hits}:
            row = self.store.db.one("SELECT oid FROM packs WHERE id=?", (pack,))
            oid = hex_id(row[0]) if row else None
            packs[pack] = oid if oid is not None and self.store.has(oid) else None
        return {keys[image]: (packs[pack], row) for image, pack, row in hits  # type: ignore[misc]
                if packs[pack] is not None}

    def add(self, extractor: str, pack: str, images: Sequence[str]) -> None:
        """Record that row ``i`` of ``pack`` holds the features of ``images[i]``."""
        with self.store.db.write() as conn:
            insert_feature_rows(conn, extractor, pack, enumerate(images))


def pack_index(path: str | Path) -> tuple[str, list[str]] | None:
    """A pack's extractor key and image ids, row by row, from its header alone (no tensor is
    read); None when the header does not say them."""
    try:
        metadata = read_safetensors_header(path)[0].get("__metadata__") or {}
        images = json.loads(metadata["images"])
        extractor = metadata["extractor"]
    except (ValueError, KeyError, TypeError, OSError, RecursionError, VbstoreError):
        return None
    if not (isinstance(extractor, str) and isinstance(images, list)
            and all(isinstance(image, str) for image in images)):
        return None
    return extractor, images


def insert_feature_rows(conn, extractor: str, pack: str, rows: Iterable[tuple[int, str]]) -> None:
    """Record ``(row, image)`` pairs of one pack, inside the caller's write transaction."""
    conn.execute("INSERT OR IGNORE INTO extractors(key) VALUES (?)", (db_id(extractor),))
    conn.execute("INSERT OR IGNORE INTO packs(oid) VALUES (?)", (db_id(pack),))
    ((number,),) = conn.execute("SELECT id FROM extractors WHERE key=?", (db_id(extractor),))
    ((pack_number,),) = conn.execute("SELECT id FROM packs WHERE oid=?", (db_id(pack),))
    conn.executemany(
        "INSERT OR REPLACE INTO feature_rows(extractor, image, pack, row) VALUES (?,?,?,?)",
        [(number, db_id(image), pack_number, row) for row, image in rows],
    )


def forget_pack_rows(conn, keys: list) -> None:
    """Drop the feature rows and numbers of the packs among ``keys`` (registry ids), inside the
    caller's write transaction."""
    if not keys:
        return
    marks = ",".join("?" * len(keys))
    conn.execute("DELETE FROM feature_rows WHERE pack IN "  # noqa: S608 - marks is a fixed "?" list
                 f"(SELECT id FROM packs WHERE oid IN ({marks}))", keys)
    conn.execute(f"DELETE FROM packs WHERE oid IN ({marks})", keys)  # noqa: S608
