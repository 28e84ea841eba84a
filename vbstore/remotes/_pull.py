"""``pull``, the binary cache (``fetch_derivation``) and ``fetch_object``: remote → local store.

Every path in is the same :func:`install`: download each missing blob of a closure into a
temp file, hashing as it arrives; refuse the whole transfer if any blob does not hash to its id,
or is not what its kind claims (a pickle posing as safetensors, a JSON document of another kind,
non-canonical JSON); only when all of them passed do they enter the store. Lineage (edges and
derivations) is recorded only for objects this transfer brought in: a remote never rewrites the
history of what the local store already had, and a local derivation result is never replaced.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import canonical
from .._progress import progress
from ..errors import CorruptObject, ObjectNotFound, UsageError, VbstoreError
from ..records import StagedReader, check_answer
from ..records.gate import arrival_problems, check_named, makes
from ..store import check_safetensors_file, derivation_key, encoding, validate
from ._base import Remote, document_limit
from ._closure import Entry, parse_derivation, parse_ref, within
from ._errors import RemoteConflict, RemoteError, RemoteNotFound, TamperedBlob, UnsafeRemotePath
from ._limits import check_record, record_bytes
from ._open import open_remote, registry, remote_for
from ._paths import check_oid, check_ref, derivation_path, object_path, split_target

log = logging.getLogger("vbstore.remotes")


@dataclass
class PullResult:
    """What one transfer brought in."""

    remote: str
    ref: str | None = None
    local_ref: str | None = None
    id: str | None = None
    kind: str | None = None
    revision: str | None = None
    downloaded: list[str] = field(default_factory=list)
    already_present: int = 0
    missing: list[str] = field(default_factory=list)
    derivations: int = 0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


# Derived kinds in the order they feed each other: a pulled object may bring cache answers for
# its own kind and the kinds that can be its inputs, never for what is built on top of it.
_DERIVED = ("backbone", "featureset", "head", "result")


def _check_content(remote: str, entry: Entry, temp: Path) -> None:
    """Refuse a blob whose content contradicts its kind, before it reaches the store.

    JSON records are read (they are bounded); safetensors are checked by their header alone.
    """
    kind, how = entry.kind, encoding(entry.kind)
    if how == "json":  # before the parse amplifies it
        check_record(remote, entry.id, kind, temp.read_bytes())
    try:
        if how == "json":
            data = temp.read_bytes()
            document = json.loads(data)
            if not isinstance(document, dict) or document.get("kind") != kind:
                raise VbstoreError(f"it is not a {kind} document")
            if canonical.dumps(document) != data:
                raise VbstoreError("it is not canonical JSON")
            validate(kind, document)
        elif how == "safetensors":
            check_safetensors_file(temp, kind)
    except (VbstoreError, ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise TamperedBlob(remote, entry.id, f"claims kind {kind} but {exc}") from None


def _listed_size(remote: str, entry: Entry, chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Stop a download the moment it passes the size the listing gave (or the record cap)."""
    limit = entry.size if entry.size >= 0 else None
    if encoding(entry.kind) == "json":  # parsed whole: capped, whatever a listing claims
        cap = record_bytes(entry.kind)
        limit = cap if limit is None else min(limit, cap)
    taken = 0
    try:
        for chunk in chunks:
            taken += len(chunk)
            if limit is not None and taken > limit:
                raise TamperedBlob(remote, entry.id, f"it is larger than its listed size ({limit})")
            yield chunk
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()


def _discard(temp: Path) -> None:
    try:
        os.chmod(temp, 0o600)
        os.unlink(temp)
    except FileNotFoundError:
        pass


def _known(store, oid: str) -> bool:
    if store.has(oid):
        return True
    try:
        store.info(oid)
        return True
    except ObjectNotFound:
        return False


def _recordable(entries: list[Entry], root: str) -> set[str]:
    """Ids whose listed derivation a transfer of ``root`` may record as a cache answer.

    Only objects reachable from ``root``, whose derivation's op makes the kind they are (the
    gate's :data:`~vbstore.records.gate.QUESTIONS`), and of a kind that can be an input of
    ``root``'s kind: pulling one head never plants an answer for a result, however the
    listing is dressed up.
    """
    reachable = {e.id: e for e in within(entries, root)}
    top = reachable[root].kind if root in reachable else None
    if top not in _DERIVED:
        return set()
    allowed = _DERIVED[: _DERIVED.index(top) + 1]
    return {e.id for e in reachable.values()
            if e.derivation and makes(e.derivation["spec"]["op"]) == e.kind
            and e.kind in allowed}


