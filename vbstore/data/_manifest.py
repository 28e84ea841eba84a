"""Turning a :class:`Scan` into a stored ``manifest`` document.

The document holds no absolute path, so a copied or shared folder gives the same id. Images are
hashed through the store's file-state cache (a ``stat`` per unchanged file) and decoded only
when hashed afresh. Nothing is written to the store unless every sample is usable.
"""

from __future__ import annotations

import os
import time
from array import array
from collections.abc import Callable, MutableSequence, Sequence
from operator import attrgetter
from pathlib import Path
from typing import Any

import blake3

from .. import canonical
from ..errors import BadInput, StoreIOError, UsageError, field_ref
from ..store import RACY_SECONDS
from ._files import (
    check_class_names,
    check_image,
    check_target,
    links_out,
    name_hash,
    unreadable,
)
from ._scan import Entry, Scan


def manifest_digest(classes: Sequence[str], samples: Sequence[dict[str, Any]],
                    triplets: Sequence[Sequence[int]] | None = None,
                    pairs: Sequence[Sequence[Any]] | None = None) -> str:
    """The digest of a split's content: BLAKE3 of ``canonical({"classes", "samples"})``
    (and ``triplets``, for 2AFC data: the same images with other judgements differ).

    Unlike the manifest id it ignores how the data was laid out, named as a split or limited,
    so two readings of the same files and labels share a digest.
    """
    content: dict[str, Any] = {"classes": list(classes), "samples": list(samples)}
    if triplets is not None:
        content["triplets"] = [list(t) for t in triplets]
    if pairs is not None:  # views with their relative poses, or keypoint pairs
        content["pairs"] = [list(p) for p in pairs]
    return canonical.key_of(content)


