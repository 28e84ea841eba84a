"""Reading NAVI's poses directly, side by side with the same pairs converted to ``pairs.csv``.

    python benchmarks/navi_bench.py [--objects N] [--scenes S] [--views V] [--trials T] [--json]

Builds a NAVI-shaped tree (N objects, S scenes each of V views, tiny PNGs, poses from scipy) and
prints, for the val split: the first read (every image hashed and decoded), a repeated read
(the listing, every ``annotations.json`` parsed and the pairs formed again, then the stored
manifest), and the repeated read of the same pairs written as ``pairs.csv`` over hard links to
the same images, with the ratio of the two repeated reads (best of T, interleaved).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image
from scipy.spatial.transform import Rotation

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vbstore import Store
from vbstore.data import load_manifest


def build(root: Path, objects: int, scenes: int, views: int) -> None:
    rng = np.random.default_rng(0)
    for o in range(objects):
        for s in range(scenes):
            folder = root / f"object_{o:02d}" / f"multiview-{s:02d}-pixel_5"
            (folder / "images").mkdir(parents=True)
            items = []
            for v in range(views):
                x, y, z, w = Rotation.random(random_state=rng).as_quat()
                name = f"{v:03d}.png"
                Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)).save(
                    folder / "images" / name)
                items.append({"filename": name, "split": "val" if v % 5 == 0 else "train",
                              "camera": {"q": [w, x, y, z], "t": list(rng.uniform(-200, 200, 3))}})
            (folder / "annotations.json").write_text(json.dumps(items))


def as_table(view, root: Path) -> None:
    (root / "val").mkdir(parents=True)
    with open(root / "val" / "pairs.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "image_a", "image_b", "qw", "qx", "qy", "qz", "tx", "ty", "tz"])
        for a, b, *pose in view.doc["pairs"]:
            writer.writerow([f"{view.names[a]}|{view.names[b]}", view.names[a], view.names[b],
                             *map(repr, pose)])
    for name in view.names:
        (root / "val" / name).parent.mkdir(parents=True, exist_ok=True)
        os.link(view.root / name, root / "val" / name)


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=12)
    parser.add_argument("--scenes", type=int, default=10)
    parser.add_argument("--views", type=int, default=25)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "store") as store:
        navi = Path(tmp) / "navi"
        build(navi, args.objects, args.scenes, args.views)
        view, cold = timed(lambda: load_manifest(store, navi, split="val"))
        as_table(view, Path(tmp) / "table")
        again = load_manifest(store, Path(tmp) / "table", split="val", layout="pairs")
        assert again.doc["pairs"] == view.doc["pairs"]  # the same pairs compared
        warms, tables = [], []
        for _ in range(args.trials):  # interleaved, best of the trials
            warms.append(timed(lambda: load_manifest(store, navi, split="val"))[1])
            tables.append(timed(lambda: load_manifest(store, Path(tmp) / "table", split="val",
                                                      layout="pairs"))[1])
        warm, table = min(warms), min(tables)
        images = args.objects * args.scenes * args.views
        figures = {"images": images, "val_images": len(view), "pairs": len(view.doc["pairs"]),
                   "navi_first_s": cold, "navi_again_s": warm, "table_again_s": table,
                   "navi_over_table": warm / table}
        print(f"{images} images, {len(view)} in val, {len(view.doc['pairs'])} val pairs")
        print(f"navi, first read      {cold:8.3f} s")
        print(f"navi, read again      {warm:8.3f} s")
        print(f"pairs.csv, read again {table:8.3f} s   navi / pairs.csv = {warm / table:.2f}")
        if args.json:
            print(json.dumps(figures))


if __name__ == "__main__":
    main()
