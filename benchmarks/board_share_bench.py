"""Merging two shared boards of N evaluations each through a directory remote.

    python benchmarks/board_share_bench.py [--evaluations N] [--attempts K] [--dir DIR]
                                           [--compare OTHER_CHECKOUT]

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

``--compare OTHER_CHECKOUT`` runs the same steps with another checkout's vbstore (say a
``git worktree`` or ``git archive`` of main) in a subprocess first, then with this one, and
prints both side by side with the ratio old / new of each step.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# the vbstore measured: this checkout's, or the one --compare runs this script with
sys.path.insert(0, os.environ.get("BOARD_BENCH_SRC") or str(Path(__file__).resolve().parents[1]))
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


STEPS = ("A: first push", "A: re-push, nothing new", "B: push, merged into A's",
         "A: pull of the merged board", "A: pull again, nothing new", "leaderboard, 2N evaluations")


def run(n: int, attempts: int, where: str | None) -> tuple[float, dict[str, float]]:
    """The set-up seconds and each step's wall seconds, with this process's vbstore."""
    with tempfile.TemporaryDirectory(dir=where) as tmp, Store(Path(tmp) / "a") as a, \
            Store(Path(tmp) / "b") as b:
        for store in (a, b):
            add_remote(store, "team", str(Path(tmp) / "team"))
        setup = fill(a, "a", n, attempts, 0) + fill(b, "b", n, attempts, 1)
        steps = []
        for fn in (
            lambda: push_board(a, "team", "bench@1"),
            lambda: push_board(a, "team", "bench@1"),
            lambda: push_board(b, "team", "bench@1"),
            lambda: pull_board(a, "team", "bench@1"),
            lambda: pull_board(a, "team", "bench@1"),
            lambda: leaderboard(a, "bench@1"),
        ):
            steps.append(timed(fn))
    assert steps[2][1].listed == 2 * n, "the merge lost or duplicated evaluations"
    assert steps[3][1].added == n
    board = steps[5][1]
    assert len(board.rows) + len(board.unranked) == 2 * n // attempts
    return setup, {label: seconds for label, (seconds, _) in zip(STEPS, steps, strict=True)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--evaluations", type=int, default=100_000)
    parser.add_argument("--attempts", type=int, default=4)
    parser.add_argument("--dir", default=None, help="Where the stores and the remote go.")
    parser.add_argument("--compare", default=None, metavar="OTHER_CHECKOUT",
                        help="Run the same steps with this checkout's vbstore first.")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # --compare's child
    args = parser.parse_args()
    n = args.evaluations
    other = None
    if args.compare is not None:
        command = [sys.executable, __file__, "--evaluations", str(n), "--attempts",
                   str(args.attempts), "--json", *(["--dir", args.dir] if args.dir else [])]
        done = subprocess.run(command, env={**os.environ, "BOARD_BENCH_SRC": args.compare},
                              check=True, capture_output=True, text=True)
        other = json.loads(done.stdout.strip().splitlines()[-1])
    setup, steps = run(n, args.attempts, args.dir)
    if args.json:
        print(json.dumps({"setup": setup, "steps": steps}))
        return
    print(f"merge of two boards of {n} evaluations each on a directory remote "
          f"({args.dir or tempfile.gettempdir()})")
    print(f"setup: storing {2 * n} evaluations took {setup:.1f} s "
          f"({setup / (2 * n) * 1e3:.2f} ms each)")
    base = steps[STEPS[1]]
    if other is None:
        print(f"{'step':<30} {'wall s':>9} {'x re-push':>10} {'ms/evaluation':>14}")
        for label, seconds in steps.items():
            print(f"{label:<30} {seconds:>9.2f} {seconds / base:>10.1f} "
                  f"{seconds / n * 1e3:>14.3f}")
        return
    print(f"(the other checkout, {args.compare}: setup {other['setup']:.1f} s)")
    print(f"{'step':<30} {'other s':>9} {'this s':>9} {'other/this':>11} "
          f"{'ms/eval other':>14} {'ms/eval this':>13}")
    for label, seconds in steps.items():
        was = other["steps"][label]
        print(f"{label:<30} {was:>9.2f} {seconds:>9.2f} {was / seconds:>11.2f} "
              f"{was / n * 1e3:>14.3f} {seconds / n * 1e3:>13.3f}")


if __name__ == "__main__":
    main()
