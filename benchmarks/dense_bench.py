"""Dense probes, side by side in one run: streamed vs in-memory training, and what each probe
learns on ``scenes``.

    python benchmarks/dense_bench.py [--images N] [--channels C] [--epochs E] [--skip-probes]

Prints:
- training throughput (images per second over ``fit_split``) of the same probe on the same
  features, once streamed batch by batch from a float16 file on disk (a memory map, as a
  pack-backed split reads) and once from float32 tensors held in memory, with the ratio and
  the feature bytes each keeps resident;
- for every dense probe, its headline on ``scenes`` val (trained on train with the default
  probe3d schedule) next to the trivial predictor's (majority class, mean depth, mean normal,
  zero map). The features are a fixed, backbone-free stand-in: each 4x4 patch's pixels and
  their squares, randomly projected to C channels; real backbones come with the engine.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PATCH = 4
FOLDERS = {"semantic_segmentation": "labels", "generic_segmentation": "masks", "depth": "depth",
           "surface_normal": "normals", "edge": "edges", "occlusion_edge": "occlusion_edges",
           "keypoints2d": "keypoints", "corner": "images"}


def load_split(root: Path, split: str, folder: str) -> np.ndarray:
    from PIL import Image

    files = sorted((root / split / folder).glob("*.png"))
    return np.stack([np.array(Image.open(f)) for f in files])


def patch_features(images: np.ndarray, channels: int) -> np.ndarray:
    """(N, channels, H/4, W/4) float16: 4x4 patches' pixels and squares, randomly projected."""
    n, h, w, _ = images.shape
    x = images.astype(np.float32) / 255.0
    patches = x.reshape(n, h // PATCH, PATCH, w // PATCH, PATCH, 3).transpose(0, 1, 3, 2, 4, 5)
    patches = patches.reshape(n, h // PATCH, w // PATCH, -1)
    patches = np.concatenate([patches, patches**2], axis=-1)
    proj = np.random.default_rng(0).normal(size=(patches.shape[-1], channels)) / 8
    return (patches @ proj).transpose(0, 3, 1, 2).astype(np.float16)


def targets(task_name: str, raw: np.ndarray):
    import torch

    if task_name in ("semantic_segmentation", "generic_segmentation"):
        return torch.as_tensor(raw.astype(np.int64))
    if task_name == "depth":
        return torch.as_tensor(raw.astype(np.float32) / 1000.0)[:, None]
    if task_name == "surface_normal":
        return torch.as_tensor(raw.astype(np.float32) / 127.5 - 1).permute(0, 3, 1, 2)
    if task_name == "corner":
        return torch.as_tensor(raw.astype(np.float32) / 255.0).permute(0, 3, 1, 2)
    return torch.as_tensor(raw.astype(np.float32))[:, None]


class MemmapSplit:
    """A DenseSplit streaming float16 features from a file on disk, one batch at a time."""

    def __init__(self, path: Path, target, target_kind: str) -> None:
        import torch

        self.feats = np.load(path, mmap_mode="r")
        self.target = target
        self.layers = (-1,)
        self.channels = (int(self.feats.shape[1]),)
        self.grid_hw = tuple(int(s) for s in self.feats.shape[2:])
        self.target_hw = tuple(int(s) for s in target.shape[-2:])
        self.target_kind = target_kind
        self.device = torch.device("cpu")

    def __len__(self) -> int:
        return len(self.target)

    def batches(self, batch_size, *, shuffle=False, seed=0):
        import torch

        from vbstore.tasks import DenseBatch

        order = (torch.randperm(len(self), generator=torch.Generator().manual_seed(seed))
                 if shuffle else torch.arange(len(self)))
        for start in range(0, len(self), batch_size):
            rows = order[start:start + batch_size]
            block = np.asarray(self.feats[np.sort(rows.numpy())])  # one read per batch
            back = np.argsort(np.argsort(rows.numpy()))
            feats = torch.from_numpy(block[back].astype(np.float32))
            yield DenseBatch([feats], self.target[rows], rows)


def throughput(work: Path, images: int, channels: int, epochs: int) -> dict:
    import torch

    from vbstore.data import make_scenes
    from vbstore.tasks import TensorSplit, get_task

    root = make_scenes(work / "tput", per_split=images, seed=0, size=64)
    feats = patch_features(load_split(root, "train", "images"), channels)
    np.save(work / "feats.npy", feats)
    target = targets("semantic_segmentation", load_split(root, "train", "labels"))
    task = get_task("semantic_segmentation")
    params = {"num_classes": 4, "epochs": epochs}
    streamed = MemmapSplit(work / "feats.npy", target, "label_map")
    memory = TensorSplit([torch.from_numpy(feats.astype(np.float32))], target,
                         target_kind="label_map")
    out = {}
    for name, split in (("streamed", streamed), ("in_memory", memory)):
        task.fit_split(split, {**params, "epochs": 1}, seed=0)  # warm up
        start = time.perf_counter()
        head, _ = task.fit_split(split, params, seed=0)
        out[name] = images * epochs / (time.perf_counter() - start)
        out[name + "_metrics"] = task.evaluate_split(head, split, params)
    out["resident_bytes"] = {"streamed": 8 * feats[0].nbytes * 2,  # one float32 batch of 8
                             "in_memory": feats.size * 4}
    out["same_numbers"] = out["streamed_metrics"] == out["in_memory_metrics"]
    return out


def trivial(task, split, params) -> float:
    import torch

    params = task.resolve_params(params)
    scorer = task._scorer(params)
    everything = split._target
    for batch in split.batches(8):
        target = task._prepare(batch.target, params, "eval")
        if task.name == "semantic_segmentation":
            pred = torch.zeros(len(target), params["num_classes"], *target.shape[-2:])
            pred[:, int(torch.mode(everything.flatten()).values)] = 1
        elif task.name == "generic_segmentation":
            pred = torch.full((len(target), 1, *target.shape[-2:]), -1.0)
        elif task.name == "depth":
            pred = torch.full_like(target, float(everything[everything > 0].mean()))
        elif task.name == "surface_normal":
            pred = everything.mean(dim=(0, 2, 3)).reshape(1, 3, 1, 1).expand_as(target)
        else:
            return 0.0  # a constant map correlates with nothing
        scorer.update(pred, target)
    return scorer.result()[task.headline]


def probes(work: Path, images: int, channels: int, schedule: dict):
    """Yield (task name, row) as each probe finishes."""
    import torch

    from vbstore.data import make_scenes
    from vbstore.tasks import TensorSplit, get_task

    root = make_scenes(work / "probes", per_split=images, seed=1, size=64)
    splits = {}
    for split in ("train", "val"):
        feats = torch.from_numpy(patch_features(load_split(root, split, "images"), channels))
        splits[split] = feats
    for name, folder in FOLDERS.items():
        task = get_task(name)
        kind = task.target_kind
        params = {"num_classes": 4} if name == "semantic_segmentation" else {}
        params.update(schedule)
        data = {s: TensorSplit([splits[s]], targets(name, load_split(root, s, folder)),
                               target_kind=kind) for s in ("train", "val")}
        start = time.perf_counter()
        head, train = task.fit_split(data["train"], params, seed=0)
        metrics = task.evaluate_split(head, data["val"], params)
        yield name, {"headline": task.headline, "probe": metrics[task.headline],
                     "trivial": trivial(task, data["val"], params),
                     "train_loss": train["train_loss"], "seconds": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=64)
    parser.add_argument("--channels", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--skip-probes", action="store_true")
    parser.add_argument("--probe-epochs", type=int, default=10, help="probe3d's 10 by default")
    parser.add_argument("--probe-lr", type=float, default=5e-4, help="probe3d's 5e-4 by default")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        t = throughput(work, args.images, args.channels, args.epochs)
        print(f"training throughput, semantic_segmentation, {args.images} images of 64 px, "
              f"{args.channels} channels, {args.epochs} epochs:")
        print(f"  streamed from float16 on disk  {t['streamed']:8.1f} images/s   resident "
              f"features {t['resident_bytes']['streamed'] / 1e6:.2f} MB")
        print(f"  float32 in memory              {t['in_memory']:8.1f} images/s   resident "
              f"features {t['resident_bytes']['in_memory'] / 1e6:.2f} MB")
        print(f"  ratio streamed / in-memory     {t['streamed'] / t['in_memory']:8.2f}   same "
              f"metrics: {t['same_numbers']}")
        if args.skip_probes:
            return
        schedule = {"epochs": args.probe_epochs, "lr": args.probe_lr}
        print(f"\nscenes val ({args.images} train / {args.images} val images, patch features, "
              f"epochs {args.probe_epochs}, lr {args.probe_lr:g}):")
        print(f"  {'task':24s} {'metric':28s} {'probe':>7s} {'trivial':>8s} {'seconds':>8s}")
        for name, row in probes(work, args.images, args.channels, schedule):
            print(f"  {name:24s} {row['headline']:28s} {row['probe']:7.3f} {row['trivial']:8.3f} "
                  f"{row['seconds']:8.1f}", flush=True)


if __name__ == "__main__":
    main()
