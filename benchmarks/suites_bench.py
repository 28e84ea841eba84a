"""Leaderboard and export over 100k evaluations, side by side with plain SQLite in one run.

    python benchmarks/suites_bench.py [--rows N] [--attempts K] [--variants V] [--runs R]

Fills a store's ``evaluations`` table with N rows (N/K checkpoints, K attempts each, a quarter
not ranked; each checkpoint's attempts spread over V variants, the settings a suite leaves open,
so the board has a row per checkpoint and variant) on one suite, then times (1) reading the same
rows with plain sqlite3, (2)
``leaderboard`` (latest ranked attempt per checkpoint, ties, weakest condition, gap, reorders)
and (3) the board as Markdown and CSV. Rows are inserted directly (as ``record`` indexes them),
each with a small evaluation blob (the fields a board reads) stored in batches: a board ranks
the numbers of its ranked rows' blobs, re-hashed (issue 32), not the registry's copy. R
interleaved rounds (default 5), the best of each.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from vbstore import Store, canonical
from vbstore.suites import board_csv, board_markdown, leaderboard, push_suite

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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--attempts", type=int, default=4)
    parser.add_argument("--variants", type=int, default=1,
                        help="variants per checkpoint (1: every attempt the same settings)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dir", default=None, help="Where the store goes (default: the temp dir).")
    args = parser.parse_args()
    rng = random.Random(0)  # noqa: S311 - benchmark data, not secrets
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp, Store(Path(tmp) / "s") as store:
        suite, _ = push_suite(store, SUITE)
        variants = [
            json.dumps({"layers": [-1 - v], "pooling": "cls", "precision": "fp32", "seeds": 1,
                        "input_size": 224}, sort_keys=True, separators=(",", ":"))
            for v in range(args.variants)
        ]
        rows, blobs = [], []
        for i in range(args.rows):
            day, night = round(rng.random(), 3), round(rng.random(), 3)
            scores = {
                "conditions": {
                    "day": {"top1": day, "top5": day},
                    "night": {"top1": night, "top5": night},
                },
                "overall": {"top1": (day + night) / 2, "top5": (day + night) / 2},
            }
            ranked = rng.random() > 0.25
            variant = variants[(i % args.attempts) % args.variants]
            checkpoint = {"id": f"ckpt{i // args.attempts:07d}",
                          "label": f"model-{i // args.attempts}", "weights": "pretrained"}
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
        with store.db.write() as conn:
            conn.executemany(
                "INSERT INTO evaluations(id, suite, checkpoint, label, weights, state, ranked, "
                "evidence, recorded, scores, reasons, variant) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                rows,
            )
        # the fixture's 100k tuples would otherwise slow every garbage collection timed
        del rows, blobs
        path = store.root / "registry.db"

        def plain() -> None:
            conn = sqlite3.connect(path)
            conn.execute(
                "SELECT id, checkpoint, label, weights, ranked, evidence, recorded, state, scores, "
                "reasons, variant FROM evaluations WHERE suite=? "
                "ORDER BY checkpoint, variant, recorded, id",
                ("bench@1",),
            ).fetchall()
            conn.close()

        # interleaved rounds, best of each: a busy machine slows all three alike
        timings: dict[str, list[tuple[float, float]]] = {"plain": [], "board": [], "export": []}
        result = leaderboard(store, "bench@1")
        for _ in range(args.runs):
            timings["plain"].append(timed(plain))
            timings["board"].append(timed(lambda: leaderboard(store, "bench@1")))
            timings["export"].append(timed(lambda: (board_markdown(result), board_csv(result))))
        print(
            f"{args.rows} evaluations, {args.variants} variant(s) per checkpoint, "
            f"{len(result.rows)} ranked rows, "
            f"{len(result.unranked)} not ranked; best of {args.runs} interleaved rounds"
        )
        print(f"{'':22}{'wall ms':>9}{'ratio':>8}{'cpu ms':>10}{'ratio':>8}")
        best = {k: [min(t[i] for t in v) for i in (0, 1)] for k, v in timings.items()}
        best["board + export"] = [a + b for a, b in zip(best["board"], best["export"], strict=True)]
        for name, label in (
            ("plain", "plain sqlite read"),
            ("board", "leaderboard"),
            ("export", "markdown + csv export"),
            ("board + export", "board + export"),
        ):
            (wall, cpu), (raw_wall, raw_cpu) = best[name], best["plain"]
            print(
                f"{label:22}{wall * 1000:9.1f}{wall / raw_wall:7.2f}x"
                f"{cpu * 1000:10.1f}{cpu / raw_cpu:7.2f}x"
            )


if __name__ == "__main__":
    main()