def install(store, remote: Remote, entries: Iterable[Entry], revision: str | None,
            result: PullResult, required: Iterable[str] = (),
            root: str | None = None, lineage: bool = False,
            answers: Iterable[tuple[dict[str, Any], str]] = (),
            origin: str | None = None) -> PullResult:
    """Bring the missing objects of a closure into ``store``, verified, all or nothing.

    Each blob streams into a temp file in the store's ``tmp/``, hashed as it arrives and cut
    off at its listed size; it is checked against its kind from the file, and moved into place
    only when every blob passed. Derivations are recorded for ``root`` itself, and with
    ``lineage`` for its own lineage too (see :func:`_recordable`); with ``root=None`` none are.
    ``answers`` are ``(spec, output)`` pairs to record as well (the binary cache's answer).
    Every staged blob is checked against what its kind claims
    (:func:`vbstore.records.gate.arrival_problems`), and every derivation to record against
    what its output declares (:func:`vbstore.records.check_answer`), from the downloaded
    files, before any blob enters the store; each is recorded with ``origin`` (default
    ``pulled from REMOTE``).

    Raises:
        TamperedBlob: a blob does not hash to its id, is larger than listed, or contradicts its
            kind; nothing was kept.
        MisfiledAnswer: a derivation's output declares another question; nothing was kept.
        RemoteNotFound: a ``required`` object is on neither side.
    """
    entries, required = list(entries), set(required)
    needed = {e.id for e in entries if not store.has(e.id)}
    result.already_present += len(entries) - len(needed)
    staged: list[tuple[Entry, Path, int]] = []
    try:
        with progress(f"pulling from {remote.name}", len(needed), "blob") as shown:
            for entry in (e for e in entries if e.id in needed):
                chunks = remote.download(object_path(entry.id), revision)
                if chunks is None:
                    if entry.id in required:
                        raise RemoteNotFound(
                            f"remote {remote.name!r} lacks object {entry.id[:12]}",
                            hint="push it again from a store that has it")
                    result.missing.append(entry.id)
                    continue
                # hashed as it arrives, stopped at the listed size
                temp, digest, size = store.files.write_temp(
                    _listed_size(remote.name, entry, chunks))
                staged.append((entry, temp, size))
                if digest != entry.id:
                    raise TamperedBlob(remote.name, entry.id,
                                       f"its bytes hash to {digest[:12]}")
                if entry.size >= 0 and size != entry.size:  # -1: no listing to compare with
                    raise TamperedBlob(remote.name, entry.id,
                                       "its size differs from the listing")
                _check_content(remote.name, entry, temp)
                shown.update(1)
        temps = {entry.id: temp for entry, temp, _ in staged}
        brought = set(temps)
        recordable = _recordable(entries, root) if root is not None else set()
        if not lineage:
            recordable &= {root}
        to_record = [(e.derivation["spec"], e.id) for e in entries
                     if e.id in brought and e.id in recordable and e.derivation is not None]
        to_record += [(spec, output) for spec, output in answers]
        # an answer's inputs must be here (downloaded now or before) for it to be recorded
        to_record = [(spec, output) for spec, output in to_record
                     if all(i in temps or _known(store, i) for i in spec["inputs"].values())]
        reader = StagedReader(store, temps)
        for entry, _, _ in staged:  # the gate: each kind against what came with it or is here
            problems = arrival_problems(entry.kind, entry.id, reader)
            if problems:
                raise TamperedBlob(remote.name, entry.id, "; ".join(problems[:3]))
        for spec, output in to_record:  # before any blob enters the store
            check_answer(spec, output, reader, f"remote {remote.name!r}")
        for entry, temp, size in staged:  # every blob passed: now they may enter the store
            store.put_temp(temp, entry.id, entry.kind, size)
            result.downloaded.append(entry.id)
    finally:
        for _, temp, _ in staged:
            _discard(temp)
    for entry in entries:
        if entry.id not in brought:
            continue
        edges: dict[str, list[str]] = {}
        for role, child in entry.edges:
            if _known(store, child):
                edges.setdefault(role, []).append(child)
        if edges:
            store.add_edges(entry.id, edges)
    for spec, output in to_record:
        if store.lookup(derivation_key(spec), check=False) is None:  # a local answer stands
            store.record(spec, output, origin=origin or f"pulled from {remote.name}")
            result.derivations += 1
    return result


