"""The project's reference registry (``registry.db`` at the repository top) and the README tables.

``registry.db`` is a small standalone SQLite file: suites, result records and evaluations (no
features, no blobs), the boards as rows, and views for browsing (``datasette registry.db``). It
is rebuilt by ``make registry`` with a fixed clock (in a fresh store, or in a kept one where only
what changed recomputes), and holds two kinds of
boards that never share a suite:

- **observed**: the reference corpus (:mod:`._corpus`): one suite per built-in probe on data any
  machine has or generates, the three EfficientNet-Lites ranked and ``test_pixels`` and two
  random-weight baselines evaluated beside them (unranked: untrained weights never rank on a
  pretrained suite); the text probes and CLIP_benchmark's linear probe on a random-weight CLIP,
  on random-weight suites.
- **reported**: published reference figures of the seed projects, imported from the VisBench
  JSONL files in ``suites/reference/`` through :func:`import_results` (what ``vbstore import
  results`` runs) onto the suites written beside them, each naming its source and what it lacks.

    python -m vbstore.suites.reference build registry.db   # compute (see docs/suites.md: long)
    python -m vbstore.suites.reference build registry.db --work DIR   # keep the store in DIR
    python -m vbstore.suites.reference readme README.md registry.db   # rewrite the README tables
"""

from __future__ import annotations

import json
import sqlite3
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import UnknownTask
from ..records import EvaluationRecord, ResultRecord
from ..store import Store
from . import _corpus
from ._board import leaderboard
from ._evaluate import from_results, record
from ._import import import_results
from ._new import new_suite
from ._openclip import import_table
from ._suite import EXTENSION, get_suite, list_suites, normalize, push_suite, read_suite_file

START, END = "<!-- registry:start -->", "<!-- registry:end -->"
# the suite and record files of the reported figures (a checkout's, not an installed package's)
REFERENCE_DIR = Path(__file__).resolve().parents[2] / "suites" / "reference"

# Reported figures: (suite file, VisBench record file, sample counts the records do not give).
# The counts are the full evaluation splits the figures name, vouched for here: Imagenette's
# (imagenette2) val split has 3925 images, VOC 2012's segmentation val list 1449 (PROTOCOLS.md).
REPORTED = [
    ("imagenette-linear.json", "visbench-readme-imagenette.jsonl", {"val": 3925}),
    ("voc-semseg.json", "visbench-readme-voc.jsonl", {"val": 1449}),
]
# open_clip's tables: openclip_classification_results.csv holds the same cells as the first
# (tests/suites/test_openclip_tables.py), so it is not imported a second time
OPENCLIP = ("openclip_results.csv", "openclip_retrieval_results.csv")
# the one open_clip board the README shows; the others are listed by name
README_OPENCLIP = "openclip-imagenet1k@1"

_SCHEMA = """
CREATE TABLE suites (ref TEXT PRIMARY KEY, slug TEXT, version INTEGER, name TEXT, task TEXT,
                     headline TEXT, protocol_digest TEXT, document TEXT);
CREATE TABLE results (id TEXT PRIMARY KEY, task TEXT, backbone TEXT, weights TEXT, split TEXT,
                      samples INTEGER, metrics TEXT, params TEXT, vbstore TEXT);
CREATE TABLE evaluations (id TEXT PRIMARY KEY, suite TEXT REFERENCES suites(ref), checkpoint TEXT,
                          label TEXT, weights TEXT, evidence TEXT, missing TEXT, state TEXT,
                          ranked INTEGER, recorded REAL, reasons TEXT, scores TEXT, sources TEXT);
CREATE TABLE board_rows (suite TEXT REFERENCES suites(ref), rank INTEGER, label TEXT, weights TEXT,
                         evidence TEXT, headline REAL, conditions TEXT, weakest TEXT,
                         weakest_value REAL, gap REAL, attempts INTEGER,
                         evaluation TEXT REFERENCES evaluations(id));
CREATE VIEW results_v AS SELECT id, task, backbone, weights, split, samples,
    json_extract(metrics, '$.top1') AS top1, json_extract(metrics, '$.top5') AS top5,
    json_extract(metrics, '$.miou') AS miou, vbstore FROM results;
CREATE VIEW evaluations_v AS SELECT e.suite, e.label, e.weights, e.evidence, e.missing, e.state,
    e.reasons, json_extract(e.scores, '$.overall.' || s.headline) AS overall, e.id
    FROM evaluations e JOIN suites s ON s.ref = e.suite ORDER BY e.suite, e.label;
CREATE VIEW evaluation_scores AS SELECT e.suite, e.label, e.evidence, c.key AS condition,
    m.key AS metric, m.value, e.id AS evaluation
    FROM evaluations e, json_each(e.scores, '$.conditions') c, json_each(c.value) m
    ORDER BY e.suite, e.label, c.key, m.key;
CREATE VIEW reported AS SELECT e.suite, e.label, e.weights, e.missing, s.key AS condition,
    json_extract(s.value, '$.file') AS file, json_extract(s.value, '$.line') AS line,
    json_extract(s.value, '$.notes') AS notes, e.id AS evaluation
    FROM evaluations e, json_each(e.sources) s WHERE e.evidence = 'reported'
    ORDER BY e.suite, e.label, s.key;
CREATE VIEW boards AS SELECT b.suite, s.headline, b.rank, b.label, b.weights, b.evidence,
    b.headline AS value, b.conditions, b.weakest, b.weakest_value, b.gap, b.attempts
    FROM board_rows b JOIN suites s ON s.ref = b.suite ORDER BY b.suite, b.rank, b.label;
"""


