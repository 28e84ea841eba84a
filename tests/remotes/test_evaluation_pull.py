"""A plain ``pull`` of an evaluation ref is judged and indexed as a board pull's evaluations are:
it used to store the blob and stop, never ranked, reported by ``fsck`` as unindexed."""

from __future__ import annotations

import pytest
from test_board_share import SUITE, evaluate

from vbstore import canonical
from vbstore.remotes import TamperedBlob, add_remote, pull, push
from vbstore.store import fsck
from vbstore.suites import build, get_suite, leaderboard, list_evaluations, push_suite


@pytest.fixture
def team(stores, tmp_path):
    """A directory remote ``team`` in both stores; the suite only in A."""
    for store in stores:
        add_remote(store, "team", str(tmp_path / "team"))
    push_suite(stores[0], SUITE)
    return tmp_path / "team"


def test_a_pulled_evaluation_is_judged_indexed_and_ranked(stores, team):
    a, b = stores
    alpha = evaluate(a, "alpha", 0.6, 0.5).id
    a.tag("evals/alpha", alpha)
    push(a, "team", "evals/alpha")
    pulled = pull(b, "team/evals/alpha")
    assert pulled.id == alpha
    assert get_suite(b, "road-test@1").id == get_suite(a, "road-test@1").id  # came with it
    assert [r["id"] for r in list_evaluations(b)] == [alpha]
    board = leaderboard(b, "road-test@1")
    assert [(r["evaluation"], r["headline"]) for r in board.rows] == [(alpha, pytest.approx(0.55))]
    report = fsck(b)
    assert report.unindexed == []
    assert report.clean
    assert pull(b, "team/evals/alpha").downloaded == []  # again: nothing new, still indexed
    assert [r["id"] for r in list_evaluations(b)] == [alpha]


def test_a_pulled_evaluation_the_judge_refuses_leaves_nothing(stores, team):
    """One that claims promotion from an evaluation that exists nowhere is refused by the same
    judge a board pull runs, before any of its blobs enters B."""
    a, b = stores
    forged = dict(build(get_suite(a, "road-test@1"), **{
        "checkpoint": {"id": "z" * 64, "label": "forged", "weights": "pretrained"},
        "results": {"day": {"overall": {"miou": 0.99}}, "night": {"overall": {"miou": 0.99}}},
        "sample_counts": {"day": 10, "night": 8},
        "data": {"kind": "external", "manifestSha256": "a" * 64},
        "protocol": {"task": "segmentation", "params": {}},
        "evaluator": {"package": "vbstore", "version": "0.1.0"}}))
    forged["promoted_from"] = "f" * 64
    oid = a.put_bytes(canonical.dumps(forged), "evaluation",
                      edges={"suite": get_suite(a, "road-test@1").id})
    a.tag("evals/forged", oid)
    push(a, "team", "evals/forged")
    with pytest.raises(TamperedBlob, match="claims promotion from ffffffffffff"):
        pull(b, "team/evals/forged")
    assert b.ls() == []
    assert b.refs() == {}
    assert fsck(b).clean


def test_a_pulled_evaluation_whose_verdict_does_not_hold_here_is_ranked_as_judged_here(
        stores, team):
    """A verdict that says eligible without the sample counts that make it so is judged again,
    as on a board: the copy carrying this store's verdict is indexed, the original kept."""
    a, b = stores
    honest = dict(a.read_json(evaluate(a, "alpha", 0.6, 0.5, sample_counts={}).id))
    assert honest["verdict"]["ranked"] is False
    claimed = {**honest, "verdict": {**honest["verdict"], "state": "eligible", "ranked": True,
                                     "reasons": []}}
    oid = a.put_bytes(canonical.dumps(claimed), "evaluation",
                      edges={"suite": get_suite(a, "road-test@1").id})
    a.tag("evals/claimed", oid)
    push(a, "team", "evals/claimed")
    pull(b, "team/evals/claimed")
    [row] = list_evaluations(b)
    assert row["id"] != oid
    assert (row["state"], row["ranked"]) == (honest["verdict"]["state"], 0)
    assert b.read_json(row["id"])["rejudged_from"] == oid
    assert leaderboard(b, "road-test@1").rows == []
    assert fsck(b).clean
