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

``--compare OTHER_CHECKOUT`` times the pulls (4, 5 and the leaderboard) with another
checkout's vbstore too (say a ``git worktree`` or ``git archive`` of main): each from a fresh
copy of A, in a subprocess, the two checkouts alternating for ``--rounds`` rounds, the best of
each kept; it prints both side by side with the ratio other / this. Both wall and CPU time are
shown: on a loaded machine the CPU time is the steadier figure of vbstore's own work.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
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
    """``((wall seconds, this process's CPU seconds), fn())``: on a loaded machine the CPU time
    is the steadier figure of vbstore's own work."""
    start, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return (time.perf_counter() - start, time.process_time() - cpu), out


PUSHES = ("A: first push", "A: re-push, nothing new", "B: push, merged into A's")
PULLS = ("A: pull of the merged board", "A: pull again, nothing new", "leaderboard, 2N evaluations")


def prepare(tmp: Path, n: int, attempts: int) -> tuple[float, dict[str, list[float]]]:
    """Stores ``tmp/a`` and ``tmp/b`` filled, both boards pushed to ``tmp/team``: the set-up
    seconds and each push's ``[wall, CPU]`` seconds."""
    with Store(tmp / "a") as a, Store(tmp / "b") as b:
        for store in (a, b):
            add_remote(store, "team", str(tmp / "team"))
        setup = fill(a, "a", n, attempts, 0) + fill(b, "b", n, attempts, 1)
        steps = [timed(lambda: push_board(a, "team", "bench@1")),
                 timed(lambda: push_board(a, "team", "bench@1")),
                 timed(lambda: push_board(b, "team", "bench@1"))]
    assert steps[2][1].listed == 2 * n, "the merge lost or duplicated evaluations"
    return setup, {label: list(t) for label, (t, _) in zip(PUSHES, steps, strict=True)}


def pulls(root: Path, n: int, attempts: int) -> dict[str, list[float]]:
    """A's pull of the merged board, its pull again and its leaderboard: ``[wall, CPU]``
    seconds each, with this process's vbstore."""
    with Store(root) as a:
        steps = [timed(lambda: pull_board(a, "team", "bench@1")),
                 timed(lambda: pull_board(a, "team", "bench@1")),
                 timed(lambda: leaderboard(a, "bench@1"))]
    assert steps[0][1].added == n
    board = steps[2][1]
    assert len(board.rows) + len(board.unranked) == 2 * n // attempts
    return {label: list(t) for label, (t, _) in zip(PULLS, steps, strict=True)}


def floor(tmp: Path, n: int, size: int = 800) -> float:
    """Seconds to create ``n`` files of ``size`` bytes, rename each into one of 256 folders and
    flush them once (``sync``): what any layout of one file per blob pays on this disk."""

    (tmp / "floor").mkdir()
    for i in range(256):
        (tmp / "floor" / f"{i:02x}").mkdir()
    data = b"x" * size
    start = time.perf_counter()
    for i in range(n):
        temp = tmp / "floor" / f"{i}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
        os.write(fd, data)
        os.close(fd)
        os.replace(temp, tmp / "floor" / f"{i % 256:02x}" / str(i))
    os.sync()
    seconds = time.perf_counter() - start
    shutil.rmtree(tmp / "floor")
    return seconds


def pull_with(src: str, root: Path, n: int, attempts: int) -> dict[str, list[float]]:
    """:func:`pulls` in a subprocess whose vbstore is the checkout ``src``."""
    command = [sys.executable, __file__, "--pull-only", str(root), "--evaluations", str(n),
               "--attempts", str(attempts)]
    done = subprocess.run(command, env={**os.environ, "BOARD_BENCH_SRC": src},
                          check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--evaluations", type=int, default=100_000)
    parser.add_argument("--attempts", type=int, default=4)
    parser.add_argument("--dir", default=None, help="Where the stores and the remote go.")
    parser.add_argument("--compare", default=None, metavar="OTHER_CHECKOUT",
                        help="Also pull with this checkout's vbstore, interleaved with this one.")
    parser.add_argument("--rounds", type=int, default=3,
                        help="With --compare: pulls per checkout, alternating; the best counts.")
    parser.add_argument("--pull-only", default=None, help=argparse.SUPPRESS)  # --compare's child
    args = parser.parse_args()
    n = args.evaluations
    if args.pull_only is not None:
        print(json.dumps(pulls(Path(args.pull_only), n, args.attempts)))
        return
    with tempfile.TemporaryDirectory(dir=args.dir) as name:
        tmp = Path(name)
        setup, pushed = prepare(tmp, n, args.attempts)
        print(f"merge of two boards of {n} evaluations each on a directory remote "
              f"({args.dir or tempfile.gettempdir()})")
        print(f"setup: storing {2 * n} evaluations took {setup:.1f} s "
              f"({setup / (2 * n) * 1e3:.2f} ms each)")
        if args.compare is None:
            steps = {**pushed, **pulls(tmp / "a", n, args.attempts)}
            print(f"{'step':<30} {'wall s':>9} {'cpu s':>8} {'ms/eval wall':>13} "
                  f"{'ms/eval cpu':>12}")
            for label, (wall, cpu) in steps.items():
                print(f"{label:<30} {wall:>9.2f} {cpu:>8.2f} {wall / n * 1e3:>13.3f} "
                      f"{cpu / n * 1e3:>12.3f}")
            return
        # each pull starts from a copy of A as it was before any pull; the two checkouts
        # alternate, so a load that comes and goes on the machine slows both alike
        here = str(Path(__file__).resolve().parents[1])
        best: dict[str, dict[str, list[float]]] = {"other": {}, "this": {}}
        for _ in range(args.rounds):
            for who, src in (("other", args.compare), ("this", here)):
                copy = tmp / f"a-{who}"
                shutil.copytree(tmp / "a", copy)
                os.sync()  # the copy's writes are on disk: neither pull pays for them
                for label, times in pull_with(src, copy, n, args.attempts).items():
                    kept = best[who].setdefault(label, times)
                    best[who][label] = [min(x, y) for x, y in zip(kept, times, strict=True)]
                shutil.rmtree(copy)
        bare = floor(tmp, n)
    print("pushes (this checkout): " + ", ".join(
        f"{label} {wall / n * 1e3:.3f} ms/eval" for label, (wall, _) in pushed.items()))
    print(f"pulls, best of {args.rounds} alternating rounds; other = {args.compare}")
    print(f"{'step':<30} {'ms/eval wall: other':>20} {'this':>7} {'ratio':>6} "
          f"{'ms/eval cpu: other':>19} {'this':>7} {'ratio':>6}")
    for label in PULLS:
        (was_wall, was_cpu), (wall, cpu) = best["other"][label], best["this"][label]
        print(f"{label:<30} {was_wall / n * 1e3:>20.3f} {wall / n * 1e3:>7.3f} "
              f"{was_wall / wall:>6.2f} {was_cpu / n * 1e3:>19.3f} {cpu / n * 1e3:>7.3f} "
              f"{was_cpu / max(cpu, 1e-9):>6.2f}")
    print("ratio: the other checkout's time over this one's (above 1: this one is faster)")
    print(f"floor on this disk now: creating, renaming and flushing {n} files of 800 bytes "
          f"took {bare / n * 1e3:.3f} ms each")


if __name__ == "__main__":
    main()
