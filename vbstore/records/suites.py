"""Records of the Visin suite format: a suite (a versioned protocol) and an evaluation on it.

Each round-trips its document exactly (schemas/suite.schema.json, evaluation.schema.json).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._base import Record


@dataclass(frozen=True)
class SuiteRecord(Record):
    """A versioned, immutable evaluation protocol.

    Attributes:
        slug, version: Its identity, ``slug@version``.
        name: Its title. ``visibility``: ``private`` or ``public``.
        protocol: ``task``, ``params``, ``data``, ``conditions``, ``metrics``, ``aggregation``...
    """

    kind = "suite"

    slug: str
    version: int
    name: str
    protocol: dict[str, Any]
    visibility: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ref(self) -> str:
        """``slug@version``."""
        return f"{self.slug}@{self.version}"


@dataclass(frozen=True)
class EvaluationRecord(Record):
    """One checkpoint's results on one suite version, with the verdict on whether they rank.

    Attributes:
        suite, suite_id: ``slug@version`` and the suite's id.
        checkpoint: ``id``, ``label``, ``weights`` (the kind).
        results: condition -> metric -> value (a score, or ``{"value": ...}`` fields).
        sample_counts: condition -> samples scored.
        evidence: ``observed``, ``reported`` or ``attested``.
        verdict: ``state``, ``reasons``, ``ranked``, ``scores``.
        missing, sources, comparable, data, protocol, evaluator, protocol_digest: As recorded.
    """

    kind = "evaluation"

    suite: str
    suite_id: str
    checkpoint: dict[str, Any]
    results: dict[str, dict[str, Any]]
    sample_counts: dict[str, int]
    evidence: str
    verdict: dict[str, Any]
    protocol_digest: str | None = None
    data: dict[str, Any] | None = None
    protocol: dict[str, Any] | None = None
    evaluator: dict[str, Any] | None = None
    comparable: bool | None = None
    sources: dict[str, Any] | None = None
    missing: list[str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def state(self) -> str:
        return self.verdict["state"]

    @property
    def ranked(self) -> bool:
        return bool(self.verdict["ranked"])

    @property
    def reasons(self) -> list[str]:
        return list(self.verdict.get("reasons") or [])
