"""A board's baseline row: what the task's trivial predictor scores on the suite's data.

Every result stored since baselines exist carries its task's trivial baseline on its eval split
(``baseline`` in the record, vbstore.engine._baseline). A suite's conditions are fixed data, so
the baseline is the same for every checkpoint: it is read from the records behind one ranked
evaluation (a blob per condition, not per row) and aggregated as the suite aggregates a score
(the equal mean of the conditions).
"""

from __future__ import annotations

from typing import Any

from ..records import EvaluationRecord, ResultRecord
from ..store import Store
from ._suite import Suite

# ranked rows tried for a baseline: imports carry none, and a board of 25k imported rows must
# not open 25k blobs to learn that (any vbstore result on the suite's data carries the same one)
_TRIES = 20


def board_baseline(store: Store, suite: Suite, rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """``{"predictor", "headline", "conditions"}`` of the first ranked row whose results all
    carry a baseline of the headline; None when none does (results stored before baselines)."""
    key = suite.headline["key"]
    names = [c["name"] for c in suite.conditions]
    for row in rows[:_TRIES]:
        if not store.has(row["evaluation"]):  # an index row without its blob (a benchmark's)
            continue
        sources = _sources(store, row)
        values, predictor = {}, None
        for name in names:
            oid = sources.get(name)
            if not (isinstance(oid, str) and store.has(oid)):
                break
            # through the record: a metric stored under an old name reads under its new one
            base = ResultRecord.from_dict(store.read_json(oid)).baseline or {}
            if key not in (base.get("metrics") or {}):
                break
            values[name], predictor = float(base["metrics"][key]), base["predictor"]
        if len(values) == len(names) and names:
            return {"predictor": predictor, "conditions": values,
                    "headline": sum(values.values()) / len(values)}
    return None


def beats(value: float, baseline: float, direction: str) -> bool:
    """Whether a board value is strictly better than the baseline's."""
    return value > baseline if direction == "max" else value < baseline


OVERLAP_ROWS = 1000  # beyond this many ranked rows a board opens no records for intervals
Z95 = 1.959964


def headline_interval(store, suite: Suite, row: dict[str, Any]) -> tuple[float, float] | None:
    """The 95% interval of a row's overall headline, from the bootstrap std over eval samples of
    each condition's result: the equal mean of conditions has std sqrt(sum of squares) / n (the
    conditions are independent samples), the interval is value +- 1.96 std. None when a result
    has no interval over eval samples (a dense task, an imported figure)."""
    key = suite.headline["key"]
    names = [c["name"] for c in suite.conditions]
    sources = _sources(store, row)
    stds = []
    for name in names:
        oid = sources.get(name)
        if not (isinstance(oid, str) and store.has(oid)):
            return None
        ci = (ResultRecord.from_dict(store.read_json(oid)).sample_ci or {}).get(key)
        if not ci:
            return None
        stds.append(float(ci["std"]))
    if not stds:
        return None
    half = Z95 * sum(s * s for s in stds) ** 0.5 / len(stds)
    return row["headline"] - half, row["headline"] + half


def mark_overlaps(store, suite: Suite, rows: list[dict[str, Any]]) -> None:
    """Give each ranked row its ``interval`` and ``overlaps_above``: whether its interval
    overlaps the one of the row ranked just above it (the order between them is then not
    established on this data). Boards of more than :data:`OVERLAP_ROWS` rows are left as they
    are: each row would open its records."""
    if len(rows) > OVERLAP_ROWS:
        return
    previous = None
    for row in rows:
        interval = headline_interval(store, suite, row)
        row["interval"] = list(interval) if interval else None
        row["overlaps_above"] = bool(interval and previous and interval[0] <= previous[1]
                                     and previous[0] <= interval[1])
        previous = interval


def _sources(store, row: dict[str, Any]) -> dict[str, Any]:
    """The result id of each condition of a board row's evaluation."""
    return EvaluationRecord.from_dict(store.read_json(row["evaluation"])).sources or {}
