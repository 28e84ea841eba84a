"""Suites: written-down ways of scoring, stored as ``slug@version`` and never changed once pushed.

A suite file is Visin's format (``slug``, integer ``version``, ``name``, ``protocol``), JSON or,
with PyYAML installed, YAML. What only vbstore reads lives in a ``vbstore`` extension block beside
the protocol, so the protocol and its digest are what Visin writes: ``params`` (task parameters
a result must have been computed with), ``weights`` (``pretrained``, the default, or ``random``:
untrained baselines, random or ``fixed`` weights, are ranked only among themselves),
``settings`` (the other settings it pins: layers, pooling... see ``_settings``), ``splits``
(where ``get result --suite`` finds each condition's samples) and ``contentSha256`` (what the
samples are, from vbstore manifests). The block has its own digest. Suites written before it
held ``params``, ``weights`` and each condition's ``split`` in the protocol; reading moves them.
"""

from __future__ import annotations

import copy
import hashlib
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from .. import canonical
from ..errors import SuiteConflict, SuiteNotFound, UsageError
from ..records import SuiteRecord
from ..store import Store
from . import _files

_REF = re.compile(r"^([a-z0-9][a-z0-9._-]*)(?:@([1-9][0-9]*))?\Z")
AGGREGATIONS = ("equal-mean-of-conditions",)
EXTENSION = "vbstore"  # the block of what only vbstore reads; the protocol stays Visin's


@dataclass(frozen=True)
class Suite:
    """A stored suite: its id, ``slug@version`` and its document with defaults filled in
    (``record`` reads it typed)."""

    id: str
    doc: dict[str, Any]

    @cached_property
    def record(self) -> SuiteRecord:
        return SuiteRecord.from_dict(self.doc)

    @property
    def slug(self) -> str:
        return self.record.slug

    @property
    def version(self) -> int:
        return self.record.version

    @property
    def ref(self) -> str:
        return self.record.ref

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def visibility(self) -> str | None:
        return self.record.visibility

    @property
    def protocol(self) -> dict[str, Any]:
        return self.record.protocol

    @property
    def conditions(self) -> list[dict[str, Any]]:
        return self.protocol["conditions"]

    @property
    def metrics(self) -> list[dict[str, Any]]:
        return self.protocol["metrics"]

    @property
    def headline(self) -> dict[str, Any]:
        return next(m for m in self.metrics if m["headline"])

    @property
    def digest(self) -> str:
        """The protocol's digest: Visin's protocol only (the extension has its own)."""
        return protocol_digest(self.protocol)

    @property
    def extension(self) -> dict[str, Any]:
        return self.record.extra[EXTENSION]  # filled in when the suite is read

    @property
    def extension_digest(self) -> str:
        return extension_digest(self.extension)

    @property
    def params(self) -> dict[str, Any]:
        """Task parameters a result must have been computed with."""
        return self.extension["params"]

    @property
    def weights(self) -> str:
        """``pretrained`` or ``random``: which weights the suite ranks."""
        return self.extension["weights"]

    @property
    def settings(self) -> dict[str, Any]:
        """The settings it pins (layers, pooling...); any other varies, shown in the label."""
        return self.extension["settings"]

    def split_of(self, condition: str) -> str:
        """Where ``get result --suite`` finds a condition's samples (default: its name)."""
        return self.extension.get("splits", {}).get(condition, condition)


def parse_ref(text: str) -> tuple[str, int | None]:
    """``("road-test", 1)`` from ``road-test@1``; ``(slug, None)`` for the latest version.

    Raises:
        UsageError: not ``slug`` or ``slug@N``.
    """
    match = _REF.match(text.strip())
    if not match:
        raise UsageError(
            f"not a suite name: {text!r}", hint="write slug@version, e.g. digits-knn@1"
        )
    return match.group(1), int(match.group(2)) if match.group(2) else None


MAX_YAML_DEPTH = 32  # a suite nests four levels; PyYAML's scanner slows with depth squared