def build(
    path: str | Path,
    work: str | Path | None = None,
    progress: bool = False,
    reference: str | Path = REFERENCE_DIR,
) -> Path:
    """Compute the observed results and import the reported ones, then write them to ``path``.

    Without ``work`` the store is a fresh temporary one. With ``work`` it persists there, so a
    later build reuses every feature, head and result whose derivation is unchanged (only what
    changed recomputes); its suites and evaluations are indexed anew each time, so the file
    written equals a cold build's.
    """
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(work or scratch)
        store = Store(root / "store")
        try:
            _forget_boards(store)
            clock = _compute(store, root / "inputs", progress)
            _import_reported(store, Path(reference), clock)
            return write_registry(store, path)
        finally:
            store.close()


def _forget_boards(store: Store) -> None:
    """Drop the suite and evaluation index of a reused work store (the stored objects stay):
    the build indexes them again, with its own clock, as a fresh store would."""
    with store.db.write() as conn:
        conn.execute("DELETE FROM evaluations")
        conn.execute("DELETE FROM suites")


def _where(value: str, inputs: Path) -> str:
    """A corpus data reference: ``@name`` is one of the inputs :func:`write_inputs` wrote."""
    return str(inputs / value[1:]) if value.startswith("@") else value


def _plan(spec: dict[str, Any], inputs: Path) -> dict[str, Any]:
    """Where a corpus probe reads its data: eval data, split, conditions, train data."""
    data = _where(spec["data"], inputs)
    listed = data.endswith(".csv")  # a sample list: its split is the file
    split = _corpus.EVAL_SPLIT.get(spec["data"], "val")
    where = {name: _where(value, inputs)
             for name, value in (spec["conditions"] or {"val": split or "val"}).items()}
    return {"data": data, "listed": listed, "split": split, "where": where,
            "train": data.replace("-val.csv", "-train.csv") if listed else data}


def backbones_of(spec: dict[str, Any]) -> list[tuple[str, str, int | None, int | None]]:
    """The backbones a corpus probe runs on (a text tower for zero-shot text probes)."""
    if spec["backbones"] == "clip":
        return list(_corpus.CLIP)
    return _corpus.PRETRAINED + _corpus.BASELINES


def probe_results(store: Store, spec: dict[str, Any], inputs: Path,
                  backbone: tuple[str, str, int | None, int | None],
                  progress: bool = False) -> dict[str, str]:
    """Result ids of one corpus probe on one backbone, per condition (computed when missing)."""
    from ..engine import get_result  # torch: only a rebuild computes

    plan = _plan(spec, inputs)
    name, weights, seed, size = backbone
    results = {}
    for condition, source in plan["where"].items():
        as_list = source.endswith(".csv")
        results[condition] = get_result(
            name, spec["task"], source if as_list else plan["data"],
            plan["train"] if spec["train"] else None, store=store,
            split=None if as_list else plan["split"],
            train_split=("train" if not plan["listed"] else None) if spec["train"] else None,
            weights=weights, backbone_seed=seed, input_size=size, progress=progress,
            params=spec["params"], data_options=spec.get("data_options"),
        ).id
    return results


