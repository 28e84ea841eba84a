"""Fine-tuning the last N blocks: the stored frozen prefix, side by side (docs/finetune.md).

    python benchmarks/finetune_bench.py [--backbone SPEC] [--weights W] [--data SRC]
                                        [--limit K] [--blocks N] [--epochs E] [--threads T]
                                        [--dense]

Prints, for one backbone and one train/eval split:
- the first fine-tuning run (frozen prefix of both splits computed and stored, blocks and head
  trained, eval features under the fine-tuned weights) vs a second run with another
  ``--backbone-lr`` on the same data (prefix read back): wall of each, their ratio, and the
  images sent through the frozen blocks by each (the forward passes the second one avoids);
- the frozen probe on the same data, run first (so it also pays for reading the data), for
  scale;
- the stored bytes of the fine-tuned weights artifact (only the tensors training changed) vs
  the full weights (every tensor of the backbone), and the prefix blobs' bytes.

Defaults: efficientnet_lite0 (its packaged pretrained weights, offline) on 20 digits per class;
``--backbone test_vit --weights random`` runs in seconds. ``--dense``: the dense row instead,
semantic segmentation of generated scenes (``scenes:per_split=K,size=32``, 5 classes, miou),
the same figures for a dense head trained with the blocks.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backbone", default="efficientnet_lite0")
    parser.add_argument("--weights", default="default")
    parser.add_argument("--data", default="sklearn:digits")
    parser.add_argument("--limit", type=int, default=20, help="per class, in each split")
    parser.add_argument("--blocks", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's)")
    parser.add_argument("--dense", action="store_true",
                        help="semantic segmentation of generated scenes (--limit per split)")
    args = parser.parse_args()

    import torch

    import vbstore
    from vbstore import Store
    from vbstore.heads import head_record

    if args.threads:
        torch.set_num_threads(args.threads)
    store = Store(Path(tempfile.mkdtemp(prefix="finetune-bench-")) / "store")
    common = {"split": "val", "train_split": "train", "limit": args.limit,
              "train_limit": args.limit, "weights": args.weights, "store": store,
              "progress": False, "params": {"epochs": args.epochs, "batch_size": 32}}
    task, data, metric = "classification", args.data, "top1"
    if args.dense:  # a dense head (1x1 conv on the last block's map) trained with the blocks
        task, data, metric = "semantic_segmentation", f"scenes:per_split={args.limit},size=32", \
            "miou"
        common = {"split": "val", "train_split": "train", "weights": args.weights,
                  "store": store, "progress": False, "data_options": {"target": "labels"},
                  "params": {"epochs": args.epochs, "batch_size": 8, "num_classes": 5}}

    def run(**kw):
        start = time.perf_counter()
        result = vbstore.get_result(args.backbone, task, data, data, **common, **kw)
        return time.perf_counter() - start, result

    frozen_s, frozen = run()  # first: it also pays for reading the data into manifests
    cold_s, first = run(finetune_blocks=args.blocks, backbone_lr=1e-4)
    warm_s, second = run(finetune_blocks=args.blocks, backbone_lr=1e-3)
    samples = first.record.data["train"]["samples"] + first.record.data["eval"]["samples"]
    print(f"{args.backbone} ({args.weights}), {task} on {data}: {samples} images, last "
          f"{args.blocks} block(s), {args.epochs} epochs")
    print(f"  first fine-tuning run   {cold_s:8.2f} s   images through the frozen blocks "
          f"{first.extracted}")
    print(f"  second (another lr)     {warm_s:8.2f} s   images through the frozen blocks "
          f"{second.extracted}   ({first.extracted - second.extracted} forward passes "
          f"avoided)")
    print(f"  second / first          {warm_s / cold_s:8.3f}")
    print(f"  frozen probe (cold)     {frozen_s:8.2f} s   (data read too; "
          f"{metric} {frozen.metrics[metric]:.3f}; "
          f"fine-tuned {first.metrics[metric]:.3f} at lr 1e-4, "
          f"{second.metrics[metric]:.3f} at 1e-3)")
    tuned = head_record(store, first.record.inputs["head"])["finetune"]["weights"]
    tuned_bytes = store.info(tuned).size
    backbone = vbstore.engine.resolve_backbone(store, args.backbone, weights=args.weights).load()
    full = sum(t.numel() * t.element_size() for t in backbone.module.state_dict().values())
    prefix = sum(store.info(first.record.inputs[r]).size for r in ("train_prefix", "eval_prefix"))
    print(f"  fine-tuned weights      {tuned_bytes:>12,d} bytes   full weights {full:,d} bytes  "
          f"ratio {tuned_bytes / full:.4f}")
    print(f"  frozen prefix (both)    {prefix:>12,d} bytes   ({prefix / samples:,.0f} per image)")


if __name__ == "__main__":
    main()
