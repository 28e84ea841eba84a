"""``promote``: a maintainer vouches for an evaluation, which becomes *attested* evidence.

The original stays as it was; the promoted copy records where it came from, and the checkpoint
label and sample counts the maintainer vouches for.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..store import Store
from ._evaluate import Evaluation, build, open_evaluation, record
from ._suite import get_suite


def promote(
    store: Store,
    evaluation: str,
    *,
    suite: str | None = None,
    label: str | None = None,
    sample_counts: Mapping[str, int] | None = None,
    dry_run: bool = False,
) -> Evaluation:
    """Copy an evaluation onto ``suite`` (default: its own) as attested evidence.

    Raises:
        ObjectNotFound, UsageError: no such evaluation; SuiteNotFound: no such suite.
    """
    origin = open_evaluation(store, evaluation)
    was = origin.record
    target = get_suite(store, suite or was.suite)
    checkpoint = {**was.checkpoint, **({"label": label} if label else {})}
    doc = build(
        target,
        checkpoint=checkpoint,
        results=was.results,
        sample_counts={**was.sample_counts, **(sample_counts or {})},
        data=was.data,
        protocol=was.protocol,
        evaluator=was.evaluator,
        comparable=was.comparable is not False,
        sources=was.sources,
        promoted_from=origin.id,
        # the settings it ran with and the classes it scored are judged on the target suite too
        settings=was.extra.get("settings"),
        classes=was.extra.get("classes"),
    )
    return record(store, doc, dry_run=dry_run)
