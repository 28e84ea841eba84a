"""Data where it lives, side by side in one run: a CIFAR-format torchvision source, a saved
``datasets`` dataset, WebDataset shards and a plain folder of the same PNGs.

    python benchmarks/sources_bench.py [--images N]

For each, the first ``load_manifest`` (a source is written once under the store, then hashed)
and the second (an unchanged source: its key, then the manifest alias), with the ratio of each
to the folder's. Synthetic images; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import io
import os
import pickle
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def write_sources(work: Path, n: int) -> dict[str, tuple[str, dict]]:
    import datasets
    import numpy as np

    from vbstore.data import png_bytes

    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)
    labels = [int(x) for x in rng.integers(0, 10, n)]
    names = [f"c{i}" for i in range(10)]
    pngs = [png_bytes(p) for p in pixels]
    cifar = work / "tv" / "cifar-10-batches-py"
    cifar.mkdir(parents=True)
    empty = {"data": np.zeros((0, 3072), dtype=np.uint8), "labels": []}
    for k in range(1, 6):
        (cifar / f"data_batch_{k}").write_bytes(pickle.dumps(empty))
    (cifar / "test_batch").write_bytes(pickle.dumps(
        {"data": pixels.transpose(0, 3, 1, 2).reshape(n, -1), "labels": labels}))
    (cifar / "batches.meta").write_bytes(pickle.dumps({"label_names": names}))
    features = datasets.Features({"img": datasets.Image(),
                                  "label": datasets.ClassLabel(names=names)})
    table = {"img": [{"bytes": b, "path": None} for b in pngs], "label": labels}
    datasets.DatasetDict({"test": datasets.Dataset.from_dict(table, features=features)}
                         ).save_to_disk(str(work / "hf"))
    (work / "wds" / "test").mkdir(parents=True)
    with tarfile.open(work / "wds" / "test" / "0.tar", "w") as tar:
        for i, (data, label) in enumerate(zip(pngs, labels, strict=True)):
            for suffix, body in ((".png", data), (".cls", str(label).encode())):
                info = tarfile.TarInfo(f"{i:06d}{suffix}")
                info.size = len(body)
                tar.addfile(info, io.BytesIO(body))
    (work / "wds" / "classnames.txt").write_text("\n".join(names) + "\n")
    for i, (data, label) in enumerate(zip(pngs, labels, strict=True)):
        path = work / "folder" / names[label] / f"{i:06d}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    old = time.time() - 60  # past the file-state cache's racy window
    for path in work.rglob("*"):
        os.utime(path, (old, old))
    return {"folder": (str(work / "folder"), {}),
            "torchvision": ("torchvision:CIFAR10", {"split": "test",
                                                    "dataset_root": str(work / "tv")}),
            "hf": (f"hf:{work / 'hf'}", {"split": "test"}),
            "wds": (f"wds:{work / 'wds'}", {"split": "test"})}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--images", type=int, default=2000)
    args = parser.parse_args()
    from torchvision.datasets import cifar

    from vbstore import Store
    from vbstore.data import load_manifest

    # synthetic batches cannot match CIFAR's published md5s: check that the files exist
    cifar.check_integrity = lambda path, md5=None: os.path.isfile(path)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        sources = write_sources(work, args.images)
        rows = {}
        with Store(work / "store") as store:
            for name, (data, options) in sources.items():
                first = timed(lambda d=data, o=options: load_manifest(store, d, **o))
                second = timed(lambda d=data, o=options: load_manifest(store, d, **o))
                rows[name] = (first, second)
        base = rows["folder"]
        print(f"{args.images} images, 32x32 PNG")
        print(f"{'source':<12} {'first s':>8} {'x folder':>9} {'again s':>8} {'x folder':>9}")
        for name, (first, second) in rows.items():
            print(f"{name:<12} {first:8.3f} {first / base[0]:9.2f} {second:8.3f} "
                  f"{second / base[1]:9.2f}")


if __name__ == "__main__":
    main()
