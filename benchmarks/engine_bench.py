"""The lazy engine, side by side in one run: cold vs cached results, and feature reuse.

    python benchmarks/engine_bench.py [--per-class K] [--big-per-class N]

Prints:
- cold ``get result`` (extract features, train the probe) vs the same call cached: ratio and
  absolute times;
- a second task on the same features vs that task's cold cost in a fresh store;
- the wall time of the CLI answering a cached result on a 10k-image dataset (a fresh process:
  interpreter start, imports, manifest check by stat, lookup); target <= 0.1 s on a quiet
  machine (issue "Typed engine"); and `--dry-run` on a warm and on a cold store.
"""

from __future__ import annotations

import argparse
import os
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
    assert knn.record.features_from_cache
    return {"images": 2 * 5 * per_class, "cold_s": cold, "cached_s": cached,
            "second_task_s": second, "second_task_cold_s": knn_cold}


def cli_cached(work: Path, per_class: int) -> dict:
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
    empty = tempfile.mkdtemp(prefix="vbstore-nopyc-")
    no_pyc_env = {**cached_env, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": empty}
    subprocess.run(cmd, check=True, capture_output=True, env=cached_env)  # writes the .pyc files
    out = {"images": 2 * 5 * per_class}
    for label, env in (("", cached_env), ("no_pyc_", no_pyc_env)):
        walls = []
        for _ in range(7):
            start = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True, env=env)
            walls.append(time.perf_counter() - start)
        out[f"{label}wall_min_s"] = min(walls)
        out[f"{label}wall_median_s"] = statistics.median(walls)
    bare = [sys.executable, "-c", "pass"]
    out["bare_python_s"] = min(timed(lambda: subprocess.run(bare, check=True))[0] for _ in range(5))
    # --dry-run: on the warm store (everything cached) and on a cold one (nothing stored: the
    # manifest's files are hashed, no backbone is built, nothing is computed)
    dry = [*cmd, "--dry-run"]
    out["dry_warm_min_s"] = min(timed(lambda: subprocess.run(dry, check=True, capture_output=True,
                                                             env=cached_env))[0] for _ in range(5))
    colds = []
    for i in range(3):
        cold = [sys.executable, "-m", "vbstore", "--store", str(work / f"cold-{i}"), "get",
                "result", *args, "--dry-run"]
        colds.append(timed(lambda cold=cold: subprocess.run(cold, check=True, capture_output=True,
                                                            env=cached_env))[0])
    out["dry_cold_min_s"] = min(colds)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-class", type=int, default=40, help="shapes per class per split")
    parser.add_argument("--big-per-class", type=int, default=1000,
                        help="per class per split of the dataset the CLI timing uses "
                             "(5 classes, 2 splits)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vbstore-engine-") as tmp:
        work = Path(tmp)
        eng = engine_ratios(work, args.per_class)
        cli = cli_cached(work, args.big_per_class)
    print(f"{BACKBONE} (random weights, 112 px), classification probe on {eng['images']} shapes")
    print(f"  cold get result {eng['cold_s']:.2f} s, cached {eng['cached_s'] * 1000:.1f} ms "
          f"-> {eng['cold_s'] / eng['cached_s']:.0f}x")
    print(f"  second task (knn) on the same features {eng['second_task_s']:.2f} s vs its cold cost "
          f"{eng['second_task_cold_s']:.2f} s "
          f"-> {eng['second_task_cold_s'] / eng['second_task_s']:.1f}x")
    print(f"CLI, cached knn result on a {cli['images']}-image dataset (train + val split; a fresh "
          "process each time):")
    print(f"  wall min {cli['wall_min_s']:.3f} s, median {cli['wall_median_s']:.3f} s "
          f"(bare python start {cli['bare_python_s']:.3f} s)   target <= 0.1 s")
    print(f"  without bytecode caches (every module compiled at start): min "
          f"{cli['no_pyc_wall_min_s']:.3f} s, median {cli['no_pyc_wall_median_s']:.3f} s")
    print(f"  --dry-run: everything cached {cli['dry_warm_min_s']:.3f} s; cold store (hashes "
          f"{cli['images']} images, builds nothing) {cli['dry_cold_min_s']:.3f} s "
          f"-> {cli['dry_cold_min_s'] / cli['dry_warm_min_s']:.0f}x")


if __name__ == "__main__":
    main()
