"""The project's reference registry (``registry.db`` at the repository top) and the README tables.

``registry.db`` is a small standalone SQLite file: suites, result records and evaluations (no
features, no blobs), the boards as rows, and views for browsing (``datasette registry.db``). It
is rebuilt by ``make registry``, which computes every observed result here from data vbstore
generates anywhere (scikit-learn digits, ``shapes``) with seeded random-weight test backbones,
so it is reproducible on any machine. Random weights are ranked only on random-weight suites.

    python -m vbstore.suites.reference build registry.db   # compute (a few minutes on a CPU)
    python -m vbstore.suites.reference readme README.md    # rewrite the README's tables
"""

from __future__ import annotations

import json
import sqlite3
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from ..store import Store
from ._board import leaderboard
from ._evaluate import from_results, record
from ._new import new_suite
from ._suite import get_suite, list_suites, push_suite

START, END = "<!-- registry:start -->", "<!-- registry:end -->"
# (slug, name, data, split, conditions, task, params): suites over data vbstore rebuilds anywhere
SUITES = [
    (
        "digits-knn",
        "kNN on scikit-learn digits (random-weight baselines)",
        "sklearn:digits",
        "val",
        None,
        "knn",
        {"k": 20},
    ),
    (
        "shapes-knn",
        "kNN on generated shapes (random-weight baselines)",
        "shapes",
        "val",
        None,
        "knn",
        {"k": 10},
    ),
]
BACKBONES = [("test_vit", 0), ("test_cnn", 0), ("test_cnn", 1)]
INPUT_SIZE = 32

_SCHEMA = """
CREATE TABLE suites (ref TEXT PRIMARY KEY, slug TEXT, version INTEGER, name TEXT, task TEXT,
                     headline TEXT, protocol_digest TEXT, document TEXT);
CREATE TABLE results (id TEXT PRIMARY KEY, task TEXT, backbone TEXT, weights TEXT, split TEXT,
                      samples INTEGER, metrics TEXT, params TEXT, vbstore TEXT);
CREATE TABLE evaluations (id TEXT PRIMARY KEY, suite TEXT REFERENCES suites(ref), checkpoint TEXT,
                          label TEXT, weights TEXT, evidence TEXT, state TEXT, ranked INTEGER,
                          recorded REAL, reasons TEXT, scores TEXT, sources TEXT);
CREATE TABLE board_rows (suite TEXT REFERENCES suites(ref), rank INTEGER, label TEXT, weights TEXT,
                         evidence TEXT, headline REAL, weakest TEXT, weakest_value REAL, gap REAL,
                         attempts INTEGER, evaluation TEXT REFERENCES evaluations(id));
CREATE VIEW results_v AS SELECT id, task, backbone, weights, split, samples,
    json_extract(metrics, '$.top1') AS top1, json_extract(metrics, '$.top5') AS top5 FROM results;
CREATE VIEW evaluations_v AS SELECT e.suite, e.label, e.weights, e.evidence, e.state, e.reasons,
    json_extract(e.scores, '$.overall') AS overall, e.id FROM evaluations e
    ORDER BY e.suite, e.label;
CREATE VIEW boards AS SELECT b.suite, s.headline, b.rank, b.label, b.weights, b.evidence,
    b.headline AS value, b.weakest, b.weakest_value, b.gap, b.attempts
    FROM board_rows b JOIN suites s ON s.ref = b.suite ORDER BY b.suite, b.rank, b.label;
"""


def build(path: str | Path, work: str | Path | None = None, progress: bool = False) -> Path:
    """Compute the reference results in a fresh store and write them to ``path``."""
    with tempfile.TemporaryDirectory() as scratch:
        store = Store(Path(work or scratch) / "store")
        try:
            _compute(store, progress)
            return write_registry(store, path)
        finally:
            store.close()


def _compute(store: Store, progress: bool) -> None:
    from ..engine import get_result  # torch: only a rebuild computes

    clock = 0.0
    for slug, name, data, split, conditions, task, params in SUITES:
        doc = new_suite(
            store,
            slug=slug,
            task=task,
            data=data,
            split=split,
            conditions=conditions,
            name=name,
            params=params,
            weights="random",
        )
        suite, _ = push_suite(store, doc)
        for backbone, seed in BACKBONES:
            results = {}
            for condition in suite.conditions:
                results[condition["name"]] = get_result(
                    backbone,
                    task,
                    data,
                    data,
                    store=store,
                    split=condition["split"],
                    train_split="train",
                    weights="random",
                    backbone_seed=seed,
                    input_size=INPUT_SIZE,
                    progress=progress,
                    params=params,
                ).id
            clock += 1.0  # a fixed clock: the registry must not change with the day it is built
            record(store, from_results(store, suite, results), recorded=clock)


