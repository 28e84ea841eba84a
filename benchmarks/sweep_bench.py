"""A sweep here vs on Ray (one driver, then two drivers on the same grid), side by side.

    python benchmarks/sweep_bench.py [--per-class P] [--size S] [--ray-cpus C]

Sweeps backbones x tasks (knn, retrieval) over generated shapes from cold stores: locally, on a
local Ray started here with C CPUs (each unit a Ray task), again on Ray once all is stored (the
driver answers every unit itself), and with two drivers at once (this process and a
``vbstore sweep`` subprocess joining the same cluster). Reports seconds, ratios to the local
sweep, how the two drivers split the units, and checks that no derivation was computed twice
and that the metrics equal the local sweep's. On a shared machine run it inside a
loopback-only namespace: ``unshare -n sh -c 'ip link set lo up; python benchmarks/sweep_bench.py'``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GRID = "torchvision:resnet18 weights=random input_size={size}\ntest_vit weights=random\n"
TASKS = ["knn", "retrieval"]


def timed_sweep(store_root: Path, backbones: Path, data: str, executor=None):
    from vbstore import Store
    from vbstore.engine import read_backbones_file, sweep

    with Store(store_root) as store:
        start = time.perf_counter()
        rows = list(sweep(read_backbones_file(backbones), TASKS, data, data, store=store,
                          split="val", train_split="train", progress=False, executor=executor))
        seconds = time.perf_counter() - start
    failed = [row for row in rows if "error" in row]
    if failed:
        raise SystemExit(f"sweep failed: {failed[0]['error']}")
    return seconds, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-class", type=int, default=20)
    parser.add_argument("--size", type=int, default=96)
    parser.add_argument("--ray-cpus", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()

    import ray

    from vbstore import Store
    from vbstore.data import make_shapes
    from vbstore.features import RayExecutor

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=args.ray_cpus, object_store_memory=200 << 20, include_dashboard=False,
             log_to_driver=False)
    address = ray.get_runtime_context().gcs_address
    executor = RayExecutor(address=address)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data = str(make_shapes(root / "shapes", per_class=args.per_class, seed=1, size=args.size))
        backbones = root / "backbones.txt"
        backbones.write_text(GRID.format(size=args.size))
        timed_sweep(root / "warm", backbones, data)  # imports and model caches warm
        timed_sweep(root / "warm-ray", backbones, data, executor)  # Ray's worker processes too
        local_s, local_rows = timed_sweep(root / "local", backbones, data)
        ray_s, ray_rows = timed_sweep(root / "ray", backbones, data, executor)
        stored_s, _ = timed_sweep(root / "ray", backbones, data, executor)

        Store(root / "two").close()
        other = subprocess.Popen(
            [sys.executable, "-m", "vbstore", "--store", str(root / "two"), "sweep",
             "--backbones", str(backbones), "--tasks", ",".join(TASKS), "-d", data, "--split",
             "val", "--train-data", data, "--train-split", "train", "--executor", "ray",
             "--ray-address", address, "--json"],
            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        start = time.perf_counter()
        _, mine = timed_sweep(root / "two", backbones, data, executor)
        theirs = json.loads(other.communicate()[0])
        two_s = time.perf_counter() - start  # the subprocess started first: a lower bound
        computed = [k for row in mine + theirs for k in row["computed"]]
        expected = {(r["label"], r["task"]): r["metrics"] for r in local_rows}
        same = all(expected[(r["label"], r["task"])] == r["metrics"]
                   for r in ray_rows + mine + theirs)
    units = len(local_rows)
    split = [sum(1 for r in rows if not r["from_cache"]) for rows in (mine, theirs)]
    print(f"{units} units ({len(TASKS)} tasks x {units // len(TASKS)} backbones), "
          f"{args.per_class * 5} images per split at {args.size}px, {os.cpu_count()} CPUs, "
          f"local Ray with {args.ray_cpus} CPUs")
    print(f"{'':24} {'s':>8} {'/local':>8}")
    for name, seconds in (("local sweep", local_s), ("ray, one driver", ray_s),
                          ("ray, all stored", stored_s), ("ray, two drivers", two_s)):
        print(f"{name:24} {seconds:8.2f} {seconds / local_s:8.2f}")
    print(f"two drivers: units computed {split[0]} + {split[1]}, derivations computed "
          f"{len(computed)}, distinct {len(set(computed))}; metrics equal to local: {same}")
    print(json.dumps({"local_s": local_s, "ray_s": ray_s, "stored_s": stored_s,
                      "two_drivers_s": two_s, "split": split, "computed": len(computed),
                      "distinct": len(set(computed)), "identical": same}))
    ray.shutdown()


if __name__ == "__main__":
    main()
