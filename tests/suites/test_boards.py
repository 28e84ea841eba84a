
import json
from pathlib import Path

import pytest
from suites_support import evidence

from vbstore.errors import UsageError
from vbstore.store import fsck
from vbstore.suites import board_csv, board_markdown, board_text, build, diff, leaderboard, record


def attempt(store, suite, label, day, night, when, **overrides):
    checkpoint = {"id": label * 8, "label": label, "weights": "pretrained"}
    return record(
        store,
        build(suite, **evidence(day, night, checkpoint=checkpoint, **overrides)),
        recorded=when,
    )


def test_latest_ranked_attempt_never_best_ties_weakest_and_gap(store, suite):
    attempt(store, suite, "a", 0.9, 0.9, 1.0)  # a's best
    attempt(store, suite, "a", 0.6, 0.5, 2.0)  # a's latest: this one ranks
    attempt(store, suite, "a", 0.95, 0.95, 3.0, sample_counts={"day": 1})  # newer, not ranked
    attempt(store, suite, "b", 0.6, 0.5, 1.5)  # ties with a
    attempt(store, suite, "c", 0.5, 0.4, 1.0)
    attempt(store, suite, "d", 0.99, 0.99, 1.0, sample_counts={})  # never ranked
    board = leaderboard(store, "road-test@1")
    rows = {r["label"]: r for r in board.rows}
    assert [(r["rank"], r["label"]) for r in board.rows] == [(1, "a"), (1, "b"), (3, "c")]
    assert rows["a"]["headline"] == pytest.approx(0.55)
    assert rows["a"]["attempts"] == 3
    assert rows["a"]["weakest"] == "night"
    assert rows["a"]["weakest_value"] == 0.5
    assert rows["a"]["gap"] == pytest.approx(0.05)
    assert [u["label"] for u in board.unranked] == ["d"]
    assert board.unranked[0]["reasons"] == [
        "sample-count(day: unknown)",
        "sample-count(night: unknown)",
    ]
    text = board_text(board)
    assert "weakest night 0.5000  gap 0.0500" in text
    assert "not ranked  d" in text
    assert (
        board_csv(board).splitlines()[0]
        == "rank,checkpoint,weights,evidence,miou,day,night,weakest,gap,attempts"
    )
    assert "| 3 | c |" in board_markdown(board)


def test_lower_is_better_and_metrics_that_reorder(store):
    from suites_support import road_test

    from vbstore.suites import push_suite

    suite = push_suite(
        store,
        road_test(
            metrics=[
                {"key": "err", "direction": "min", "headline": True},
                {"key": "acc", "direction": "max"},
                {"key": "acc2", "direction": "max"},
            ]
        ),
    )[0]
    for label, err, acc, acc2 in [("x", 0.1, 0.5, 0.9), ("y", 0.2, 0.6, 0.8)]:
        results = {c: {"overall": {"err": err, "acc": acc, "acc2": acc2}} for c in ("day", "night")}
        record(
            store,
            build(
                suite,
                **evidence(
                    results=results,
                    checkpoint={"id": label, "label": label, "weights": "pretrained"},
                ),
            ),
        )
    board = leaderboard(store, "road-test@1")
    assert [r["label"] for r in board.rows] == ["x", "y"]
    assert board.reorders == ["acc"]  # y has the better acc but the worse err; acc2 agrees


def test_observed_only_board(store, suite):
    attempt(store, suite, "a", 0.5, 0.5, 1.0)
    attempt(store, suite, "b", 0.9, 0.9, 1.0, data=None)  # reported
    assert [r["label"] for r in leaderboard(store, "road-test@1").rows] == ["b", "a"]
    observed = leaderboard(store, "road-test@1", observed=True)
    assert [(r["rank"], r["label"]) for r in observed.rows] == [(1, "a")]


