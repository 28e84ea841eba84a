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
What an evaluation cannot prove by itself is checked against this store
(:func:`._judge.judge_pulled`): the results it names that are here, the evaluation it corrects,
the origin it claims promotion from. Nothing is stored unless every evaluation passed. A new
evaluation is dated by the board (never later than now); a time already recorded here is never
changed. The pull is resumable and crash-safe: evaluations are stored and indexed in batches,
each committed with its blobs after one flush to disk; an evaluation counts as here once it is
indexed, so the blobs of a batch a kill cut short are read back, judged and indexed by the next
pull (or ``vbstore fsck --repair``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from .. import canonical
from .._progress import progress
from ..errors import (
    ObjectNotFound,
    RemoteConflict,
    RemoteNotFound,
    SuiteNotFound,
    TamperedBlob,
    VbstoreError,
)
from ..records import EvaluationRecord, StoreReader, SuiteRecord
from ..remotes import (
    BoardListing,
    RefUpdate,
    blobs_to_send,
    board_document,
    board_ref,
    check_record,
    fetch_record,
    open_remote,
    read_board,
    sizes,
)
from ..store import Store, hex_id, validate
from ._evaluate import index_evaluation, supersede
from ._judge import REJUDGED, judge_pulled, rejudge
from ._suite import Suite, get_suite, normalize, push_suite

BATCH = 1000  # evaluations a pull stores and indexes per transaction, with one flush to disk
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

    ``suite_ref`` is ``slug@version`` (the board names one version). Resumable: an evaluation
    is *here* once it is indexed, so one whose blob a killed pull left unindexed is read back
    from this store, judged and indexed by the next.

    Raises:
        RemoteNotFound: the remote has no board of that suite.
        TamperedBlob: a blob failed its checks, an evaluation is not of this board, or it fails
            :func:`judge_pulled`; nothing was kept.
        RemoteConflict: this store holds ``slug@version`` as another suite document (another
            protocol, or the same one with other vbstore settings).
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
        wanted = sorted(set(listing.evaluations) - indexed(store, listing.suite))
        result.already_present = len(listing.evaluations) - len(wanted)
        arriving: dict[str, tuple[bytes, dict[str, Any]]] = {}
        with progress(f"pulling board from {source.name}", len(wanted), "evaluation") as shown:
            for oid in wanted:
                size = listing.evaluations[oid][0]
                here = _left_here(store, oid)
                got = here or fetch_record(source, oid, "evaluation", size, rev)
                if got is None:
                    raise RemoteNotFound(f"remote {source.name!r} lists evaluation {oid[:12]} "
                                         f"on the board of {listing.suite} but lacks it",
                                         hint="push the board again from a store that has it")
                arriving[oid] = got
                if here is None:
                    result.bytes += len(got[0])
                    result.downloaded += 1
                shown.update(1)

        def lookup(oid: str) -> dict[str, Any] | None:
            got = arriving.get(oid)
            return got[1] if got is not None else None

        admitted = []
        for oid, (data, doc) in arriving.items():
            problems = judge_pulled(store, doc, suite=suite, lookup=lookup)
            if problems:
                more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
                raise TamperedBlob(source.name, oid, "; ".join(problems[:3]) + more)
            admitted.append((oid, data, doc, rejudge(suite, doc)))
    # every evaluation passed: now they may enter the store
    if suite_doc is not None:
        result.suite_added = _add_suite(store, suite_doc)
    latest = time.time()  # a listed time in the future is a claim to be the newest attempt
    admit(store, [(oid, data, doc, again, min(listing.evaluations[oid][1], latest))
                  for oid, data, doc, again in admitted], result)
    return result


def indexed(store: Store, suite_ref: str) -> set[str]:
    """The evaluations of ``suite_ref`` this store has indexed: its rows, and the originals of
    its re-judged copies."""
    rows = {oid for (oid,) in store.db.query("SELECT id FROM evaluations WHERE suite=?",
                                              (suite_ref,))}
    return rows | {original for copy, original in _copies(store) if copy in rows}


def _copies(store: Store) -> list[tuple[str, str]]:
    """``(re-judged copy, the original it was judged from)`` of every copy here."""
    return [(hex_id(parent), hex_id(child)) for parent, child in store.db.query(
        "SELECT parent, child FROM edges WHERE role=?", (REJUDGED,))]


def _left_here(store: Store, oid: str) -> tuple[bytes, dict[str, Any]] | None:
    """An evaluation's bytes and document when its blob is here though it is not indexed (a
    killed pull left it), checked as a download is."""
    if not store.has(oid):
        return None
    try:
        data = store.read_bytes(oid)
    except ObjectNotFound:  # collected meanwhile: fetch it again
        return None
    return data, check_record(f"store {store.root}", oid, "evaluation", data)


def index_stored(store: Store, oids: list[str]) -> list[str]:
    """Judge and index evaluation blobs this store holds but has not indexed (what a killed
    pull left), as a pull does, each dated by its blob's creation; return the ids indexed.

    One that fails :func:`judge_pulled`, or whose suite is not here, stays unindexed (``fsck``
    keeps reporting it).
    """
    items = []
    for oid in oids:
        try:
            data = store.read_bytes(oid)
            doc = check_record(f"store {store.root}", oid, "evaluation", data)
            suite = get_suite(store, EvaluationRecord.from_dict(doc).suite)
        except VbstoreError:
            continue
        if judge_pulled(store, doc, suite=suite):
            continue
        items.append((oid, data, doc, rejudge(suite, doc), store.info(oid).created))
    admit(store, items)
    return [oid for oid, *_ in items]


def judge_staged(reader, oid: str) -> list[str]:
    """The gate's judge of an evaluation arriving by a plain pull (or a cache answer) rather
    than on a board: :func:`judge_pulled`, run on the transfer's staged files before any enters
    the store. Its suite must come along or be here, and be the document this store holds
    under that ``slug@version``, if it holds one."""
    doc = reader.json(oid)
    suite, problems = _staged_suite(reader, doc)
    if suite is None:
        return problems
    staged = getattr(reader, "staged", {})
    return judge_pulled(reader.store, doc, suite=suite,
                        lookup=lambda other: reader.json(other) if other in staged else None)


def _staged_suite(reader, doc: dict[str, Any]) -> tuple[Suite | None, list[str]]:
    """The suite an arriving evaluation names, from the transfer or this store, or why not."""
    ref, oid = doc.get("suite"), doc.get("suite_id")
    if not isinstance(oid, str) or not reader.present(oid):
        return None, [f"its suite {ref} ({str(oid)[:12]}) neither came with it nor is here"]
    suite_doc = reader.json(oid)
    if suite_doc.get("kind") != "suite" or f"{suite_doc.get('slug')}@" \
            f"{suite_doc.get('version')}" != ref:
        return None, [f"its suite_id {oid[:12]} is not suite {ref}"]
    try:
        here = get_suite(reader.store, ref)
    except SuiteNotFound:
        here = None
    if here is not None and here.id != oid:
        return None, [f"this store holds {ref} as another suite document ({here.id[:12]}) "
                      f"than the one it names ({oid[:12]})"]
    return Suite(oid, normalize(suite_doc)), []


def index_pulled(store: Store, oid: str) -> None:
    """After a plain pull stored evaluation ``oid`` (judged by :func:`judge_staged`): index it
    as a board pull indexes its evaluations (its suite first, when this store lacks that
    version; re-judged as a copy where its verdict does not hold here). One already indexed is
    left as it is.

    Raises:
        TamperedBlob: it fails :func:`judge_pulled` here (one stored before, by an older
            vbstore's plain pull); it stays unindexed and gets no name.
    """
    evaluation = EvaluationRecord.from_dict(store.read_json(oid))  # the gate checked its schema
    if oid in indexed(store, evaluation.suite):
        return
    _add_suite(store, store.read_json(evaluation.suite_id))
    if index_stored(store, [oid]) != [oid]:
        problems = judge_staged(StoreReader(store), oid) or ["it cannot be judged here"]
        raise TamperedBlob(f"store {store.root}", oid, "; ".join(problems[:3]),
                           what=f"evaluation {oid[:12]}")


def admit(store: Store, pulled: list[tuple[str, bytes, dict[str, Any], dict[str, Any] | None,
                                           float]], result: BoardPull | None = None) -> int:
    """Store and index judged evaluations ``(id, bytes, document, re-judged copy or None,
    recorded)``, :data:`BATCH` at a time; return how many rows were added.

    Each batch is written with one flush to disk, and its blobs and rows are committed
    together (:meth:`Store.put_many`), so a kill at any point loses at most the rows of one
    batch, whose blobs the next pull (or ``fsck --repair``) indexes. A re-judged one is stored
    as its copy, ranked, and the original as a plain blob, never ranked. Times already
    recorded here are never changed.
    """
    copies = {original: copy for copy, original in _copies(store)}
    # each document read once, as its record
    out: list[tuple[str, bytes, EvaluationRecord, float,
                    tuple[bytes, EvaluationRecord] | None]] = []
    for oid, data, doc, again, when in pulled:
        if again is not None:
            made = {**again, REJUDGED: oid}
            encoded = canonical.dumps(made)
            validate("evaluation", made)
            copies[oid] = canonical.digest(encoded)
            out.append((oid, data, EvaluationRecord.from_dict(doc), when,
                        (encoded, EvaluationRecord.from_dict(made))))
        else:
            out.append((oid, data, EvaluationRecord.from_dict(doc), when, None))
    # a correction replaces what its original is ranked as here: a re-judged one's local copy
    corrections = {copies.get(replaced, replaced): copies.get(oid, oid)
                   for oid, _, record, _, _ in out if (replaced := _supersedes(record))}
    added = 0
    for start in range(0, len(out), BATCH):
        batch = out[start : start + BATCH]
        blobs: list[tuple[bytes, str, dict[str, Any] | None]] = []
        rows: list[tuple[str, EvaluationRecord, float]] = []
        for oid, data, record, when, copy in batch:
            edges = _edges(store, record)
            if copy is None:
                blobs.append((data, "evaluation", edges))
                rows.append((oid, record, when))
                continue
            # the copy first: a kill between the two renames leaves no unjudged original
            blobs.append((copy[0], "evaluation", {**edges, REJUDGED: oid}))
            blobs.append((data, "blob", None))  # the remote's document: never ranked
            rows.append((copies[oid], copy[1], when))
            if result is not None:
                result.rejudged.append({
                    "id": oid, "as": copies[oid], "was": record.state, "now": copy[1].state,
                    "reasons": copy[1].reasons,
                    "evidence": [record.evidence, copy[1].evidence]})

        def index(conn, rows=rows) -> None:
            nonlocal added
            for oid, record, when in rows:
                added += index_evaluation(conn, oid, record, when)
            for oid, record, _ in rows:
                if replaced := _supersedes(record):
                    supersede(conn, copies.get(replaced, replaced), oid)
                if oid in corrections:  # its correction may be in an earlier batch
                    supersede(conn, oid, corrections[oid])

        store.put_many(blobs, then=index)
    if result is not None:
        result.added += added
    return added


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
    remote = Suite(listing.suite_id, doc)  # a suite document: fetch_record checked its schema
    if remote.ref != listing.suite:
        raise TamperedBlob(source.name, listing.suite_id, "the board's suite is another suite",
                           what=what)
    if canonical.dumps(normalize(doc)) != data:
        raise TamperedBlob(source.name, listing.suite_id, "the suite is not in its stored form",
                           what=what)
    digest = remote.digest
    if digest != listing.protocol_digest:
        raise TamperedBlob(source.name, listing.suite_id,
                           "the suite's protocol does not hash to the board's digest", what=what)
    if here is not None and here.digest != digest:
        raise RemoteConflict(
            f"this store holds {listing.suite} with another protocol ({here.digest[:12]}) than "
            f"the board on remote {source.name!r} ({digest[:12]})",
            hint="a published suite version never changes: one of the two must become a new "
                 "version")
    if here is not None:  # the same protocol in another document: refused, as a push is
        differs = ("other vbstore settings (params, pins)"
                   if here.extension_digest != remote.extension_digest else "another name")
        raise RemoteConflict(
            f"this store holds {listing.suite} as another suite document ({here.id[:12]}) than "
            f"the board on remote {source.name!r} ({listing.suite_id[:12]}): the same protocol, "
            f"{differs}",
            hint="a published suite version never changes: one of the two must become a new "
                 "version (vbstore suite show compares them)")
    return remote, doc


def _add_suite(store: Store, doc: dict[str, Any]) -> bool:
    """Store the remote's suite document: indexed unless this store has that version already
    (the same protocol, checked before), where it is kept for the evaluations that name it."""
    try:
        get_suite(store, SuiteRecord.from_dict(doc).ref)
    except SuiteNotFound:
        return push_suite(store, doc)[1]
    store.put_json(doc, "suite")
    return False


def _supersedes(evaluation: EvaluationRecord) -> str | None:
    """The evaluation it corrects (Visin's ``supersedes``, kept in the record's extra)."""
    return evaluation.extra.get("supersedes") or None


def _edges(store: Store, evaluation: EvaluationRecord) -> dict[str, str | list[str]]:
    """An evaluation's edges as ``record`` writes them: its suite, and its results when here."""
    edges: dict[str, str | list[str]] = {"suite": evaluation.suite_id}
    sources = [v for v in (evaluation.sources or {}).values()
               if isinstance(v, str) and len(v) == 64 and store.has(v)]
    if sources:
        edges["result"] = sources
    return edges
