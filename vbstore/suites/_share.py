"""Shared boards: a suite's evaluations pushed to a remote and pulled from it, merged.

``push_board`` uploads the suite and every evaluation of it that this store holds and the remote
lacks, then swaps the remote's listing (``refs/boards/SLUG@V.json``) for the union of both. The
swap is conditional; when another push won the race, the listing is read again, merged again
and the swap retried, so no one's evaluations are lost.

``pull_board`` downloads the listing, the suite and every evaluation this store lacks, each
verified (hash, size, kind, canonical form, schema) and checked against the suite (its
``slug@version``, its id, and the origin of a promoted one). Then each is **judged again** with
this store's rules: its evidence level from what it carries, its verdict from the suite. One
whose recorded verdict or evidence agree is stored as it came (the same id in every store). One
that disagrees (tampered, or judged by other rules) is *re-judged*: the remote's document is kept
by id as a plain blob, never ranked, and a copy carrying this store's verdict and
``rejudged_from`` is what the board ranks; a later push shares the original, not the copy.
Nothing is stored unless every evaluation passed; each keeps the time it was first recorded,
so attempts keep their order across stores (one recorded in two stores takes the earlier time in
both), and an evaluation already here is never pulled twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import canonical
from .._progress import progress
from ..errors import ObjectNotFound, RemoteConflict, RemoteNotFound, SuiteNotFound, TamperedBlob
from ..records import EvaluationRecord
from ..remotes import (
    BoardListing,
    RefUpdate,
    blobs_to_send,
    board_document,
    board_ref,
    fetch_record,
    open_remote,
    read_board,
    sizes,
)
from ..store import Store, hex_id
from ._evaluate import index_evaluation, supersede
from ._suite import Suite, get_suite, normalize, protocol_digest, push_suite
from ._verdict import evidence_of, judge

REJUDGED = "rejudged_from"  # the edge (and field) from a re-judged copy to the remote's original
ATTEMPTS = 5  # conditional swaps a push tries before it gives up on a busy board


@dataclass
class _Transfer:
    """What a board push or pull has in common: where, which suite, what it moved."""

    remote: str
    suite: str
    listed: int = 0
    added: int = 0
    bytes: int = 0
    revision: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class BoardPush(_Transfer):
    """What one board push sent."""

    uploaded: int = 0
    already_there: int = 0
    changed: bool = True
    retries: int = 0


@dataclass
class BoardPull(_Transfer):
    """What one board pull brought in."""

    downloaded: int = 0
    already_present: int = 0
    suite_added: bool = False
    rejudged: list[dict[str, Any]] = field(default_factory=list)


def local_board(store: Store, suite: Suite) -> dict[str, tuple[int, float]]:
    """The evaluations of ``suite`` this store can share: id → ``(size, first recorded)``.

    A re-judged copy is shared as the original it was judged from; an evaluation whose blob is
    not here is left out.
    """
    rows = store.db.query("SELECT id, recorded FROM evaluations WHERE suite=?", (suite.ref,))
    originals = {hex_id(parent): hex_id(child) for parent, child in store.db.query(
        "SELECT parent, child FROM edges WHERE role=?", (REJUDGED,))}
    found: dict[str, tuple[int, float]] = {}
    for oid, recorded in rows:
        shared = originals.get(oid, oid)
        try:
            size = store.info(shared).size
        except ObjectNotFound:
            continue
        if store.has(shared):
            found[shared] = (size, min(recorded, found.get(shared, (0, recorded))[1]))
    return found


def push_board(store: Store, remote: str, suite_ref: str) -> BoardPush:
    """Merge this store's evaluations of ``suite_ref`` into the remote's board of it.

    Raises:
        SuiteNotFound: no such suite here. UnknownRemote, RemoteOffline: see ``push``.
        RemoteConflict: the remote's board is of another protocol under this ``slug@version``,
            or it kept changing through every attempt.
        CorruptObject: a local blob no longer matches its id (run ``vbstore fsck``).
    """
    suite = get_suite(store, suite_ref)
    ours = local_board(store, suite)
    name = board_ref(suite.ref)
    with open_remote(store, remote) as target:
        target.check_online()
        result = BoardPush(target.name, suite.ref)
        for attempt in range(ATTEMPTS):
            result.retries = attempt
            base = target.begin_push()
            listing, current, version = read_board(target, suite.ref, base)
            if listing is not None and (listing.protocol_digest != suite.digest
                                        or listing.suite_id != suite.id):
                raise RemoteConflict(
                    f"remote {target.name!r} holds a board of {suite.ref} for another suite "
                    f"document (protocol {listing.protocol_digest[:12]}, here "
                    f"{suite.digest[:12]})",
                    hint="a published suite version never changes: publish yours as a new "
                         "version (vbstore suite push) and push that board")
            theirs = listing.evaluations if listing is not None else {}
            merged = dict(theirs)
            for oid, (size, recorded) in ours.items():
                merged[oid] = (size, min(recorded, theirs[oid][1]) if oid in theirs
                               else recorded)
            files, there = blobs_to_send(store, target, [suite.id, *ours], base)
            document = board_document(BoardListing(
                suite.ref, suite.id, store.info(suite.id).size, suite.digest, merged))
            result.listed, result.added = len(merged), len(merged) - len(theirs)
            result.uploaded, result.already_there = len(files), there
            result.bytes = sizes(files)
            if current == document and not files:
                result.changed, result.revision = False, base
                return result
            try:
                result.revision = target.publish(
                    files, RefUpdate(name, document, version),
                    f"vbstore: push board {suite.ref} ({len(merged)} evaluations)")
            except RemoteConflict:
                continue  # another push merged first: read its listing and merge again
            return result
    raise RemoteConflict(f"the board of {suite.ref} on remote {remote!r} changed through "
                         f"{ATTEMPTS} attempts to merge into it",
                         hint="push again when the other pushes are done")


def pull_board(store: Store, remote: str, suite_ref: str, revision: str | None = None
               ) -> BoardPull:
    """Merge the remote's board of ``suite_ref`` into this store, every evaluation re-judged.

    ``suite_ref`` is ``slug@version`` (the board names one version).

    Raises:
        RemoteNotFound: the remote has no board of that suite.
        TamperedBlob: a blob failed its checks, or an evaluation is not of this board; nothing
            was kept.
        RemoteConflict: this store holds ``slug@version`` with another protocol.
    """
    with open_remote(store, remote) as source:
        source.check_online()
        rev = source.resolve(revision)
        listing, _, _ = read_board(source, suite_ref, rev)
        if listing is None:
            raise RemoteNotFound(f"remote {source.name!r} has no board of {suite_ref}",
                                 hint=f"list them with: vbstore remote refs {source.name} "
                                      "(boards/SLUG@VERSION)")
        result = BoardPull(source.name, listing.suite, len(listing.evaluations), revision=rev)
        suite, suite_doc = _suite_of(store, source, listing, rev)
        wanted = {oid: entry for oid, entry in listing.evaluations.items() if not store.has(oid)}
        result.already_present = len(listing.evaluations) - len(wanted)
        fetched: list[tuple[str, bytes, dict[str, Any]]] = []
        with progress(f"pulling board from {source.name}", len(wanted), "evaluation") as shown:
            for oid, (size, _) in sorted(wanted.items()):
                got = fetch_record(source, oid, "evaluation", size, rev)
                if got is None:
                    raise RemoteNotFound(f"remote {source.name!r} lists evaluation {oid[:12]} "
                                         f"on the board of {listing.suite} but lacks it",
                                         hint="push the board again from a store that has it")
                fetched.append((oid, *got))
                shown.update(1)
        judged = [_judge(store, source.name, listing, suite, oid, doc)
                  for oid, _, doc in fetched]
    # every evaluation passed: now they may enter the store
    if suite_doc is not None:
        result.suite_added = _add_suite(store, suite_doc)
    rows = []
    for (oid, data, doc), again in zip(fetched, judged, strict=True):
        edges = _edges(store, doc)
        result.bytes += len(data)
        result.downloaded += 1
        when = listing.evaluations[oid][1]
        if again is None:
            store.put_bytes(data, "evaluation", edges)
            rows.append((oid, doc, when))
            continue
        store.put_bytes(data, "blob")  # the remote's document, by id: never ranked, never re-pulled
        copy = store.put_json(again, "evaluation", edges={**edges, REJUDGED: oid})
        rows.append((copy, again, when))
        result.rejudged.append({"id": oid, "as": copy, "was": doc["verdict"]["state"],
                                "now": again["verdict"]["state"], "reasons":
                                again["verdict"]["reasons"], "evidence": [
                                    doc["evidence"], again["evidence"]]})
    # a correction replaces what its original is ranked as here: a re-judged one's local copy
    copies = {hex_id(child): hex_id(parent) for parent, child in store.db.query(
        "SELECT parent, child FROM edges WHERE role=?", (REJUDGED,))}
    with store.db.write() as conn:
        for oid, doc, when in rows:
            result.added += index_evaluation(conn, oid, EvaluationRecord.from_dict(doc), when)
        for oid, doc, _ in rows:  # once every pulled evaluation is indexed, as reindex does
            if doc.get("supersedes"):
                supersede(conn, copies.get(doc["supersedes"], doc["supersedes"]), oid)
        # one evaluation recorded in two stores is dated by its first recording in both, so
        # every store orders a checkpoint's attempts alike
        conn.executemany("UPDATE evaluations SET recorded=? WHERE id=? AND recorded>?",
                         [(when, oid, when) for oid, (_, when) in listing.evaluations.items()
                          if oid not in wanted])
    return result


def _suite_of(store: Store, source, listing: BoardListing, rev: str | None
              ) -> tuple[Suite, dict[str, Any] | None]:
    """The suite to judge by (this store's when it has it) and the remote's document to add
    (None when nothing needs adding)."""
    try:
        here = get_suite(store, listing.suite)
    except SuiteNotFound:
        here = None
    if here is not None and here.id == listing.suite_id:
        return here, None
    got = fetch_record(source, listing.suite_id, "suite", listing.suite_size, rev)
    if got is None:
        raise RemoteNotFound(f"remote {source.name!r} lacks suite {listing.suite} "
                             f"({listing.suite_id[:12]}) of its board",
                             hint="push the board again from a store that has it")
    data, doc = got
    what = f"suite {listing.suite}"
    if f"{doc.get('slug')}@{doc.get('version')}" != listing.suite:
        raise TamperedBlob(source.name, listing.suite_id, "the board's suite is another suite",
                           what=what)
    if canonical.dumps(normalize(doc)) != data:
        raise TamperedBlob(source.name, listing.suite_id, "the suite is not in its stored form",
                           what=what)
    digest = protocol_digest(doc["protocol"])
    if digest != listing.protocol_digest:
        raise TamperedBlob(source.name, listing.suite_id,
                           "the suite's protocol does not hash to the board's digest", what=what)
    if here is not None and here.digest != digest:
        raise RemoteConflict(
            f"this store holds {listing.suite} with another protocol ({here.digest[:12]}) than "
            f"the board on remote {source.name!r} ({digest[:12]})",
            hint="a published suite version never changes: one of the two must become a new "
                 "version")
    return (here or Suite(listing.suite_id, doc)), doc


def _add_suite(store: Store, doc: dict[str, Any]) -> bool:
    """Store the remote's suite document: indexed unless this store has that version already
    (the same protocol, checked before), where it is kept for the evaluations that name it."""
    try:
        get_suite(store, f"{doc['slug']}@{doc['version']}")
    except SuiteNotFound:
        return push_suite(store, doc)[1]
    store.put_json(doc, "suite")
    return False


def _judge(store: Store, remote: str, listing: BoardListing, suite: Suite, oid: str,
           doc: dict[str, Any]) -> dict[str, Any] | None:
    """None when the evaluation's own verdict and evidence are what this store judges them to
    be; else the re-judged copy of it.

    Raises:
        TamperedBlob: it is not an evaluation of this board's suite, or it claims a promotion
            whose origin is neither on the board nor here.
    """
    if doc["suite"] != listing.suite or doc["suite_id"] != listing.suite_id:
        raise TamperedBlob(remote, oid, f"the board of {listing.suite} lists an evaluation of "
                                        f"{doc['suite']} ({doc['suite_id'][:12]})")
    origin = doc.get("promoted_from")
    if origin is not None and not (isinstance(origin, str) and (
            origin in listing.evaluations or store.has(origin))):
        raise TamperedBlob(remote, oid, f"it claims promotion from {str(origin)[:12]}, which is "
                                        "neither on the board nor in this store")
    evidence, missing = evidence_of(doc)
    verdict = judge(suite, doc)
    if (doc["evidence"], doc.get("missing"), doc["verdict"]) == (evidence, missing, verdict):
        return None
    return {**doc, "evidence": evidence, "missing": missing, "verdict": verdict, REJUDGED: oid}


def _edges(store: Store, doc: dict[str, Any]) -> dict[str, str | list[str]]:
    """An evaluation's edges as ``record`` writes them: its suite, and its results when here."""
    edges: dict[str, str | list[str]] = {"suite": doc["suite_id"]}
    sources = [v for v in (doc.get("sources") or {}).values()
               if isinstance(v, str) and len(v) == 64 and store.has(v)]
    if sources:
        edges["result"] = sources
    return edges