def test_diff_drop_missing_and_within(store, suite):
    base = attempt(store, suite, "a", 0.80, 0.70, 1.0)
    same = attempt(store, suite, "a", 0.795, 0.70, 2.0)
    worse = attempt(store, suite, "a", 0.80, 0.60, 3.0)
    skipped = attempt(
        store,
        suite,
        "a",
        0.9,
        0.9,
        4.0,
        results={"day": {"overall": {"miou": 0.9, "pixel_acc": 0.9}}},
    )
    within = diff(store, base.id, same.id, max_drop=0.01)
    assert within.passed
    assert within.exit_code == 0
    assert {c.scope for c in within.changes} == {"overall", "day", "night"}
    dropped = diff(store, base.id, worse.id, max_drop=0.01)
    assert dropped.exit_code == 4
    assert [(c.scope, c.status) for c in dropped.regressions] == [
        ("overall", "regressed"),
        ("night", "regressed"),
    ]
    missing = diff(store, base.id, skipped.id, max_drop=0.5)
    assert missing.exit_code == 5
    assert missing.problems
    assert diff(store, base.id, worse.id, max_drop=0.2).exit_code == 0
    assert len(diff(store, base.id, same.id, all_metrics=True).changes) == 6
    with pytest.raises(UsageError):
        diff(store, base.id, same.id, max_drop=-1)


def test_board_reads_names_sqlite_cannot_path_through_python_alike(store):
    """Condition and metric names that a JSON path cannot spell (non-ASCII, a quote) give the
    same board as plain ones: the scores are then decoded in Python."""
    from suites_support import road_test

    from vbstore.suites import push_suite

    boards = []
    for slug, night, key in (("plain", "night", "miou"), ("odd", "nuit-é", 'mi"ou')):
        doc = road_test(
            conditions=[{"name": "day", "sampleCount": 2}, {"name": night, "sampleCount": 2}],
            metrics=[{"key": key, "headline": True}, {"key": "acc", "direction": "max"}],
        )
        suite = push_suite(store, {**doc, "slug": slug})[0]
        for label, day_value, night_value in (("a", 0.6, 0.2), ("b", 0.5, 0.4), ("c", 0.3, 0.5)):
            results = {
                "day": {"overall": {key: day_value, "acc": 0.5}},
                night: {"overall": {key: night_value, "acc": 0.4}},
            }
            record(
                store,
                build(
                    suite,
                    **evidence(
                        results=results,
                        sample_counts={"day": 2, night: 2},
                        checkpoint={"id": label * 4, "label": label, "weights": "pretrained"},
                    ),
                ),
            )
        boards.append(leaderboard(store, f"{slug}@1"))
    plain, odd = boards
    expected = {  # label: (rank, headline, weakest, its value, gap), by hand
        "a": (2, 0.4, "night", 0.2, 0.2),
        "b": (1, 0.45, "night", 0.4, 0.05),
        "c": (2, 0.4, "day", 0.3, 0.1),
    }
    assert [r["label"] for r in plain.rows] == ["b", "a", "c"]  # a tie is ordered by label
    for r in plain.rows:
        rank, headline, weakest, value, gap = expected[r["label"]]
        assert (r["rank"], r["weakest"]) == (rank, weakest)
        values = (r["headline"], r["weakest_value"], r["gap"])
        assert values == pytest.approx((headline, value, gap))
    assert [
        (r["rank"], r["label"], r["headline"], r["weakest_value"], r["gap"], r["overall"]["acc"])
        for r in odd.rows
    ] == [
        (r["rank"], r["label"], r["headline"], r["weakest_value"], r["gap"], r["overall"]["acc"])
        for r in plain.rows
    ]
    assert [r["weakest"] for r in odd.rows] == [
        {"night": "nuit-é"}.get(r["weakest"], r["weakest"]) for r in plain.rows
    ]
    assert odd.evaluations == plain.evaluations == 3


def test_evidence_levels_are_the_schemas():
    from vbstore.suites import EVIDENCE_LEVELS

    schema = json.loads(
        (Path(__file__).resolve().parents[2] / "schemas" / "evaluation.schema.json").read_text()
    )
    assert sorted(EVIDENCE_LEVELS) == sorted(schema["properties"]["evidence"]["enum"])