def _reading(spec: dict[str, Any], data: str) -> dict[str, Any]:
    """The listing options the probe's results read the data with (the task's reading), so the
    suite pins the samples its results hold (data(content))."""
    # the engine and the task registry: read only when the corpus is built
    from ..engine import data_options_for
    from ..tasks import get_task

    return data_options_for(get_task(spec["task"]), spec.get("data_options") or {}, data)


def _compute(store: Store, inputs: Path, progress: bool, only: Iterable[str] = ()) -> float:
    _corpus.write_inputs(store, inputs)
    clock = 0.0
    for spec in [p for p in _corpus.PROBES if not only or p["task"] in only]:
        plan = _plan(spec, inputs)
        split = plan["split"]
        doc = new_suite(store, slug=spec["slug"], task=spec["task"], data=plan["data"],
                        split=split or "val",
                        conditions=None if split is None else plan["where"],
                        name=spec["name"], params=spec["params"],
                        weights="random" if spec["backbones"] == "clip" else "pretrained",
                        data_options=_reading(spec, plan["data"]))
        # a written input is recorded by its name, never by where this build wrote it
        doc[EXTENSION]["splits"] = {c: Path(where).name
                                    for c, where in doc[EXTENSION]["splits"].items()}
        doc["protocol"]["data"]["label"] = spec["data"].lstrip("@")
        suite, _ = push_suite(store, normalize(doc))
        for backbone in backbones_of(spec):
            results = probe_results(store, spec, inputs, backbone, progress)
            clock += 1.0  # a fixed clock: the registry must not change with the day it is built
            record(store, from_results(store, suite, results), recorded=clock)
    return clock


def refresh_reported(path: str | Path, reference: str | Path = REFERENCE_DIR) -> Path:
    """Replace the reported boards of an existing registry file, keeping its observed ones.

    The reported figures are imported into a fresh store with the clock a full build would
    have reached (the newest observed evaluation's), and the file's reported suites, their
    evaluations and board rows are replaced by them: what :func:`build` would write for those
    boards, without recomputing the corpus. A suite is reported when all its evaluations are.
    """
    out = Path(path)
    conn = sqlite3.connect(out)
    try:
        reported = [ref for (ref,) in conn.execute(
            "SELECT suite FROM evaluations GROUP BY suite "
            "HAVING SUM(evidence != 'reported') = 0")]
        (clock,) = conn.execute(
            "SELECT COALESCE(MAX(recorded), 0) FROM evaluations WHERE evidence != 'reported'"
        ).fetchone()
        for table in ("board_rows", "evaluations", "suites"):
            column = "ref" if table == "suites" else "suite"
            conn.executemany(f"DELETE FROM {table} WHERE {column}=?",  # noqa: S608 (constants)
                             [(ref,) for ref in reported])
        with tempfile.TemporaryDirectory() as scratch:
            store = Store(Path(scratch) / "store")
            try:
                _import_reported(store, Path(reference), float(clock))
                _fill(conn, store)
            finally:
                store.close()
        conn.commit()
    finally:
        conn.close()
    return out


def _import_reported(store: Store, reference: Path, clock: float) -> None:
    for suite_file, records, counts in REPORTED:
        suite, _ = push_suite(store, read_suite_file(reference / suite_file))
        clock += 1.0
        import_results(
            store,
            reference / records,
            suite.ref,
            sample_counts=counts,
            weights="pretrained",
            recorded=clock,
        )

    for table in OPENCLIP:
        clock += 1.0
        import_table(store, reference / table, recorded=clock)


def write_registry(store: Store, path: str | Path) -> Path:
    """Write the suites, results and evaluations of ``store`` into a standalone SQLite file."""
    out = Path(path)
    out.unlink(missing_ok=True)
    conn = sqlite3.connect(out)
    try:
        conn.executescript(_SCHEMA)
        _fill(conn, store)
        conn.commit()
    finally:
        conn.close()
    return out


