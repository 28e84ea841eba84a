"""The paths a user walks all day, side by side with VisBench 0.27 (issue 36's table).

    python benchmarks/paths_bench.py [--peers DIR] [--install] [--images 1000] [--size 128]
                                     [--rounds 2] [--threads 2] [--code LABEL=DIR ...]
                                     [--bare] [--work DIR] [--json]

Data: ``--images`` photographs made from scikit-image's ``lfw_subset`` (100 faces, 100 other
crops, 25 px), each a variant (flipped, shifted, gamma, a little noise) upsampled to ``--size``
px, in an image folder with ``train`` (70 %) and ``val`` (30 %) splits of two classes.
Backbone: ``efficientnet_lite0`` with its ImageNet weights (the ``efficientnet-lite0-pytorch-
model`` package), handed to VisBench as a ``CustomBackbone`` over the same tensors
(``paths_peer.py``). Rows, each command a fresh process, as a user runs them:

- ``cold``: classification at VisBench's defaults on an empty store (extract both splits,
  train, score); VisBench with an empty feature cache;
- ``again (1st)``/``again (2nd)``: the same question again, spelled ``vbstore -q get result
  ... --json``, right after the computation and once more;
- ``new head``: classification with ``epochs=100`` on the stored features;
- ``second task``: retrieval on the stored val split;
- ``floor``: ``python -c "import sqlite3, blake3"``, what a cached answer cannot go below;
- with ``--bare``: timm's ``forward_features`` of the same backbone over the same images,
  decoded into memory first (what the cold row cannot go below), in its own process.

Every side runs each row in turn, round after round (the order rotating), so a loaded machine
slows them alike; ``--code base=DIR`` adds another vbstore checkout as a side (its own stores),
so one run measures before and after. VisBench runs in its own process with ``--peers DIR`` on
``PYTHONPATH`` (``--install`` fills DIR: ``pip install --no-deps --target DIR
visbench==0.27.0``). Printed: each row's seconds per side and round, the median's ratio to
VisBench's and to the first side's, and the metrics both tools report for the shared protocol
(classification ``top1``, retrieval ``recall@k`` and ``mAP``), which must be the same figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PEER = "visbench==0.27.0"
BACKBONE = "efficientnet_lite0"
STEPS = ("cold", "again (1st)", "again (2nd)", "new head", "second task")
SHARED = {"classification": ("top1",), "retrieval": ("recall@1", "recall@5", "recall@10", "mAP")}


def make_data(root: Path, n: int, size: int) -> Path:
    """``n`` variants of ``lfw_subset`` at ``size`` px: ``root/{train,val}/{face,other}``."""
    import numpy as np
    from PIL import Image
    from skimage.data import lfw_subset

    faces = lfw_subset()  # (200, 25, 25) floats in [0, 1]: 100 faces, then 100 other crops
    for i in range(n):
        # faces and other crops alternate, so that any n holds both classes
        source, variant = (i % 2) * 100 + (i // 2) % 100, i // len(faces)
        image = faces[source]
        if variant & 1:
            image = image[:, ::-1]
        image = np.roll(image, variant // 2 % 5 - 2, axis=variant % 2)
        image = image ** (1.0 + 0.15 * (variant % 3 - 1))
        image = image + np.random.default_rng(i).normal(0.0, 0.02, image.shape)
        pixels = (np.clip(image, 0, 1) * 255).round().astype(np.uint8)
        split = "val" if i % 10 < 3 else "train"
        folder = root / split / ("face" if source < len(faces) // 2 else "other")
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(pixels).convert("RGB").resize((size, size), Image.BICUBIC).save(
            folder / f"{i:05d}.png")
    return root


def timed(command: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Wall seconds of ``command`` in a fresh process, and its stdout. It runs in the system's
    temporary folder: ``python -m`` puts the working directory first on ``sys.path``, and a
    checkout there would be imported instead of the side's."""
    begin = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, env=env, check=False,
                          cwd=tempfile.gettempdir())
    seconds = time.perf_counter() - begin
    if proc.returncode:
        raise SystemExit(f"paths_bench: {' '.join(command[:6])}... failed:\n{proc.stderr[-3000:]}")
    return seconds, proc.stdout


