"""Leaderboard and export over 100k evaluations, side by side with plain SQLite in one run.

    python benchmarks/suites_bench.py [--rows N] [--attempts K] [--variants V] [--runs R]
                                      [--dir DIR] [--compare OTHER_CHECKOUT [--rounds C]]

Fills a store's ``evaluations`` table with N rows (N/K checkpoints, K attempts each, a quarter
not ranked; each checkpoint's attempts spread over V variants, the settings a suite leaves open,
so the board has a row per checkpoint and variant) on one suite, then times (1) reading the same
rows with plain sqlite3, (2)
``leaderboard`` (latest ranked attempt per checkpoint, ties, weakest condition, gap, reorders)
and (3) the board as Markdown and CSV. Rows are inserted directly (as ``record`` indexes them),
each with a small evaluation blob (the fields a board reads) stored in batches: a board ranks
the numbers of its ranked rows' blobs, re-hashed (issue 32), not the registry's copy. R
interleaved rounds (default 5), the best of each. The first board is timed apart: rows indexed
without a record of their blob's verification (as the fixture's are) make it read and re-hash
every ranked blob once, and record them (the verified-scores cache, registry migration 11).

``--compare OTHER_CHECKOUT`` (a ``git worktree`` or ``git archive`` of main, say) makes the store
with that checkout's vbstore, copies it, and times each checkout on its own copy in a
subprocess, alternating for ``--rounds`` rounds; the best of each is printed side by side.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# the vbstore measured: this checkout's, or the one --compare runs this script with
sys.path.insert(0, os.environ.get("SUITES_BENCH_SRC") or str(Path(__file__).resolve().parents[1]))
from vbstore import Store, canonical
from vbstore.suites import Board, board_csv, board_markdown, leaderboard, push_suite

SUITE = {
    "slug": "bench",
    "version": 1,
    "name": "bench",
    "protocol": {
        "task": "knn",
        "data": {"kind": "external"},
        "conditions": [{"name": "day", "sampleCount": 100}, {"name": "night", "sampleCount": 100}],
        "metrics": [{"key": "top1", "headline": True}, {"key": "top5"}],
    },
}


def timed(fn) -> tuple[float, float]:
    """Wall and CPU seconds of ``fn()``: on a shared machine the CPU time is the steadier."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def fill(store: Store, n: int, attempts: int, variants_per: int) -> None:
    """``n`` evaluation rows of the bench suite, each with its blob (see the module's doc)."""
    rng = random.Random(0)  # noqa: S311 - benchmark data, not secrets
    suite, _ = push_suite(store, SUITE)
    variants = [
        json.dumps({"layers": [-1 - v], "pooling": "cls", "precision": "fp32", "seeds": 1,
                    "input_size": 224}, sort_keys=True, separators=(",", ":"))
        for v in range(variants_per)
    ]
    rows, blobs = [], []
    for i in range(n):
        day, night = round(rng.random(), 3), round(rng.random(), 3)
        scores = {
            "conditions": {
                "day": {"top1": day, "top5": day},
                "night": {"top1": night, "top5": night},
            },
            "overall": {"top1": (day + night) / 2, "top5": (day + night) / 2},
        }
        ranked = rng.random() > 0.25
        variant = variants[(i % attempts) % variants_per]
        checkpoint = {"id": f"ckpt{i // attempts:07d}",
                      "label": f"model-{i // attempts}", "weights": "pretrained"}
        reasons = [] if ranked else ["missing-condition(night)"]
        # the evaluation blob a board reads its ranked numbers from (what fsck verifies):
        # an evaluation as the board reads it, with the attempt's number
        doc = {"kind": "evaluation", "suite": "bench@1", "suite_id": suite.id,
               "checkpoint": checkpoint, "evidence": "observed", "sources": {"attempt": i},
               "results": {c: {"overall": v} for c, v in scores["conditions"].items()},
               "sample_counts": {"day": 100, "night": 100},
               "verdict": {"state": "eligible" if ranked else "incomplete",
                           "reasons": reasons, "ranked": ranked, "scores": scores,
                           "variant": json.loads(variant)}}
        data = canonical.dumps(doc)
        blobs.append((data, "evaluation", None))
        rows.append(
            (
                canonical.digest(data),
                "bench@1",
                checkpoint["id"],
                checkpoint["label"],
                "pretrained",
                doc["verdict"]["state"],
                int(ranked),
                "observed",
                float(i),
                json.dumps(scores),
                json.dumps(reasons),
                variant,
            )
        )
    for start in range(0, len(blobs), 10_000):  # one flush to disk per 10k blobs
        store.put_many(blobs[start : start + 10_000])
    # inserted directly, as an older vbstore indexed them: the first board below reads every
    # ranked blob (and, where the registry keeps a verified-scores cache, records them)
    with store.db.write() as conn:
        conn.executemany(
            "INSERT INTO evaluations(id, suite, checkpoint, label, weights, state, ranked, "
            "evidence, recorded, scores, reasons, variant) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            rows,
        )


