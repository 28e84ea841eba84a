"""Pair probes, side by side in one run: correspondence end to end cold, reused and cached, and
the throughput of the pair metric code.

    python benchmarks/pairs_bench.py [--images N] [--input-size S] [--metric-images N]
                                     [--sections correspondence,metrics,visbench]
                                     [--peer-python PATH]

Each section is a function ``section(args) -> dict`` in :data:`SECTIONS`, printing its own lines
and returning its numbers (``--json`` prints them all at the end).

Prints:
- ``correspondence``: through the engine (a store of its own, ``test_vit`` with random weights
  on a flat folder of N generated scene images): the first run (the images' and their warped
  views' dense features extracted, the views written), a run with other matching parameters
  (every feature stored: matching only), and the same call again (the stored result), with the
  ratios to the first run;
- ``visbench`` (asked for by name): the same correspondence through VisBench 0.27's public API
  in a scratch venv (``--peer-python``), on the same images with the same weights (vbstore's
  ``test_vit`` rebuilt there as a ``CustomBackbone``), cold and cached, each in a fresh
  process, with the ratios; VisBench is never imported by vbstore;
- ``metrics``: images (pairs) per second of the correspondence metric code at N images with a
  ViT-S/14 geometry (384 channels, a 16 x 16 grid at 224 px; images 300 x 240, resized and
  cropped as a real backbone would), features read from a small pool so memory stays flat;
  and pairs per second of the relative-pose metrics at N pairs;
- ``detection`` (asked for by name): ``benchmarks/detection_bench.py``'s figures (metric-code
  throughput at --metric-images images, scenes as a VOC folder cold and cached, and VisBench's
  detection beside them when ``visbench`` is asked for too).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def flat_images(root: Path, count: int, size: int) -> Path:
    """A flat folder of ``count`` generated scene images (``size`` px)."""
    from vbstore.data import make_scenes

    scenes = make_scenes(root / "scenes", per_split=count, seed=11, size=size)
    flat = root / "flat"
    flat.mkdir()
    for image in sorted((scenes / "val" / "images").glob("*.png")):
        shutil.copy(image, flat / image.name)
    return flat


def correspondence(args) -> dict:
    """Correspondence end to end: cold, features reused, cached."""
    import vbstore

    work = Path(tempfile.mkdtemp(prefix="pairs-bench-"))
    try:
        flat = flat_images(work, args.images, 2 * args.input_size)
        common = dict(weights="random", input_size=args.input_size, progress=False)
        runs = {}
        with vbstore.Store(work / "store") as store:
            for label, params in (("cold", {}), ("reused", {"ratio": 0.8}), ("cached", {})):
                start = time.perf_counter()
                result = vbstore.get_result("test_vit", "correspondence", str(flat),
                                            store=store, params=params, **common)
                runs[label] = {"seconds": time.perf_counter() - start,
                               "from_cache": result.from_cache, "metrics": result.metrics}
            chance = random_matching(store, flat, args.input_size)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    cold = runs["cold"]["seconds"]
    print(f"correspondence, test_vit (random weights, {args.input_size} px), "
          f"{args.images} images:")
    for label, run in runs.items():
        print(f"  {label:<7} {run['seconds']:8.2f} s   x{cold / run['seconds']:7.1f} faster "
              f"than cold   recall@10px {run['metrics']['recall@10px']:.3f}  "
              f"num_matches {run['metrics']['num_matches']:.1f}")
    m = runs["cold"]["metrics"]
    print("  cold metrics: " + ", ".join(f"{k} {v:.4f}" for k, v in m.items()))
    print("  random features, same warps: " + ", ".join(
        f"{k} {chance[k]:.4f}" for k in ("recall@1px", "recall@5px", "recall@10px", "auc@10px",
                                         "num_matches")))
    return {**runs, "random_features": chance}


def random_matching(store, flat: Path, input_size: int) -> dict:
    """The metrics of Gaussian noise features on the same images and warps (chance)."""
    import torch

    from vbstore.backbones import BackboneCfg
    from vbstore.data import image_sizes, load_manifest, view_homographies
    from vbstore.tasks import TensorSplit, WarpPairs, get_task

    view = load_manifest(store, str(flat))
    n, grid = len(view.samples), input_size // 8  # test_vit: patch 8
    g = torch.Generator().manual_seed(0)

    def noise():
        return TensorSplit([torch.randn(n, 32, grid, grid, generator=g)],
                           torch.zeros(n, 1, 1, 1), target_kind="image")

    cfg = BackboneCfg(input_size=input_size, resize=input_size)  # test_vit's: squash-free resize
    return get_task("correspondence").evaluate_views(WarpPairs(
        noise(), noise(), view_homographies(view, 0, 0.2), image_sizes(view), cfg.geometry,
        input_size))


class _Rows:
    """Dense feature rows drawn from a fixed pool of 64 random maps (row i is map i mod 64), so
    N images cost neither memory nor random draws in the timed code."""

    def __init__(self, n: int, channels: int, grid: int, seed: int) -> None:
        import torch

        self.n, self.grid_hw = n, (grid, grid)
        g = torch.Generator().manual_seed(seed)
        self.pool = torch.randn(64, channels, grid, grid, generator=g)

    def __len__(self) -> int:
        return self.n

    def feats(self, positions):
        import torch

        return [self.pool[torch.as_tensor(positions) % len(self.pool)]]


def metrics(args) -> dict:
    """Throughput of the correspondence and relative-pose metric code."""
    import torch

    from vbstore.backbones import BackboneCfg
    from vbstore.data import random_homography
    from vbstore.tasks import WarpPairs, get_task
    from vbstore.tasks.relative_pose import pose_metrics

    n, size = args.metric_images, 224
    cfg = BackboneCfg(input_size=size, resize=256)
    sizes = np.array([[300, 240]] * n)  # the backbone resizes and crops them, as real images
    homographies = np.stack([random_homography(f"{i:064x}", (300, 240), 0, 0.2)
                             for i in range(n)])
    pairs = WarpPairs(_Rows(n, 384, 16, 0), _Rows(n, 384, 16, 1), homographies, sizes,
                      cfg.geometry, size)
    start = time.perf_counter()
    get_task("correspondence").evaluate_views(pairs)
    corr = time.perf_counter() - start
    g = torch.Generator().manual_seed(0)
    truth = torch.cat([torch.zeros(n, 2), torch.nn.functional.normalize(
        torch.randn(n, 4, generator=g), dim=1), torch.randn(n, 3, generator=g)], dim=1).double()
    rotations = torch.linalg.qr(torch.randn(n, 3, 3, generator=g))[0]
    start = time.perf_counter()
    pose_metrics(rotations, torch.randn(n, 3, generator=g), truth)
    pose = time.perf_counter() - start
    out = {"correspondence_images_per_s": n / corr, "relative_pose_pairs_per_s": n / pose}
    print(f"metric code at {n} images (ViT-S/14 geometry: 384 x 16 x 16, {size} px input):")
    print(f"  correspondence   {corr:8.2f} s   {out['correspondence_images_per_s']:10.0f} "
          "images/s (match, ratio test, errors, ceiling)")
    print(f"  relative_pose    {pose:8.4f} s   {out['relative_pose_pairs_per_s']:10.0f} pairs/s")
    return out


# Run by the peer's interpreter: VisBench's correspondence through its public API, with the same
# tiny ViT (vbstore's test_vit, rebuilt here from its published architecture) and weights.
_PEER = r"""
import json, sys, time
start = time.perf_counter()
import torch
from torch import nn
import visbench
from visbench.backbones.custom import CustomBackbone
from visbench.cache.feature_cache import FeatureCache
from visbench.data.pair_dataset import HomographyPairDataset