def write_registry(store: Store, path: str | Path) -> Path:
    """Write the suites, results and evaluations of ``store`` into a standalone SQLite file."""
    out = Path(path)
    out.unlink(missing_ok=True)
    conn = sqlite3.connect(out)
    try:
        conn.executescript(_SCHEMA)
        refs = [s["ref"] for s in list_suites(store)]
        for ref in refs:
            suite = get_suite(store, ref)
            conn.execute(
                "INSERT INTO suites VALUES (?,?,?,?,?,?,?,?)",
                (
                    ref,
                    suite.slug,
                    suite.version,
                    suite.doc["name"],
                    suite.protocol["task"],
                    suite.headline["key"],
                    suite.digest,
                    json.dumps(suite.doc, sort_keys=True),
                ),
            )
        result_ids: set[str] = set()
        for oid, suite_ref, recorded in store.db.query(
            "SELECT id, suite, recorded FROM evaluations ORDER BY suite, recorded, id"
        ):
            doc = store.read_json(oid)
            conn.execute(
                "INSERT INTO evaluations VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    oid,
                    suite_ref,
                    doc["checkpoint"]["id"],
                    doc["checkpoint"]["label"],
                    doc["checkpoint"]["weights"],
                    doc["evidence"],
                    doc["verdict"]["state"],
                    int(doc["verdict"]["ranked"]),
                    recorded,
                    json.dumps(doc["verdict"]["reasons"]),
                    json.dumps(doc["verdict"]["scores"], sort_keys=True),
                    json.dumps(doc["sources"], sort_keys=True),
                ),
            )
            result_ids.update(v for v in doc["sources"].values() if isinstance(v, str))
        for oid in sorted(result_ids):
            r = store.read_json(oid)
            conn.execute(
                "INSERT INTO results VALUES (?,?,?,?,?,?,?,?,?)",
                (
                    oid,
                    r["task"],
                    r["backbone"]["spec"],
                    r["weights_kind"],
                    r["data"]["eval"]["split"],
                    r["data"]["eval"]["samples"],
                    json.dumps(r["metrics"], sort_keys=True),
                    json.dumps(r["params"], sort_keys=True),
                    r["versions"]["vbstore"],
                ),
            )
        for ref in refs:
            for row in leaderboard(store, ref).rows:
                conn.execute(
                    "INSERT INTO board_rows VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (
                        ref,
                        row["rank"],
                        row["label"],
                        row["weights"],
                        row["evidence"],
                        row["headline"],
                        row["weakest"],
                        row["weakest_value"],
                        row["gap"],
                        row["attempts"],
                        row["evaluation"],
                    ),
                )
        conn.commit()
    finally:
        conn.close()
    return out


def render(path: str | Path) -> str:
    """The README's tables, read from a reference registry file only."""
    conn = sqlite3.connect(f"file:{Path(path)}?mode=ro", uri=True)
    try:
        parts = [
            START,
            "",
            "_Generated from `registry.db` by `make registry`; a test fails when they drift. "
            "Every number below was computed by vbstore with seeded **random** weights on "
            "generated data: they are baselines, not a measure of any pretrained backbone._",
            "",
        ]
        for ref, name, task, headline in conn.execute(
            "SELECT ref, name, task, headline FROM suites ORDER BY ref"
        ):
            parts += [
                f"**{ref}** — {name}; `{task}`, ranked by `{headline}`",
                "",
                "| rank | backbone | weights | evidence | "
                + headline
                + " | weakest | gap | attempts |",
                "|---|---|---|---|---|---|---|---|",
            ]
            for (
                rank,
                label,
                weights,
                evidence,
                value,
                weakest,
                weakest_value,
                gap,
                attempts,
            ) in conn.execute(
                "SELECT rank, label, weights, evidence, headline, weakest, weakest_value, gap, "
                "attempts FROM board_rows WHERE suite=? ORDER BY rank, label",
                (ref,),
            ):
                parts.append(
                    f"| {rank} | {label} | {weights} | {evidence} | {value:.4f} | "
                    f"{weakest} {weakest_value:.4f} | {gap:.4f} | {attempts} |"
                )
            parts.append("")
        parts.append(END)
        return "\n".join(parts)
    finally:
        conn.close()


def splice(readme: str, tables: str) -> str:
    """``readme`` with the text between the registry markers replaced by ``tables``."""
    head, start, rest = readme.partition(START)
    _, end, tail = rest.partition(END)
    if not start or not end:
        raise ValueError(f"the README has no {START} ... {END} section")
    return head + tables + tail


def main(argv: Iterable[str]) -> int:
    args = list(argv)
    if len(args) == 2 and args[0] == "build":
        build(args[1], progress=True)
        return 0
    if len(args) == 3 and args[0] == "readme":
        readme = Path(args[1])
        readme.write_text(splice(readme.read_text(), render(args[2])))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