def _fill(conn: sqlite3.Connection, store: Store) -> None:
    """Insert the suites, evaluations, their results and the boards of ``store``."""
    refs = [s["ref"] for s in list_suites(store)]
    for ref in refs:
        suite = get_suite(store, ref)
        conn.execute(
            "INSERT INTO suites VALUES (?,?,?,?,?,?,?,?)",
            (
                ref,
                suite.slug,
                suite.version,
                suite.name,
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
        evaluation = EvaluationRecord.from_dict(store.read_json(oid))
        sources = evaluation.sources or {}
        conn.execute(
            "INSERT INTO evaluations VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                oid,
                suite_ref,
                evaluation.checkpoint["id"],
                evaluation.checkpoint["label"],
                evaluation.checkpoint["weights"],
                evaluation.evidence,
                json.dumps(evaluation.missing or []),
                evaluation.state,
                int(evaluation.ranked),
                recorded,
                json.dumps(evaluation.reasons),
                json.dumps(evaluation.verdict["scores"], sort_keys=True),
                json.dumps(sources, sort_keys=True),
            ),
        )
        result_ids.update(v for v in sources.values() if isinstance(v, str))
    for oid in sorted(result_ids):
        r = ResultRecord.from_dict(store.read_json(oid))
        conn.execute(
            "INSERT INTO results VALUES (?,?,?,?,?,?,?,?,?)",
            (
                oid,
                r.task,
                r.spec,
                r.weights_kind,
                r.eval_data["split"],
                r.eval_data["samples"],
                json.dumps(r.metrics, sort_keys=True),
                json.dumps(r.params, sort_keys=True),
                (r.versions or {})["vbstore"],
            ),
        )
    for ref in refs:
        for row in leaderboard(store, ref).rows:
            conn.execute(
                "INSERT INTO board_rows VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    ref,
                    row["rank"],
                    row["label"],
                    row["weights"],
                    row["evidence"],
                    row["headline"],
                    json.dumps(row["conditions"]),
                    row["weakest"],
                    row["weakest_value"],
                    row["gap"],
                    row["attempts"],
                    row["evaluation"],
                ),
            )


# how a board row names what its evidence lacks (evaluation "missing")
_LACKING = {"data": "no manifest", "protocol": "unknown protocol", "evaluator": "unknown evaluator"}
_OBSERVED_NOTE = (
    "_Computed by vbstore on data any machine has or generates (scikit-image's lfw_subset faces "
    "vs non-faces, generated scenes, triplets and pairs, captioned photos; "
    "`vbstore/suites/_corpus.py`): one suite "
    "per built-in probe. The three EfficientNet-Lites (ImageNet weights from the `weights` "
    "extra) rank; below them, unranked, the same suite's baselines: `test_pixels` (fixed "
    "filters, nothing learned) and two random-weight backbones (EfficientNet-Lite0's "
    "architecture and `test_cnn`, seed 0). Probes that compare images with text, and "
    "CLIP_benchmark's linear probe, run on a random-weight CLIP, on random-weight suites. "
    "Small data: these figures show what each probe reads from each backbone here, not how the "
    "backbones rank on real benchmarks._"
)
_REPORTED_NOTE = (
    "_Published figures of other tools, imported as **reported** evidence from "
    "`suites/reference/` (`vbstore import results`): vbstore did not compute them, and each row "
    "names what its evidence lacks. They rank only on their own suites, never beside observed "
    "results._"
)
_OPENCLIP_NOTE = (
    "_open_clip's tables hold {count} more boards of the same checkpoints, one per dataset, in "
    "`registry.db` (`datasette registry.db`, view `boards`), or in your store after `vbstore "
    "import openclip suites/reference/openclip_results.csv "
    "suites/reference/openclip_retrieval_results.csv` (`vbstore leaderboard SUITE`): {suites}. "
    "VOC 2007, SUN397, Dollar Street and GeoDE have none (their test split sizes are not known to "
    "vbstore: `--sample-count DATASET=N` imports them), nor WinoGAViL (a task vbstore does not "
    "run); a 0.0000 cell is read as not evaluated (docs/suites.md)._"
)
LEVELS = (("high", "High-level probes"), ("mid", "Mid-level probes"), ("low", "Low-level probes"),
          ("other", "Other probes"))


def _level(task: str) -> str:
    """A suite task's level; ``other`` for a task this vbstore does not register."""
    from ..tasks import get_task  # the task registry (no torch)

    try:
        return get_task(task).level
    except UnknownTask:
        return "other"


