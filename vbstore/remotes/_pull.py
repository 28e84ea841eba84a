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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import canonical
from ..errors import CorruptObject, ObjectNotFound, VbstoreError
from ..store._kinds import encoding
from ._base import Remote
from ._closure import MAX_DOCUMENT_BYTES, Entry, parse_derivation, parse_ref
from ._errors import RemoteConflict, RemoteError, RemoteNotFound, TamperedBlob
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


def _check_content(remote: str, entry: Entry, data: bytes) -> None:
    """Refuse bytes whose content contradicts their kind, before they reach the store."""
    kind, how = entry.kind, encoding(entry.kind)
    try:
        if how == "json":
            from ..store._schemas import validate

            document = json.loads(data)
            if not isinstance(document, dict) or document.get("kind") != kind:
                raise VbstoreError(f"it is not a {kind} document")
            if canonical.dumps(document) != data:
                raise VbstoreError("it is not canonical JSON")
            validate(kind, document)
        elif how == "safetensors":
            from ..store._tensors import check_safetensors_bytes

            check_safetensors_bytes(data, kind)
    except (VbstoreError, ValueError, UnicodeDecodeError) as exc:
        raise TamperedBlob(remote, entry.id, f"claims kind {kind} but {exc}") from None


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


def install(store, remote: Remote, entries: Iterable[Entry], revision: str | None,
            result: PullResult, required: Iterable[str] = ()) -> PullResult:
    """Bring the missing objects of a closure into ``store``, verified, all or nothing.

    Raises:
        TamperedBlob: a blob does not hash to its id or contradicts its kind; nothing was kept.
        RemoteNotFound: a ``required`` object is on neither side.
    """
    entries, required = list(entries), set(required)
    needed = {e.id for e in entries if not store.has(e.id)}
    result.already_present += len(entries) - len(needed)
    staged: list[tuple[Entry, Path]] = []
    try:
        for entry in (e for e in entries if e.id in needed):
            chunks = remote.download(object_path(entry.id), revision)
            if chunks is None:
                if entry.id in required:
                    raise RemoteNotFound(f"remote {remote.name!r} lacks object {entry.id[:12]}",
                                         hint="push it again from a store that has it")
                result.missing.append(entry.id)
                continue
            temp, digest, size = store.files.write_temp(chunks)  # hashed as it arrives
            staged.append((entry, temp))
            if digest != entry.id:
                raise TamperedBlob(remote.name, entry.id, f"its bytes hash to {digest[:12]}")
            if entry.size >= 0 and size != entry.size:  # -1: no listing to compare with
                raise TamperedBlob(remote.name, entry.id, "its size differs from the listing")
            if encoding(entry.kind) != "raw":
                _check_content(remote.name, entry, temp.read_bytes())
        for entry, temp in staged:  # every blob passed: now they may enter the store
            data = temp.read_bytes()
            got = (store.put_bytes(data, entry.kind) if encoding(entry.kind) == "raw"
                   else store.put_parsed(data, entry.kind))
            if got != entry.id:  # cannot happen after the checks above; refuse rather than guess
                raise TamperedBlob(remote.name, entry.id, f"it was stored as {got[:12]}")
            result.downloaded.append(entry.id)
    finally:
        for _, temp in staged:
            _discard(temp)
    brought = set(result.downloaded)
    for entry in entries:
        if entry.id not in brought:
            continue
        edges: dict[str, list[str]] = {}
        for role, child in entry.edges:
            if _known(store, child):
                edges.setdefault(role, []).append(child)
        if edges:
            store.add_edges(entry.id, edges)
        spec = entry.derivation and entry.derivation["spec"]
        if spec and all(_known(store, i) for i in spec["inputs"].values()) and store.lookup(
                entry.derivation["key"]) is None:
            store.record(spec, entry.id)
            result.derivations += 1
    return result


def pull(store, target: str, revision: str | None = None, as_name: str | None = None,
         force: bool = False, accept: Callable[[PullResult], None] | None = None) -> PullResult:
    """Pull ``REMOTE/REF``: download its closure (verified), record lineage, tag it locally.

    ``accept(result)`` runs after the download and before the ref is tagged or the pull noted;
    when it raises (a head that does not fit, say), local refs are left exactly as they were.

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
        oid, kind, entries = parse_ref(remote.name, ref, data)
        existing = store.refs().get(local_name)
        if existing not in (None, oid) and not force:
            raise RemoteConflict(
                f"local ref {local_name!r} points at {existing[:12]}, the remote's at {oid[:12]}",
                hint="pull it under another name (--as NAME) or move the local ref (--force)")
        result = PullResult(remote.name, ref, local_name, oid, kind, rev)
        install(store, remote, entries, rev, result, required=[oid])
    if accept is not None:
        accept(result)
    store.tag(local_name, oid)
    registry(store).note_pull(local_name, remote.config, ref, oid, rev)
    return result


def fetch_derivation(store, key: str, remotes: Iterable[str] | None = None) -> str | None:
    """The binary cache: the output of derivation ``key``, fetched from a remote if one has it.

    Asks each configured remote (or those named) in turn for ``derivations/<key>.json``,
    downloads the output and whatever of its closure is missing, verified, records the
    derivation, and returns the output id. An unreachable remote is a miss, not an error, so
    ``get`` computes instead; a tampered answer is an error.

    Raises:
        TamperedBlob: a remote's record or blob failed verification; nothing was kept.
    """
    key = check_oid(key, "derivation key")
    hit = store.lookup(key)
    if hit is not None:
        return hit
    configs = registry(store).all()
    if remotes is not None:
        wanted = set(remotes)
        configs = [c for c in configs if c.name in wanted]
    for config in configs:
        try:
            with remote_for(config) as remote:
                remote.check_online()
                rev = remote.resolve(None)
                data = remote.read(derivation_path(key), rev, limit=MAX_DOCUMENT_BYTES)
                if data is None:
                    continue
                spec, output, entries = parse_derivation(remote.name, key, data)
                install(store, remote, entries, rev, PullResult(remote.name), required=[output])
        except RemoteError as exc:  # offline, missing, server trouble: a cache miss
            log.warning("binary cache %s skipped: %s", config.name, exc)
            continue
        if all(_known(store, i) for i in spec["inputs"].values()):
            store.record(spec, output)
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
    if kind is None:
        try:
            kind = store.info(oid).kind
        except ObjectNotFound:
            kind = "blob"
    for config in registry(store).all():
        try:
            with remote_for(config) as remote:
                remote.check_online()
                rev = remote.resolve(None)
                result = PullResult(remote.name)
                install(store, remote, [Entry(oid, kind, -1, (), None)], rev, result)
                if result.downloaded:
                    return config.name
        except RemoteError as exc:
            log.warning("re-fetch of %s from %s failed: %s", oid[:12], config.name, exc)
    return None

