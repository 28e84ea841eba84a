"""Dense probes, side by side in one run: streamed vs in-memory training, and what each probe
learns on ``scenes``.

    python benchmarks/dense_bench.py [--images N] [--channels C] [--epochs E] [--skip-probes]
                                     [--rss-images N] [--skip-store] [--skip-realistic]
                                     [--visbench PYTHON [--only-versus]]

Prints:
- through the engine (a store of its own, ``test_vit`` with random weights on ``scenes``): the
  stored dense bytes per image (float16 packs, every byte of the pack files) against float32
  maps of the same grid and width, with the ratio; and the peak RSS of training a depth probe
  on N and on 4N images (features already stored, each run in a fresh process), with the
  ratio, both as the process's peak and as the peak above the RSS after imports; the stored
  bytes are split into the float16 numbers and the pack header (the image ids), and measured
  again on a real probe's grid (ViT-S/14 at 224 px: 384 x 16 x 16, random weights);
- with ``--visbench PYTHON`` (a scratch venv with ``pip install visbench``; never a vbstore
  dependency): the same probe (semantic_segmentation on generated ``scenes``) through vbstore
  and through VisBench on one random timm checkpoint both load, each call a fresh process:
  wall seconds cold, the same command again, a new head on cached features, a second task on
  the same images, and both tools' metrics side by side. VisBench runs in its own interpreter
  (``benchmarks/visbench_peer.py``), never imported here;
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
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PATCH = 4
FOLDERS = {"semantic_segmentation": "labels", "generic_segmentation": "masks", "depth": "depth",
           "surface_normal": "normals", "edge": "edges", "occlusion_edge": "occlusion_edges",
           "keypoints2d": "keypoints", "corner": "images", "orientation": "images"}


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
    if task_name in ("corner", "orientation"):
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
    """The task's trivial predictor on ``split`` (the library's ``baseline_split``)."""
    return task.baseline_split(split, params)[task.headline]


def probes(work: Path, images: int, channels: int, schedule: dict, only: list[str] | None):
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
        if only and name not in only:
            continue
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


_TRAIN_CHILD = """
import json, resource, sys
import vbstore, torch  # the imports every training run pays for
from vbstore.engine import PackSplit  # noqa: F401
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
before = rss()
data = sys.argv[1]
r = vbstore.get_result("test_vit", "depth", data, data, split="val", train_split="train",
                       weights="random", input_size=64, progress=False,
                       params={"target_scale": 1000, "epochs": 2},
                       data_options={"target": "depth"})
assert r.run.features_from_cache, "features were not stored first"
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"before": before, "peak": peak}))
"""

_EXTRACT_CHILD = """
import json, struct, sys
import vbstore
data = sys.argv[1]
backbone, size = (sys.argv[2], int(sys.argv[3])) if len(sys.argv) > 3 else ("test_vit", 64)
out = {}
for split in ("train", "val"):
    f = vbstore.get_features(backbone, data, split=split, weights="random", input_size=size,
                             mode="dense", progress=False, device="cpu",
                             data_options={"target": "depth"})
    store = f.backbone.store
    doc = store.read_json(f.id)
    header = ids = 0
    for pack in doc["packs"]:
        raw = store.path(pack).read_bytes()
        length = struct.unpack("<Q", raw[:8])[0]
        header += 8 + length  # safetensors: u64 length, then the JSON header
        ids += len(json.loads(raw[8:8 + length])["__metadata__"]["images"])
    out[split] = {"images": len(f.manifest), "packs": len(doc["packs"]),
                  "pack_bytes": sum(store.path(p).stat().st_size for p in doc["packs"]),
                  "header_bytes": header, "image_id_bytes": ids,
                  "shape": list(f.features.dense(-1).shape)}