def test_scores_edited_in_the_registry_are_a_fault_until_repaired(store, suite):
    """A board reads the evaluations index; fsck compares it with the blobs, and the board ranks
    the numbers of the re-hashed blobs: a score edited in SQL is never ranked (issues 21, 32)."""
    from vbstore.suites import reindex

    oid = attempt(store, suite, "a", 0.6, 0.5, 1.0).id
    with store.db.write() as conn:
        scores = json.loads(conn.execute("SELECT scores FROM evaluations WHERE id=?",
                                         (oid,)).fetchone()[0])
        scores["overall"]["miou"] = 0.9978
        conn.execute("UPDATE evaluations SET scores=? WHERE id=?", (json.dumps(scores), oid))
    board = leaderboard(store, "road-test@1")
    assert board.rows == []
    [row] = board.unranked
    assert row["reasons"] == ["registry-edited(scores): run vbstore fsck --repair"]
    report = fsck(store)
    assert not report.clean
    assert [m["table"] for m in report.mismatched] == ["evaluations"]
    assert "scores" in report.mismatched[0]["why"]
    assert fsck(store, repair=True).mismatched
    reindex(store)  # what `vbstore fsck --repair` runs after forgetting the row
    assert fsck(store).clean
    board = leaderboard(store, "road-test@1")
    assert board.rows[0]["headline"] == pytest.approx(0.55)


def test_a_ranked_row_edited_or_without_its_blob_is_not_ranked(store, suite):
    """Every ranked number is read from the row's re-hashed document: an edited checkpoint or
    evidence, or a row whose blob is gone, is listed with why, never ranked (issue 32)."""
    kept = attempt(store, suite, "a", 0.6, 0.5, 1.0).id
    edited = attempt(store, suite, "b", 0.7, 0.5, 1.0).id
    gone = attempt(store, suite, "c", 0.8, 0.5, 1.0).id
    with store.db.write() as conn:
        conn.execute("UPDATE evaluations SET evidence='attested' WHERE id=?", (edited,))
    store.files.path(gone).unlink()
    board = leaderboard(store, "road-test@1")
    assert [r["evaluation"] for r in board.rows] == [kept]
    assert board.rows[0]["headline"] == pytest.approx(0.55)
    reasons = {r["evaluation"]: r["reasons"] for r in board.unranked}
    assert reasons[edited] == ["registry-edited(evidence): run vbstore fsck --repair"]
    assert "missing or damaged" in reasons[gone][0]


def test_reindex_leaves_out_an_evaluation_the_judge_refuses(store, suite):
    """A stored evaluation blob no judge saw (a plain `pull` of an evaluation ref stores one
    unindexed) is refused by `fsck --repair`'s index; `reindex` (what `fsck --rebuild` and a
    repair of edited rows run) ranked it anyway: here one that claims promotion from nothing."""
    from vbstore import canonical
    from vbstore.suites import reindex
    from vbstore.suites._share import index_stored

    attempt(store, suite, "a", 0.6, 0.5, 1.0)
    forged = dict(build(suite, **evidence(0.99, 0.99, checkpoint={
        "id": "z" * 64, "label": "forged", "weights": "pretrained"})))
    forged["promoted_from"] = "f" * 64
    oid = store.put_bytes(canonical.dumps(forged), "evaluation")
    assert index_stored(store, [oid]) == []
    reindex(store)
    assert [r["label"] for r in leaderboard(store, "road-test@1").rows] == ["a"]


def _counting_reads(monkeypatch) -> list[str]:
    """Count the evaluation blobs a board reads."""
    from vbstore.suites import _board

    paths: list[str] = []
    read = _board._read

    def counted(path):
        paths.append(path)
        return read(path)

    monkeypatch.setattr(_board, "_read", counted)
    return paths


