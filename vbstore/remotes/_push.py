"""``push``: send an object, everything it was made from, and a ref naming it, to a remote.

Order matters for readers: blobs and derivation records go up before the ref that points at
them, so whoever reads the ref finds everything it lists (on the Hub all of it lands in one
commit anyway). The ref update is conditional on the ref (Hub: the branch) being unchanged since
the push read it, so two concurrent pushes cannot silently overwrite each other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import CorruptObject, ObjectNotFound, UsageError
from ._base import RefUpdate
from ._closure import Entry, closure, derivation_document, ref_document, within
from ._open import open_remote
from ._paths import check_ref, check_root_file, derivation_path, object_path


@dataclass
class PushResult:
    """What one push sent."""

    remote: str
    ref: str
    id: str
    kind: str
    uploaded: list[str] = field(default_factory=list)
    already_there: int = 0
    skipped: list[str] = field(default_factory=list)
    derivations: int = 0
    files: list[str] = field(default_factory=list)
    revision: str | None = None
    changed: bool = True

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def push(store, remote: str, ref_or_id: str, name: str | None = None,
         extra_files: Mapping[str, bytes] | None = None, message: str | None = None,
         options: Mapping[str, str] | None = None,
         include: Iterable[str] | None = None) -> PushResult:
    """Push a local ref (or an id, with ``name``) and its whole input closure to ``remote``.

    ```python
    push(store, "hub", "my-head")                       # remote ref "my-head"
    push(store, "s3", "3fa9c2", name="heads/linear")    # an id, named on the remote
    ```

    Raises:
        UnknownRemote: ``remote`` is not configured.
        RemoteOffline: the remote cannot be reached; nothing was sent.
        RemoteConflict: the remote ref changed while this push ran.
        UsageError: an id was given without ``name``.
    """
    oid = store.resolve(ref_or_id)
    if name is None:
        if store.refs().get(ref_or_id) != oid:
            raise UsageError(f"{ref_or_id!r} is an id, not a ref name",
                             hint="name it on the remote with --as NAME")
        name = ref_or_id
    return push_ref(store, remote, name, oid, extra_files=extra_files, message=message,
                    options=options, include=include)


def push_ref(store, remote: str, name: str, oid: str,
             extra_files: Mapping[str, bytes] | None = None,
             message: str | None = None, options: Mapping[str, str] | None = None,
             include: Iterable[str] | None = None) -> PushResult:
    """Make remote ref ``name`` point at ``oid``, uploading what the remote lacks.

    Uploads ``oid`` and every object reachable from it through input edges that is present
    locally (each re-hashed first, so a damaged blob is never published), the derivation
    records that produced them, then the ref. A file the remote already holds under an id or
    key is uploaded again unless it matches ours byte for byte (see :meth:`Remote.unchanged`).
    ``extra_files`` (root file name → bytes) join the same push: on the Hub,
    ``model.safetensors``, ``vbstore.json`` and ``README.md`` make a pushed head a browsable
    model repository. ``options`` override the remote's configured
    options for this push (``private``). ``include`` limits the push to ``oid`` and these ids
    (with their own closures cut to the same set): a head travels with its backbone and weights
    records, not with the features it was trained on.

    Raises:
        ObjectNotFound: ``oid`` is neither present locally nor already on the remote.
        CorruptObject: a local blob no longer matches its id (run ``vbstore fsck``).
        RemoteConflict: the ref (Hub: the branch) moved since the push read it.
    """
    check_ref(name)
    extra = {check_root_file(k): bytes(v) for k, v in (extra_files or {}).items()}
    entries = closure(store, oid) if include is None else _selected(store, oid, include)
    root = next((e for e in entries if e.id == oid), None)
    if root is None:
        raise ObjectNotFound(oid)
    with open_remote(store, remote, options) as target:
        target.check_online()
        base = target.begin_push()
        current, version = target.read_ref(name, base)
        wanted = {object_path(e.id): e for e in entries}
        derived = {derivation_path(e.derivation["key"]): e for e in entries if e.derivation}
        there = target.existing([*wanted, *derived], base)
        result = PushResult(target.name, name, oid, root.kind)
        present = {e.id for e in entries if store.has(e.id)}
        listed = [e for e in entries if e.id in present or object_path(e.id) in there]
        # what the remote holds must be what we would send: anything planted under an id (or a
        # derivation key) is found here and overwritten below
        ours: dict[str, Any] = {}
        for path, entry in wanted.items():
            if entry.id in present:
                ours[path] = store.path(entry.id)
        for path, entry in derived.items():
            if entry.id in present or object_path(entry.id) in there:
                ours[path] = derivation_document(entry, within(listed, entry.id))
        same = target.unchanged({p: ours[p] for p in there if p in ours}, base)
        same |= {p for p in there if p not in ours}  # on the remote only: nothing to compare
        files: dict[str, Any] = {}
        for path, entry in sorted(wanted.items()):
            if path in same:
                result.already_there += 1
            elif entry.id in present:
                if not store.verify(entry.id):
                    raise CorruptObject(entry.id, str(store.path(entry.id)))
                files[path] = ours[path]
                result.uploaded.append(entry.id)
            else:
                result.skipped.append(entry.id)  # evicted locally and not on the remote
        if oid in result.skipped:
            raise ObjectNotFound(
                oid, hint="it is not present locally (evicted?); recompute it first")
        for path in sorted(derived):
            if path not in ours:
                continue
            result.derivations += 1
            if path not in same:
                files[path] = ours[path]
        files.update(extra)
        result.files = sorted(extra)
        document = ref_document(name, root, listed)
        if current == document and not files:
            result.changed, result.revision = False, base
            return result
        result.revision = target.publish(
            files, RefUpdate(name, document, version),
            message or f"vbstore: push {name} -> {oid[:12]} ({root.kind})")
        return result


def _selected(store, oid: str, include: Iterable[str]) -> list[Entry]:
    """The entries of ``oid`` and ``include`` only; edges and derivations that would point
    outside the selection are left out, so the listing never names what was not sent."""
    keep = {oid, *include}
    found: dict[str, Entry] = {}
    for start in sorted(keep):
        for entry in closure(store, start):
            if entry.id in keep:
                found[entry.id] = entry
    selected = []
    for entry in found.values():
        edges = tuple(e for e in entry.edges if e[1] in keep)
        derivation = entry.derivation
        if derivation and not set(derivation["spec"]["inputs"].values()) <= keep:
            derivation = None
        selected.append(Entry(entry.id, entry.kind, entry.size, edges, derivation))
    return sorted(selected, key=lambda e: e.id)
