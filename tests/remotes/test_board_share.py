"""Shared boards: push and pull a suite's evaluations through a directory or S3 remote, merged
without duplicates, every pulled evaluation verified and judged again, never trusted."""

from __future__ import annotations

import json
import re
from pathlib import Path

import blake3
import pytest
from click.testing import CliRunner
from remotes_support import race_once

from vbstore import canonical
from vbstore.cli import cli
from vbstore.remotes import RemoteConflict, TamperedBlob, add_remote, board_ref, object_path
from vbstore.remotes._fsspec import DirRemote
from vbstore.suites import (
    build,
    get_suite,
    leaderboard,
    list_evaluations,
    promote,
    pull_board,
    push_board,
    push_suite,
    record,
    reindex,
)

SUITE = {
    "slug": "road-test",
    "version": 1,
    "name": "Road test",
    "protocol": {
        "task": "segmentation",
        "data": {"kind": "external", "manifestSha256": "a" * 64},
        "conditions": [{"name": "day", "sampleCount": 10}, {"name": "night", "sampleCount": 8}],
        "metrics": [{"key": "miou", "direction": "max", "headline": True}],
    },
}


def evaluate(store, label, day, night, *, weights="pretrained", ckpt=None, **fields):
    """Record an evaluation of ``label`` on road-test@1 (complete evidence unless overridden)."""
    suite = get_suite(store, "road-test@1")
    evidence = {
        "checkpoint": {"id": ckpt or label * 8, "label": label, "weights": weights},
        "results": {"day": {"overall": {"miou": day}}, "night": {"overall": {"miou": night}}},
        "sample_counts": {"day": 10, "night": 8},
        "data": {"kind": "external", "manifestSha256": "a" * 64},
        "protocol": {"task": "segmentation", "params": {}},
        "evaluator": {"package": "vbstore", "version": "0.1.0"},
        **fields,
    }
    return record(store, build(suite, **evidence), recorded=None)


def board_rows(store):
    return {(r["label"], r["state"], r["evidence"]) for r in list_evaluations(store, "road-test@1")}


def recorded(store):
    return {r["id"]: r["recorded"] for r in list_evaluations(store, "road-test@1")}


@pytest.fixture
def team(stores, tmp_path):
    """A directory remote ``team`` configured in both stores, the suite pushed in A and B."""
    for store in stores:
        add_remote(store, "team", str(tmp_path / "team"))
        push_suite(store, SUITE)
    return tmp_path / "team"


def test_two_boards_merge_without_duplicates_and_keep_times(stores, team):
    a, b = stores
    shared = evaluate(a, "alpha", 0.8, 0.7)  # the same evaluation recorded in both stores
    assert evaluate(b, "alpha", 0.8, 0.7).id == shared.id
    evaluate(a, "alpha", 0.6, 0.5)  # a second attempt of alpha
    evaluate(b, "beta", 0.9, 0.6)
    evaluate(b, "gamma", 0.4, 0.3, weights="random")  # incompatible on a pretrained board

    first = push_board(a, "team", "road-test@1")
    assert (first.added, first.listed, first.uploaded) == (2, 2, 3)  # two evaluations, the suite
    merged = push_board(b, "team", "road-test@1")
    assert (merged.added, merged.listed) == (2, 4)  # alpha's shared one is listed once
    assert merged.uploaded == 2
    assert merged.already_there == 2

    pulled = pull_board(a, "team", "road-test@1")
    assert (pulled.listed, pulled.downloaded, pulled.already_present, pulled.added) == (4, 2, 2, 2)
    assert pulled.rejudged == []
    times_a, times_b = recorded(a), recorded(b)
    assert {k: times_a[k] for k in times_b if k != shared.id} == {
        k: v for k, v in times_b.items() if k != shared.id}  # B's times came with them
    assert times_a[shared.id] < times_b[shared.id]  # A recorded it first, and keeps that
    assert len(list_evaluations(a, "road-test@1")) == 4
    board = leaderboard(a, "road-test@1")
    assert [r["label"] for r in board.rows] == ["beta", "alpha"]
    assert next(r for r in board.rows if r["label"] == "alpha")["attempts"] == 2
    assert [r["label"] for r in board.unranked] == ["gamma"]

    again = pull_board(a, "team", "road-test@1")
    assert (again.downloaded, again.added) == (0, 0)
    assert not push_board(a, "team", "road-test@1").changed  # nothing new either way
    kept = recorded(b)[shared.id]
    pull_board(b, "team", "road-test@1")
    # a time recorded here is never changed by a pull; the others came with the board
    assert recorded(b) == {**recorded(a), shared.id: kept}