def vbstore_step(step: str, code: Path, store: Path, data: Path,
                 env: dict[str, str]) -> tuple[float, dict[str, Any]]:
    """One row for a vbstore checkout: seconds and the metrics it printed."""
    words = ["-q", "--store", str(store), "get", "result", "-b", BACKBONE, "-d", str(data),
             "--split", "val"]
    if step == "second task":
        words += ["-t", "retrieval"]
    else:
        words += ["-t", "classification", "--train-data", str(data), "--train-split", "train"]
        if step == "new head":
            words += ["-p", "epochs=100"]
    seconds, out = timed([sys.executable, "-m", "vbstore", *words, "--json"],
                         {**env, "PYTHONPATH": str(code)})
    return seconds, json.loads(out)["record"]["metrics"]


def peer_step(step: str, cache: Path, data: Path, peers: Path,
              env: dict[str, str]) -> tuple[float, dict[str, Any]]:
    """The same row for VisBench, in its own process."""
    task = "retrieval" if step == "second task" else "classification"
    extra = ["100"] if step == "new head" else []
    seconds, out = timed([sys.executable, str(HERE / "paths_peer.py"), task, str(data),
                          str(cache), env["OMP_NUM_THREADS"], *extra],
                         {**env, "PYTHONPATH": os.pathsep.join([str(peers), str(HERE)])})
    return seconds, json.loads(out.strip().splitlines()[-1])


BARE = """
import sys, time, torch
from pathlib import Path
from PIL import Image
from torchvision import transforms
from conformance_peer import lite0
torch.set_num_threads(int(sys.argv[2]))
# timm's eval transform for the backbone, as VisBench is given it (conformance_peer.py)
preprocess = transforms.Compose([transforms.Resize(256, transforms.InterpolationMode.BICUBIC),
                                 transforms.CenterCrop(224), transforms.ToTensor(),
                                 transforms.Normalize([0.5] * 3, [0.5] * 3)])
files = sorted(Path(sys.argv[1]).rglob("*.png"))
images = [preprocess(Image.open(f).convert("RGB")) for f in files]
model = lite0()
begin = time.perf_counter()
with torch.inference_mode():
    for i in range(0, len(images), 32):
        model.forward_features(torch.stack(images[i:i + 32]))
print(time.perf_counter() - begin)
"""


def bare_forward(data: Path, env: dict[str, str]) -> float:
    """Seconds of the bare forward over every image, decoded in memory beforehand."""
    _, out = timed([sys.executable, "-c", BARE, str(data), env["OMP_NUM_THREADS"]],
                   {**env, "PYTHONPATH": str(HERE)})
    return float(out.strip().splitlines()[-1])


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    data = make_data(work / "data", args.images, args.size)
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads),
           "MKL_NUM_THREADS": str(args.threads), "VBSTORE_PROGRESS": "0"}
    env.pop("VBSTORE_HOME", None)
    sides = [("vbstore", HERE.parent),
             *((label, Path(path).resolve()) for label, path in args.code)]
    names = [label for label, _ in sides] + ["VisBench"]
    for label, code in sides:  # each side imports its own checkout
        _, where = timed([sys.executable, "-c", "import vbstore; print(vbstore.__file__)"],
                         {**env, "PYTHONPATH": str(code)})
        if not Path(where.strip()).is_relative_to(code.resolve()):
            raise SystemExit(f"paths_bench: side {label} imports {where.strip()}, not {code}")
    seconds: dict[str, dict[str, list[float]]] = {s: {n: [] for n in names}
                                                  for s in (*STEPS, "floor")}
    metrics: dict[str, dict[str, dict[str, Any]]] = {s: {} for s in STEPS}
    if args.bare:
        seconds["bare forward"] = {"forward": []}
    for round_ in range(args.rounds):
        order = names[round_ % len(names):] + names[:round_ % len(names)]
        for step in STEPS:
            for name in order:
                if name == "VisBench":
                    s, m = peer_step(step, work / f"cache-{round_}", data, args.peers, env)
                else:
                    code = dict(sides)[name]
                    s, m = vbstore_step(step, code, work / f"store-{name}-{round_}", data, env)
                seconds[step][name].append(s)
                metrics[step].setdefault(name, m)
                print(f"round {round_ + 1} {step:<12} {name:<10} {s:7.2f} s", file=sys.stderr)
        for name in names:
            s, _ = timed([sys.executable, "-c", "import sqlite3, blake3"], env)
            seconds["floor"][name].append(s)
        if args.bare:
            seconds["bare forward"]["forward"].append(bare_forward(data, env))
    return {"images": args.images, "size": args.size, "threads": args.threads,
            "rounds": args.rounds, "sides": names, "seconds": seconds, "metrics": metrics}