def _check_yaml(yaml: Any, text: str, name: str, loader: Any) -> None:
    """Refuse YAML aliases and deep nesting from the event stream, before anything is built:
    nested aliases expand exponentially (1 KB can stand for gigabytes), and a suite needs
    neither.

    Raises:
        UsageError: naming the file and the fix.
    """
    depth = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.AliasEvent):
            raise UsageError(f"{name} uses YAML aliases (*name), which vbstore refuses",
                             hint="write each value out in full (or write the suite as JSON)")
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                raise UsageError(f"{name} is nested over {MAX_YAML_DEPTH} levels deep",
                                 hint="a suite nests a few levels; write it out flat")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def read_suite_file(path: str | Path) -> dict[str, Any]:
    """A suite document from a JSON file, or a YAML one (.yml/.yaml) when PyYAML is installed.

    Its size is checked before it is read (:data:`~._files.MAX_SUITE_BYTES`), and YAML is
    read by libyaml's safe loader where PyYAML has it.

    Raises:
        UsageError: unreadable, too large, not UTF-8, not JSON/YAML, YAML without PyYAML, YAML
            with aliases, nested too deeply, or not one object.
    """
    file = Path(path)
    text = _files.read_text(file, "suite file", _files.MAX_SUITE_BYTES,
                             hint="a suite is a few KiB: is this the suite file?")
    if file.suffix.lower() in (".yml", ".yaml"):
        try:
            import yaml  # optional: only YAML suite files need it
        except ImportError:
            raise UsageError(
                f"{file.name} is YAML, which needs PyYAML",
                hint="pip install pyyaml, or write the suite as JSON",
            ) from None
        # libyaml's safe loader when built in (several times faster); the same documents
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        try:
            _check_yaml(yaml, text, file.name, loader)
            loaded = yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader, chosen above
        except yaml.YAMLError as exc:
            where = " ".join(str(exc).split())  # PyYAML's message spans lines: one line
            raise UsageError(f"{file.name} is not valid YAML: {where}") from None
        except RecursionError:
            raise UsageError(f"{file.name} is nested too deeply to be a suite") from None
    else:
        loaded = _files.loads(text, file.name)
    if not isinstance(loaded, dict):
        raise UsageError(
            f"{file.name} should hold one suite",
            hint="an object with slug, version, name and protocol",
        )
    return loaded