def test_a_new_store_gets_the_suite_and_evidence_levels(stores, team, tmp_path):
    from vbstore import Store

    a, _ = stores
    evaluate(a, "alpha", 0.8, 0.7)
    reported = evaluate(a, "beta", 0.7, 0.7, data=None)  # no data: reported evidence
    attested = promote(a, reported.id, sample_counts={"day": 10})
    assert attested.record.evidence == "attested"
    push_board(a, "team", "road-test@1")
    with Store(tmp_path / "c") as c:
        add_remote(c, "team", str(team))
        pulled = pull_board(c, "team", "road-test@1")
        assert pulled.suite_added
        assert pulled.added == 3
        assert get_suite(c, "road-test@1").id == get_suite(a, "road-test@1").id
        assert board_rows(c) == board_rows(a)
        assert {r[2] for r in board_rows(c)} == {"observed", "reported", "attested"}
        # provenance travels byte for byte: the same ids, the same documents
        assert c.read_json(attested.id) == a.read_json(attested.id)


def test_a_tampered_evaluation_is_refused_and_nothing_is_kept(stores, team):
    a, b = stores
    evaluate(a, "alpha", 0.8, 0.7)
    victim = evaluate(a, "beta", 0.9, 0.6)
    push_board(a, "team", "road-test@1")
    path = team / object_path(victim.id)
    doc = json.loads(path.read_bytes())
    doc["results"]["night"]["overall"]["miou"] = 0.7  # same length, other bytes
    path.chmod(0o644)
    path.write_bytes(canonical.dumps(doc))
    before = ([o.id for o in b.ls()], list_evaluations(b))
    with pytest.raises(TamperedBlob, match=r"refused .* hash to"):
        pull_board(b, "team", "road-test@1")
    assert ([o.id for o in b.ls()], list_evaluations(b)) == before


def _plant(team: Path, doc: dict, suite: str = "road-test@1") -> str:
    """Put ``doc`` on the remote as a well-formed blob and list it on the board of ``suite``."""
    data = canonical.dumps(doc)
    oid = blake3.blake3(data).hexdigest()
    target = team / object_path(oid)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    ref = team / "refs" / f"{board_ref(suite)}.json"
    board = json.loads(ref.read_bytes())
    board["evaluations"] = sorted([*board["evaluations"], [oid, len(data), 1.0]])
    ref.write_bytes(canonical.dumps(board))
    return oid


def test_a_verdict_that_does_not_hold_here_is_judged_again(stores, team):
    a, b = stores
    evaluate(a, "alpha", 0.8, 0.7)
    push_board(a, "team", "road-test@1")
    lie = build(get_suite(a, "road-test@1"), checkpoint={
        "id": "r" * 8, "label": "noise", "weights": "random"},
        results={"day": {"overall": {"miou": 0.99}}, "night": {"overall": {"miou": 0.99}}},
        sample_counts={"day": 10, "night": 8})
    lie["verdict"] = {**lie["verdict"], "state": "eligible", "reasons": [], "ranked": True}
    lie["evidence"], lie["missing"] = "observed", []  # it has no data, protocol or evaluator
    oid = _plant(team, lie)

    pulled = pull_board(b, "team", "road-test@1")
    [item] = pulled.rejudged
    assert (item["id"], item["was"], item["now"]) == (oid, "eligible", "incompatible")
    assert item["evidence"] == ["observed", "reported"]
    assert "weights(random)" in item["reasons"]
    assert [r["label"] for r in leaderboard(b, "road-test@1").rows] == ["alpha"]
    copy = b.read_json(item["as"])
    assert copy["rejudged_from"] == oid
    assert copy["verdict"]["state"] == "incompatible"
    assert b.info(oid).kind == "blob"  # the remote's document, kept by id, never ranked
    # pulled again: nothing new; pushed back: the original is shared, not the local copy
    assert pull_board(b, "team", "road-test@1").downloaded == 0
    assert not push_board(b, "team", "road-test@1").changed
    # a registry rebuilt from the blobs (which reads the original's kind from its content)
    # still ranks the copy alone
    rows = board_rows(b)
    with b.db.write() as conn:
        conn.execute("DELETE FROM evaluations")
        conn.execute("UPDATE objects SET kind='evaluation' WHERE id=?", (bytes.fromhex(oid),))
    assert reindex(b)["evaluations"] == 2
    assert board_rows(b) == rows


def test_an_evaluation_of_another_suite_is_refused(stores, team):
    a, b = stores
    evaluate(a, "alpha", 0.8, 0.7)
    push_board(a, "team", "road-test@1")
    other, _ = push_suite(a, {**SUITE, "version": 2})
    stray = build(other, checkpoint={"id": "x" * 8, "label": "x", "weights": "pretrained"},
                  results={}, sample_counts={})
    _plant(team, stray)
    with pytest.raises(TamperedBlob, match="is an evaluation of road-test@2"):
        pull_board(b, "team", "road-test@1")
    assert list_evaluations(b) == []


