"""Fine-tuning's peak memory against the train split's size (docs/finetune.md, issue #25).

    python benchmarks/finetune_memory_bench.py [--backbone SPEC] [--weights W]
        [--input-size PX] [--sizes 200,400,800,1600] [--epochs E] [--batch-size B]
        [--blocks N] [--threads T]

For each train size N it fine-tunes the last block with a linear head, twice, each run in a
fresh subprocess so no peak carries over: the first run computes and stores the frozen prefix
of both splits, the second (another ``--backbone-lr``) streams the stored prefix back. The eval
split is fixed (8 images per class), so only the train split grows. Within each run it
measures three phases (the engine's own functions, wrapped):

- ``prefix``: ``write_prefix`` (images through the frozen blocks, written as they stream);
- ``train``: ``tasks.finetune`` (the training loop, the two no-gradient passes over the train
  prefix, the final loss);
- ``eval``: the eval featureset under the fine-tuned weights.

For each phase, the peak growth over its start of: ``live``, the bytes malloc has handed out and
not had back (glibc's mallinfo2; torch's CPU tensors and numpy's arrays are malloc'd), sampled
every millisecond: what the phase holds; ``anon`` (``RssAnon``, sampled too), which also counts
freed memory the allocator keeps; ``rss``, the kernel's exact peak resident set (``VmHWM``, reset
through ``/proc/self/clear_refs`` when the phase starts), which also counts library pages first
touched. The last lines are peak(N_max) / peak(N_min): flat means close to 1 while the prefix
bytes grow N_max / N_min times.

Linux with glibc only (/proc, mallinfo2). Defaults: ``test_vit`` (random weights) at 128 px,
so a train image's prefix is 257 tokens x 32 floats (33 KB); ``--backbone efficientnet_lite0
--weights default --input-size 0`` fine-tunes Lite0's last stage (192 x 7 x 7 floats per
image, 38 KB).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CLASSES = 5  # make_shapes' five shapes
EVAL_PER_CLASS = 8
PHASES = ("prefix", "train", "eval")


def _status() -> dict[str, int]:
    """VmRSS, VmHWM, RssAnon, RssFile of this process, in bytes, and ``live``: the bytes
    malloc has handed out and not had back (glibc's mallinfo2; torch's CPU tensors and numpy's
    arrays are malloc'd), which unlike RssAnon does not count freed memory malloc keeps."""
    out = {}
    with open("/proc/self/status") as handle:
        for line in handle:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                out[key] = int(value.split()[0]) * 1024
    info = _LIBC.mallinfo2()
    out["live"] = info.uordblks + info.hblkhd
    return out


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


_LIBC = ctypes.CDLL("libc.so.6")
_LIBC.mallinfo2.restype = _Mallinfo2


class Meter:
    """Per-phase peak growth: anonymous memory sampled every millisecond, the resident set's
    exact peak from the kernel (reset when the phase starts); a phase run twice (the train and
    eval prefixes) keeps its larger growth."""

    def __init__(self) -> None:
        self.peaks: dict[str, dict[str, int]] = {}
        self._now: dict[str, int] | None = None  # the running phase's sampled peaks
        self._stop = False
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop:
            now, current = _status(), self._now
            if current is not None:
                current["live"] = max(current["live"], now["live"])
                current["anon"] = max(current["anon"], now["RssAnon"])
            time.sleep(0.001)

    def wrap(self, phase: str, func):
        def wrapped(*args, **kwargs):
            with open("/proc/self/clear_refs", "w") as handle:
                handle.write("5")  # the kernel's VmHWM := VmRSS now
            begin = _status()
            self._now = {"live": begin["live"], "anon": begin["RssAnon"]}
            try:
                return func(*args, **kwargs)
            finally:
                current, self._now = self._now, None
                end = _status()
                growth = {"live": max(current["live"], end["live"]) - begin["live"],
                          "anon": max(current["anon"], end["RssAnon"]) - begin["RssAnon"],
                          "rss": end["VmHWM"] - begin["VmRSS"]}
                old = self.peaks.get(phase, growth)
                self.peaks[phase] = {k: max(old[k], growth[k]) for k in growth}
        return wrapped

    def report(self) -> dict[str, dict[str, int]]:
        self._stop = True
        self._thread.join()
        return self.peaks


def child(args: argparse.Namespace) -> None:
    """One fine-tuning run in this process; prints its phases' peaks as JSON."""
    import torch

    import vbstore
    from vbstore import Store
    from vbstore.engine import _finetune_compute

    torch.set_num_threads(args.threads)
    meter = Meter()
    _finetune_compute.write_prefix_blob = meter.wrap("prefix", _finetune_compute.write_prefix_blob)
    _finetune_compute.finetune = meter.wrap("train", _finetune_compute.finetune)
    _finetune_compute.features = meter.wrap("eval", _finetune_compute.features)
    store = Store(Path(args.store))
    start = time.perf_counter()
    result = vbstore.get_result(
        args.backbone, "classification", args.data, args.data, split="val", train_split="train",
        limit=EVAL_PER_CLASS, train_limit=args.n // CLASSES, weights=args.weights,
        input_size=args.input_size or None, store=store, progress=False, device="cpu",
        finetune_blocks=args.blocks, backbone_lr=args.backbone_lr, batch_size=args.batch_size,
        params={"epochs": args.epochs, "batch_size": args.batch_size})
    wall = time.perf_counter() - start
    prefix = store.info(result.record.inputs["train_prefix"]).size
    print(json.dumps({"phases": meter.report(), "wall": wall, "extracted": result.extracted,
                      "prefix_bytes": prefix, "top1": result.metrics["top1"]}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backbone", default="test_vit")
    parser.add_argument("--weights", default="random")
    parser.add_argument("--input-size", type=int, default=128, help="0: the backbone's own")
    parser.add_argument("--sizes", default="200,400,800,1600", help="train images, comma-separated")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--blocks", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--child", choices=("first", "second"), help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--backbone-lr", type=float, default=1e-4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return

    from vbstore.data import make_shapes

    sizes = sorted(int(s) for s in args.sizes.split(","))
    root = Path(tempfile.mkdtemp(prefix="finetune-memory-bench-"))
    data = make_shapes(root / "shapes", per_class=max(sizes[-1] // CLASSES, EVAL_PER_CLASS),
                       size=64)
    print(f"{args.backbone} ({args.weights}, {args.input_size or 'own'} px), last {args.blocks} "
          f"block(s), {args.epochs} epochs, batch {args.batch_size}, {args.threads} thread(s); "
          f"eval {EVAL_PER_CLASS * CLASSES} images")
    print("peak growth over each phase's start, MB: live = malloc'd and not freed (mallinfo2), "
          "anon = RssAnon (both sampled every ms), rss = VmHWM (the kernel's exact peak)")
    print(f"{'N':>5} {'prefix MB':>9} | {'run':<6} {'wall s':>6} | "
          + " | ".join(f"{p:^20}" for p in PHASES))
    print(f"{'':>15} | {'':>13} | " + " | ".join(f"{'live':>6} {'anon':>6} {'rss':>6}"
                                                  for _ in PHASES))
    rows: dict[tuple[int, str], dict] = {}
    for n in sizes:
        store = root / f"store-{n}"
        for run, lr in (("first", 1e-4), ("second", 1e-3)):
            command = [sys.executable, __file__, "--child", run, "--store", str(store),
                       "--data", str(data), "--n", str(n), "--backbone-lr", str(lr),
                       "--backbone", args.backbone, "--weights", args.weights,
                       "--input-size", str(args.input_size), "--epochs", str(args.epochs),
                       "--batch-size", str(args.batch_size), "--blocks", str(args.blocks),
                       "--threads", str(args.threads)]
            env = {**os.environ, "VBSTORE_HOME": str(root / "home")}
            out = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
            if out.returncode:
                sys.exit(f"N={n} {run} run failed:\n{out.stderr[-3000:]}")
            got = json.loads(out.stdout.strip().splitlines()[-1])
            rows[n, run] = got
            print(f"{n:>5} {got['prefix_bytes'] / 1e6:>9.1f} | {run:<6} {got['wall']:>6.1f} | "
                  + " | ".join(_cells(got["phases"].get(p), 1e6, ".1f") for p in PHASES),
                  flush=True)
    low, high = sizes[0], sizes[-1]
    grew = rows[high, "first"]["prefix_bytes"] / rows[low, "first"]["prefix_bytes"]
    print(f"peak(N={high}) / peak(N={low}), while the train prefix grew {grew:.1f}x:")
    for run in ("first", "second"):
        ratios = []
        for phase in PHASES:
            a, b = rows[low, run]["phases"].get(phase), rows[high, run]["phases"].get(phase)
            ratios.append(None if a is None or b is None else
                          {k: b[k] / max(a[k], 1) for k in ("live", "anon", "rss")})
        print(f"{'':>15} | {run:<6} {'':>6} | " + " | ".join(_cells(r, 1, ".2f") for r in ratios))
    shutil.rmtree(root, ignore_errors=True)


def _cells(peak: dict | None, unit: float, spec: str) -> str:
    if peak is None:
        return " ".join(f"{'-':>6}" for _ in range(3))
    return " ".join(f"{peak[k] / unit:>6{spec}}" for k in ("live", "anon", "rss"))


if __name__ == "__main__":
    main()
