"""Leaderboards: one row per checkpoint (and variant), its latest ranked attempt, never its best.

Ranking a checkpoint by its best attempt would let it be re-run until it looks good, so the row
is the newest evaluation that ranks, and ``attempts`` says how many were recorded. Ties share a
rank and the next rank skips (1, 1, 3). Each row shows the weakest condition on the headline
and the gap below the overall figure. A setting the suite leaves open (vbstore.suites._settings)
makes a variant: a checkpoint has a row per variant, labelled with the settings in which the
variants under its label differ. Rows come from the registry's ``evaluations`` table, so a
board over 100k evaluations reads one row per checkpoint and variant. The numbers it ranks are
those of the rows' evaluation documents, not the rows' copies: each ranked row is compared with
what its blob says, from the record of the blob's verification (``verified_scores``, kept when
the blob was judged and indexed, or re-hashed by an earlier board; ``fsck`` checks it against
the blobs), else by reading and re-hashing the blob, which is then recorded. A row edited in
SQL, or one whose blob is gone, is listed but not ranked.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .. import canonical
from ..errors import VbstoreError
from ..store import VERIFIED_FROM, Store, remember_verified, verified_claims
from ._baseline import beats, board_baseline, mark_overlaps
from ._evaluate import UPLOADS_FROM, VARIANTS_FROM
from ._settings import show
from ._suite import Suite, get_suite
from ._verdict import EVIDENCE_LEVELS

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
    baseline: dict[str, Any] | None = None
    project: str | None = None  # the pool: evaluations recorded in this project (Visin's)
    pagination: dict[str, dict[str, int]] | None = None  # set on one page (._pages)

    def as_dict(self) -> dict[str, Any]:
        headline = self.suite.headline
        # a board of a project, or one page, says so; a whole board reads as before
        scoped = {k: v for k, v in (("project", self.project), ("pagination", self.pagination))
                  if v is not None}
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
            "baseline": self.baseline,
            **scoped,
        }


def leaderboard(store: Store, ref: str, *, observed: bool = False,
                project: str | None = None) -> Board:
    """The board of suite ``ref`` (``slug@version``, or the latest version of ``slug``).

    ``observed`` ranks only evaluations vbstore computed itself (complete evidence); ``project``
    only the evaluations recorded in that project (Visin's): the pool and the ranks are those
    of that subset.
    """
    suite = get_suite(store, ref)
    headline = suite.headline
    metrics = [m["key"] for m in suite.metrics]
    names = [c["name"] for c in suite.conditions]
    levels = ("observed",) if observed else EVIDENCE_LEVELS
    paths = [("overall", m) for m in metrics] + [("conditions", c, headline["key"]) for c in names]
    # SQLite reads the few numbers a row needs out of the scores (no JSON decoding in Python)
    # unless a name cannot be written as a JSON path; then Python decodes the scores
    in_sql = all(_plain(part) for path in paths for part in path)
    columns = ", ".join(["json_extract(e.scores, ?)"] * len(paths)) if in_sql else "e.scores"
    pool = f"suite=? AND evidence IN ({','.join('?' * len(levels))})"
    scope: tuple[str, ...] = ()
    if project is not None:  # a store made before projects has none: an empty pool
        pool += " AND project=?" if store.db.version >= UPLOADS_FROM else " AND 0"
        scope = (project,) if store.db.version >= UPLOADS_FROM else ()
    # per checkpoint: its attempts, then its newest ranked attempt, or its newest when none
    # ranks; listing every evidence level lets both steps walk the (suite, evidence,
    # checkpoint, ranked, recorded, id) index instead of sorting the scan
    # one row per checkpoint and variant (the settings the suite leaves open)
    # a read-only store made before the variant column reads every variant as ''
    variant, e_variant = (("variant", "e.variant") if store.db.version >= VARIANTS_FROM
                          else ("''", "''"))
    # whether the row agrees with what its blob says, when the blob's verification is on
    # record (store/_verified.py): the claims a board checks, and the scores' text (when only
    # the text differs, _verify compares the numbers)
    cached, verified_join = (
        ("v.suite IS e.suite AND v.checkpoint IS e.checkpoint AND v.label IS e.label AND "
         "v.weights IS e.weights AND v.state IS e.state AND v.ranked IS 1 AND "
         "v.evidence IS e.evidence, v.scores IS e.scores",
         "LEFT JOIN verified_scores v ON v.id = e.id ")
        if store.db.version >= VERIFIED_FROM else ("0, 0", ""))
    found = store.db.query(  # the f-strings add only placeholders and constant column lists
        f"SELECT e.id, e.checkpoint, e.label, e.weights, e.ranked, e.evidence, e.recorded, "  # noqa: S608
        f"e.state, e.reasons, g.attempts, {e_variant}, {columns}, {cached} FROM (SELECT "
        f"checkpoint, {variant} AS variant, COUNT(*) AS attempts, MAX(ranked) AS ever FROM "
        f"evaluations WHERE {pool} GROUP BY checkpoint, variant) g "
        f"JOIN evaluations e ON e.id = (SELECT id FROM evaluations WHERE {pool} AND "
        f"checkpoint=g.checkpoint AND {variant}=g.variant AND ranked=g.ever "
        f"ORDER BY recorded DESC, id DESC LIMIT 1) {verified_join}"
        f"ORDER BY e.label, e.checkpoint, {e_variant}",  # the order ties keep (see _rank)
        (
            *([_json_path(p) for p in paths] if in_sql else []),
            suite.ref,
            *levels,
            *scope,
            suite.ref,
            *levels,
            *scope,
        ),
    )
    total = sum(r[9] for r in found)
    rows = _verify(store, suite, found, paths, in_sql)
    labels = _Labels(rows)
    ranked = _ranked_rows(headline, metrics, names, rows, in_sql, labels)
    _rank(ranked, headline)
    unranked = [
        {
            "evaluation": r[0],
            "checkpoint": r[1],
            "label": labels[r[2], r[10]](r[2]),
            "weights": r[3],
            "evidence": r[5],
            "state": r[7],
            "reasons": json.loads(r[8]),
            "attempts": r[9],
            "variant": labels[r[2], r[10]].variant,
        }
        for r in rows
        if not r[4]
    ]
    mark_overlaps(store, suite, ranked)  # ranks whose intervals overlap: not established
    baseline = board_baseline(store, suite, ranked)
    if baseline is not None:  # each row says whether it beats the trivial predictor
        for row in ranked:
            row["beats_baseline"] = beats(row["headline"], baseline["headline"],
                                          headline["direction"])
    return Board(suite, ranked, unranked, _reorders(suite, ranked), observed, total, baseline,
                 project)


_EDITED = "registry-edited({}): run vbstore fsck --repair"


def _verify(store: Store, suite: Suite, found: list[tuple], paths: Sequence[tuple[str, ...]],
            in_sql: bool) -> list[tuple]:
    """The board's rows (each query row less its last two columns, whether it agrees with the
    record of its blob), every ranked one checked against what its blob says.

    Where the blob's verification is on record (``verified_scores``) and the row's claims and
    scores agree with it, the blob is only looked for; otherwise it is read and re-hashed
    (:func:`_verified`), and what it says is recorded for the next board when it agrees. A row
    edited in SQL differs from the record of its blob, so it is read and listed unranked.
    """
    rows, learned = [], []
    for r in found:
        row = r[:-2]
        if not r[4]:
            rows.append(row)
            continue
        same_claims, same_text = r[-2:]
        if same_claims and (same_text or _same_scores(store, row, paths, in_sql)) \
                and _here(store.files.fspath(row[0])):
            rows.append(row)
            continue
        checked, doc = _verified(store, suite, row, paths, in_sql)
        rows.append(checked)
        if doc is not None and checked[4]:  # it agrees with its blob: on record from now on
            learned.append((row[0], verified_claims(doc)))
    if learned and not store.db.read_only and store.db.version >= VERIFIED_FROM:
        # a cache: a board that cannot write it (locked, disk full) is still right
        with contextlib.suppress(VbstoreError), store.db.write() as conn:
            remember_verified(conn, learned)
    return rows


def _same_scores(store: Store, row: tuple, paths: Sequence[tuple[str, ...]],
                 in_sql: bool) -> bool:
    """Whether the blob's recorded scores agree with the row's numbers, where their text
    differs (a row indexed by an older vbstore wrote its JSON otherwise, or it was edited)."""
    cached = store.db.one("SELECT scores FROM verified_scores WHERE id=?", (row[0],))
    if cached is None:
        return False
    scores, values = json.loads(cached[0]), row[11:]
    if in_sql:
        return tuple(_extract(scores, path) for path in paths) == tuple(values)
    return bool(scores == json.loads(values[0]))


def _here(path: str) -> bool:
    """Whether the blob is still there (one ``stat``; a gone blob's row is not ranked)."""
    try:
        os.stat(path)
    except OSError:
        return False
    return True


def _verified(store: Store, suite: Suite, row: tuple, paths: Sequence[tuple[str, ...]],
              in_sql: bool) -> tuple[tuple, dict[str, Any] | None]:
    """A ranked row with the numbers of its re-hashed evaluation document, and the document;
    not ranked, with the reason, when the document is not here or says otherwise than the
    row."""
    oid = row[0]
    doc = None
    try:
        data = _read(store.files.fspath(oid))
        if canonical.digest(data) != oid:
            raise ValueError("its blob does not hash to its id")
        doc = json.loads(data)
        verdict = doc["verdict"]
        scores = verdict["scores"]
        if in_sql:
            values = tuple(_extract(scores, path) for path in paths)
        else:
            values = (json.dumps(scores),)
        claims = {
            "suite": doc["suite"] == suite.ref,
            "checkpoint": (doc["checkpoint"]["id"], doc["checkpoint"]["label"],
                           doc["checkpoint"]["weights"]) == tuple(row[1:4]),
            "ranked": verdict["ranked"] is True,
            "evidence": doc["evidence"] == row[5],
            "state": verdict["state"] == row[7],
            "scores": (values == tuple(row[11:]) if in_sql
                       else scores == json.loads(row[11])),
        }
    except (OSError, ValueError, KeyError, TypeError):
        return (*row[:4], 0, *row[5:8], json.dumps(
            ["unverified: its evaluation blob is missing or damaged (run vbstore fsck)"]),
            *row[9:]), None
    edited = [name for name, holds in claims.items() if not holds]
    if edited:
        return (*row[:4], 0, *row[5:8], json.dumps([_EDITED.format(", ".join(edited))]),
                *row[9:11], *values), doc
    return (*row[:11], *values), doc


def _read(path: str) -> bytes:
    """A small file's bytes: a board reads one blob per ranked row, so the bare system calls
    rather than a buffered file object (or Store.read_bytes's Paths)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        parts = []
        while chunk := os.read(fd, 1 << 16):
            parts.append(chunk)
        return b"".join(parts)
    finally:
        os.close(fd)


def _extract(scores: dict[str, Any], path: tuple[str, ...]) -> Any:
    """What ``json_extract(scores, path)`` reads: the value, or None where a part is missing."""
    value: Any = scores
    for part in path:
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


class _Label(NamedTuple):
    """What a row of one checkpoint label and variant shows after the label: the settings in
    which that label's variants differ, so rows that differ in a setting never share a label
    (and a checkpoint with one variant shows none)."""

    variant: dict[str, Any]
    shown: str

    def __call__(self, label: str) -> str:
        return f"{label} [{self.shown}]" if self.shown else label


class _Labels:
    """The :class:`_Label` of each (label, variant) on the board. Each variant's JSON is decoded
    once; only labels with several variants are compared, each set of variants once however
    many labels share it. A setting that is an object (preprocessing) is compared and shown by
    its parts (``preprocessing.resize=32``)."""

    def __init__(self, rows: list) -> None:
        decoded = {key: json.loads(key) if key else {} for key in {r[10] for r in rows}}
        self.plain = {key: _Label(v, "") for key, v in decoded.items()}
        first: dict[str, str] = {}
        several: dict[str, set[str]] = {}
        for r in rows:  # the common case, one variant a label, costs a dict lookup a row
            if first.setdefault(r[2], r[10]) != r[10]:
                several.setdefault(r[2], {first[r[2]]}).add(r[10])
        compared: dict[frozenset[str], dict[str, _Label]] = {}
        self.special: dict[tuple[str, str], _Label] = {}
        for label, keys in several.items():
            together = frozenset(keys)
            made = compared.get(together)
            if made is None:
                shown = _shown({key: _flat(decoded[key]) for key in together})
                made = compared[together] = {k: _Label(decoded[k], v) for k, v in shown.items()}
            for key, value in made.items():
                self.special[label, key] = value

    def __getitem__(self, row: tuple[str, str]) -> _Label:
        return self.special.get(row) or self.plain[row[1]]


def _shown(flat: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Per variant, the settings in which these variants differ, written out."""
    names = sorted({k for v in flat.values() for k in v})
    differ = [
        k for k in names
        if len({json.dumps(v.get(k, _UNKNOWN), sort_keys=True) for v in flat.values()}) > 1
    ]
    return {
        key: " ".join(f"{k}={part}" for k in differ if (part := _part(k, v)) is not None)
        for key, v in flat.items()
    }


def _part(name: str, flat: dict[str, Any]) -> str | None:
    """One setting of a label: its value, '?' when the variant does not name it, or nothing
    when the variant names it whole (``finetune=none`` beside ``finetune.blocks=1``)."""
    if name in flat:
        return show(flat[name])
    if name.partition(".")[0] in flat or any(k.startswith(name + ".") for k in flat):
        return None
    return "?"


def _flat(variant: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in variant.items():
        if isinstance(value, dict) and value:
            out.update({f"{name}.{part}": v for part, v in value.items()})
        else:
            out[name] = value
    return out


_UNKNOWN = "\x00unknown"  # a setting a variant does not name (evaluations indexed before)


def _plain(name: str) -> bool:
    """Whether ``name`` can be a quoted JSON path label that matches the stored key as written
    (``json.dumps`` escapes quotes, backslashes and non-ASCII characters)."""
    return name.isascii() and name.isprintable() and '"' not in name and "\\" not in name


def _json_path(parts: tuple[str, ...]) -> str:
    return "$" + "".join(f'."{part}"' for part in parts)


def _ranked_rows(
    headline: dict[str, Any], metrics: list[str], names: list[str], rows: list, in_sql: bool,
    labels: _Labels,
) -> list[dict[str, Any]]:
    """A board row for each ranked evaluation row; ``row[11:]`` holds the suite's overall
    metrics, then the headline per condition (or, when not ``in_sql``, the scores' JSON)."""
    key, split = headline["key"], len(metrics)
    at = metrics.index(key)
    # the weakest condition on the headline; ties go to the name that sorts last for a
    # lower-is-better headline and first otherwise
    worst = min if headline["direction"] == "max" else max
    out = []
    for row in rows:
        if not row[4]:
            continue
        if in_sql:
            values = row[11:]
        else:
            scores = json.loads(row[11])
            values = (
                *(scores["overall"].get(m) for m in metrics),
                *(scores["conditions"][c][key] for c in names),
            )
        overall = dict(zip(metrics, values[:split], strict=True))
        if None in overall.values():  # a metric some condition lacks has no overall figure
            overall = {m: v for m, v in overall.items() if v is not None}
        per_condition = values[split:]
        value, weakest = worst(zip(per_condition, names, strict=True))
        score = values[at]
        label = labels[row[2], row[10]]
        out.append(
            {
                "rank": 0,
                "evaluation": row[0],
                "checkpoint": row[1],
                "label": f"{row[2]} [{label.shown}]" if label.shown else row[2],
                "weights": row[3],
                "evidence": row[5],
                "recorded": row[6],
                "variant": label.variant,
                "attempts": row[9],
                "headline": score,
                "conditions": dict(zip(names, per_condition, strict=True)),
                "weakest": weakest,
                "weakest_value": value,
                "gap": abs(score - value),
                "overall": overall,
            }
        )
    return out


def _rank(rows: list[dict[str, Any]], headline: dict[str, Any]) -> None:
    """Order ``rows`` (given in label, checkpoint order) by the headline and number them; a
    stable sort on the rounded value alone keeps a tie in label order."""
    sign = -1 if headline["direction"] == "max" else 1
    keys = [sign * round(r["headline"], _TIE_DIGITS) for r in rows]
    order = sorted(range(len(rows)), key=keys.__getitem__)
    previous, rank = None, 0
    for position, i in enumerate(order, start=1):
        if keys[i] != previous:
            previous, rank = keys[i], position
        rows[i]["rank"] = rank
    rows[:] = [rows[i] for i in order]


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