def test_a_suite_with_another_protocol_is_refused_both_ways(stores, team, tmp_path):
    from vbstore import Store

    a, _ = stores
    evaluate(a, "alpha", 0.8, 0.7)
    push_board(a, "team", "road-test@1")
    changed = json.loads(json.dumps(SUITE))
    changed["protocol"]["conditions"][0]["sampleCount"] = 11
    with Store(tmp_path / "c") as c:
        add_remote(c, "team", str(team))
        push_suite(c, changed)
        with pytest.raises(RemoteConflict, match="another protocol"):
            pull_board(c, "team", "road-test@1")
        with pytest.raises(RemoteConflict, match="another suite document"):
            push_board(c, "team", "road-test@1")
        assert list_evaluations(c) == []


def test_a_concurrent_push_is_merged_not_lost(stores, team, monkeypatch):
    a, b = stores
    evaluate(a, "alpha", 0.8, 0.7)
    evaluate(b, "beta", 0.9, 0.6)
    race_once(monkeypatch, DirRemote, lambda: push_board(b, "team", "road-test@1"))
    result = push_board(a, "team", "road-test@1")
    assert result.retries == 1
    assert result.listed == 2
    pull_board(b, "team", "road-test@1")
    assert {r[0] for r in board_rows(b)} == {"alpha", "beta"}


def test_pull_ref_of_a_board_names_the_command(stores, team):
    from vbstore.errors import UsageError
    from vbstore.remotes import pull

    a, b = stores
    evaluate(a, "alpha", 0.8, 0.7)
    push_board(a, "team", "road-test@1")
    with pytest.raises(UsageError, match="shared board"):
        pull(b, "team/boards/road-test@1")


def test_board_commands_and_their_progress_lines(stores, team, monkeypatch):
    a, b = stores
    for i in range(3):
        evaluate(a, f"m{i}", 0.5 + i / 10, 0.4)
    monkeypatch.setenv("VBSTORE_PROGRESS_INTERVAL", "0")
    monkeypatch.delenv("VBSTORE_PROGRESS", raising=False)
    runner = CliRunner()

    def vb(store, *args):
        out = runner.invoke(cli, ["--store", str(store.root), *args])
        assert out.exit_code == 0, out.output
        return out

    pushed = vb(a, "push", "board", "road-test@1", "--to", "team")
    assert re.match(r"pushed board road-test@1 -> team: 3 evaluations added \(3 on the board\), "
                    r"4 files uploaded \(\d", pushed.stdout)
    assert "pushing to team: file 4/4 (" in pushed.stderr
    pulled = vb(b, "pull", "board", "road-test@1", "--from", "team")
    assert pulled.stdout.startswith("pulled board road-test@1 <- team: 3 evaluations added")
    assert "pulling board from team: evaluation 3/3 (" in pulled.stderr
    again = json.loads(vb(b, "pull", "board", "team/road-test@1", "--json").stdout)
    assert (again["added"], again["already_present"]) == (0, 3)
    same = vb(a, "push", "board", "road-test@1", "--to", "team")
    assert "nothing to push" in same.stdout
    unnamed = runner.invoke(cli, ["--store", str(b.root), "pull", "board", "road-test@1"])
    assert unnamed.exit_code == 2
    assert "--from REMOTE" in unnamed.stderr


def test_boards_merge_through_s3_with_progress(stores, s3_url, monkeypatch, capsys):
    from vbstore._progress import reporting

    a, b = stores
    url, endpoint = s3_url
    for store in stores:
        add_remote(store, "s3", url, {"endpoint_url": endpoint})
        push_suite(store, SUITE)
    evaluate(a, "alpha", 0.8, 0.7)
    evaluate(b, "beta", 0.9, 0.6)
    evaluate(b, "gamma", 0.7, 0.6)
    monkeypatch.setenv("VBSTORE_PROGRESS_INTERVAL", "0")
    monkeypatch.delenv("VBSTORE_PROGRESS", raising=False)
    with reporting(True):
        assert push_board(a, "s3", "road-test@1").listed == 1
        merged = push_board(b, "s3", "road-test@1")
        pulled = pull_board(a, "s3", "road-test@1")
    assert (merged.added, merged.listed) == (2, 3)
    assert (pulled.downloaded, pulled.added) == (2, 2)
    assert {r[0] for r in board_rows(a)} == {"alpha", "beta", "gamma"}
    assert not push_board(a, "s3", "road-test@1").changed
    lines = [re.sub(r" \(\d+ s\)$", "", x) for x in capsys.readouterr().err.splitlines()]
    # A: the suite and alpha; B: beta and gamma (the suite was there); then A's pull
    assert lines == ["pushing to s3: file 2/2", "pushing to s3: file 2/2",
                     "pulling board from s3: evaluation 1/2",
                     "pulling board from s3: evaluation 2/2"]


