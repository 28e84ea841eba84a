"""The lazy engine, side by side in one run: cold vs cached results, and feature reuse.

    python benchmarks/engine_bench.py [--per-class K] [--big-per-class N] [--cli-only]
                                      [--compare OTHER_CHECKOUT]

Prints:
- cold ``get result`` (extract features, train the probe) vs the same call cached: ratio and
  absolute times;
- a second task on the same features vs that task's cold cost in a fresh store;
- the CLI answering a cached result on a 10k-image dataset (a fresh process each time), wall
  and CPU time (user + system of the child, steadier than wall on a shared machine): through the
  answer cache (interpreter start, a stat per file, the registry rows re-read, the result's hash
  checked) and through the full command (what answers the first call after a change: click,
  the engine, the listing, the plan), interleaved with their floors: a bare interpreter, one
  that imports click alone, one that only stats every file, and one that also imports what the
  answer cache cannot do without; target <= 0.1 s (issue "Typed engine"). ``--compare`` adds
  the same command run with another checkout's vbstore, for before/after figures in one run;
- ``--dry-run`` on a warm and on a cold store.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BACKBONE = "torchvision:resnet18"


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def engine_ratios(work: Path, per_class: int) -> dict:
    import vbstore
    from vbstore import Store
    from vbstore.data import make_shapes

    data = str(make_shapes(work / "shapes", per_class=per_class, seed=0, size=64))
    kw = dict(split="val", train_split="train", weights="random", input_size=112, progress=False)
    store = Store(work / "a")
    def classification():
        return vbstore.get_result(BACKBONE, "classification", data, data, store=store, **kw)

    cold, first = timed(classification)
    cached = min(timed(classification)[0] for _ in range(5))
    second, knn = timed(lambda: vbstore.get_result(BACKBONE, "knn", data, data, store=store, **kw))
    fresh = Store(work / "b")
    knn_cold, _ = timed(lambda: vbstore.get_result(BACKBONE, "knn", data, data, store=fresh, **kw))
    assert not first.from_cache
    assert knn.run.features_from_cache
    return {"images": 2 * 5 * per_class, "cold_s": cold, "cached_s": cached,
            "second_task_s": second, "second_task_cold_s": knn_cold}


def _run(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and the child's CPU seconds (user + system) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    # from a neutral folder: `python -m` puts the working directory first on sys.path
    subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def _side_by_side(cases: dict[str, tuple[list[str], dict[str, str]]], trials: int) -> dict:
    """Each case ``trials`` times, interleaved (the machine's load hits them alike); min and
    median of wall and CPU seconds."""
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
    for _ in range(trials):
        for name, (cmd, env) in cases.items():
            runs[name].append(_run(cmd, env))
    out = {}
    for name, r in runs.items():
        walls, cpus = [w for w, _ in r], [c for _, c in r]
        out[name] = {"wall_min": min(walls), "wall_median": statistics.median(walls),
                     "cpu_min": min(cpus), "cpu_median": statistics.median(cpus)}
    return out


def cli_cached(work: Path, per_class: int, trials: int, compare: str | None) -> dict:
    import vbstore
    from vbstore import Store
    from vbstore.data import make_shapes

    data = str(make_shapes(work / "big", per_class=per_class, seed=0, size=16))
    args = ["-b", "test_cnn", "-t", "knn", "-d", data, "--split", "val", "--train-data", data,
            "--train-split", "train", "--weights", "random", "--input-size", "16"]
    store = work / "big-store"
    vbstore.get_result("test_cnn", "knn", data, data, store=Store(store), split="val",
                       train_split="train", weights="random", input_size=16, progress=False)
    cmd = [sys.executable, "-m", "vbstore", "--store", str(store), "get", "result", *args]
    # with bytecode caches (a normal install), and without any (an empty pycache prefix: every
    # module compiled at start, as where PYTHONDONTWRITEBYTECODE=1 kept caches from being written)
    cached_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cached_env["PYTHONPYCACHEPREFIX"] = str(work / "pyc")  # in the run's folder: removed with it
    this = str(Path(__file__).resolve().parents[1])
    here_env = {**cached_env, "PYTHONPATH": this}
    empty = work / "nopyc"
    empty.mkdir()
    no_pyc_env = {**here_env, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": str(empty)}
    files = work / "files.txt"
    files.write_text("\n".join(str(p) for p in sorted(Path(data).rglob("*")) if p.is_file()))
    stat = f"import os\nfor p in open({str(files)!r}).read().split(chr(10)): os.stat(p)"
    floors = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python: import click": [sys.executable, "-c", "import click"],
        "python: stat every file": [sys.executable, "-c", stat],
        "python: import sqlite3, json, blake3 + stat": [
            sys.executable, "-c", f"import sqlite3, json, blake3\n{stat}"],
    }
    cases = {name: (c, cached_env) for name, c in floors.items()}
    cases["vbstore get result (answer cache)"] = (cmd, here_env)
    # the full command, as main runs it when the answer cache has no answer
    full = [sys.executable, "-c", "import gc, sys\ngc.set_threshold(100_000, 10, 10)\n"
            "from vbstore.cli._root import cli\ntry:\n    cli(sys.argv[1:], prog_name='vbstore')\n"
            "finally:\n    gc.freeze()", "--store", str(store), "get", "result", *args]
    cases["vbstore get result (cached, full command)"] = (full, here_env)
    if compare is not None:  # the same command with another checkout's vbstore, on a store of
        # its own (its registry may be of another schema version), computed by the warm-up run
        other = [sys.executable, "-m", "vbstore", "--store", str(work / "compare-store"), "get",
                 "result", *args]
        cases[f"  the same, vbstore from {compare}"] = (other, {**cached_env,
                                                                "PYTHONPATH": compare})
    for c, env in cases.values():  # writes the bytecode caches (and the compare store)
        _run(c, env)
    time.sleep(0.2)  # past the answer cache's racy window, then it records and answers
    _run(cmd, here_env)
    with sqlite3.connect(store / "registry.db") as conn:
        (deps,) = conn.execute("SELECT deps FROM answers").fetchone()
    assert "skip" not in json.loads(deps), "the answer cache did not record this command"
    out = {"images": 2 * 5 * per_class, "side_by_side": _side_by_side(cases, trials)}
    # the first call after a change: the full command, then the recording (a walk and stat of
    # the data folder, the manifests read, one registry write); the rows dropped before each run
    # (with --compare, the other checkout's miss interleaved: its store, its answer rows if any)
    miss_cases = {"miss": (store, cmd, here_env)}
    if compare is not None:
        miss_cases["miss_compare"] = (work / "compare-store", other, {**cached_env,
                                                                      "PYTHONPATH": compare})
    misses: dict[str, list[tuple[float, float]]] = {name: [] for name in miss_cases}
    for _ in range(5):
        for name, (where, c, env) in miss_cases.items():
            with sqlite3.connect(where / "registry.db") as conn:
                tables = {t for (t,) in conn.execute("SELECT name FROM sqlite_master")}
                for table in {"answers", "answer_trees"} & tables:
                    conn.execute(f"DELETE FROM {table}")  # noqa: S608 - one of two names
            time.sleep(0.15)  # past the racy window, so the run records
            misses[name].append(_run(c, env))
    for name, runs in misses.items():
        out[name] = {"wall_min": min(w for w, _ in runs), "cpu_min": min(c for _, c in runs)}
    out["no_pyc"] = _side_by_side({"no_pyc": (cmd, no_pyc_env)}, 3)["no_pyc"]
    # --dry-run: on the warm store (everything cached) and on a cold one (nothing stored: the
    # manifest's files are hashed, no backbone is built, nothing is computed)
    dry = {"dry_warm": ([*cmd, "--dry-run"], here_env)}
    out["dry_warm"] = _side_by_side(dry, 5)["dry_warm"]
    colds = [_run([sys.executable, "-m", "vbstore", "--store", str(work / f"cold-{i}"), "get",
                   "result", *args, "--dry-run"], here_env) for i in range(3)]
    out["dry_cold"] = {"wall_min": min(w for w, _ in colds), "cpu_min": min(c for _, c in colds)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-class", type=int, default=40, help="shapes per class per split")
    parser.add_argument("--big-per-class", type=int, default=1000,
                        help="per class per split of the dataset the CLI timing uses "
                             "(5 classes, 2 splits)")
    parser.add_argument("--trials", type=int, default=11,
                        help="runs of each CLI case (interleaved; min and median reported)")
    parser.add_argument("--cli-only", action="store_true",
                        help="only the CLI timings (no resnet18 training)")
    parser.add_argument("--compare", metavar="CHECKOUT", default=None,
                        help="also time the cached CLI with the vbstore package of another "
                             "checkout (a folder holding vbstore/), side by side")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vbstore-engine-") as tmp:
        work = Path(tmp)
        eng = None if args.cli_only else engine_ratios(work, args.per_class)
        cli = cli_cached(work, args.big_per_class, args.trials, args.compare)
    if eng is not None:
        print(f"{BACKBONE} (random weights, 112 px), classification probe on {eng['images']} "
              "shapes")
        print(f"  cold get result {eng['cold_s']:.2f} s, cached {eng['cached_s'] * 1000:.1f} ms "
              f"-> {eng['cold_s'] / eng['cached_s']:.0f}x")
        print(f"  second task (knn) on the same features {eng['second_task_s']:.2f} s vs its cold "
              f"cost {eng['second_task_cold_s']:.2f} s "
              f"-> {eng['second_task_cold_s'] / eng['second_task_s']:.1f}x")
    rows = cli["side_by_side"]
    print(f"CLI, cached knn result on a {cli['images']}-image dataset (train + val split; a fresh "
          f"process each time; {args.trials} interleaved runs, load {os.getloadavg()[0]:.1f}):")
    print(f"  {'':52s} {'wall min':>9s} {'median':>7s} {'cpu min':>8s} {'median':>7s}")
    for name, r in rows.items():
        print(f"  {name:52s} {r['wall_min'] * 1000:7.1f}ms {r['wall_median'] * 1000:6.1f}ms "
              f"{r['cpu_min'] * 1000:6.1f}ms {r['cpu_median'] * 1000:6.1f}ms")
    ours, bare = rows["vbstore get result (answer cache)"], rows["python -c pass"]
    full = rows["vbstore get result (cached, full command)"]
    floor = rows["python: import sqlite3, json, blake3 + stat"]
    above = (ours["cpu_min"] - floor["cpu_min"]) * 1000
    print(f"  cached CLI wall min {ours['wall_min']:.3f} s (target <= 0.1 s); above the floor of "
          f"python + sqlite3, json, blake3 + stat: {above:.0f} ms CPU; "
          f"{ours['cpu_min'] / bare['cpu_min']:.1f}x a bare python start; the full "
          f"command {full['wall_min']:.3f} s -> {full['wall_min'] / ours['wall_min']:.1f}x")
    miss = cli["miss"]
    print(f"  a miss that records (the first call after a change): wall min "
          f"{miss['wall_min']:.3f} s, cpu min {miss['cpu_min']:.3f} s "
          f"({(miss['cpu_min'] - full['cpu_min']) * 1000:.0f} ms CPU above the full command)")
    if "miss_compare" in cli:
        other = cli["miss_compare"]
        print(f"    the same, vbstore from {args.compare}: wall min {other['wall_min']:.3f} s, "
              f"cpu min {other['cpu_min']:.3f} s -> {other['cpu_min'] / miss['cpu_min']:.2f}x")
    nopyc = cli["no_pyc"]
    print(f"  without bytecode caches (every module compiled at start): wall min "
          f"{nopyc['wall_min']:.3f} s, cpu min {nopyc['cpu_min']:.3f} s")
    warm, cold = cli["dry_warm"], cli["dry_cold"]
    print(f"  --dry-run: everything cached {warm['wall_min']:.3f} s; cold store (hashes "
          f"{cli['images']} images, builds nothing) {cold['wall_min']:.3f} s wall, "
          f"{cold['cpu_min']:.3f} s CPU -> {cold['wall_min'] / warm['wall_min']:.0f}x")


if __name__ == "__main__":
    main()
