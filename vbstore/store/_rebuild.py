"""Rebuild ``registry.db`` from the objects folder, when SQLite says it is damaged.

Every blob knows what it is: a JSON document carries ``kind``, a safetensors file carries
``vbstore.kind`` in its ``__metadata__``. Its edges are the ids it names: a document's fields (a
result's backbone, manifests, feature sets and heads; a feature set's packs and manifest; a
backbone's weights...), a head's compatibility record, and a pack's rows give back the feature-row
index. What no blob records cannot come back: refs, aliases, derivation records (so the next
``get`` recomputes what it asks for, and finds the same bytes already stored), the file-state
cache and leases, the registry's logs (notes, runs, data names), and the edges no document
names: a zero-shot result's ``text_embeddings`` (gc may then collect those text-tower outputs;
a rerun computes them again). The damaged file is kept aside, never deleted.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError, VbstoreError
from ._fsck import registry_errors, sniff_kind
from ._ids import db_id
from ._kinds import encoding
from ._objects import _fsync_dir, hash_file
from ._registry import Registry
from ._rows import insert_feature_rows, pack_index
from ._tensors import read_safetensors_header

if TYPE_CHECKING:
    from ._base import StoreBase
    from ._reports import RebuildReport

_ID = re.compile(r"^[0-9a-f]{64}\Z")
_MAX_DEPTH = 64


def rebuild_registry(store: StoreBase, jobs: int | None = None,
                     force: bool = False) -> RebuildReport:
    """Move ``registry.db`` aside and index every intact blob in a fresh one.

    Run it while no other vbstore process uses the store: one holding the old file open
    would go on writing to the file that was moved aside.

    Raises:
        StoreReadOnly: the store cannot be written.
        UsageError: the registry is intact (SQLite's integrity check passes) and ``force``
            is not given: a rebuild would lose its refs and derivation records.
    """
    store.writable("rebuild its registry")
    if not force and not registry_errors(store):
        raise UsageError(
            "registry.db is intact (SQLite's integrity check passes); a rebuild would lose "
            "its refs, aliases and derivation records",
            hint="rebuild only a registry `vbstore fsck` reports damaged")
    store.close()
    from ._reports import RebuildReport  # loads with its first report (_reports says why)

    report = RebuildReport()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for suffix in ("", "-wal", "-shm"):  # the WAL may hold the newest pages: keep it beside
        old = store.root / f"registry.db{suffix}"
        if old.exists():
            aside = old.with_name(f"registry.db.damaged-{stamp}{suffix}")
            os.replace(old, aside)
            report.kept_aside.append(str(aside))
    files = dict(store.files.iter_files())

    def read(item: tuple[str, Path]) -> tuple[str, Path, str | None, os.stat_result | None]:
        oid, path = item
        try:
            st = path.stat()
            return oid, path, sniff_kind(path) if hash_file(path) == oid else None, st
        except OSError:
            return oid, path, None, None

    objects, edges = [], []
    headers: dict[str, tuple[str, list[str]]] = {}  # pack → (extractor, images)
    documents: dict[str, tuple[str, Path]] = {}  # featureset or manifest → (kind, path)
    # a thread pool (with logging: ~4 ms of imports) only where blobs are hashed,
    # never on a cached `get`
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(jobs or min(8, os.cpu_count() or 2)) as pool:
        found = list(pool.map(read, files.items()))
    present = {oid for oid, _, kind, _ in found if kind is not None}
    for oid, path, kind, st in found:
        if kind is None or st is None:
            report.corrupt.append(oid)
            continue
        # published at its mtime: gc's grace period counts from there
        objects.append((db_id(oid), kind, st.st_size, st.st_mtime, st.st_mtime))
        report.kinds[kind] = report.kinds.get(kind, 0) + 1
        named = {(role, child) for role, child in _named_ids(path, kind)
                 if child in present and child != oid}
        edges += [(db_id(oid), db_id(child), role) for role, child in sorted(named)]
        if kind == "pack" and (index := pack_index(path)):
            headers[oid] = index
        elif kind in ("featureset", "manifest"):
            documents[oid] = (kind, path)
    packs = _vouched_rows(headers, documents)
    report.packs_not_indexed = sorted(set(headers) - {pack for _, pack, _ in packs})
    # built under another name and moved into place whole: a rebuild killed midway leaves
    # no registry.db (refused as lost, so the rebuild is run again), never an empty one
    building = store.root / "registry.db.rebuilding"
    for suffix in ("", "-wal", "-shm"):  # what a killed rebuild left
        building.with_name(building.name + suffix).unlink(missing_ok=True)
    registry = Registry(building, new=True)
    try:
        with registry.write() as conn:
            conn.executemany("INSERT INTO objects(id, kind, size, created, last_used) "
                             "VALUES (?,?,?,?,?)", objects)
            conn.executemany("INSERT OR IGNORE INTO edges(parent, child, role) "
                             "VALUES (?,?,?)", edges)
            for extractor, pack, pack_rows in packs:
                insert_feature_rows(conn, extractor, pack, pack_rows)
        registry.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # all of it in the file
    finally:
        registry.close()
    os.replace(building, store.root / "registry.db")
    _fsync_dir(store.root)
    report.edges, report.feature_rows = len(edges), sum(len(r) for *_, r in packs)
    report.kinds = dict(sorted(report.kinds.items()))
    return report


def _named_ids(path: Path, kind: str) -> Iterator[tuple[str, str]]:
    """(role, id) for every id-shaped string a blob names, the role being its field's name."""
    try:
        if encoding(kind) == "json":
            yield from _walk(json.loads(path.read_bytes()), kind, 0)
        elif encoding(kind) == "safetensors":
            metadata = read_safetensors_header(path)[0].get("__metadata__") or {}
            for key, value in metadata.items():
                if key == "images":  # image content hashes, not blobs
                    continue
                if isinstance(value, str) and value[:1] in ("{", "["):
                    yield from _walk(json.loads(value), key, 0)
                else:
                    yield from _walk(value, key, 0)
    except (ValueError, RecursionError, OSError, VbstoreError):
        return


def _walk(value: Any, role: str, depth: int) -> Iterator[tuple[str, str]]:
    if depth > _MAX_DEPTH:
        return
    if isinstance(value, str):
        if _ID.match(value):
            yield role, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(item, str(key), depth + 1)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item, role, depth + 1)


