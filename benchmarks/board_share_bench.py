"""Merging two shared boards of N evaluations each through a directory remote.

    python benchmarks/board_share_bench.py [--evaluations N] [--attempts K] [--dir DIR]

Stores A and B each record N evaluations on one suite (N/K checkpoints, K attempts each; none in
common). Then, timed one after the other on the same remote:

1. A's first push (N evaluations up, the listing written),
2. A's re-push of the same board (nothing new: the baseline of a push that finds it all there),
3. B's push, which merges its N into A's N (2N listed),
4. A's pull of the merged board (N evaluations down, each verified and judged again),
5. A's pull again (nothing new),

and prints each wall time with its ratio to the re-push and the per-evaluation cost. Setting
up the stores (recording 2N evaluations) is timed apart: it is the cost a pull pays per
evaluation too (a blob and a registry row each). ``--dir /dev/shm`` puts the stores and the
remote on a tmpfs, where an fsync costs nothing: what is left is vbstore's own work.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from suites_bench import SUITE  # the same suite (this script's folder is on the path)

from vbstore import Store, canonical
from vbstore.records import EvaluationRecord
from vbstore.remotes import add_remote
from vbstore.suites import build, leaderboard, pull_board, push_board, push_suite
from vbstore.suites._evaluate import index_evaluation  # the set-up indexes as `record` does


def fill(store: Store, name: str, count: int, attempts: int, seed: int) -> float:
    """Store ``count`` evaluations in ``store`` as ``record`` would; return the wall seconds.

    Each is built and judged by :func:`build` and stored as its canonical bytes with its edge to
    the suite, then all are indexed in one transaction: ``record`` also validates each document
    against its schema and indexes each in its own transaction, which on a loaded two-core
    machine made the set-up of 2 x 100k evaluations take most of an hour.
    """
    rng = random.Random(seed)  # noqa: S311 - benchmark data, not secrets
    suite, _ = push_suite(store, SUITE)
    start = time.perf_counter()
    rows = []
    for i in range(count):
        day, night = round(rng.random(), 4), round(rng.random(), 4)
        ckpt = f"{name}-{i // attempts}"
        doc = build(
            suite,
            checkpoint={"id": ckpt, "label": ckpt, "weights": "pretrained"},
            results={"day": {"overall": {"top1": day, "top5": day}},
                     "night": {"overall": {"top1": night, "top5": night}}},
            sample_counts={"day": 100, "night": 100},
            data={"kind": "external"},
            protocol={"task": "knn", "params": {}},
            evaluator={"package": "vbstore", "version": "0.1.0"},
            sources={"attempt": i},
        )
        oid = store.put_bytes(canonical.dumps(doc), "evaluation", {"suite": suite.id})
        rows.append((oid, EvaluationRecord.from_dict(doc), float(i)))
    with store.db.write() as conn:
        for oid, typed, when in rows:
            index_evaluation(conn, oid, typed, when)
    return time.perf_counter() - start


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--evaluations", type=int, default=100_000)
    parser.add_argument("--attempts", type=int, default=4)
    parser.add_argument("--dir", default=None, help="Where the stores and the remote go.")
    args = parser.parse_args()
    n = args.evaluations
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp, Store(Path(tmp) / "a") as a, \
            Store(Path(tmp) / "b") as b:
        for store in (a, b):
            add_remote(store, "team", str(Path(tmp) / "team"))
        setup = fill(a, "a", n, args.attempts, 0) + fill(b, "b", n, args.attempts, 1)
        steps = []
        for label, fn in (
            ("A: first push", lambda: push_board(a, "team", "bench@1")),
            ("A: re-push, nothing new", lambda: push_board(a, "team", "bench@1")),
            ("B: push, merged into A's", lambda: push_board(b, "team", "bench@1")),
            ("A: pull of the merged board", lambda: pull_board(a, "team", "bench@1")),
            ("A: pull again, nothing new", lambda: pull_board(a, "team", "bench@1")),
        ):
            seconds, out = timed(fn)
            steps.append((label, seconds, out))
        board_s, board = timed(lambda: leaderboard(a, "bench@1"))
    assert steps[2][2].listed == 2 * n, "the merge lost or duplicated evaluations"
    assert steps[3][2].added == n
    assert len(board.rows) + len(board.unranked) == 2 * n // args.attempts
    base = steps[1][1]
    print(f"merge of two boards of {n} evaluations each on a directory remote "
          f"({args.dir or tempfile.gettempdir()})")
    print(f"setup: storing {2 * n} evaluations took {setup:.1f} s "
          f"({setup / (2 * n) * 1e3:.2f} ms each)")
    print(f"{'step':<30} {'wall s':>9} {'x re-push':>10} {'ms/evaluation':>14}")
    for label, seconds, _ in steps:
        print(f"{label:<30} {seconds:>9.2f} {seconds / base:>10.1f} {seconds / n * 1e3:>14.3f}")
    print(f"leaderboard over the merged {2 * n} evaluations: {board_s:.2f} s")


if __name__ == "__main__":
    main()