def test_a_board_reads_no_blob_whose_verification_is_on_record(store, suite, monkeypatch):
    """Reading and re-hashing one blob per ranked row made a 100k board 3.3x a plain read: what
    a blob says is recorded by its id when it is judged and indexed (``verified_scores``), and
    a board without that record reads the blob once and records it (a store migrated from
    before the cache)."""
    attempt(store, suite, "a", 0.6, 0.5, 1.0)
    attempt(store, suite, "b", 0.7, 0.5, 1.0)
    reads = _counting_reads(monkeypatch)
    first = leaderboard(store, "road-test@1")
    assert [r["label"] for r in first.rows] == ["b", "a"]
    assert reads == []
    with store.db.write() as conn:
        conn.execute("DELETE FROM verified_scores")
    assert leaderboard(store, "road-test@1").rows == first.rows
    assert len(reads) == 2
    assert store.db.one("SELECT count(*) FROM verified_scores") == (2,)
    assert leaderboard(store, "road-test@1").rows == first.rows
    assert len(reads) == 2


def test_scores_written_otherwise_are_compared_by_value(store, suite, monkeypatch):
    """A row whose scores' JSON is spelled otherwise (an older vbstore's) is compared with the
    record by value: still ranked, and no blob read."""
    oid = attempt(store, suite, "a", 0.6, 0.5, 1.0).id
    with store.db.write() as conn:
        (text,) = conn.execute("SELECT scores FROM evaluations WHERE id=?", (oid,)).fetchone()
        conn.execute("UPDATE evaluations SET scores=? WHERE id=?",
                     (json.dumps(json.loads(text), indent=1), oid))
    reads = _counting_reads(monkeypatch)
    board = leaderboard(store, "road-test@1")
    assert board.rows[0]["headline"] == pytest.approx(0.55)
    assert reads == []


def test_the_record_of_a_blob_never_ranks_an_edited_row_and_fsck_checks_it(store, suite):
    """The record is the blob's, keyed by its id: a row edited in SQL still differs from it and
    is not ranked. A record edited in SQL, or one whose blob is gone, is fsck's fault, and
    ``--repair`` forgets it; the next board reads the blob again."""
    from vbstore.suites import reindex

    oid = attempt(store, suite, "a", 0.6, 0.5, 1.0).id
    gone = attempt(store, suite, "c", 0.8, 0.5, 1.0).id
    with store.db.write() as conn:
        scores = json.loads(conn.execute("SELECT scores FROM evaluations WHERE id=?",
                                         (oid,)).fetchone()[0])
        scores["overall"]["miou"] = 0.9978
        conn.execute("UPDATE evaluations SET scores=? WHERE id=?", (json.dumps(scores), oid))
    kept = store.files.path(gone).read_bytes()
    store.files.path(gone).unlink()
    board = leaderboard(store, "road-test@1")
    assert board.rows == []
    reasons = {r["evaluation"]: r["reasons"] for r in board.unranked}
    assert reasons[oid] == ["registry-edited(scores): run vbstore fsck --repair"]
    assert "missing or damaged" in reasons[gone][0]
    # the record edited as well: the board trusts it, fsck compares it with the blob
    with store.db.write() as conn:
        conn.execute("UPDATE verified_scores SET scores=? WHERE id=?",
                     (json.dumps(scores, sort_keys=True), oid))
    faults = {(m["table"], m["key"]): m["why"] for m in fsck(store).mismatched}
    assert "scores" in faults["verified_scores", oid]
    assert "scores" in faults["evaluations", oid]
    assert "not here" in faults["verified_scores", gone]
    fsck(store, repair=True)
    assert store.db.one("SELECT count(*) FROM verified_scores WHERE id=?", (gone,)) == (0,)
    store.files.path(gone).write_bytes(kept)  # the blob back, as a refetch brings it
    reindex(store)  # what `vbstore fsck --repair` runs after forgetting the rows
    assert fsck(store).mismatched == []
    board = leaderboard(store, "road-test@1")
    assert [r["headline"] for r in board.rows] == pytest.approx([0.65, 0.55])