def render(path: str | Path) -> str:
    """The README's tables, read from a reference registry file only."""
    conn = sqlite3.connect(f"file:{Path(path)}?mode=ro", uri=True)
    try:
        parts = [
            START,
            "",
            "_Generated from `registry.db` by `make registry`; a test fails when they drift._",
            "",
        ]
        suites = conn.execute(
            "SELECT ref, name, task, headline, json_extract(document, '$.protocol.conditions'), "
            "document FROM suites ORDER BY ref"
        ).fetchall()
        observed = [s for s in suites if _evidence_of(conn, s[0]) == "observed"]
        reported = [s for s in suites if _evidence_of(conn, s[0]) == "reported"]
        if observed:
            missing = "; ".join(f"`{task}`: {why}" for task, why in _corpus.NOT_IN_CORPUS.items())
            parts += ["### Observed: computed here", "", _OBSERVED_NOTE, "",
                      f"_Not in the corpus: {missing}._", ""]
        for level, title in LEVELS:
            chosen = [s for s in observed if _level(s[2]) == level]
            if chosen:
                parts += [f"#### {title}", ""]
            for suite in chosen:
                parts += _render_suite(conn, *suite)
        if reported:
            parts += ["### Reported: published figures, imported", "", _REPORTED_NOTE, ""]
        # open_clip's tables make a board per dataset: the README shows one, names the others
        others = [s[0] for s in reported
                  if s[0].startswith("openclip-") and s[0] != README_OPENCLIP]
        for suite in reported:
            if suite[0] not in others:
                parts += _render_suite(conn, *suite)
        if others:
            parts += [_OPENCLIP_NOTE.format(count=len(others), suites=", ".join(
                f"`{ref}`" for ref in others)), ""]
        parts.append(END)
        return "\n".join(parts)
    finally:
        conn.close()


def _evidence_of(conn: sqlite3.Connection, ref: str) -> str:
    """``reported`` for a suite whose evaluations are all reported, else ``observed``."""
    kinds = {e for (e,) in conn.execute("SELECT evidence FROM evaluations WHERE suite=?", (ref,))}
    return "reported" if kinds == {"reported"} else "observed"


def _baselines(conn: sqlite3.Connection, ref: str, headline: str, names: list[str],
               direction: str) -> list[tuple[Any, ...]]:
    """Board-shaped rows of the suite's unranked evaluations (untrained weights on a pretrained
    suite): their latest attempt each, shown beside the board, never ranked with it."""
    rows = []
    worst = min if direction == "max" else max
    latest: dict[str, tuple[Any, ...]] = {}
    attempts: dict[str, int] = {}
    for checkpoint, label, weights, evidence, scores, missing, sources in conn.execute(
        "SELECT checkpoint, label, weights, evidence, scores, missing, sources FROM evaluations "
        "WHERE suite=? AND ranked=0 ORDER BY recorded, id", (ref,)
    ):
        latest[checkpoint] = (label, weights, evidence, json.loads(scores), missing, sources)
        attempts[checkpoint] = attempts.get(checkpoint, 0) + 1
    for checkpoint, (label, weights, evidence, scores, missing, sources) in latest.items():
        value = scores.get("overall", {}).get(headline)
        per = {c: scores.get("conditions", {}).get(c, {}).get(headline) for c in names}
        if value is None or any(v is None for v in per.values()):
            continue
        weakest, weakest_value = worst(per.items(), key=lambda kv: (kv[1], kv[0]))
        rows.append(("-", label, weights, evidence, value, json.dumps(per), weakest,
                     weakest_value, abs(value - weakest_value), attempts[checkpoint], missing,
                     sources))
    return sorted(rows, key=lambda r: (r[2], r[1]))