def test_boards_merge_through_the_hub_in_one_commit_each(stores, hub):
    a, b = stores
    for store in stores:
        add_remote(store, "hub", "hf://tester/boards", cache=True)
        push_suite(store, SUITE)
    evaluate(a, "alpha", 0.8, 0.7)
    evaluate(b, "beta", 0.9, 0.6)
    first = push_board(a, "hub", "road-test@1")
    merged = push_board(b, "hub", "road-test@1")
    assert merged.revision == hub.head("tester/boards") != first.revision
    assert (merged.added, merged.listed) == (1, 2)
    pulled = pull_board(a, "hub", "road-test@1", revision=merged.revision)
    assert (pulled.downloaded, pulled.revision) == (1, merged.revision)
    assert {r[0] for r in board_rows(a)} == {"alpha", "beta"}
    old = pull_board(b, "hub", "road-test@1", revision=first.revision)  # pinned to A's commit
    assert (old.listed, old.downloaded) == (1, 1)


@pytest.mark.parametrize(("entry", "why"), [
    (lambda e: [e[0], e[1], float("nan")], "not a JSON document"),
    (lambda e: [e[0], -1, e[2]], "bad size or time"),
    (lambda e: [e[0], e[1], -5.0], "bad size or time"),
    (lambda e: ["../../x", e[1], e[2]], "evaluation id"),
])
def test_a_malformed_listing_is_refused(stores, team, entry, why):
    from vbstore.remotes import UnsafeRemotePath

    a, b = stores
    evaluate(a, "alpha", 0.8, 0.7)
    push_board(a, "team", "road-test@1")
    ref = team / "refs" / f"{board_ref('road-test@1')}.json"
    board = json.loads(ref.read_bytes())
    board["evaluations"] = [entry(board["evaluations"][0])]
    ref.write_bytes(json.dumps(board).encode())
    with pytest.raises((TamperedBlob, UnsafeRemotePath), match=re.escape(why)):
        pull_board(b, "team", "road-test@1")
    assert list_evaluations(b) == []


def test_a_listing_over_its_limit_is_not_read(stores, team, monkeypatch):
    from vbstore.remotes import RemoteError, _limits

    a, b = stores
    evaluate(a, "alpha", 0.8, 0.7)
    push_board(a, "team", "road-test@1")
    monkeypatch.setattr(_limits, "MAX_BOARD_BYTES", 100)
    with pytest.raises(RemoteError, match="larger than 100 bytes"):
        pull_board(b, "team", "road-test@1")
    assert list_evaluations(b) == []


def test_a_pulled_correction_takes_the_replaced_evaluation_off_the_board(stores, team):
    a, b = stores
    first = evaluate(a, "alpha", 0.8, 0.7)
    fix = evaluate(a, "alpha", 0.6, 0.5, supersedes=first.id)
    push_board(a, "team", "road-test@1")
    pull_board(b, "team", "road-test@1")
    rows = {r["id"]: r for r in list_evaluations(b, "road-test@1")}
    assert rows[first.id]["superseded_by"] == fix.id
    assert not rows[first.id]["ranked"]
    assert [r["evaluation"] for r in leaderboard(b, "road-test@1").rows] == [fix.id]


def test_a_suite_with_other_pins_under_the_same_protocol_is_a_conflict_not_tampering(
        stores, team, tmp_path):
    """Two stores made ``road-test@1`` with the same Visin protocol but another ``vbstore``
    block (here a task parameter): the pull is refused as the push is, a conflict of suite
    documents (exit 11) naming both, not as a damaged remote (exit 10), and nothing is kept."""
    from vbstore import Store

    a, _ = stores
    evaluate(a, "alpha", 0.8, 0.7)
    push_board(a, "team", "road-test@1")
    with Store(tmp_path / "c") as c:
        add_remote(c, "team", str(team))
        here, _ = push_suite(c, {**SUITE, "vbstore": {"params": {"k": 7}}})
        assert here.digest == get_suite(a, "road-test@1").digest  # Visin's protocol: the same
        with pytest.raises(RemoteConflict, match="another suite document") as err:
            pull_board(c, "team", "road-test@1")
        assert err.value.exit_code == 11
        assert here.id[:12] in str(err.value)
        assert list_evaluations(c) == []
    with Store(tmp_path / "d") as d:  # the same protocol and settings, another name
        add_remote(d, "team", str(team))
        push_suite(d, {**SUITE, "name": "Road test (ours)"})
        with pytest.raises(RemoteConflict, match="the same protocol, another name"):
            pull_board(d, "team", "road-test@1")
