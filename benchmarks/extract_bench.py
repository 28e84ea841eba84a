"""Feature extraction efficiency, side by side in one run, on a folder of JPEGs.

    python benchmarks/extract_bench.py [--images N] [--backbone SPEC] [--input-size S]

Prints:
- bare model forward on pre-decoded tensors vs end-to-end ``get features`` (decode, preprocess,
  forward, packs, registry) from a cold store: the efficiency ratio (target >= 0.9 on CPU);
- the same for the two decode strategies (a thread pool vs DataLoader worker processes);
- a cache-hit rerun's time;
- peak RSS of a fresh process extracting N and 4N images (target: < 1.2x growth).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def make_jpegs(root: Path, n: int, size: int = 256) -> Path:
    """n JPEGs of drawn shapes in one class folder per shape."""
    from PIL import Image

    from vbstore.data import make_shapes

    per_class = max(1, n // 5)
    src = make_shapes(root / "png", per_class=per_class, seed=1, size=size)
    out = root / f"jpeg{n}"
    count = 0
    for path in sorted((src / "train").rglob("*.png")):
        if count >= n:
            break
        target = out / path.parent.name / (path.stem + ".jpg")
        target.parent.mkdir(parents=True, exist_ok=True)
        Image.open(path).convert("RGB").save(target, quality=90)
        count += 1
    return out


def bare_forward(folder: Path, spec: str, size: int, batch: int,
                 bf16: bool = False) -> tuple[float, int]:
    import torch
    from PIL import Image

    from vbstore.backbones import build_backbone

    backbone = build_backbone(spec, weights="random", input_size=size)
    if bf16:  # what --precision bf16 runs: a bfloat16 copy of the weights
        backbone = backbone.in_bfloat16()
    tensors = [backbone.preprocess(Image.open(p).convert("RGB"))
               for p in sorted(folder.rglob("*.jpg"))]
    backbone.extract(torch.stack(tensors[:batch]))  # warm-up, as the engine's geometry probe
    start = time.perf_counter()
    for i in range(0, len(tensors), batch):
        backbone.extract(torch.stack(tensors[i : i + batch]))
    return time.perf_counter() - start, len(tensors)


def end_to_end(folder: Path, spec: str, size: int, batch: int, loader: str,
               store_dir: Path) -> dict:
    import vbstore
    from vbstore import Store
    from vbstore.backbones import build_backbone
    from vbstore.engine import resolve_backbone

    store = Store(store_dir)
    # build once outside the timing, as bare_forward does; the timed part is the whole get path
    resolve_backbone(store, spec, weights="random", input_size=size)
    build_backbone(spec, weights="random", input_size=size)
    start = time.perf_counter()
    result = vbstore.get_features(spec, str(folder), store=store, weights="random", input_size=size,
                                  batch_size=batch, progress=False, loader=loader)
    cold = time.perf_counter() - start
    start = time.perf_counter()
    again = vbstore.get_features(spec, str(folder), store=store, weights="random", input_size=size,
                                 batch_size=batch, progress=False)
    hit = time.perf_counter() - start
    assert again.from_cache
    return {"cold_s": cold, "hit_s": hit, "stats": result.stats}


def peak_rss(folder: Path, spec: str, size: int, store_dir: Path) -> float:
    """Peak RSS (MiB) of a fresh process extracting dense + pooled features of ``folder``."""
    code = (
        "import sys, resource, vbstore\n"
        "from vbstore import Store\n"
        f"vbstore.get_features({spec!r}, {str(folder)!r}, store=Store({str(store_dir)!r}), "
        f"weights='random', input_size={size}, mode='both', progress=False)\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=200)
    parser.add_argument("--backbone", default="torchvision:resnet18")
    parser.add_argument("--input-size", type=int, default=160)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--trials", type=int, default=3, help="best of N interleaved runs")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="vbstore-extract-"))
    try:
        n = args.images
        folder = make_jpegs(work, n)
        folder4 = make_jpegs(work, 4 * n)
        rows: dict[str, dict] = {}
        bare_times = []
        for trial in range(args.trials):  # interleaved, best of each: drift hits all sides alike
            bare, count = bare_forward(folder, args.backbone, args.input_size, args.batch_size)
            bare_times.append(bare)
            for loader in ("threads", "workers"):
                e2e = end_to_end(folder, args.backbone, args.input_size, args.batch_size, loader,
                                 work / f"store-{loader}-{trial}")
                if loader not in rows or e2e["cold_s"] < rows[loader]["cold_s"]:
                    rows[loader] = e2e
        for row in rows.values():
            row["bare_s"] = min(bare_times)
        bf16 = min(
            bare_forward(folder, args.backbone, args.input_size, args.batch_size, bf16=True)[0]
            for _ in range(2))
        rss_n = peak_rss(folder, args.backbone, args.input_size, work / "rss-n")
        rss_4n = peak_rss(folder4, args.backbone, args.input_size, work / "rss-4n")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{args.backbone} (random weights) at {args.input_size}px, {count} JPEGs, "
          f"batch {args.batch_size}")
    for loader, row in rows.items():
        build = row["stats"]["build_seconds"]
        print(f"  {loader:<8} efficiency bare/end-to-end {row['bare_s'] / row['cold_s']:.2f}  "
              f"(bare {count / row['bare_s']:.1f} img/s, "
              f"end-to-end {count / row['cold_s']:.1f} img/s)  "
              f"target >= 0.9")
        print(f"  {'':<8} without the one-time model build ({build:.2f} s): "
              f"{row['bare_s'] / (row['cold_s'] - build):.2f}")
    print(f"  bare forward with --precision bf16: {count / bf16:.1f} img/s, "
          f"{min(bare_times) / bf16:.2f}x the fp32 forward")
    best = rows["threads"]
    print(f"  cache-hit rerun {best['hit_s'] * 1000:.0f} ms vs cold {best['cold_s']:.2f} s "
          f"({best['cold_s'] / best['hit_s']:.0f}x)")
    print(f"  peak RSS: {n} images {rss_n:.0f} MiB, {4 * n} images {rss_4n:.0f} MiB "
          f"-> {rss_4n / rss_n:.2f}x growth   target < 1.2")
    print(json.dumps({"rows": rows, "rss_mib": [rss_n, rss_4n]}, default=str))


if __name__ == "__main__":
    main()