print(json.dumps(out))
"""


def _child(code: str, data: str, home: Path, *args: str) -> dict:
    env = {**os.environ, "VBSTORE_HOME": str(home),
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    out = subprocess.run([sys.executable, "-c", code, data, *args], env=env, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def engine_memory(work: Path, images: int) -> dict:
    """Stored dense bytes per image, and training peak RSS at N and 4N images."""
    out: dict = {}
    for n in (images, 4 * images):
        data = f"scenes:per_split={n},size=64"
        home = work / f"store{n}"
        stored = _child(_EXTRACT_CHILD, data, home)["train"]
        out[n] = {**_bytes_row(stored), **_child(_TRAIN_CHILD, data, home)}
    return out


def _bytes_row(stored: dict) -> dict:
    _, c, h, w = stored["shape"]
    n = stored["images"]
    return {"stored_per_image": stored["pack_bytes"] / n, "float32_per_image": c * h * w * 4,
            "grid": (c, h, w), "header_per_image": stored["header_bytes"] / n,
            "image_id_per_image": stored["image_id_bytes"] / n, "images": n,
            "packs": stored["packs"]}


def realistic_bytes(work: Path, images: int, backbone: str, size: int) -> dict:
    """Stored dense bytes per image on a ViT-S/14 grid at 224 px (384 x 16 x 16), random weights:
    the same measurement as :func:`engine_memory` on the grid of a real probe."""
    data = f"scenes:per_split={images},size={size}"
    stored = _child(_EXTRACT_CHILD, data, work / "store_vits", backbone, str(size))
    return _bytes_row(stored["train"])


def print_bytes(label: str, row: dict) -> None:
    c, h, w = row["grid"]
    print(f"  {label}: a {c}x{h}x{w} grid, {row['images']} images in {row['packs']} pack(s)")
    print(f"    stored dense bytes per image {row['stored_per_image']:10.0f}   float32 maps "
          f"{row['float32_per_image']:10.0f}   ratio "
          f"{row['stored_per_image'] / row['float32_per_image']:.4f}")
    print(f"    of which pack header per image {row['header_per_image']:6.1f} (image ids "
          f"{row['image_id_per_image']:.1f}), float16 numbers "
          f"{row['stored_per_image'] - row['header_per_image']:.0f} = exactly 0.5x float32")


_VBSTORE_CHILD = """
import json, sys, time
started = time.perf_counter()
import vbstore
config, task, seed = json.loads(open(sys.argv[1]).read()), sys.argv[2], int(sys.argv[3])
folder, params = {"semantic_segmentation": ("labels", {"num_classes": 4}),
                  "generic_segmentation": ("masks", {})}[task]
begin = time.perf_counter()
r = vbstore.get_result("timm:" + config["arch"], task, config["data"], config["data"],
                       split="val", train_split="train", weights=config["checkpoint"],
                       input_size=config["size"], device="cpu", progress=False, seed=seed,
                       params=params, data_options={"target": folder})
print(json.dumps({"metrics": r.metrics, "call_seconds": time.perf_counter() - begin,
                  "process_seconds": time.perf_counter() - started,
                  "result_from_cache": r.from_cache,
                  "features_from_cache": r.run.features_from_cache}))