def _vouched_rows(headers: dict[str, tuple[str, list[str]]],
                  documents: dict[str, tuple[str, Path]]
                  ) -> list[tuple[str, str, list[tuple[int, str]]]]:
    """``(extractor, pack, [(row, image)])`` of the pack rows a featureset vouches for.

    A pack's header names its extractor and images, but anyone can write such a header: a row
    is indexed only when an intact featureset of that extractor lists it at a position where
    its intact manifest has that very image. A pack no featureset names is not indexed (the
    next extraction that needs it computes it again).
    """
    vouched: dict[str, set[int]] = {}
    for kind, path in documents.values():
        if kind != "featureset":
            continue
        try:
            doc = json.loads(path.read_bytes())
            kind_of, manifest_path = documents.get(doc["manifest"], (None, None))
            if kind_of != "manifest" or manifest_path is None:
                continue
            images = [s["image"] for s in json.loads(manifest_path.read_bytes())["samples"]]
            packs, rows, key = doc["packs"], doc["rows"], doc["extractor_key"]
            if len(rows) != len(images):
                continue
            for image, (index, row) in zip(images, rows, strict=True):
                pack = packs[index]
                header = headers.get(pack)
                if header and header[0] == key and 0 <= row < len(header[1]) \
                        and header[1][row] == image:
                    vouched.setdefault(pack, set()).add(row)
        except (ValueError, KeyError, TypeError, IndexError, OSError, RecursionError):
            continue
    return [(headers[pack][0], pack, [(row, headers[pack][1][row]) for row in sorted(rows)])
            for pack, rows in sorted(vouched.items())]
