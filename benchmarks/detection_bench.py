"""Detection: metric throughput; end to end on generated scenes, cold vs cached, beside VisBench.

Three measurements, printed side by side with their ratios:

1. Evaluation throughput of the scoring code (``DetectionScorer``: VOC all-point AP + pycocotools
   COCO AP) on N synthetic images (default 5,000): 1-6 ground-truth boxes of 20 classes per
   image, detections = jittered ground truth plus random false positives.
2. ``vbstore get result --task detection`` on ``scenes`` written as a VOC folder: a cold run (a
   fresh store: manifests, features, head, result) and a second run (the cached answer).
3. The same VOC folder and the same seeded random ``test_vit`` weights through VisBench's
   ``detection`` probe, when a scratch venv with ``visbench`` is given (``--peer``): the weights
   go over as a TorchScript trace, wrapped by VisBench's own ``CustomBackbone``; VisBench runs
   in its own process, cold (an empty feature cache) then again (features cached). VisBench is
   never imported here and none of its code is copied.

```
python benchmarks/detection_bench.py --images 5000 --per-split 48 --size 64 \
    --peer /tmp/peer/bin/python
```
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

import numpy as np
import torch

CLASSES = ("box", "sphere")


def synthetic(n: int, seed: int = 0) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    rng = np.random.default_rng(seed)
    truths, dets = [], []
    for _ in range(n):
        k = int(rng.integers(1, 7))
        xy = rng.uniform(0, 180, (k, 2))
        wh = rng.uniform(8, 44, (k, 2))
        gt = np.concatenate([xy, xy + wh, rng.integers(0, 20, (k, 1)),
                             (rng.random((k, 1)) < 0.1)], 1)
        jitter = gt[:, :4] + rng.normal(0, 3, (k, 4))
        fp = int(rng.integers(0, 15))
        fxy = rng.uniform(0, 180, (fp, 2))
        found = np.concatenate([
            np.concatenate([jitter, rng.uniform(0.3, 1, (k, 1)), gt[:, 4:5]], 1),
            np.concatenate([fxy, fxy + rng.uniform(8, 44, (fp, 2)), rng.uniform(0.05, 0.6, (fp, 1)),
                            rng.integers(0, 20, (fp, 1))], 1)])
        truths.append(torch.tensor(gt, dtype=torch.float32))
        dets.append(torch.tensor(found, dtype=torch.float32))
    return dets, truths


def metric_throughput(n: int) -> dict[str, float]:
    from vbstore.tasks import _boxes

    dets, truths = synthetic(n)
    start = time.perf_counter()
    scorer = _boxes.DetectionScorer("detection", 20, masks=False)
    for d, t in zip(dets, truths, strict=True):
        scorer.add(d, t, None, (224, 224))
    metrics = scorer.result()
    wall = time.perf_counter() - start
    start = time.perf_counter()
    _boxes.voc_ap(dets, truths, 20)
    voc = time.perf_counter() - start
    start = time.perf_counter()
    _boxes.coco_map(dets, truths, 20)
    coco = time.perf_counter() - start
    return {"images": n, "wall_s": wall, "images_per_s": n / wall, "voc_ap_s": voc,
            "coco_ap_s": coco, "map_50": metrics["map_50"], "map_50_95": metrics["map_50_95"]}


def scenes_as_voc(per_split: int, size: int, root: Path) -> Path:
    """``scenes`` written by vbstore, its JSON boxes converted to one VOC folder (both tools
    read these same files); boxes under 2 pixels wide or high are left out."""
    from vbstore.data import make_scenes

    scenes = make_scenes(root / "scenes", per_split=per_split, size=size)
    voc = root / "voc"
    for folder in ("JPEGImages", "Annotations", "ImageSets/Main"):
        (voc / folder).mkdir(parents=True, exist_ok=True)
    for split in ("train", "val"):
        stems = []
        for i in range(per_split):
            stem = f"{split}_{i:04d}"
            stems.append(stem)
            (voc / "JPEGImages" / f"{stem}.png").write_bytes(
                (scenes / split / "images" / f"{i:04d}.png").read_bytes())
            doc = json.loads((scenes / split / "boxes" / f"{i:04d}.json").read_bytes())
            objects = "".join(
                f"<object><name>{o['class']}</name><difficult>0</difficult><bndbox>"
                f"<xmin>{o['box'][0] + 1}</xmin><ymin>{o['box'][1] + 1}</ymin>"
                f"<xmax>{o['box'][2]}</xmax><ymax>{o['box'][3]}</ymax></bndbox></object>"
                for o in doc["objects"]
                # VisBench reads VOC's xmax as a 0-based index and refuses a 1-pixel box
                if min(o["box"][2] - o["box"][0], o["box"][3] - o["box"][1]) >= 2)
            (voc / "Annotations" / f"{stem}.xml").write_text(
                f"<annotation><size><width>{size}</width><height>{size}</height></size>"
                f"{objects}</annotation>")
        (voc / "ImageSets/Main" / f"{split}.txt").write_text("".join(s + "\n" for s in stems))
    (voc / "classes.txt").write_text("".join(c + "\n" for c in CLASSES))
    return voc


def vbstore_runs(voc: Path, size: int, home: Path, probe: dict[str, float]) -> list[dict]:
    env = dict(os.environ, VBSTORE_HOME=str(home))
    cmd = [sys.executable, "-m", "vbstore", "get", "result", "--backbone", "test_vit",
           "--weights", "random", "--input-size", str(size), "--task", "detection",
           "--data", str(voc), "--split", "val", "--train-data", str(voc), "--train-split",
           "train", "--classes", str(voc / "classes.txt"), "--json",
           *[a for k, v in probe.items() for a in ("-p", f"{k}={v}")]]
    out = []
    for label in ("cold", "cached"):
        start = time.perf_counter()
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
        if done.returncode:
            raise SystemExit(f"vbstore failed: {done.stderr.strip()}")
        record = json.loads(done.stdout)
        out.append({"run": label, "wall_s": wall, "metrics": record["record"]["metrics"],
                    "from_cache": record["from_cache"]})
    return out


DRIVER = r"""
import json, sys, torch
from torchvision import transforms
import visbench
from visbench.backbones.custom import CustomBackbone
from visbench.cache import FeatureCache
from visbench.data.detection import DetectionFolderDataset

