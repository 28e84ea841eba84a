"""A board pull killed by SIGKILL at any point loses nothing (issue 32): the next pull, or
``fsck --repair``, indexes every evaluation it stored, and fsck reports the ones it left.

The pull runs in a real subprocess that SIGKILLs itself at a fixed point (after its Nth blob is
renamed into place, or its Nth leaderboard row is written), so each case is deterministic.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_board_share import SUITE, evaluate

import vbstore
from vbstore.remotes import add_remote
from vbstore.store import fsck
from vbstore.store._fsck import unindexed
from vbstore.suites import index_stored, list_evaluations, pull_board, push_board, push_suite

COUNT, BATCH = 25, 10

CHILD = textwrap.dedent("""
    import os, signal, sys
    from vbstore import Store
    from vbstore.store._objects import ObjectFiles
    from vbstore.suites import _share, pull_board

    root, where, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
    _share.BATCH = {batch}
    seen = [0]

    def dying(fn):
        def wrapped(*args, **kwargs):
            out = fn(*args, **kwargs)
            seen[0] += 1
            if seen[0] == limit:
                os.kill(os.getpid(), signal.SIGKILL)
            return out
        return wrapped

    if where == "blob":
        ObjectFiles.publish = dying(ObjectFiles.publish)
    else:
        _share.index_evaluation = dying(_share.index_evaluation)
    with Store(root) as store:
        pull_board(store, "team", "road-test@1")
    print("finished")
""").format(batch=BATCH)


@pytest.fixture(scope="module")
def pushed(tmp_path_factory):
    """Store B's folder, before any pull: A's board of COUNT evaluations is on a directory
    remote both stores know (``team``), and both hold the suite. Built once for the module:
    every case pulls into a copy of B (a pull only reads the remote)."""
    root = tmp_path_factory.mktemp("board")
    with vbstore.Store(root / "a") as a, vbstore.Store(root / "b") as b:
        for store in (a, b):
            add_remote(store, "team", str(root / "team"))
            push_suite(store, SUITE)
        for i in range(COUNT):
            evaluate(a, f"m{i:02d}", 0.5 + i / 100, 0.4)
        push_board(a, "team", "road-test@1")
    return root / "b"


@pytest.fixture
def board(pushed, tmp_path):
    """A copy of B, this case's own, with A's board on the remote ``team``."""
    with vbstore.Store(shutil.copytree(pushed, tmp_path / "b")) as b:
        yield b


def _killed_pull(store, where: str, limit: int) -> None:
    root = str(Path(vbstore.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-c", CHILD, str(store.root), where, str(limit)],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr  # it died where it was told to


def _stored(store) -> int:
    return len(store.ls("evaluation"))


# kill points: mid first batch, after the first batch's last rename (before its commit), in the
# second batch, and inside the second batch's transaction
KILLS = [("blob", 1), ("blob", BATCH), ("blob", BATCH + 5), ("row", BATCH + 3)]


@pytest.mark.parametrize(("where", "limit"), KILLS)
def test_the_next_pull_indexes_what_a_killed_pull_stored(board, where, limit):
    b = board
    _killed_pull(b, where, limit)
    assert len(list_evaluations(b)) < COUNT  # the kill cut the pull short
    before = len(list_evaluations(b))
    again = pull_board(b, "team", "road-test@1")
    assert again.added == COUNT - before
    assert len(list_evaluations(b, "road-test@1")) == COUNT
    assert unindexed(b) == []
    assert fsck(b).clean


@pytest.mark.parametrize(("where", "limit"), KILLS)
def test_fsck_reports_and_repair_indexes_what_a_killed_pull_stored(board, where, limit):
    b = board
    _killed_pull(b, where, limit)
    rows = len(list_evaluations(b))
    report = fsck(b)
    stored_only = report.unindexed
    # every evaluation stored but not indexed is reported (a kill after a batch's renames and
    # before its commit leaves some); none is lost from fsck's sight
    assert len(stored_only) == _stored(b) - rows
    assert report.clean == (not stored_only)
    if where == "blob" and limit == BATCH:
        assert len(stored_only) == BATCH  # the whole first batch, renamed, never committed
    repaired = fsck(b, repair=True, index=lambda ids: index_stored(b, ids))
    assert sorted(repaired.indexed) == sorted(stored_only)
    assert repaired.unindexed == []
    assert len(list_evaluations(b)) == _stored(b)
    assert fsck(b).clean
    # and the pull then completes the board
    pull_board(b, "team", "road-test@1")
    assert len(list_evaluations(b, "road-test@1")) == COUNT


def test_fsck_command_names_an_unindexed_evaluation_and_repair_indexes_it(stores):
    from click.testing import CliRunner

    from vbstore.cli import cli

    a, _ = stores
    push_suite(a, SUITE)
    oid = evaluate(a, "alpha", 0.8, 0.7).id
    with a.db.write() as conn:  # as a pull killed between its blobs and its rows leaves it
        conn.execute("DELETE FROM evaluations WHERE id=?", (oid,))
    runner = CliRunner()
    found = runner.invoke(cli, ["--store", str(a.root), "fsck"])
    assert found.exit_code == 1
    assert f"UNINDEXED evaluation {oid[:12]}" in found.output
    fixed = runner.invoke(cli, ["--store", str(a.root), "fsck", "--repair"])
    assert fixed.exit_code == 0, fixed.output
    assert f"indexed  evaluation {oid[:12]}" in fixed.output
    assert [r["id"] for r in list_evaluations(a)] == [oid]
    assert runner.invoke(cli, ["--store", str(a.root), "fsck"]).exit_code == 0
