"""A board's baseline row: what the task's trivial predictor scores on the suite's data.

Every result stored since baselines exist carries its task's trivial baseline on its eval split
(``baseline`` in the record, vbstore.engine._baseline). A suite's conditions are fixed data, so
the baseline is the same for every checkpoint: it is read from the records behind one ranked
evaluation (a blob per condition, not per row) and aggregated as the suite aggregates a score
(the equal mean of the conditions).
"""

from __future__ import annotations

from typing import Any

from ..store import Store
from ._suite import Suite


def board_baseline(store: Store, suite: Suite, rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """``{"predictor", "headline", "conditions"}`` of the first ranked row whose results all
    carry a baseline of the headline; None when none does (results stored before baselines)."""
    key = suite.headline["key"]
    names = [c["name"] for c in suite.conditions]
    for row in rows:
        doc = store.read_json(row["evaluation"])
        sources = doc.get("sources") or {}
        values, predictor = {}, None
        for name in names:
            oid = sources.get(name)
            if not (isinstance(oid, str) and store.has(oid)):
                break
            base = store.read_json(oid).get("baseline") or {}
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