def pull(store, target: str, revision: str | None = None, as_name: str | None = None,
         force: bool = False, accept: Callable[[PullResult], None] | None = None,
         kind: str | None = None, lineage: bool = False) -> PullResult:
    """Pull ``REMOTE/REF``: download its closure (verified), record lineage, tag it locally.

    ``kind`` refuses a ref whose object is of another kind, before anything is downloaded and
    again after (an object already present is judged by the kind the local store knows).
    ``accept(result)`` runs after the download and before the ref is tagged or the pull noted;
    when it raises (a head that does not fit, say), local refs are left exactly as they were.
    Without ``accept``, the check the object's kind declares for that moment runs instead
    (:func:`vbstore.records.gate.check_named`: a head's compatibility check, strict).
    Derivations are recorded only from remotes that serve as a cache (not ``--no-cache``):
    the root's own, and with ``lineage`` those of everything under it too, each checked
    against what its output declares first.

    ```python
    pull(store, "hub/heads/linear", revision="9f2c...")   # pinned to a Hub commit
    ```

    Raises:
        UnknownRemote: no such remote. RemoteOffline: unreachable; the store is unchanged.
        RemoteNotFound: no such ref or revision. TamperedBlob: a blob failed its checks.
        UnsafeRemotePath: a name or id that would leave the remote's layout.
        RemoteConflict: the local ref points elsewhere (pass ``as_name`` or ``force``).
    """
    remote_name, ref = split_target(target)
    local_name = check_ref(as_name or ref)
    with open_remote(store, remote_name) as remote:
        remote.check_online()
        rev = remote.resolve(revision)
        data, _ = remote.read_ref(ref, rev)
        if data is None:
            raise RemoteNotFound(f"remote {remote_name!r} has no ref {ref!r}",
                                 hint=f"list them with: vbstore remote refs {remote_name}")
        oid, claimed, entries = parse_ref(remote.name, ref, data)
        if kind is not None and claimed != kind:
            raise UsageError(f"{target} is a {claimed}, not a {kind}",
                             hint="pull it with `vbstore pull ref`")
        existing = store.refs().get(local_name)
        if existing not in (None, oid) and not force:
            raise RemoteConflict(
                f"local ref {local_name!r} points at {existing[:12]}, the remote's at {oid[:12]}",
                hint="pull it under another name (--as NAME) or move the local ref (--force)")
        result = PullResult(remote.name, ref, local_name, oid, claimed, rev)
        install(store, remote, entries, rev, result, required=[oid],
                root=oid if remote.config.cache else None, lineage=lineage)
    local_kind = store.info(oid).kind
    if local_kind != claimed:  # present before this pull, so its bytes were not checked now
        raise TamperedBlob(remote.name, oid, f"the ref claims kind {claimed} but it is a "
                                             f"{local_kind} here")
    if accept is not None:
        accept(result)
    else:
        check_named(local_kind, store, oid)
    store.tag(local_name, oid)
    registry(store).note_pull(local_name, remote.config, ref, oid, rev)
    return result


def fetch_derivation(store, key: str, remotes: Iterable[str] | None = None) -> str | None:
    """The binary cache: the output of derivation ``key``, fetched from a remote if one has it.

    Asks each configured remote (or those named) in turn for ``derivations/<key>.json``,
    downloads the output and whatever of its closure is missing, verified, records the
    derivation (origin ``remote NAME``), and returns the output id. Pull-only remotes
    (``cache=False``) are never asked. An unreachable remote, and an answer that fails any
    check (a tampered blob, an unsafe or malformed record, an output of another kind than its
    op makes, an output that declares another question than the key's spec), is a miss with a
    warning: ``get`` computes instead and nothing of that answer is kept.
    """
    key = check_oid(key, "derivation key")
    hit = store.lookup(key)
    if hit is not None:
        return hit
    configs = [c for c in registry(store).all() if c.cache]
    if remotes is not None:
        wanted = set(remotes)
        configs = [c for c in configs if c.name in wanted]
    for config in configs:
        try:
            with remote_for(config) as remote:
                remote.check_online()
                rev = remote.resolve(None)
                data = remote.read(derivation_path(key), rev, limit=document_limit())
                if data is None:
                    continue
                spec, output, entries = parse_derivation(remote.name, key, data)
                kind = next(e.kind for e in entries if e.id == output)
                if makes(spec["op"]) != kind:
                    raise TamperedBlob(remote.name, output,
                                       f"a {spec['op']} derivation cannot produce a {kind}")
                install(store, remote, entries, rev, PullResult(remote.name), required=[output],
                        root=output, lineage=True, answers=[(spec, output)],
                        origin=f"remote {config.name}")
        except (RemoteError, CorruptObject, UnsafeRemotePath) as exc:
            # offline, missing, server trouble, or an answer that failed a check (a tampered
            # blob, an output declaring another question): a cache miss, nothing of it kept
            log.warning("binary cache %s skipped: %s", config.name, exc)
            continue
        if store.lookup(key, check=False) != output:
            continue  # its inputs are not all here: not an answer this store can use
        return output
    return None


def fetch_object(store, oid: str, kind: str | None = None) -> str | None:
    """Re-fetch one blob from the first remote that has it; return that remote's name or None.

    Meant for ``fsck --repair``: call it after the damaged copy has been moved aside (a present
    file is never overwritten). The blob is verified like any pulled one.

    Raises:
        CorruptObject: a damaged copy is still in place.
        TamperedBlob: a remote served bytes that are not this blob.
    """
    oid = check_oid(oid)
    if store.has(oid):
        if store.verify(oid):
            return None
        raise CorruptObject(oid, str(store.path(oid)))
    size = -1
    try:
        info = store.info(oid)
        kind, size = kind or info.kind, info.size
    except ObjectNotFound:
        kind = kind or "blob"
    for config in registry(store).all():
        try:
            with remote_for(config) as remote:
                remote.check_online()
                rev = remote.resolve(None)
                result = PullResult(remote.name)
                install(store, remote, [Entry(oid, kind, size, (), None)], rev, result)
                if result.downloaded:
                    return config.name
        except RemoteError as exc:
            log.warning("re-fetch of %s from %s failed: %s", oid[:12], config.name, exc)
    return None