def check_limit(limit: int | None) -> int | None:
    """``limit`` itself, or :class:`UsageError` when it is not a positive integer."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise UsageError(f"limit must be a positive integer, not {limit!r}",
                         hint=f"e.g. {field_ref('limit', '10')}")
    return limit


def select(scan: Scan, limit: int | None) -> list[Entry]:
    """The entries ``--limit`` keeps: the N lowest name hashes per class, or N in all.

    A hash rank rather than a prefix of the sorted names, so the kept samples are spread over
    the whole split; ranks depend on relative names only, so every copy keeps the same ones.
    """
    if scan.triplets is not None:  # --limit counts triplets: keep the images they use
        used = {name for t in kept_triplets(scan, limit) for name in t[1:4]}
        return [e for e in scan.entries if e.name in used]
    if scan.pairs is not None:  # --limit counts pairs: keep the images they use
        used = {name for p in kept_pairs(scan, limit) for name in p[1:3]}
        return [e for e in scan.entries if e.name in used]
    if limit is None:
        return list(scan.entries)
    groups: dict[str, list[Entry]] = {}
    for entry in scan.entries:
        groups.setdefault(entry.group if scan.limit_by == "class" else "", []).append(entry)
    kept = []
    for members in groups.values():
        kept.extend(sorted(members, key=lambda e: (name_hash(e.key), e.key))[:limit])
    return kept


def kept_triplets(scan: Scan, limit: int | None) -> list[tuple[str, str, str, str, int, int]]:
    """The triplets ``--limit`` keeps: the N lowest hashes of their ids, in id order."""
    rows = sorted(scan.triplets or [], key=lambda t: t[0])
    if limit is None:
        return rows
    return sorted(sorted(rows, key=lambda t: (name_hash(t[0]), t[0]))[:limit], key=lambda t: t[0])


def kept_pairs(scan: Scan, limit: int | None) -> list[tuple[str, str, str, tuple[Any, ...]]]:
    """The pairs ``--limit`` keeps: the N lowest hashes of their ids, in id order."""
    rows = sorted(scan.pairs or [], key=lambda p: p[0])
    if limit is None:
        return rows
    return sorted(sorted(rows, key=lambda p: (name_hash(p[0]), p[0]))[:limit], key=lambda p: p[0])


def _hash(store, paths: list[str], check: Callable[[Path, bytes | None, str], str | None],
          noun: str) -> list[str]:
    try:
        return store.file_states.hash(paths, check=check, what=f"unreadable or corrupt {noun}")
    except StoreIOError as exc:
        if exc.__cause__ is not None:  # the registry itself (disk full, damaged): not the files
            raise
        # file_states.hash names the first unreadable file; list them all, as for corrupt ones
        raise unreadable(paths, f"missing or unreadable {noun}") from None


def _sample(entry: Entry, image: str, target: str | None) -> dict[str, Any]:
    sample: dict[str, Any] = {"name": entry.name, "image": image}
    if entry.label is not None:
        sample["label"] = entry.label
    if entry.labels is not None:
        sample["labels"] = entry.labels
    if entry.target_name is not None:
        sample["target"], sample["target_name"] = target, entry.target_name
    if entry.captions is not None:
        sample["captions"] = entry.captions
    if entry.condition is not None:
        sample["condition"] = entry.condition
    return sample


def kept_entries(scan: Scan, limit: int | None) -> list[Entry]:
    """The entries a manifest holds, in sample order (sorted by name)."""
    return sorted(select(scan, check_limit(limit)), key=attrgetter("name"))


def file_states(scan: Scan, entries: Sequence[Entry]) -> tuple[list[str], Sequence[int]] | None:
    """The names of the entries' files under ``scan.root`` (each image, then its target), and
    the (dev, inode, size, mtime, ctime) of each, five numbers apiece, in that order; None when
    one cannot be statted (build_document names the missing file)."""
    try:
        # 40 bytes a file as machine integers (a list of ints would hold ~180)
        return _file_states(str(scan.root) + os.sep, entries, array("q"))
    except OverflowError:  # an inode or device number past 2**63 (some network filesystems)
        return _file_states(str(scan.root) + os.sep, entries, [])
    except OSError:
        return None


def _file_states(root: str, entries: Sequence[Entry],
                 states: MutableSequence[int]) -> tuple[list[str], Sequence[int]]:
    # this runs on every cached `get`, a stat per file: the loop keeps to the stat, and the
    # states stay numbers, turned to bytes once (measured 2x faster than a line per file)
    names: list[str] = []
    add, name, stat = states.extend, names.append, os.stat
    for e in entries:
        st = stat(root + e.name)
        add((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
        name(e.name)
        if e.target_name is not None:
            tt = stat(root + e.target_name)
            add((tt.st_dev, tt.st_ino, tt.st_size, tt.st_mtime_ns, tt.st_ctime_ns))
            name(e.target_name)
    return names, states


def state_key(scan: Scan, limit: int | None, entries: Sequence[Entry] | None = None,
              files: tuple[list[str], Sequence[int]] | None = None) -> str | None:
    """A key for "this exact listing over files in these exact states", or None when racy.

    It covers the layout, split, classes, limit and every kept entry with the (dev, inode, size,
    mtime, ctime) of its files, so an unchanged folder maps to its manifest without hashing a
    file or re-encoding 100k samples; any change to a file or to the listing changes the key.
    A file modified in the last moments gives None (its timestamp could hide a second write).

    Args:
        entries: ``kept_entries(scan, limit)``, when the caller has them already.
        files: ``file_states(scan, entries)``, when the caller has them already.
    """
    if entries is None:
        entries = kept_entries(scan, limit)
    if files is None:
        files = file_states(scan, entries)
        if files is None:
            return None
    states = files[1]
    if time.time_ns() - max(states[3::5], default=0) < RACY_SECONDS * 1e9:
        return None
    # machine integers as bytes; a list, where a number did not fit one, as its repr
    state_bytes = states.tobytes() if isinstance(states, array) else repr(states).encode()
    root = str(scan.root) + os.sep
    header = (4, scan.layout, root, scan.split, scan.classes, scan.target_type, limit,
              kept_triplets(scan, limit) if scan.triplets is not None else None,
              # the poses live in the table, not in any image's state
              (scan.pair_field, kept_pairs(scan, limit)) if scan.pairs is not None else None)
    # a column no entry fills is None, not a list of Nones (a folder of class folders fills one)
    columns = [None if column.count(None) == len(column) else column for column in (
        [e.label for e in entries], [e.labels for e in entries], [e.target_name for e in entries],
        [e.captions for e in entries], [e.condition for e in entries])]
    hasher = blake3.blake3()
    for part in (repr(header).encode(), "\0".join([e.name for e in entries]).encode(),
                 repr(columns).encode(), state_bytes):
        hasher.update(len(part).to_bytes(8, "little"))
        hasher.update(part)
    return hasher.hexdigest()


def build_document(store, scan: Scan, limit: int | None) -> dict[str, Any]:
    """Hash the kept samples and assemble the manifest document (not stored yet).

    Raises:
        BadInput: missing, unreadable or corrupt images or targets, every one listed; files
            that link out of the data folder; class names with control characters.
    """
    entries = kept_entries(scan, limit)
    # plain string joins: building 100k Path objects would cost more than the cached hashing
    root = str(scan.root)
    check_class_names(scan.classes, root)
    # a manifest names files of its own dataset: a link out of it would make the dataset
    # whatever the link points at (checked before anything is hashed or stored). The dataset's
    # folder holds every split: a split folder's parent, so splits may share files by links.
    split_folder = scan.split is not None and scan.root.name == scan.split
    outside = links_out(root, [n for e in entries for n in (e.name, e.target_name)
                               if n is not None],
                        within=str(scan.root.parent) if split_folder else root)
    if outside:
        raise BadInput("files that link out of the data folder", outside,
                       hint="copy the files in, or point the data at a folder that holds both")
    images = _hash(store, [os.path.join(root, e.name) for e in entries], check_image, "images")
    with_target = [(i, e.target_name) for i, e in enumerate(entries) if e.target_name is not None]
    # one file may hold many samples' targets (a COCO split): hashed once
    unique = sorted({name for _, name in with_target})
    hashed = dict(zip(unique, _hash(store, [os.path.join(root, n) for n in unique], check_target,
                                    "targets") if unique else [], strict=True))
    target_hashes = [hashed[name] for _, name in with_target]
    if scan.check_targets is not None:  # box annotations: their contents, before any store
        scan.check_targets([(entries[i].name, Path(root, name)) for i, name in with_target])
    if scan.check_images is not None:
        scan.check_images([(e.name, Path(root, e.name)) for e in entries])
    targets: list[str | None] = [None] * len(entries)
    for (i, _), digest in zip(with_target, target_hashes, strict=True):
        targets[i] = digest
    samples = [_sample(e, h, t) for e, h, t in zip(entries, images, targets, strict=True)]
    doc: dict[str, Any] = {
        "kind": "manifest",
        "layout": scan.layout,
        "split": scan.split,
        "classes": scan.classes,
        "target_type": scan.target_type,
        "limit": limit,
        "samples": samples,
    }
    triplets = None
    if scan.triplets is not None:
        index = {e.name: i for i, e in enumerate(entries)}
        triplets = [[index[r], index[a], index[b], lv, rv]
                    for _, r, a, b, lv, rv in kept_triplets(scan, limit)]
        doc["triplets"] = triplets
    pairs = None
    if scan.pairs is not None:
        index = {e.name: i for i, e in enumerate(entries)}
        pairs = [[index[a], index[b], *payload] for _, a, b, payload in kept_pairs(scan, limit)]
        doc[scan.pair_field] = pairs
    doc["digest"] = manifest_digest(scan.classes, samples, triplets, pairs)
    return doc


def store_document(store, doc: dict[str, Any]) -> str:
    """Store the document and return its id, validating it only the first time it is written."""
    data = canonical.dumps(doc)
    if store.has(canonical.digest(data)):
        # validated when first written; put_bytes refreshes last_used (gc's grace period) and
        # republishes safely if gc removed the blob meanwhile
        return store.put_bytes(data, "manifest")
    return store.put_json(doc, "manifest")
