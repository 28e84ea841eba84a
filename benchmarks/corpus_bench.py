"""The reference corpus: its cached rebuild, and how efficiently Lite0's features are extracted.

    python benchmarks/corpus_bench.py [--work DIR] [--images N] [--skip-corpus]

1. **Corpus rebuild** (``vbstore.suites.reference.build``): with ``--work DIR`` holding a store
   a previous build filled (``python -m vbstore.suites.reference build registry.db`` leaves none;
   pass the same ``--work`` to ``reference.build`` once, cold, to make one), every result is
   answered from the store: prints the wall time, the number of results and the seconds per
   result (goal: at most 0.05 s each). Without ``--work`` the build runs cold in a temporary
   folder and prints the same figures (the cold build time).
2. **Extraction efficiency** of ``efficientnet_lite0``: ``vbstore.get_features`` end to end
   (decode, preprocess, forward, float32 pack written) on N generated 64 px images in a fresh
   store, in images/s, divided by the bare forward (``Backbone.extract``) on the same
   preprocessed tensors in the same batches (goal: at least 0.95).
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

import vbstore
from vbstore.backbones import build_backbone
from vbstore.data import write_png
from vbstore.suites import reference

BATCH = 32


def corpus(work: Path | None) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "registry.db"
        start = time.perf_counter()
        reference.build(out, work=work)
        seconds = time.perf_counter() - start
        conn = sqlite3.connect(out)
        results = conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]
        evaluations = conn.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0]
        conn.close()
    state = "cached (every result from the store)" if work else "cold"
    print(f"corpus build, {state}: {seconds:.1f} s for {results} results and {evaluations} "
          f"evaluations: {seconds / results:.3f} s per result (goal <= 0.05 cached)")


def efficiency(count: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        rng = np.random.default_rng(0)
        for i in range(count):
            write_png(root / "images" / "x" / f"{i:04d}.png",
                      rng.integers(0, 256, (64, 64, 3), dtype=np.uint8))
        with vbstore.Store(root / "store") as store:
            # warm: the build and the model load are not extraction
            vbstore.get_features("efficientnet_lite0", str(root / "images"), store=store,
                                 limit=BATCH, progress=False)
            start = time.perf_counter()
            result = vbstore.get_features("efficientnet_lite0", str(root / "images"),
                                          store=store, batch_size=BATCH, progress=False)
            end_to_end = time.perf_counter() - start
            assert not result.from_cache
        backbone = build_backbone("efficientnet_lite0")
        images = sorted((root / "images" / "x").glob("*.png"))
        from PIL import Image

        tensors = torch.stack([backbone.cfg(Image.open(p)) for p in images])
        with torch.inference_mode():
            start = time.perf_counter()
            for i in range(0, len(tensors), BATCH):
                backbone.extract(tensors[i:i + BATCH], layers=[-1], pooling="gap")
            bare = time.perf_counter() - start
    print(f"efficientnet_lite0 extraction, {count} images: end to end {count / end_to_end:.1f} "
          f"img/s, bare forward {count / bare:.1f} img/s: efficiency "
          f"{bare / end_to_end:.3f} (goal >= 0.95)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=None,
                        help="a folder holding a filled corpus store (cached rebuild)")
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--skip-corpus", action="store_true")
    args = parser.parse_args()
    if not args.skip_corpus:
        corpus(args.work)
    efficiency(args.images)


if __name__ == "__main__":
    main()
