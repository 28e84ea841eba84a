"""Local vs Ray extraction, side by side in one run: fixed overhead and per-image cost.

    python benchmarks/scale_bench.py [--images N] [--backbone SPEC] [--input-size S]
                                     [--ray-address ADDR] [--ray-cpus C]

Extracts N and 4N JPEGs from cold stores, locally and through ``RayExecutor`` (a local Ray
started here with C CPUs unless ``--ray-address`` names a cluster), and fits
``seconds = overhead + images / rate`` to each pair, so the fixed cost of Ray (connect, probe,
actor start-up, pipeline) and the per-image efficiency (local rate / Ray rate) are reported
separately. Checks that both give the same featureset id. On a shared machine run it inside a
loopback-only namespace: ``unshare -n sh -c 'ip link set lo up; python benchmarks/scale_bench.py'``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from extract_bench import make_jpegs


def timed(data: Path, store_root: Path, args, executor=None) -> tuple[float, str]:
    from vbstore import Store
    from vbstore.engine import get_features

    with Store(store_root) as store:
        start = time.perf_counter()
        result = get_features(args.backbone, str(data), store=store, weights="random",
                              input_size=args.input_size, batch_size=args.batch_size,
                              progress=False, executor=executor)
        return time.perf_counter() - start, result.id


def fit(n: int, t_n: float, t_4n: float) -> dict[str, float]:
    per_image = (t_4n - t_n) / (3 * n)
    return {"overhead_s": round(t_n - per_image * n, 3),
            "img_per_s": round(1 / per_image, 1) if per_image > 0 else float("inf"),
            "n_s": round(t_n, 3), "4n_s": round(t_4n, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=128)
    parser.add_argument("--backbone", default="torchvision:resnet18")
    parser.add_argument("--input-size", type=int, default=160)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--ray-address", default=None)
    parser.add_argument("--ray-cpus", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()

    import ray

    from vbstore.features import RayExecutor

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    if args.ray_address is None:
        ray.init(num_cpus=args.ray_cpus, object_store_memory=200 << 20, include_dashboard=False,
                 log_to_driver=False)
    executor = RayExecutor(address=args.ray_address, workers=None if args.ray_address else 1,
                           cpus_per_worker=args.ray_cpus if not args.ray_address else 1)
    n = args.images
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        sets = {size: make_jpegs(root / f"d{size}", size) for size in (n, 4 * n)}
        timed(sets[n], root / "warm", args)  # build the model once: imports and caches are warm
        timed(sets[n], root / "warm-ray", args, executor)  # Ray's first worker processes too
        rows = {}
        for name, ex in (("local", None), ("ray", executor)):
            times, ids = [], []
            for size in (n, 4 * n):
                seconds, oid = timed(sets[size], root / f"{name}{size}", args, ex)
                times.append(seconds)
                ids.append(oid)
            rows[name] = {**fit(n, *times), "ids": ids}
        same = rows["local"]["ids"] == rows["ray"]["ids"]
    local, on_ray = rows["local"], rows["ray"]
    print(f"{args.backbone} @ {args.input_size}px, batch {args.batch_size}, N={n}, "
          f"{os.cpu_count()} CPUs, Ray {'at ' + args.ray_address if args.ray_address else 'local'}")
    print(f"{'':8} {'N s':>8} {'4N s':>8} {'overhead s':>11} {'img/s':>8}")
    for name, row in rows.items():
        print(f"{name:8} {row['n_s']:8.2f} {row['4n_s']:8.2f} {row['overhead_s']:11.2f} "
              f"{row['img_per_s']:8.1f}")
    print(f"per-image efficiency ray/local: {on_ray['img_per_s'] / local['img_per_s']:.2f}; "
          f"end-to-end at 4N: {local['4n_s'] / on_ray['4n_s']:.2f}; same featureset ids: {same}")
    print(json.dumps({"local": local, "ray": on_ray, "identical": same}))


if __name__ == "__main__":
    main()
