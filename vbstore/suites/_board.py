"""Leaderboards: one row per checkpoint, its latest ranked attempt, never its best.

Ranking a checkpoint by its best attempt would let it be re-run until it looks good, so the row
is the newest evaluation that ranks, and ``attempts`` says how many were recorded. Ties share a
rank and the next rank skips (1, 1, 3). Each row shows the weakest condition on the headline
and the gap below the overall figure. Rows come from the registry's ``evaluations`` table, so a
board over 100k evaluations never opens a blob.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..store import Store
from ._suite import Suite, get_suite

_TIE_DIGITS = 12  # scores equal to 12 decimals tie: float noise must not split a tie


@dataclass
class Board:
    """A suite's leaderboard: ranked rows, the checkpoints that could not be ranked, and the
    metrics that would order the ranked ones differently from the headline."""

    suite: Suite
    rows: list[dict[str, Any]]
    unranked: list[dict[str, Any]]
    reorders: list[str] = field(default_factory=list)
    observed_only: bool = False
    evaluations: int = 0

    def as_dict(self) -> dict[str, Any]:
        headline = self.suite.headline
        return {
            "suite": self.suite.ref,
            "headline": headline["key"],
            "direction": headline["direction"],
            "observed_only": self.observed_only,
            "evaluations": self.evaluations,
            "checkpoints": len(self.rows) + len(self.unranked),
            "rows": self.rows,
            "unranked": self.unranked,
            "reorders": self.reorders,
        }


def leaderboard(store: Store, ref: str, *, observed: bool = False) -> Board:
    """The board of suite ``ref`` (``slug@version``, or the latest version of ``slug``).

    ``observed`` ranks only evaluations vbstore computed itself (complete evidence): the pool and
    the ranks are those of that subset.
    """
    suite = get_suite(store, ref)
    observed_only = " AND evidence='observed'" if observed else ""
    # per checkpoint: its newest ranked attempt, or its newest attempt when none ranks; the
    # window functions keep the 100k-row scan in SQLite (ties on time go to the larger id)
    rows = store.db.query(  # observed_only is one of two constant strings
        "WITH pick AS (SELECT id, attempts FROM (SELECT id, ranked, COUNT(*) OVER w AS attempts, "  # noqa: S608
        "MAX(ranked) OVER w AS ever, ROW_NUMBER() OVER (PARTITION BY checkpoint, ranked ORDER BY "
        f"recorded DESC, id DESC) AS n FROM evaluations WHERE suite=?{observed_only} "
        "WINDOW w AS (PARTITION BY checkpoint)) WHERE n=1 AND ranked=ever) "
        "SELECT e.id, e.checkpoint, e.label, e.weights, e.ranked, e.evidence, e.recorded, e.state, "
        "e.scores, e.reasons, pick.attempts FROM pick JOIN evaluations e ON e.id = pick.id",
        (suite.ref,),
    )
    count = store.db.one(
        f"SELECT COUNT(*) FROM evaluations WHERE suite=?{observed_only}",  # noqa: S608 - a constant
        (suite.ref,),
    )
    assert count is not None  # COUNT(*) always answers one row
    total = count[0]
    headline = suite.headline
    ranked = [_row(headline, r) for r in rows if r[4]]
    _rank(ranked, headline)
    unranked = [
        {
            "evaluation": r[0],
            "checkpoint": r[1],
            "label": r[2],
            "weights": r[3],
            "evidence": r[5],
            "state": r[7],
            "reasons": json.loads(r[9]),
            "attempts": r[10],
        }
        for r in rows
        if not r[4]
    ]
    unranked.sort(key=lambda u: (u["label"], u["checkpoint"]))
    return Board(suite, ranked, unranked, _reorders(suite, ranked), observed, total)


def _row(headline: dict[str, Any], row: tuple) -> dict[str, Any]:
    key = headline["key"]
    scores = json.loads(row[8])
    per_condition = {c: v[key] for c, v in scores["conditions"].items()}
    worst = min if headline["direction"] == "max" else max
    weakest = worst(per_condition, key=lambda c: (per_condition[c], c))
    value = scores["overall"][key]
    return {
        "rank": 0,
        "evaluation": row[0],
        "checkpoint": row[1],
        "label": row[2],
        "weights": row[3],
        "evidence": row[5],
        "recorded": row[6],
        "attempts": row[10],
        "headline": value,
        "conditions": per_condition,
        "weakest": weakest,
        "weakest_value": per_condition[weakest],
        "gap": abs(value - per_condition[weakest]),
        "overall": scores["overall"],
    }


def _rank(rows: list[dict[str, Any]], headline: dict[str, Any]) -> None:
    sign = -1 if headline["direction"] == "max" else 1
    rows.sort(key=lambda r: (sign * round(r["headline"], _TIE_DIGITS), r["label"], r["checkpoint"]))
    previous = None
    for position, row in enumerate(rows, start=1):
        value = round(row["headline"], _TIE_DIGITS)
        row["rank"] = rows[position - 2]["rank"] if value == previous else position
        previous = value


def _reorders(suite: Suite, rows: list[dict[str, Any]]) -> list[str]:
    """Metrics under which some ranked checkpoint would overtake one ranked above it."""
    out = []
    headline = suite.headline["key"]
    for metric in suite.metrics:
        key = metric["key"]
        if key == headline:
            continue
        sign = 1 if metric["direction"] == "max" else -1
        best_above = None  # the worst value among all strictly better-ranked rows so far
        group_rank, group_worst = None, None
        for row in rows:
            if key not in row["overall"]:
                continue
            value = sign * row["overall"][key]
            if row["rank"] != group_rank:  # a new headline tie group starts
                if group_worst is not None:
                    best_above = group_worst if best_above is None else min(best_above, group_worst)
                group_rank, group_worst = row["rank"], value
            else:
                group_worst = min(group_worst, value)
            if best_above is not None and value > best_above + 1e-12:
                out.append(key)
                break
    return out