def _render_suite(
    conn: sqlite3.Connection, ref: str, name: str, task: str, headline: str, conditions: str,
    document: str,
) -> list[str]:
    names = [c["name"] for c in json.loads(conditions)]
    direction = next(m["direction"] for m in json.loads(document)["protocol"]["metrics"]
                     if m["key"] == headline)
    shown = names if len(names) > 1 else []  # one condition is the overall figure
    header = ["rank", "backbone", "weights", "evidence", headline, *shown, "weakest", "gap"]
    lines = [
        f"**{ref}** — {name}; `{task}`, ranked by `{headline}`"
        + (f", conditions {', '.join(names)}" if shown else ""),
        "",
        "| " + " | ".join([*header, "attempts"]) + " |",
        "|" + "---|" * (len(header) + 1),
    ]
    sources: list[tuple[str, str, dict[str, Any]]] = []
    ranked = conn.execute(
        "SELECT b.rank, b.label, b.weights, b.evidence, b.headline, b.conditions, b.weakest, "
        "b.weakest_value, b.gap, b.attempts, e.missing, e.sources FROM board_rows b "
        "JOIN evaluations e ON e.id = b.evaluation WHERE b.suite=? ORDER BY b.rank, b.label",
        (ref,),
    ).fetchall()
    for (
        rank,
        label,
        weights,
        evidence,
        value,
        per_condition,
        weakest,
        weakest_value,
        gap,
        attempts,
        missing,
        evaluation_sources,
    ) in ranked + _baselines(conn, ref, headline, names, direction):
        lacking = json.loads(missing)
        cells = [
            str(rank),
            label,
            weights,
            evidence + (f" ({', '.join(_LACKING.get(m, m) for m in lacking)})" if lacking else ""),
            f"{value:.4f}",
            *(f"{json.loads(per_condition)[c]:.4f}" for c in shown),
            f"{weakest} {weakest_value:.4f}",
            f"{gap:.4f}",
            str(attempts),
        ]
        lines.append("| " + " | ".join(cells) + " |")
        if evidence == "reported":
            for condition, source in sorted(json.loads(evaluation_sources).items()):
                sources.append((label, condition, source))
    lines.append("")
    if sources:
        lines += ["Sources:", "", *_source_lines(sources), ""]
    return lines


_SHARED = 3  # more rows than this from one file and column: one source line for them all


def _source_lines(sources: list[tuple[str, str, dict[str, Any]]]) -> list[str]:
    """A line per reported row, or one for many rows of one file, column and note."""
    groups: dict[tuple[Any, ...], list[tuple[str, str, dict[str, Any]]]] = {}
    for label, condition, source in sources:
        key = (condition, source["file"], tuple(source.get("columns", [])),
               tuple(source.get("vouched", [])), source.get("notes", ""), source.get("commit"))
        groups.setdefault(key, []).append((label, condition, source))
    out = []
    for (condition, file, columns, vouched, notes, commit), rows in groups.items():
        given = (f" ({' and '.join(v.replace('_', ' ') for v in vouched)} given at import, not "
                 "in the file)") if vouched else ""
        if len(rows) <= _SHARED:
            out += [f"- {label}, {condition}: `suites/reference/{file}` line "
                    f"{source.get('line', '?')}{given}. {notes}".rstrip()
                    for label, condition, source in rows]
            continue
        numbers = sorted(int(source.get("line", 0)) for _, _, source in rows)
        column = f", column {', '.join(columns)}" if columns else ""
        published = f", as published at {source_of(rows[0][2])}" if commit else ""
        out.append(f"- all {len(rows)} rows, {condition}: `suites/reference/{file}` lines "
                   f"{numbers[0]}-{numbers[-1]}{column}{published}{given}. {notes}".rstrip())
    return out


def source_of(source: dict[str, Any]) -> str:
    """Where an imported table was published: repository, commit and path."""
    return f"{source.get('repository', '?')}@{str(source.get('commit'))[:12]} {source.get('path')}"


def splice(readme: str, tables: str) -> str:
    """``readme`` with the text between the registry markers replaced by ``tables``."""
    head, start, rest = readme.partition(START)
    _, end, tail = rest.partition(END)
    if not start or not end:
        raise ValueError(f"the README has no {START} ... {END} section")
    return head + tables + tail


def main(argv: Iterable[str]) -> int:
    args = list(argv)
    if args[:1] == ["build"] and len(args) in (2, 4) and args[2:3] in ([], ["--work"]):
        build(args[1], work=args[3] if len(args) == 4 else None, progress=True)
        return 0
    if len(args) == 2 and args[0] == "reported":
        refresh_reported(args[1])
        return 0
    if len(args) == 3 and args[0] == "readme":
        readme = Path(args[1])
        readme.write_text(splice(readme.read_text(), render(args[2])))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