"""


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(argv: list[str], env: dict) -> dict:
    """One fresh process: its JSON line, wall seconds and CPU seconds (user + system, which
    other jobs on a shared machine inflate far less than wall time)."""
    start, cpu = time.perf_counter(), _cpu_of_children()
    out = subprocess.run(argv, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed: {out.stderr.strip().splitlines()[-1:]}")
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row["wall_seconds"] = time.perf_counter() - start
    row["cpu_seconds"] = _cpu_of_children() - cpu
    return row


def versus_visbench(work: Path, peer_python: str, images: int, size: int, arch: str,
                    threads: int, rounds: int) -> dict:
    """The same scenes, the same checkpoint, the same probe: vbstore and VisBench, each call a
    fresh process. Phases: cold (empty caches), the same command again, a new head on cached
    features (seed 1 on both sides, since vbstore returns a stored result for the same command:
    its two seeds also show how far metrics move with the head's seed alone), and a second
    task (generic_segmentation on the masks of the same images). ``rounds`` repeats the whole
    sequence with fresh caches, alternating which tool goes first."""
    import timm
    import torch
    from safetensors.torch import save_file

    from vbstore.data import make_scenes

    data = make_scenes(work / "versus", per_split=images, seed=3, size=size)
    torch.manual_seed(0)
    model = timm.create_model(arch, pretrained=False, img_size=size)
    checkpoint = work / "bench_vit.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(checkpoint))
    cfg = timm.models.get_pretrained_cfg(arch).to_dict()  # vbstore's preprocessing for timm
    config = {"arch": arch, "size": size, "checkpoint": str(checkpoint), "data": str(data),
              "mean": list(cfg["mean"]), "std": list(cfg["std"]), "threads": threads,
              "batch": 32}
    config_path = work / "versus.json"
    config_path.write_text(json.dumps(config))
    seg, generic = "semantic_segmentation", "generic_segmentation"
    rows: dict = {}
    for round_ in range(rounds):
        env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
               "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
               "VBSTORE_HOME": str(work / f"versus_store{round_}"), "CUDA_VISIBLE_DEVICES": ""}
        peer = [peer_python, str(Path(__file__).with_name("visbench_peer.py")),
                str(config_path)]
        ours = [sys.executable, "-c", _VBSTORE_CHILD, str(config_path)]
        cache = str(work / f"visbench_cache{round_}")
        phases = {
            "cold": ([*ours, seg, "0"], [*peer, seg, cache]),
            "same command again": ([*ours, seg, "0"], [*peer, seg, cache]),
            "new head, cached features": ([*ours, seg, "1"], [*peer, seg, cache, "1"]),
            "second task (masks)": ([*ours, generic, "0"], [*peer, generic, cache]),
        }
        for name, (a, b) in phases.items():
            order = (("vbstore", a), ("visbench", b))
            for tool, argv in order if round_ % 2 == 0 else order[::-1]:
                rows.setdefault(name, {}).setdefault(tool, []).append(_timed(argv, env))
    return rows


def print_versus(rows: dict, images: int, size: int, arch: str) -> None:
    rounds = len(rows["cold"]["vbstore"])
    print(f"\nvbstore vs VisBench, semantic_segmentation on scenes ({images} train / {images} val "
          f"images of {size} px), timm {arch} with one random checkpoint, CPU, each call a "
          f"fresh process, imports included; median of {rounds} round(s) with fresh caches:")
    print(f"  {'phase':27s} {'wall s: vbstore':>15s} {'VisBench':>9s} {'ratio':>6s}   "
          f"{'CPU s: vbstore':>14s} {'VisBench':>9s} {'ratio':>6s}   vbstore reused")
    for name, row in rows.items():
        med = {tool: {k: statistics.median(r[k] for r in runs)
                      for k in ("wall_seconds", "cpu_seconds")} for tool, runs in row.items()}
        ours, peer = med["vbstore"], med["visbench"]
        last = row["vbstore"][-1]
        reused = ("the stored result" if last["result_from_cache"] else
                  "stored features" if last["features_from_cache"] else "nothing")
        hits = row["visbench"][-1]["cache"]
        print(f"  {name:27s} {ours['wall_seconds']:15.1f} {peer['wall_seconds']:9.1f} "
              f"{ours['wall_seconds'] / peer['wall_seconds']:6.2f}   "
              f"{ours['cpu_seconds']:14.1f} {peer['cpu_seconds']:9.1f} "
              f"{ours['cpu_seconds'] / peer['cpu_seconds']:6.2f}   {reused} (VisBench cache: "
              f"{hits['hits']} hits, {hits['misses']} misses)")
    for name in ("cold", "new head, cached features", "second task (masks)"):
        ours, peer = rows[name]["vbstore"][0]["metrics"], rows[name]["visbench"][0]["metrics"]
        shared = [k for k in ours if k in peer]
        print(f"  metrics, {name}: " + ", ".join(
            f"{k} {ours[k]:.4f} vs {peer[k]:.4f}" for k in shared))

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=64)
    parser.add_argument("--channels", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--skip-probes", action="store_true")
    parser.add_argument("--probes", default="", help="only these dense tasks (comma-separated)")
    parser.add_argument("--rss-images", type=int, default=64,
                        help="N of the peak-RSS comparison (N vs 4N images)")
    parser.add_argument("--skip-store", action="store_true",
                        help="skip the engine's stored bytes and peak-RSS comparison")
    parser.add_argument("--probe-epochs", type=int, default=10, help="probe3d's 10 by default")
    parser.add_argument("--probe-lr", type=float, default=5e-4, help="probe3d's 5e-4 by default")
    parser.add_argument("--realistic-backbone", default="timm:vit_small_patch14_dinov2",
                        help="the stored-bytes measurement on a real probe's grid too")
    parser.add_argument("--realistic-size", type=int, default=224)
    parser.add_argument("--skip-realistic", action="store_true")
    parser.add_argument("--visbench", metavar="PYTHON", default=None,
                        help="the interpreter of a scratch venv with visbench: compare end to "
                             "end (never a vbstore dependency)")
    parser.add_argument("--versus-images", type=int, default=32)
    parser.add_argument("--versus-size", type=int, default=112)
    parser.add_argument("--versus-arch", default="vit_tiny_patch16_224")
    parser.add_argument("--threads", type=int, default=2, help="torch threads of each side")
    parser.add_argument("--versus-rounds", type=int, default=3,
                        help="repeat the comparison with fresh caches; medians are printed")
    parser.add_argument("--only-versus", action="store_true",
                        help="run the VisBench comparison alone")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.visbench:
            rows = versus_visbench(work, args.visbench, args.versus_images, args.versus_size,
                                   args.versus_arch, args.threads, args.versus_rounds)
            print_versus(rows, args.versus_images, args.versus_size, args.versus_arch)
            if args.only_versus:
                return
        t = throughput(work, args.images, args.channels, args.epochs)
        print(f"training throughput, semantic_segmentation, {args.images} images of 64 px, "
              f"{args.channels} channels, {args.epochs} epochs:")
        print(f"  streamed from float16 on disk  {t['streamed']:8.1f} images/s   resident "
              f"features {t['resident_bytes']['streamed'] / 1e6:.2f} MB")
        print(f"  float32 in memory              {t['in_memory']:8.1f} images/s   resident "
              f"features {t['resident_bytes']['in_memory'] / 1e6:.2f} MB")
        print(f"  ratio streamed / in-memory     {t['streamed'] / t['in_memory']:8.2f}   same "
              f"metrics: {t['same_numbers']}")
        if not args.skip_store:
            m = engine_memory(work, args.rss_images)
            small, large = m[args.rss_images], m[4 * args.rss_images]
            c, h, w = small["grid"]
            mib = 1024 * 1024
            print(f"\nthrough the engine (test_vit, random weights, 64 px scenes, a {c}x{h}x{w} "
                  f"grid per image):")
            print_bytes("test_vit at 64 px", small)
            if not args.skip_realistic:
                print_bytes(f"{args.realistic_backbone} at {args.realistic_size} px",
                            realistic_bytes(work, args.rss_images, args.realistic_backbone,
                                            args.realistic_size))
            print(f"  training peak RSS, {args.rss_images:4d} images  {small['peak'] / mib:8.1f} "
                  f"MiB   above imports {(small['peak'] - small['before']) / mib:8.1f} MiB")
            print(f"  training peak RSS, {4 * args.rss_images:4d} images  "
                  f"{large['peak'] / mib:8.1f} MiB   above imports "
                  f"{(large['peak'] - large['before']) / mib:8.1f} MiB")
            above = (large["peak"] - large["before"]) / max(small["peak"] - small["before"], 1)
            print(f"  ratio 4N / N                   {large['peak'] / small['peak']:8.3f}       "
                  f"above imports {above:.3f}")
        if args.skip_probes:
            return
        schedule = {"epochs": args.probe_epochs, "lr": args.probe_lr}
        print(f"\nscenes val ({args.images} train / {args.images} val images, patch features, "
              f"epochs {args.probe_epochs}, lr {args.probe_lr:g}):")
        print(f"  {'task':24s} {'metric':28s} {'probe':>7s} {'trivial':>8s} {'seconds':>8s}")
        only = args.probes.split(",") if args.probes else None
        for name, row in probes(work, args.images, args.channels, schedule, only):
            print(f"  {name:24s} {row['headline']:28s} {row['probe']:7.3f} {row['trivial']:8.3f} "
                  f"{row['seconds']:8.1f}", flush=True)


if __name__ == "__main__":
    main()