def report(result: dict[str, Any]) -> str:
    names = result["sides"]
    lines = [f"{result['images']} images at {result['size']} px, {BACKBONE}, "
             f"{result['threads']} threads, {result['rounds']} rounds (seconds per round; "
             "ratio: medians)", "",
             "| path | " + " | ".join(names) + " | " +
             " | ".join(f"{n} / VisBench" for n in names[:-1]) +
             ("".join(f" | {n} / {names[0]}" for n in names[1:-1])) + " |",
             "|---" * (3 * len(names) - 2) + "|"]
    for step, by_side in result["seconds"].items():
        if step == "bare forward":
            lines.append("| bare forward (decoded in memory) | "
                         + ", ".join(f"{s:.2f}" for s in by_side["forward"]) + " |")
            continue
        median = {n: statistics.median(v) for n, v in by_side.items() if v}
        cells = [", ".join(f"{s:.2f}" for s in by_side[n]) for n in names]
        ratios = [f"{median[n] / median['VisBench']:.2f}x" for n in names[:-1]]
        ratios += [f"{median[n] / median[names[0]]:.2f}x" for n in names[1:-1]]
        lines.append(f"| {step} | " + " | ".join(cells + ratios) + " |")
    lines += ["", "metrics of the shared protocol (first round):"]
    for step in STEPS:
        task = "retrieval" if step == "second task" else "classification"
        for key in SHARED[task]:
            values = {n: result["metrics"][step].get(n, {}).get(key) for n in names}
            found = [v for v in values.values() if v is not None]
            same = len(found) == len(values) and max(found) - min(found) <= 1e-6
            # a trained head draws its own seed's numbers in each tool: conformance.py compares
            # those within several seeds' spread; retrieval is deterministic
            verdict = ("same" if same else "differ: one seed of a trained head"
                       if task == "classification" else "DIFFER")
            lines.append(f"  {step:<12} {key:<10} " + "  ".join(
                f"{n} {'-' if v is None else f'{v:.6f}'}" for n, v in values.items())
                + f"  ({verdict})")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers", type=Path, default=None,
                        help="folder holding visbench (default: a temp dir, with --install)")
    parser.add_argument("--install", action="store_true", help=f"pip install {PEER} first")
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--code", action="append", default=[], metavar="LABEL=DIR",
                        type=lambda text: tuple(text.split("=", 1)),
                        help="another vbstore checkout to run as a side (e.g. base=../main)")
    parser.add_argument("--bare", action="store_true", help="also time the bare forward")
    parser.add_argument("--work", type=Path, default=None, help="keep data and stores here")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vbstore-paths-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        if args.peers is None:
            if not args.install:
                parser.error("give --peers DIR holding visbench, or --install")
            args.peers = work / "peers"
        if args.install:
            subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                            "--disable-pip-version-check", "--target", str(args.peers), PEER],
                           check=True)
        result = run(args, work)
    print(json.dumps(result, indent=2) if args.json else report(result))


if __name__ == "__main__":
    main()
