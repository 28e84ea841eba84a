"""Every trained probe on ``scenes`` with ``test_pixels``, beside its trivial predictor.

    python benchmarks/signal_bench.py [--per-split N] [--size S] [--tasks a,b] [--epochs E]
                                      [--lr LR] [--store DIR]

Runs each trained dense, box and pair probe through ``vbstore.get_result`` (a store of its own
unless ``--store``) with ``test_pixels`` (fixed filters, nothing learned; docs/backbones.md) on
a generated ``scenes`` set, trained on train and scored on val, and prints per probe its
headline, the trivial predictor's on the same val split (``baseline_metrics``; for
``relative_pose`` the train pairs' mean pose), the margin, the final train loss and the wall
seconds. ``--epochs``/``--lr`` override the probe3d schedule of the dense and box probes
(10 epochs at 5e-4 by default); ``relative_pose`` keeps its own. These are the figures in
docs/tasks.md ("Measured with test_pixels").
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

import vbstore
from vbstore.data import load_manifest
from vbstore.engine import baseline_metrics, dense_tasks, open_dense_result, scenes_setup
from vbstore.tasks import get_task
from vbstore.tasks.relative_pose import trivial_metrics

BOX_TASKS = ("detection", "instance_segmentation")


def _pose_trivial(store, data: str) -> dict[str, float]:
    def pairs(split: str) -> torch.Tensor:
        view = load_manifest(store, data, split=split, layout="pairs")
        return torch.tensor(view.doc["pairs"], dtype=torch.float64)

    return trivial_metrics(pairs("train"), pairs("val"))


def run(store, task: str, per_split: int, size: int, schedule: dict) -> dict:
    """One probe: its headline, the trivial predictor's, and what it cost."""
    data = f"scenes:per_split={per_split},size={size},seed=0"
    options, params = ({"target": "boxes"}, {}) if task in BOX_TASKS else ({}, {})
    if task not in (*BOX_TASKS, "relative_pose"):
        data, options, params = scenes_setup(task, per_split, size, 0)
    if task != "relative_pose":
        params = {**params, **schedule}
    start = time.perf_counter()
    result = vbstore.get_result("test_pixels", task, data, data, store=store, split="val",
                                train_split="train", weights="default", params=params,
                                data_options=options, progress=False)
    seconds = time.perf_counter() - start
    if task == "relative_pose":
        trivial = _pose_trivial(store, data)
    else:
        trivial = baseline_metrics(open_dense_result(store, result.id, data, split="val",
                                                     data_options=options))
    spec = get_task(task)
    direction = next(m.direction for m in spec.metrics if m.name == spec.headline)
    value, base = result.metrics[spec.headline], trivial[spec.headline]
    return {"task": task, "metric": spec.headline, "direction": direction, "value": value,
            "trivial": base, "margin": value - base if direction == "higher" else base - value,
            "train_loss": (result.record.train_metrics or {}).get("train_loss"),
            "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-split", type=int, default=32)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--tasks", default=",".join([*dense_tasks(), "relative_pose"]))
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--store", default=None)
    args = parser.parse_args()
    schedule = {k: v for k, v in (("epochs", args.epochs), ("lr", args.lr)) if v is not None}
    root = Path(args.store) if args.store else Path(tempfile.mkdtemp()) / "store"
    print(f"test_pixels on scenes:per_split={args.per_split},size={args.size} (train -> val), "
          f"schedule {schedule or 'default'}; store {root}")
    print(f"{'task':24} {'headline':28} {'probe':>8} {'trivial':>8} {'margin':>8} "
          f"{'train_loss':>10} {'s':>6}")
    with vbstore.Store(root) as store:
        for task in args.tasks.split(","):
            row = run(store, task, args.per_split, args.size, schedule)
            loss = row["train_loss"]
            print(f"{task:24} {row['metric'] + ' (' + row['direction'] + ')':28} "
                  f"{row['value']:8.4f} {row['trivial']:8.4f} {row['margin']:+8.4f} "
                  f"{loss if loss is None else round(loss, 4)!s:>10} {row['seconds']:6.1f}",
                  flush=True)


if __name__ == "__main__":
    main()
