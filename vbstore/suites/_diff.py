"""``diff``: a regression gate for CI between two evaluations on one suite version.

The headline is compared overall and in every condition (``all_metrics``: every metric the suite
names), each in the suite's direction, so a positive ``improvement`` always means the candidate
got better. A score that fell by more than ``max_drop`` is a regression; a score one side lacks
(a skipped condition, an evaluation that cannot be ranked) is missing, so a skipped test set
cannot hide a drop.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..errors import EXIT_DROPPED, EXIT_MISSING_CONDITION, UsageError
from ..store import Store
from ._evaluate import Evaluation, open_evaluation
from ._suite import get_suite

OVERALL = "overall"
TOLERANCE = 1e-9


@dataclass(frozen=True)
class Change:
    """One score on both sides; ``scope`` is a condition name or ``overall``."""

    scope: str
    metric: str
    direction: str
    baseline: float | None
    candidate: float | None
    improvement: float | None
    status: str  # improved, ok, regressed or missing


@dataclass(frozen=True)
class Diff:
    """Every compared score and what the gate decides."""

    suite: str
    baseline: str
    candidate: str
    max_drop: float
    changes: tuple[Change, ...]
    problems: tuple[str, ...]

    @property
    def regressions(self) -> list[Change]:
        return [c for c in self.changes if c.status == "regressed"]

    @property
    def missing(self) -> list[Change]:
        return [c for c in self.changes if c.status == "missing"]

    @property
    def passed(self) -> bool:
        return not self.regressions and not self.missing and not self.problems

    @property
    def exit_code(self) -> int:
        """0 passed; 5 a score is missing or a side is not ranked, whatever dropped (Visin
        0.10's precedence: what cannot be compared is the first thing to fix); else 4 when a
        score dropped."""
        if self.missing or self.problems:
            return EXIT_MISSING_CONDITION
        return EXIT_DROPPED if self.regressions else 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "baseline": self.baseline,
            "candidate": self.candidate,
            "max_drop": self.max_drop,
            "passed": self.passed,
            "exit_code": self.exit_code,
            "problems": list(self.problems),
            "changes": [asdict(c) for c in self.changes],
        }


def diff(
    store: Store, baseline: str, candidate: str, *, max_drop: float = 0.0, all_metrics: bool = False
) -> Diff:
    """Compare two stored evaluations (ids, prefixes or refs) on their suite.

    Raises:
        UsageError: a negative ``max_drop``, or evaluations on different suite versions.
    """
    if max_drop < 0:
        raise UsageError("--max-drop is how far a score may fall; it cannot be negative")
    base, cand = open_evaluation(store, baseline), open_evaluation(store, candidate)
    if base.record.suite != cand.record.suite:
        raise UsageError(
            f"the baseline is on {base.record.suite} and the candidate on "
            f"{cand.record.suite}: only one suite version is compared",
            hint="evaluate both on the same suite version",
        )
    # open_evaluation reads stored evaluations: both have ids
    assert base.id is not None
    assert cand.id is not None
    suite = get_suite(store, base.record.suite)
    metrics = [m for m in suite.metrics if all_metrics or m["headline"]]
    scopes = [OVERALL, *(c["name"] for c in suite.conditions)]
    problems = tuple(
        f"the {label} ({oid[:12]}) is not ranked on {suite.ref}: "
        f"{e.verdict['state']} ({', '.join(e.verdict['reasons'])})"
        for label, e, oid in (("baseline", base, base.id), ("candidate", cand, cand.id))
        if not e.ranked
    )
    changes = []
    for metric in metrics:
        key, direction = metric["key"], metric["direction"]
        for scope in scopes:
            before, after = _value(base, scope, key), _value(cand, scope, key)
            if before is None or after is None:
                changes.append(Change(scope, key, direction, before, after, None, "missing"))
                continue
            improvement = after - before if direction == "max" else before - after
            status = (
                "regressed"
                if -improvement > max_drop + TOLERANCE
                else "improved"
                if improvement > TOLERANCE
                else "ok"
            )
            changes.append(Change(scope, key, direction, before, after, improvement, status))
    return Diff(suite.ref, base.id, cand.id, max_drop, tuple(changes), problems)


def _value(evaluation: Evaluation, scope: str, key: str) -> float | None:
    if not evaluation.ranked:  # only scores the suite can rank are compared
        return None
    scores = evaluation.verdict["scores"]
    block = scores["overall"] if scope == OVERALL else scores["conditions"].get(scope, {})
    return block.get(key)