trace, voc, size, cache_dir = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
probe = json.loads(sys.argv[5])
module = torch.jit.load(trace)
prep = transforms.Compose([transforms.Resize(size), transforms.CenterCrop(size),
                           transforms.ToTensor(), transforms.Normalize([0.5] * 3, [0.5] * 3)])
def feats(m, x):
    tokens = m(x)
    g = int((tokens.shape[1] - 1) ** 0.5)
    return tokens[:, 1:], tokens[:, 0], (g, g)
if True:
    bb = CustomBackbone(module, prep, name="test_vit_random", has_cls_token=True,
                        feature_fn=feats, image_size=size, device="cpu")
    data = {s: DetectionFolderDataset(voc, stems=f"{voc}/ImageSets/Main/{s}.txt",
                                      image_size=size, classes=("box", "sphere"), split=s)
            for s in ("train", "val")}
    result = visbench.run(bb, "detection", data["val"], data["train"],
                          cache=FeatureCache(cache_dir), device="cpu", num_classes=2,
                          image_size=size, **probe)
    print(json.dumps({k: float(v) for k, v in result.metrics.items()
                      if isinstance(v, (int, float))}))
"""


def visbench_runs(peer: str, voc: Path, size: int, work: Path, probe: dict[str, float]
                  ) -> list[dict] | str:
    from vbstore.backbones import build_backbone

    backbone = build_backbone("test_vit", weights="random", input_size=size)
    module = backbone.module.eval()

    class LastBlock(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.inner.forward_blocks(x)[-1]

    trace = torch.jit.trace(LastBlock(module), torch.zeros(1, 3, size, size), check_trace=False)
    trace.save(str(work / "test_vit.pt"))
    (work / "driver.py").write_text(DRIVER)
    out = []
    for label in ("cold", "cached"):  # one process each, timed from outside as vbstore's are
        start = time.perf_counter()
        done = subprocess.run([peer, str(work / "driver.py"), str(work / "test_vit.pt"),
                               str(voc), str(size), str(work / "vb_cache"), json.dumps(probe)],
                              capture_output=True, text=True, check=False,
                              env={**os.environ, "PYTHONPATH": ""})
        wall = time.perf_counter() - start
        if done.returncode:
            return f"visbench failed: {done.stderr.strip().splitlines()[-1:]}"
        out.append({"run": label, "wall_s": wall,
                    "metrics": json.loads(done.stdout.strip().splitlines()[-1])})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=5000)
    parser.add_argument("--per-split", type=int, default=48)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--peer", help="python of a scratch venv with visbench installed")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args()
    probe = {"epochs": args.epochs, "lr": args.lr, "batch_size": args.batch_size}
    run(args.images, args.per_split, args.size, args.peer, probe)


def run(images: int, per_split: int, size: int, peer: str | None, probe: dict) -> dict:
    """Print the three measurements side by side and return their numbers (``pairs_bench.py``'s
    ``detection`` section calls this too)."""
    out: dict = {}
    if images:
        m = out["metrics"] = metric_throughput(images)
        print(f"metric code: {m['images']} images in {m['wall_s']:.2f} s = "
              f"{m['images_per_s']:.0f} images/s (VOC AP {m['voc_ap_s']:.2f} s, "
              f"pycocotools {m['coco_ap_s']:.2f} s); map_50 {m['map_50']:.3f}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        voc = scenes_as_voc(per_split, size, work)
        ours = out["vbstore"] = vbstore_runs(voc, size, work / "home", probe)
        for r in ours:
            print(f"vbstore  {r['run']:6s} {r['wall_s']:7.2f} s  "
                  f"map_50 {r['metrics']['map_50']:.4f} map_50_95 {r['metrics']['map_50_95']:.4f}")
        print(f"vbstore cold/cached: {ours[0]['wall_s'] / ours[1]['wall_s']:.1f}x")
        if peer:
            theirs = out["visbench"] = visbench_runs(peer, voc, size, work, probe)
            if isinstance(theirs, str):
                print(theirs)
                return out
            for r in theirs:
                shown = " ".join(f"{k} {v:.4f}" for k, v in sorted(r["metrics"].items()))
                print(f"visbench {r['run']:6s} {r['wall_s']:7.2f} s  {shown}")
            for a, b in zip(ours, theirs, strict=True):
                print(f"{a['run']}: visbench/vbstore wall {b['wall_s'] / a['wall_s']:.2f}x")
    return out

if __name__ == "__main__":
    main()
