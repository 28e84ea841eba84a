"""Shared boards are re-judged against this store, never trusted (issue 32): each attack of the
issue's board bullet as its proof of concept, refused; score ranges at every way in."""

from __future__ import annotations

import json
import math

import pytest
from test_board_share import SUITE, _plant, evaluate, recorded

from vbstore.errors import InvalidScores
from vbstore.remotes import TamperedBlob, add_remote, board_ref
from vbstore.store import fsck
from vbstore.suites import (
    build,
    get_suite,
    judge_pulled,
    leaderboard,
    list_evaluations,
    pull_board,
    push_board,
    push_suite,
    record,
    score_problems,
)


@pytest.fixture
def team(stores, tmp_path):
    for store in stores:
        add_remote(store, "team", str(tmp_path / "team"))
        push_suite(store, SUITE)
    return tmp_path / "team"


def _result(store, miou: float) -> str:
    """A stored result of ``miou`` (the minimal document a result is)."""
    return store.put_json({"kind": "result", "task": "segmentation", "op_version": 1,
                           "metrics": {"miou": miou}, "params": {}, "inputs": {}}, "result")


def _forged(store, label, day, night, **fields):
    """A well-formed evaluation document of road-test@1 that claims whatever it is given."""
    suite = get_suite(store, "road-test@1")
    return build(suite, checkpoint={"id": label * 8, "label": label, "weights": "pretrained"},
                 results={"day": {"overall": {"miou": day}}, "night": {"overall": {"miou": night}}},
                 sample_counts={"day": 10, "night": 8},
                 data={"kind": "external", "manifestSha256": "a" * 64},
                 protocol={"task": "segmentation", "params": {}},
                 evaluator={"package": "vbstore", "version": "0.1.0"}, **fields)


def _refused(b, match):
    before = ([o.id for o in b.ls()], list_evaluations(b))
    with pytest.raises(TamperedBlob, match=match):
        pull_board(b, "team", "road-test@1")
    assert ([o.id for o in b.ls()], list_evaluations(b)) == before  # nothing was kept


def test_an_evaluation_must_carry_the_scores_of_the_results_it_names(stores, team):
    """The issue's PoC: seed=1 ranked at 0.99 though the result it names says 0.4267."""
    a, b = stores
    day, night = _result(b, 0.4267), _result(b, 0.4311)  # B computed these itself
    evaluate(a, "alpha", 0.5, 0.5)
    push_board(a, "team", "road-test@1")
    _plant(team, _forged(a, "seed1", 0.99, 0.4311, sources={"day": day, "night": night}))
    _refused(b, r"its day miou is 0\.99 but result \w{12} in this store says 0\.4267")
    # the true scores pass
    ok = _forged(a, "seed1", 0.4267, 0.4311, sources={"day": day, "night": night})
    assert judge_pulled(b, ok) == []


def test_a_pulled_correction_replaces_only_its_own_checkpoint(stores, team):
    """The PoC: an evaluation of another checkpoint that 'supersedes' seed=0's took it off."""
    a, b = stores
    seed0 = evaluate(a, "seed0", 0.5, 0.5)
    push_board(a, "team", "road-test@1")
    _plant(team, _forged(a, "seed1", 0.3, 0.3, supersedes=seed0.id))
    _refused(b, "a correction replaces an evaluation of the same checkpoint")
    _plant_clean(team, seed0.id)
    _plant(team, _forged(a, "seed1", 0.3, 0.3, supersedes="f" * 64))
    _refused(b, "it corrects evaluation ffffffffffff, which is neither on the board nor")


def _plant_clean(team, keep: str) -> None:
    """Take every evaluation but ``keep`` off the remote's board."""
    ref = team / "refs" / f"{board_ref('road-test@1')}.json"
    board = json.loads(ref.read_bytes())
    board["evaluations"] = [e for e in board["evaluations"] if e[0] == keep]
    ref.write_bytes(json.dumps(board).encode())


def test_a_promotion_is_a_copy_of_its_origin_or_refused(stores, team):
    """The PoC: an evaluation whose promoted_from names any board entry showed as attested at
    0.95 (real 0.4978)."""
    a, b = stores
    origin = evaluate(a, "seed0", 0.4978, 0.4978)
    push_board(a, "team", "road-test@1")
    _plant(team, _forged(a, "seed0", 0.95, 0.95, promoted_from=origin.id))
    _refused(b, r"it claims promotion from \w{12} but its results is .*0\.95.* where the "
                r"origin's is .*0\.4978")
    assert all(r["evidence"] != "attested" for r in list_evaluations(b))
    # another checkpoint's evaluation cannot be promoted into this one either
    _plant_clean(team, origin.id)
    _plant(team, _forged(a, "seed1", 0.4978, 0.4978, promoted_from=origin.id))
    _refused(b, "its checkpoint id is 'seed1seed1")


def test_a_pull_never_changes_a_time_recorded_here(stores, team):
    """The PoC: the listing reset a local attempt's recorded time to 0.0."""
    a, b = stores
    mine = evaluate(b, "alpha", 0.8, 0.7)
    assert evaluate(a, "alpha", 0.8, 0.7).id == mine.id
    evaluate(a, "beta", 0.6, 0.7)
    push_board(a, "team", "road-test@1")
    ref = team / "refs" / f"{board_ref('road-test@1')}.json"
    board = json.loads(ref.read_bytes())
    board["evaluations"] = [[oid, size, 0.0] for oid, size, _ in board["evaluations"]]
    ref.write_bytes(json.dumps(board).encode())
    kept = recorded(b)[mine.id]
    assert pull_board(b, "team", "road-test@1").added == 1
    assert recorded(b)[mine.id] == kept > 0.0