data, weights, cache, size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
DIM, DEPTH, PATCH = 32, 3, 8

class TinyViT(nn.Module):
    def __init__(self, img_size):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, DIM, PATCH, stride=PATCH)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, DIM))
        self.pos_embed = nn.Parameter(torch.zeros(1, 1 + (img_size // PATCH) ** 2, DIM))
        self.blocks = nn.ModuleList(nn.TransformerEncoderLayer(
            DIM, 2, 2 * DIM, dropout=0.0, batch_first=True, norm_first=True)
            for _ in range(DEPTH))
        self.norm = nn.LayerNorm(DIM)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        return self.norm(x)

model = TinyViT(size)
model.load_state_dict(torch.load(weights))
model.eval()

def preprocess(image):  # vbstore's test_vit: resize to the input size, bilinear, mean/std 0.5
    image = image.convert("RGB").resize((size, size), 2)
    x = torch.frombuffer(bytearray(image.tobytes()), dtype=torch.uint8)
    x = x.reshape(size, size, 3).permute(2, 0, 1).float() / 255
    return (x - 0.5) / 0.5

def features(module, x):
    tokens = module(x)
    return tokens[:, 1:], tokens[:, 0], (size // PATCH, size // PATCH)

backbone = CustomBackbone(model, preprocess, name="test_vit", embed_dim=DIM,
                          has_cls_token=True, patch_size=PATCH, feature_fn=features,
                          image_size=size, device="cpu")
dataset = HomographyPairDataset(data, split="all", max_warp=0.2, seed=0, image_size=size)
result = visbench.run(backbone, "correspondence", dataset, cache=FeatureCache(cache),
                      device="cpu")
print(json.dumps({"seconds": time.perf_counter() - start,
                  "metrics": {k: float(v) for k, v in result.metrics.items()
                              if isinstance(v, (int, float))}}))
"""

_OURS = r"""
import json, sys, time
start = time.perf_counter()
import vbstore
store = vbstore.Store(sys.argv[2])
result = vbstore.get_result("test_vit", "correspondence", sys.argv[1], store=store,
                            weights="random", input_size=int(sys.argv[3]), progress=False)
print(json.dumps({"seconds": time.perf_counter() - start, "metrics": result.metrics}))
"""


def _process(python: str, code: str, *argv: str) -> dict:
    import subprocess

    out = subprocess.run([python, "-c", code, *argv], capture_output=True, text=True,
                         check=False)
    if out.returncode:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr else "failed")
    return json.loads(out.stdout.strip().splitlines()[-1])


def visbench(args) -> dict:
    """vbstore vs VisBench correspondence, same images and weights, each run in a fresh process
    (cold: empty caches; cached: the same call again)."""
    import torch

    from vbstore.backbones import build_backbone

    peer = Path(args.peer_python)
    if not peer.exists():
        print(f"visbench: no peer interpreter at {peer} (pip install visbench into a scratch "
              "venv and pass --peer-python)")
        return {}
    work = Path(tempfile.mkdtemp(prefix="pairs-peer-"))
    try:
        flat = flat_images(work, args.images, args.input_size)
        net = build_backbone("test_vit", weights="random", input_size=args.input_size).module
        torch.save(net.state_dict(), work / "vit.pt")
        ours, theirs = {}, {}
        for label in ("cold", "cached"):
            ours[label] = _process(sys.executable, _OURS, str(flat), str(work / "store"),
                                   str(args.input_size))
            theirs[label] = _process(str(peer), _PEER, str(flat), str(work / "vit.pt"),
                                     str(work / "vbcache"), str(args.input_size))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"correspondence vs VisBench 0.27 (its public API; test_vit, random weights, "
          f"{args.images} images of {args.input_size} px, fresh process each, imports "
          "included):")
    for label in ("cold", "cached"):
        a, b = ours[label]["seconds"], theirs[label]["seconds"]
        print(f"  {label:<7} vbstore {a:7.2f} s   visbench {b:7.2f} s   ratio {b / a:6.2f}x")
    for key in ("recall@1px", "recall@5px", "recall@10px", "auc@10px", "num_matches"):
        print(f"  {key:<12} vbstore {ours['cold']['metrics'].get(key, float('nan')):.4f}   "
              f"visbench {theirs['cold']['metrics'].get(key, float('nan')):.4f}")
    print("  (the warps differ: vbstore seeds each image's homography with its content hash, "
          "VisBench with its position, so the figures agree in kind, not to the digit)")
    return {"vbstore": ours, "visbench": theirs}


def detection(args) -> dict:
    """``detection_bench.py``'s measurements (metric throughput at --metric-images, scenes as a
    VOC folder cold and cached, and VisBench beside it when ``visbench`` is also asked for)."""
    import detection_bench  # a sibling script: torch and the scenes writer

    peer = args.peer_python if "visbench" in args.sections.split(",") else None
    probe = {"epochs": 10, "lr": 5e-4, "batch_size": 8}
    return detection_bench.run(args.metric_images, args.images, args.input_size, peer, probe)


SECTIONS = {"correspondence": correspondence, "metrics": metrics, "visbench": visbench,
            "detection": detection}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=32)
    parser.add_argument("--input-size", type=int, default=64)
    parser.add_argument("--metric-images", type=int, default=5000)
    parser.add_argument("--sections", default="correspondence,metrics")
    parser.add_argument("--peer-python", default="/tmp/peer/bin/python",  # noqa: S108 - a path
                        help="an interpreter with visbench installed (section visbench)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out = {}
    for name in args.sections.split(","):
        out[name] = SECTIONS[name](args)
    if args.json:
        print(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