def normalize(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The suite with every default filled in and its own rules checked (schema checked on put).

    Defaults: ``aggregation`` equal-mean-of-conditions, metric ``direction`` max and
    ``headline`` false (true when there is one metric), ``visibility`` private; in the
    ``vbstore`` block ``params`` {}, ``weights`` pretrained, ``settings`` {}. A suite written
    before the block has its ``params``, ``weights`` and condition ``split`` moved into it.

    Raises:
        UsageError: not exactly one headline metric, a metric or condition named twice, or a
            ``range`` whose min exceeds its max.
    """
    out = copy.deepcopy(dict(doc))
    out["kind"] = "suite"
    out.setdefault("visibility", "private")
    protocol = out.get("protocol")
    if not isinstance(protocol, dict):
        raise UsageError(
            "the suite has no protocol object", hint="see docs/suites.md for the format"
        )
    protocol.setdefault("aggregation", AGGREGATIONS[0])
    extension = out.get(EXTENSION)
    if extension is None:
        extension = out[EXTENSION] = {}
    elif not isinstance(extension, dict):
        raise UsageError(f"the suite's {EXTENSION!r} block is not an object")
    for key in ("params", "weights"):  # written inside the protocol before the block existed
        if key in protocol:
            extension.setdefault(key, protocol.pop(key))
    extension.setdefault("params", {})
    extension.setdefault("weights", "pretrained")
    extension.setdefault("settings", {})
    metrics = protocol.get("metrics")
    if isinstance(metrics, list) and metrics and all(isinstance(m, dict) for m in metrics):
        for metric in metrics:
            metric.setdefault("direction", "max")
            metric.setdefault("headline", len(metrics) == 1)
        headlines = [m.get("key") for m in metrics if m["headline"] is True]
        if len(headlines) != 1:
            raise UsageError(
                f"a suite needs exactly one headline metric, this one has {len(headlines)}",
                hint='mark one metric with "headline": true',
            )
        _unique([m.get("key") for m in metrics], "metric")
        for m in metrics:
            bounds = m.get("range")
            if isinstance(bounds, dict) and bounds.get("min", 0) > bounds.get(
                "max", bounds.get("min", 0)
            ):
                raise UsageError(f"metric {m['key']!r} has a range whose min exceeds its max")
    conditions = protocol.get("conditions")
    if isinstance(conditions, list) and all(isinstance(c, dict) for c in conditions):
        _unique([c.get("name") for c in conditions], "condition")
        splits = {c["name"]: c.pop("split") for c in conditions if "split" in c}
        if splits:
            extension["splits"] = {**splits, **extension.get("splits", {})}
    return out


def _unique(names: list[Any], noun: str) -> None:
    seen = set()
    for name in names:
        if name in seen:
            raise UsageError(f"{noun} {name!r} is named twice in the suite")
        seen.add(name)


def protocol_digest(protocol: Mapping[str, Any]) -> str:
    """SHA-256 of the protocol as compact, key-sorted JSON (defaults from :func:`normalize`)."""
    return hashlib.sha256(canonical.dumps(dict(protocol))).hexdigest()


def extension_digest(extension: Mapping[str, Any]) -> str:
    """SHA-256 of the ``vbstore`` block, the same way: what Visin's digest does not cover."""
    return hashlib.sha256(canonical.dumps(dict(extension))).hexdigest()


def push_suite(store: Store, doc: Mapping[str, Any]) -> tuple[Suite, bool]:
    """Store a suite as ``slug@version``; return it and whether it was new.

    The same protocol again returns the stored suite; a different protocol under a published
    version is refused (a published suite version never changes).

    Raises:
        SchemaError: the document is not a suite.
        SuiteConflict: ``slug@version`` exists with another protocol; names the next free version.
    """
    doc = normalize(doc)
    oid = store.put_json(doc, "suite")  # validates against schemas/suite.schema.json
    suite = Suite(oid, doc)
    digest, extension = suite.digest, suite.extension_digest
    slug, version = suite.slug, suite.version
    with store.db.write() as conn:
        row = conn.execute(
            "SELECT id, protocol_digest FROM suites WHERE slug=? AND version=?", (slug, version)
        ).fetchone()
        if row is None:
            conn.execute(
                "INSERT INTO suites(slug, version, id, protocol_digest, created) "
                "VALUES (?,?,?,?,?)",
                (slug, version, oid, digest, time.time()),
            )
            return suite, True
        # stored before the extension block: compare it read the way it is read now
        stored = Suite(row[0], normalize(store.read_json(row[0]))) if row[0] != oid else suite
        if (stored.digest, stored.extension_digest) != (digest, extension):
            latest = conn.execute(
                "SELECT MAX(version) FROM suites WHERE slug=?", (slug,)
            ).fetchone()[0]
            raise SuiteConflict(f"{slug}@{version}", latest + 1)
    return stored, False


def get_suite(store: Store, ref: str) -> Suite:
    """The suite ``slug@version``, or the latest version of ``slug``.

    Raises:
        SuiteNotFound: nothing stored under that name.
    """
    slug, version = parse_ref(ref)
    if version is None:
        row = store.db.one(
            "SELECT id FROM suites WHERE slug=? ORDER BY version DESC LIMIT 1", (slug,)
        )
    else:
        row = store.db.one("SELECT id FROM suites WHERE slug=? AND version=?", (slug, version))
    if row is None:
        versions = [
            v
            for (v,) in store.db.query(
                "SELECT version FROM suites WHERE slug=? ORDER BY version", (slug,)
            )
        ]
        hint = (
            f"{slug} has versions {', '.join(map(str, versions))}"
            if versions
            else "push it with: vbstore suite push FILE"
        )
        raise SuiteNotFound(ref, hint=hint)
    return Suite(row[0], normalize(store.read_json(row[0])))


def list_suites(store: Store) -> list[dict[str, Any]]:
    """Every stored suite version: slug, version, ref, id, protocol digest and name."""
    rows = store.db.query(
        "SELECT slug, version, id, protocol_digest FROM suites ORDER BY slug, version"
    )
    out = []
    for slug, version, oid, _digest in rows:
        doc = normalize(store.read_json(oid))  # a suite stored before the block: read as now
        suite = SuiteRecord.from_dict(doc)
        digest = protocol_digest(suite.protocol)
        out.append(
            {
                "ref": f"{slug}@{version}",
                "slug": slug,
                "version": version,
                "id": oid,
                "protocol_digest": digest,
                "name": suite.name,
                "task": suite.protocol["task"],
                "visibility": suite.visibility,
            }
        )
    return out