def test_a_listed_time_in_the_future_is_not_the_newest_attempt(stores, team):
    a, b = stores
    evaluate(a, "alpha", 0.9, 0.9)
    push_board(a, "team", "road-test@1")
    ref = team / "refs" / f"{board_ref('road-test@1')}.json"
    board = json.loads(ref.read_bytes())
    board["evaluations"] = [[oid, size, 1e12] for oid, size, _ in board["evaluations"]]
    ref.write_bytes(json.dumps(board).encode())
    pull_board(b, "team", "road-test@1")
    latest = evaluate(b, "alpha", 0.2, 0.2)  # recorded here after the pull: the newest attempt
    assert [r["evaluation"] for r in leaderboard(b, "road-test@1").rows] == [latest.id]


RANGED = {**SUITE, "slug": "ranged", "protocol": {
    **SUITE["protocol"],
    "metrics": [{"key": "miou", "direction": "max", "headline": True,
                 "range": {"min": 0, "max": 1}}]}}


@pytest.mark.parametrize(("day", "why"), [
    (1.5, r"day miou is 1\.5, outside the suite's range \[0, 1\]"),
    (-5, r"day miou is -5, outside the suite's range \[0, 1\]"),
    (1e308, r"outside the suite's range"),
    (math.nan, r"day miou is nan, not a finite number"),
    (math.inf, r"day miou is inf, not a finite number"),
])
def test_scores_outside_the_range_are_refused_at_evaluate(stores, day, why):
    a, _ = stores
    suite, _ = push_suite(a, RANGED)
    with pytest.raises(InvalidScores, match=why) as caught:
        build(suite, checkpoint={"id": "x", "label": "x", "weights": "pretrained"},
              results={"day": {"overall": {"miou": day}}, "night": {"overall": {"miou": 0.5}}},
              sample_counts={"day": 10, "night": 8})
    assert caught.value.exit_code == 2


def test_a_non_finite_score_is_refused_on_any_suite(stores):
    a, _ = stores
    suite, _ = push_suite(a, SUITE)  # no range
    assert score_problems(suite, {"day": {"road": {"iou": math.inf}}}) == [
        "day/road iou is inf, not a finite number"]
    assert score_problems(suite, {"day": {"overall": {"miou": 10**5000}}}) == []


def test_scores_outside_the_range_are_refused_at_import(stores, tmp_path):
    from vbstore.suites import import_results

    a, _ = stores
    push_suite(a, RANGED)
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"day": {"overall": {"miou": 1.5}},
                                "night": {"overall": {"miou": 0.5}}}))
    with pytest.raises(InvalidScores, match=r"day miou is 1\.5"):
        import_results(a, path, "ranged@1", sample_counts={"day": 10, "night": 8},
                       checkpoint={"id": "x", "label": "x", "weights": "pretrained"})
    assert list_evaluations(a) == []


def test_scores_outside_the_range_are_refused_at_pull(stores, tmp_path):
    a, b = stores
    for store in stores:
        add_remote(store, "team", str(tmp_path / "team"))
        push_suite(store, RANGED)
    suite = get_suite(a, "ranged@1")
    fine = build(suite, checkpoint={"id": "x", "label": "x", "weights": "pretrained"},
                 results={"day": {"overall": {"miou": 0.5}}, "night": {"overall": {"miou": 0.5}}},
                 sample_counts={"day": 10, "night": 8})
    record(a, fine)
    push_board(a, "team", "ranged@1")
    bad = {**fine, "results": {"day": {"overall": {"miou": 1.5}},
                               "night": {"overall": {"miou": 0.5}}}}
    _plant(tmp_path / "team", bad, "ranged@1")
    with pytest.raises(TamperedBlob, match=r"day miou is 1\.5, outside the suite's range"):
        pull_board(b, "team", "ranged@1")
    assert list_evaluations(b) == []


def test_a_correction_of_an_evaluation_re_judged_here_is_accepted(stores, team):
    """The original of a re-judged evaluation is kept as a plain blob; a later correction that
    names it still finds it, and takes its ranked copy off the board."""
    a, b = stores
    evaluate(a, "alpha", 0.8, 0.7)
    push_board(a, "team", "road-test@1")
    lie = _forged(a, "noise", 0.9, 0.9)
    lie["verdict"] = {**lie["verdict"], "reasons": ["made up"]}
    original = _plant(team, lie)
    [item] = pull_board(b, "team", "road-test@1").rejudged
    assert b.info(original).kind == "blob"
    fix = _plant(team, _forged(a, "noise", 0.4, 0.4, supersedes=original))
    assert pull_board(b, "team", "road-test@1").added == 1
    rows = {r["id"]: r for r in list_evaluations(b, "road-test@1")}
    assert rows[item["as"]]["superseded_by"] == fix
    assert fix in [r["evaluation"] for r in leaderboard(b, "road-test@1").rows]
    assert fsck(b).clean


def test_a_pulled_evaluation_with_a_nan_literal_is_refused(stores, team):
    import blake3

    from vbstore.remotes import object_path

    a, b = stores
    evaluate(a, "alpha", 0.8, 0.7)
    push_board(a, "team", "road-test@1")
    doc = _forged(a, "nan", 0.5, 0.5)
    data = json.dumps(doc, sort_keys=True, separators=(",", ":")).replace(
        '"miou":0.5', '"miou":NaN', 1).encode()
    oid = blake3.blake3(data).hexdigest()
    target = team / object_path(oid)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    ref = team / "refs" / f"{board_ref('road-test@1')}.json"
    board = json.loads(ref.read_bytes())
    board["evaluations"] = sorted([*board["evaluations"], [oid, len(data), 1.0]])
    ref.write_bytes(json.dumps(board).encode())
    _refused(b, "claims kind evaluation but")  # a NaN literal is not canonical JSON
