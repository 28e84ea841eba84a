"""``reproduce``: a run of yours against the figure published for the same checkpoint.

A published figure (an open_clip table, a VisBench README) is a *reported* evaluation on the
suite of its dataset; a run of yours is an evaluation on the same suite. The two are matched by
checkpoint: a reported figure names the weights by their spec (``open_clip:ViT-B-32@openai``),
a computed result by the tensor hash of the weights it loaded, under a label that is the spec,
so either is a match; a VisBench record (a README's figure) is labelled with its backbone's
name under an id of its own (``visbench:NAME``), so its label and weights kind match too.
Every metric the suite names is compared in every condition, both ways: the run reproduces
the figure when no score is further from it than ``tolerance`` (absolute, in the metric's
units). A difference either way is reported: a reproduction that scores higher than published
is not the same number either.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..errors import EXIT_MISSING_CONDITION, EXIT_NOT_REPRODUCED, NoPublishedFigure, UsageError
from ..store import Store
from ._evaluate import open_evaluation
from ._suite import get_suite

# CLIP_benchmark runs of one checkpoint differ in the third decimal with batch size, precision
# and hardware; a figure published to four decimals is reproduced within half a point
TOLERANCE = 0.005


@dataclass(frozen=True)
class Comparison:
    """One score of the run beside the published one; ``status`` is reproduced, differs or
    missing."""

    condition: str
    metric: str
    published: float | None
    observed: float | None
    difference: float | None
    status: str


@dataclass(frozen=True)
class Reproduction:
    """The run, the figure it is compared with, and the verdict."""

    suite: str
    checkpoint: str
    candidate: str
    candidate_evidence: str
    published: str
    published_source: dict[str, Any]
    tolerance: float
    comparisons: tuple[Comparison, ...]

    @property
    def reproduced(self) -> bool:
        return all(c.status == "reproduced" for c in self.comparisons)

    @property
    def exit_code(self) -> int:
        """0 reproduced; 5 a score one side lacks; else 12 (not reproduced)."""
        if any(c.status == "missing" for c in self.comparisons):
            return EXIT_MISSING_CONDITION
        return 0 if self.reproduced else EXIT_NOT_REPRODUCED

    def as_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "checkpoint": self.checkpoint,
            "candidate": self.candidate,
            "candidate_evidence": self.candidate_evidence,
            "published": self.published,
            "published_source": self.published_source,
            "tolerance": self.tolerance,
            "reproduced": self.reproduced,
            "exit_code": self.exit_code,
            "comparisons": [asdict(c) for c in self.comparisons],
        }


def reproduce(store: Store, candidate: str, *, tolerance: float = TOLERANCE) -> Reproduction:
    """Compare a stored evaluation (id, prefix or ref) with the newest reported evaluation of
    the same checkpoint on its suite.

    Raises:
        UsageError: a negative tolerance, or the candidate is itself reported.
        NoPublishedFigure: no figure is published for this checkpoint on this suite.
    """
    if tolerance < 0:
        raise UsageError("--tolerance is how far a score may be from the published one; it "
                         "cannot be negative")
    run = open_evaluation(store, candidate)
    assert run.id is not None  # open_evaluation reads a stored evaluation
    if run.record.evidence == "reported":
        raise UsageError(f"{run.id[:12]} is itself a reported figure",
                         hint="reproduce compares a run of yours (vbstore evaluate RESULT "
                              "--suite S@V) with the published one")
    suite = get_suite(store, run.record.suite)
    checkpoint = run.record.checkpoint
    # a published figure names the checkpoint by its spec (open_clip's tables) or is labelled
    # with the backbone's name under an id of its own (a VisBench record: visbench:NAME)
    row = store.db.one(
        "SELECT id FROM evaluations WHERE suite=? AND evidence='reported' AND id != ? "
        "AND (checkpoint IN (?, ?) OR (label=? AND weights=?)) "
        "ORDER BY recorded DESC, id DESC LIMIT 1",
        (suite.ref, run.id, checkpoint["id"], checkpoint["label"], checkpoint["label"],
         checkpoint.get("weights")),
    )
    if row is None:
        raise NoPublishedFigure(checkpoint["label"], suite.ref)
    published = open_evaluation(store, row[0])
    assert published.id is not None
    comparisons = []
    for condition in [c["name"] for c in suite.conditions]:
        for metric in [m["key"] for m in suite.metrics]:
            before = _score(published.verdict, condition, metric)
            after = _score(run.verdict, condition, metric)
            if before is None or after is None:
                comparisons.append(Comparison(condition, metric, before, after, None, "missing"))
                continue
            difference = after - before
            within = abs(difference) <= tolerance + 1e-12
            comparisons.append(Comparison(condition, metric, before, after, difference,
                                          "reproduced" if within else "differs"))
    sources = published.record.sources or {}
    return Reproduction(
        suite=suite.ref, checkpoint=checkpoint["label"], candidate=run.id,
        candidate_evidence=run.record.evidence, published=published.id,
        published_source=next((dict(v) for v in sources.values() if isinstance(v, dict)), {}),
        tolerance=tolerance, comparisons=tuple(comparisons),
    )


def _score(verdict: dict[str, Any], condition: str, metric: str) -> float | None:
    return verdict["scores"]["conditions"].get(condition, {}).get(metric)
