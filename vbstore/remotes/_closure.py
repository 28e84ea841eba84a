"""Closures: an object with everything it was made from, as listed in refs and derivations.

A ref file and a derivation file both carry the closure of the object they name: for each
object its id, kind, size, input edges and the derivation that produced it. One small file
then tells a pull everything it must download and record, whatever path it came in by
(a ref, or the binary cache's derivation key), without one request per object.

Everything read back from a remote is untrusted: :func:`parse_ref` and
:func:`parse_derivation` check every id, kind, edge and key before anything uses them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .. import __version__, canonical
from ..errors import NonCanonical, ObjectNotFound, UsageError
from ..store import KINDS, derivation_key
from . import _limits
from ._errors import TamperedBlob
from ._paths import check_oid, check_ref

REF_FORMAT = "vbstore.ref/1"
DERIVATION_FORMAT = "vbstore.derivation/1"
BOARD_FORMAT = "vbstore.board/1"  # a shared board's listing (see _boards.py), also under refs/
MAX_DOCUMENT_BYTES = _limits.MAX_DOCUMENT_BYTES  # read at call time (tests lower it)
_MAX_ROLE = 200


@dataclass(frozen=True)
class Entry:
    """One object of a closure."""

    id: str
    kind: str
    size: int
    edges: tuple[tuple[str, str], ...]
    derivation: dict[str, Any] | None  # {"key": ..., "spec": ...}

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "size": self.size,
                "edges": [list(e) for e in self.edges], "derivation": self.derivation}


def closure(store, oid: str) -> list[Entry]:
    """``oid`` and everything reachable through its input edges that the registry knows, by id.

    Objects whose blob is not present (evicted packs, say) are listed too, so the caller can
    decide; objects with no registry row at all (dangling edges) are left out.
    """
    seen: set[str] = set()
    stack, entries = [oid], []
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        try:
            info = store.info(current)
        except ObjectNotFound:
            continue
        edges = tuple((role, child) for role, child in store.children(current))
        spec = store.derivation_of(current)
        derivation = {"key": derivation_key(spec), "spec": spec} if spec else None
        entries.append(Entry(current, info.kind, info.size, edges, derivation))
        stack.extend(child for _, child in edges)
    return sorted(entries, key=lambda e: e.id)


def within(entries: Iterable[Entry], oid: str) -> list[Entry]:
    """The part of ``entries`` reachable from ``oid`` (the closure of one of its members)."""
    by_id = {e.id: e for e in entries}
    seen: set[str] = set()
    stack = [oid]
    while stack:
        current = stack.pop()
        if current in seen or current not in by_id:
            continue
        seen.add(current)
        stack.extend(child for _, child in by_id[current].edges)
    return [by_id[i] for i in sorted(seen)]


def ref_document(name: str, root: Entry, entries: Iterable[Entry]) -> bytes:
    """The canonical bytes of ``refs/<name>.json``; equal content gives equal bytes."""
    return canonical.dumps({
        "format": REF_FORMAT, "name": name, "id": root.id, "kind": root.kind,
        "closure": [e.as_json() for e in entries], "vbstore": __version__,
    })


def derivation_document(entry: Entry, entries: Iterable[Entry]) -> bytes:
    """The canonical bytes of ``derivations/<key>.json`` for the object ``entry``."""
    assert entry.derivation is not None
    return canonical.dumps({
        "format": DERIVATION_FORMAT, "key": entry.derivation["key"],
        "spec": entry.derivation["spec"], "output": entry.id, "kind": entry.kind,
        "edges": [list(e) for e in entry.edges], "closure": [e.as_json() for e in entries],
        "vbstore": __version__,
    })


def refuse(remote: str, what: str, reason: str) -> TamperedBlob:
    """The error for a downloaded document ``what`` that is not what it claims."""
    return TamperedBlob(remote, what, reason, what=what)


def load_document(remote: str, what: str, data: bytes, fmt: str,
                  max_values: int = _limits.MAX_DOCUMENT_VALUES) -> dict[str, Any]:
    """The JSON object of format ``fmt`` a remote's ``data`` holds (``what`` names it in errors).

    Raises:
        TamperedBlob: not JSON (a NaN or Infinity included), too many values or nested too
            deeply, or not a ``fmt`` document.
        UsageError: a shared board where another format was asked for (naming the pull).
    """
    def no_constants(token: str) -> None:
        raise ValueError(f"{token} is not allowed")

    _limits.check_values(remote, what, data, max_values)
    try:
        doc = json.loads(data, parse_constant=no_constants)
    except (ValueError, UnicodeDecodeError) as exc:
        raise refuse(remote, what, f"not a JSON document ({exc})") from None
    except RecursionError:
        raise refuse(remote, what, "nested too deeply") from None
    if isinstance(doc, dict) and doc.get("format") == BOARD_FORMAT != fmt:
        raise UsageError(f"{what} on remote {remote!r} is a shared board, not an object",
                         hint=f"pull it with: vbstore pull board {doc.get('suite')} "
                              f"--from {remote}")
    if not isinstance(doc, dict) or doc.get("format") != fmt:
        raise refuse(remote, what, f"not a {fmt} document")
    return doc


def _check_spec(remote: str, key: str, spec: object) -> dict[str, Any]:
    if not (isinstance(spec, dict) and isinstance(spec.get("op"), str)
            and isinstance(spec.get("op_version"), int) and isinstance(spec.get("inputs"), dict)
            and isinstance(spec.get("params"), dict)):
        raise refuse(remote, f"derivation {key[:12]}", "malformed derivation spec")
    for role, child in spec["inputs"].items():
        check_oid(child, f"input {role!r} of derivation {key[:12]}")
    try:
        actual = derivation_key(spec)
    except NonCanonical as exc:
        raise refuse(remote, f"derivation {key[:12]}", str(exc)) from None
    if actual != key:
        raise refuse(remote, f"derivation {key[:12]}", "its spec does not hash to its key")
    return spec


def _entries(remote: str, what: str, raw: object) -> list[Entry]:
    if not isinstance(raw, list):
        raise refuse(remote, what, "closure is not a list")
    if len(raw) > _limits.MAX_CLOSURE_ENTRIES:
        raise refuse(remote, what, f"its closure lists {len(raw)} objects, over the "
                                    f"{_limits.MAX_CLOSURE_ENTRIES} allowed")
    entries = []
    for item in raw:
        if not isinstance(item, dict):
            raise refuse(remote, what, "closure entry is not an object")
        oid = check_oid(item.get("id"))
        kind, size = item.get("kind"), item.get("size")
        if kind not in KINDS or not isinstance(size, int) or size < 0:
            raise refuse(remote, what, f"bad kind or size for {oid[:12]}")
        edges = []
        for edge in item.get("edges") or []:
            if not (isinstance(edge, list) and len(edge) == 2 and isinstance(edge[0], str)
                    and 0 < len(edge[0]) <= _MAX_ROLE and edge[0].isprintable()):
                raise refuse(remote, what, f"bad edge on {oid[:12]}")
            edges.append((edge[0], check_oid(edge[1], "edge target")))
        derivation = item.get("derivation")
        if derivation is not None:
            if not isinstance(derivation, dict):
                raise refuse(remote, what, f"bad derivation on {oid[:12]}")
            key = check_oid(derivation.get("key"), "derivation key")
            derivation = {"key": key, "spec": _check_spec(remote, key, derivation.get("spec"))}
        entries.append(Entry(oid, kind, size, tuple(edges), derivation))
    return entries


def parse_ref(remote: str, name: str, data: bytes) -> tuple[str, str, list[Entry]]:
    """Check a downloaded ref file; return ``(id, kind, closure)``.

    Raises:
        TamperedBlob: the document is malformed or names another ref.
        UnsafeRemotePath: an id in it is not a 64-hex id.
    """
    what = f"ref {name!r}"
    doc = load_document(remote, what, data, REF_FORMAT)
    if doc.get("name") != check_ref(name):
        raise refuse(remote, what, f"the file names ref {doc.get('name')!r}")
    oid = check_oid(doc.get("id"))
    entries = _entries(remote, what, doc.get("closure"))
    root = next((e for e in entries if e.id == oid), None)
    if root is None or root.kind != doc.get("kind"):
        raise refuse(remote, what, "its object is missing from its own closure")
    return oid, root.kind, entries


def parse_derivation(remote: str, key: str, data: bytes) -> tuple[dict[str, Any], str, list[Entry]]:
    """Check a downloaded derivation file; return ``(spec, output id, closure)``.

    Raises:
        TamperedBlob: malformed, or its spec does not hash to ``key``.
    """
    what = f"derivation {key[:12]}"
    doc = load_document(remote, what, data, DERIVATION_FORMAT)
    if doc.get("key") != key:
        raise refuse(remote, what, "the file is for another key")
    spec = _check_spec(remote, key, doc.get("spec"))
    output = check_oid(doc.get("output"))
    entries = _entries(remote, what, doc.get("closure"))
    if not any(e.id == output and e.kind == doc.get("kind") for e in entries):
        raise refuse(remote, what, "its output is missing from its own closure")
    return spec, output, entries