def measure(root: Path, runs: int) -> dict[str, Any]:
    """Best wall and CPU seconds of a plain read, the board and its export over ``runs``
    interleaved rounds (a busy machine slows all three alike), and the first board's."""
    with Store(root) as store:
        path = store.root / "registry.db"

        def plain() -> None:
            conn = sqlite3.connect(path)
            conn.execute(
                "SELECT id, checkpoint, label, weights, ranked, evidence, recorded, state, "
                "scores, reasons, variant FROM evaluations WHERE suite=? "
                "ORDER BY checkpoint, variant, recorded, id",
                ("bench@1",),
            ).fetchall()
            conn.close()

        result: list[Board] = []
        first = timed(lambda: result.append(leaderboard(store, "bench@1")))
        timings: dict[str, list[tuple[float, float]]] = {"plain": [], "board": [], "export": []}
        for _ in range(runs):
            timings["plain"].append(timed(plain))
            timings["board"].append(timed(lambda: leaderboard(store, "bench@1")))
            timings["export"].append(timed(lambda: (board_markdown(result[0]),
                                                    board_csv(result[0]))))
    best: dict[str, Any] = {k: [min(t[i] for t in v) for i in (0, 1)]
                            for k, v in timings.items()}
    best["first board"] = list(first)
    best["ranked"], best["unranked"] = len(result[0].rows), len(result[0].unranked)
    return best


LINES = (("plain", "plain sqlite read"), ("board", "leaderboard"),
         ("export", "markdown + csv export"), ("board + export", "board + export"),
         ("first board", "first board (cold)"))


def table(best: dict[str, Any]) -> list[str]:
    best = {**best, "board + export": [a + b for a, b in
                                       zip(best["board"], best["export"], strict=True)]}
    out = [f"{'':22}{'wall ms':>9}{'ratio':>8}{'cpu ms':>10}{'ratio':>8}"]
    (raw_wall, raw_cpu) = best["plain"]
    for name, label in LINES:
        wall, cpu = best[name]
        out.append(f"{label:22}{wall * 1000:9.1f}{wall / raw_wall:7.2f}x"
                   f"{cpu * 1000:10.1f}{cpu / raw_cpu:7.2f}x")
    return out


def child(src: str, *argv: str) -> dict[str, Any]:
    """This script in a subprocess whose vbstore is the checkout ``src``; its JSON line."""
    done = subprocess.run([sys.executable, __file__, *argv],
                          env={**os.environ, "SUITES_BENCH_SRC": src},
                          check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--attempts", type=int, default=4)
    parser.add_argument("--variants", type=int, default=1,
                        help="variants per checkpoint (1: every attempt the same settings)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dir", default=None, help="Where the store goes (default: the temp dir).")
    parser.add_argument("--compare", default=None, metavar="OTHER_CHECKOUT",
                        help="Also time another checkout's vbstore on a copy of the same store "
                             "(made by that checkout), alternating with this one.")
    parser.add_argument("--rounds", type=int, default=2,
                        help="With --compare: subprocesses per checkout, alternating; the best "
                             "of all counts.")
    parser.add_argument("--fill-only", default=None, help=argparse.SUPPRESS)  # --compare's child
    parser.add_argument("--measure-only", default=None, help=argparse.SUPPRESS)  # likewise
    args = parser.parse_args()
    if args.fill_only is not None:
        with Store(Path(args.fill_only)) as store:
            fill(store, args.rows, args.attempts, args.variants)
        print("{}")
        return
    if args.measure_only is not None:
        print(json.dumps(measure(Path(args.measure_only), args.runs)))
        return
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        if args.compare is None:
            with Store(Path(tmp) / "s") as store:
                fill(store, args.rows, args.attempts, args.variants)
            gc.collect()
            best = measure(Path(tmp) / "s", args.runs)
            print(f"{args.rows} evaluations, {args.variants} variant(s) per checkpoint, "
                  f"{best['ranked']} ranked rows, {best['unranked']} not ranked; best of "
                  f"{args.runs} interleaved rounds")
            print("\n".join(table(best)))
            return
        # the store made by the other checkout (an older registry migrates on this one's
        # first open); each checkout times its own copy, alternating
        here = str(Path(__file__).resolve().parents[1])
        made = Path(tmp) / "made"
        child(args.compare, "--fill-only", str(made), "--rows", str(args.rows),
              "--attempts", str(args.attempts), "--variants", str(args.variants))
        copies = {"other": Path(tmp) / "other", "this": Path(tmp) / "this"}
        for copy in copies.values():
            shutil.copytree(made, copy)
        shutil.rmtree(made)
        kept: dict[str, dict[str, Any]] = {}
        for _ in range(args.rounds):
            for who, src in (("other", args.compare), ("this", here)):
                got = child(src, "--measure-only", str(copies[who]), "--runs", str(args.runs))
                old = kept.setdefault(who, got)
                for name, _label in LINES[:3]:
                    old[name] = [min(a, b) for a, b in zip(old[name], got[name], strict=True)]
                # the first board of the first subprocess is the cold one: kept as it was
    print(f"{args.rows} evaluations, {args.variants} variant(s) per checkpoint, "
          f"{kept['this']['ranked']} ranked rows, {kept['this']['unranked']} not ranked; "
          f"best of {args.runs} interleaved rounds in each of {args.rounds} subprocesses a "
          "checkout, alternating")
    assert (kept["this"]["ranked"], kept["this"]["unranked"]) == (
        kept["other"]["ranked"], kept["other"]["unranked"])
    for who, name in (("other", args.compare), ("this", here)):
        print(f"{who}: {name}")
        print("\n".join(table(kept[who])))
    print("first board (cold): the first board a subprocess shows (this checkout: of its first "
          "subprocess only, which records the cache)")
    print(f"leaderboard cpu, other / this: "
          f"{kept['other']['board'][1] / kept['this']['board'][1]:.2f}x")


if __name__ == "__main__":
    main()
