"""The reference corpus: one suite per built-in probe, on data any machine has or generates.

Every probe runs on small data so that the whole corpus builds on a laptop's CPU: scikit-image's
``lfw_subset`` (100 faces, 100 non-faces) for the pooled probes, generated ``scenes`` (32 train
and 32 val rooms of 64 px, exact per-pixel targets, second views) for the dense, box and pair
probes, generated ``triplets`` for 2AFC similarity, and scikit-image's captioned photos for
zero-shot retrieval and caption selection. What no packaged source carries in the layout a probe
reads is written here from them, deterministically (:func:`write_inputs`): lfw under noise (a
second condition), scenes images with multi-hot labels, scenes pairs as SPair keypoint pairs, and
the captioned photos as SugarCrepe and Winoground instances.

Backbones: the three pretrained EfficientNet-Lites rank on each suite; ``test_pixels`` (fixed
filters) and two random-weight baselines (EfficientNet-Lite0's architecture and the tiny
``test_cnn``, seed 0) are evaluated on the same suite and shown beside them, never ranked with
them. Probes that compare images with text need a text tower, and CLIP_benchmark's linear probe
reads a CLIP model's image embeddings: they run on a random-weight CLIP on suites of their own.
The probes it cannot run anywhere are named, with why, in :data:`NOT_IN_CORPUS`.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from ..data import load_manifest, write_png
from ..engine import DENSE_TRAINING
from ..store import Store

LFW = "skimage:lfw_subset"
SCENES = "scenes:per_split=32,size=64,seed=0"
TRIPLETS = "triplets:count=64,seed=0,size=64"
NOISE = 0.5  # the noisy condition: each pixel halfway between the image and uniform noise
# probe3d's 10 epochs at lr 5e-4 are 40 steps on 32 train images, too few for a head to leave
# its initialisation (docs/tasks.md); every trained dense probe here runs 200 steps, as the demo
LONGER = DENSE_TRAINING

# (spec, weights, seed, input size): the ranked pretrained backbones, then the baselines
PRETRAINED = [("efficientnet_lite0", "default", None, None),
              ("efficientnet_lite1", "default", None, None),
              ("efficientnet_lite2", "default", None, None)]
BASELINES = [("test_pixels", "default", None, None),
             ("efficientnet_lite0", "random", 0, None),
             ("test_cnn", "random", 0, 64)]
CLIP = [("open_clip:ViT-B-32@laion2b_s34b_b79k", "random", 0, 64)]
# built-in probes the corpus cannot run on any machine, and why (the README table says so)
NOT_IN_CORPUS = {
    "captioning": "needs a model that writes captions (CoCa: open_clip's generate needs "
                  "transformers<4.57, the `captioning` extra), java, and SPICE's jars fetched "
                  "online; no generating model installs offline, and a random one writes noise",
    # VisBench's named questions (vbstore/tasks/questions.py): their probe under another name,
    # whose data (Places365, CUB-200, Stanford Cars, NYUv2-40) does not install offline; on the
    # corpus's data they would repeat their probe's board number for number
    **dict.fromkeys(("scene_classification", "fine_grained_classification",
                     "vehicle_classification"),
                    "classification's probe under another name; its data does not install "
                    "offline, and on the corpus's data it repeats ref-classification's numbers"),
    "scene_parsing": "semantic_segmentation's probe under another name (40 classes); NYUv2-40 "
                     "does not install offline, and on the scenes it repeats "
                     "ref-semantic-segmentation's numbers",
}


def _probe(task: str, level: str, data: str, name: str, *, train: bool = True,
           params: dict[str, Any] | None = None, target: str | None = None,
           conditions: dict[str, str] | None = None, clip: bool = False,
           listing: dict[str, str] | None = None) -> dict[str, Any]:
    options = {"target": target} if target else None
    return {"slug": f"ref-{task.replace('_', '-')}", "task": task, "level": level, "data": data,
            "name": name, "train": train, "params": params or {}, "data_options": options,
            "listing": listing or options, "conditions": conditions,
            "backbones": "clip" if clip else "vision"}


# how the suite lists scenes samples for a probe that reads the images alone (or their pairs):
# the task picks that reading itself, a plain listing must be told
IMAGES, PAIRS = {"target": "masks"}, {"layout": "pairs"}


# ``data`` names a packaged source or one of the inputs write_inputs writes (``@name``); a
# condition maps to a split of the data or to such an input
PROBES: list[dict[str, Any]] = [
    _probe("classification", "high", LFW, "Linear probe, faces vs non-faces (skimage lfw_subset)"),
    _probe("knn", "high", LFW, "kNN, faces vs non-faces, clean and under noise",
           params={"k": 20}, conditions={"clean": "@lfw-clean.csv", "noisy": "@lfw-noisy.csv"}),
    _probe("retrieval", "high", LFW, "Retrieval by class, faces vs non-faces", train=False),
    _probe("multilabel", "high", "@scenes-multilabel-val.csv",
           "Multi-label: which objects a generated scene holds (box, sphere, crowded)"),
    _probe("semantic_segmentation", "high", SCENES, "Semantic segmentation of generated scenes",
           params={"num_classes": 4, **LONGER}, target="labels"),
    _probe("detection", "high", SCENES, "Box detection in generated scenes", params=LONGER,
           target="boxes"),
    _probe("instance_segmentation", "high", SCENES, "Instance masks in generated scenes",
           params=LONGER, target="boxes"),
    _probe("zeroshot_classification", "high", LFW, "Zero-shot classification, faces vs non-faces",
           train=False, clip=True),
    _probe("zeroshot_multilabel", "high", "@scenes-multilabel-val.csv",
           "Zero-shot multi-label on generated scenes", train=False, clip=True),
    _probe("zeroshot_retrieval", "high", "skimage:samples",
           "Zero-shot image-caption retrieval, scikit-image photos", train=False, clip=True),
    _probe("linear_probe", "high", LFW,
           "CLIP_benchmark linear probe, faces vs non-faces (skimage lfw_subset)", clip=True),
    _probe("image_caption_selection", "high", "@captions.jsonl",
           "Caption selection: each scikit-image photo's caption against another photo's",
           train=False, clip=True),
    _probe("depth", "mid", SCENES, "Depth of generated scenes",
           params={"target_scale": 1000.0, **LONGER}, target="depth"),
    _probe("surface_normal", "mid", SCENES, "Surface normals of generated scenes", params=LONGER,
           target="normals"),
    _probe("generic_segmentation", "mid", SCENES, "Object vs background in generated scenes",
           params=LONGER, target="masks"),
    _probe("occlusion_edge", "mid", SCENES, "Occlusion edges of generated scenes", params=LONGER,
           target="occlusion_edges"),
    _probe("relative_pose", "mid", SCENES, "Relative camera pose between two views of a scene",
           listing=PAIRS),
    _probe("correspondence", "mid", SCENES, "Homography correspondence on scenes images",
           train=False, listing=IMAGES),
    _probe("keypoint_correspondence", "mid", "@scenes-spair",
           "Keypoint transfer between two views of a scene (exact flow)", train=False),
    _probe("similarity", "mid", TRIPLETS, "2AFC similarity, generated triplets", train=False),
    _probe("edge", "low", SCENES, "Edge strength of generated scenes", params=LONGER,
           target="edges"),
    _probe("keypoints2d", "low", SCENES, "Corner keypoint maps of generated scenes",
           params=LONGER, target="keypoints"),
    _probe("corner", "low", SCENES, "Shi-Tomasi corner response of scenes images",
           params=LONGER, listing=IMAGES),
    _probe("orientation", "low", SCENES, "Local orientation of scenes images", params=LONGER,
           listing=IMAGES),
]
# the split each source is scored on (the suite's condition; a list's every row is its split)
EVAL_SPLIT = {TRIPLETS: "test", "@scenes-spair": "test"}


def write_inputs(store: Store, root: str | Path) -> Path:
    """Write the corpus inputs no packaged source carries under ``root`` (deterministic)."""
    root = Path(root)
    _write_noisy(store, root)
    _write_multilabel(store, root)
    _write_spair(store, root)
    _write_captions(store, root)
    return root


def _write_noisy(store: Store, root: Path) -> None:
    """``lfw-clean.csv`` lists a copy of the lfw val split (the same bytes, so the same image
    ids), ``lfw-noisy.csv`` the same images blended :data:`NOISE` with uniform noise, each
    seeded by its index."""
    view = load_manifest(store, LFW, split="val")
    labels, classes = view.labels(), view.classes
    lines = {"clean": ["image,label"], "noisy": ["image,label"]}
    for i, name in enumerate(view.names):
        label = classes[labels[i]]
        clean = root / "lfw-clean" / name
        clean.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(view.image_path(i), clean)
        ink = np.asarray(view.load_image(i))[..., 0].astype(np.float64)
        noise = np.random.default_rng([0, i]).uniform(0, 255, ink.shape)
        pixels = np.rint((1 - NOISE) * ink + NOISE * noise).astype(np.uint8)
        write_png(root / "lfw-noisy" / name, pixels)
        for condition in lines:
            lines[condition].append(f"lfw-{condition}/{name},{label}")
    for condition, rows in lines.items():
        (root / f"lfw-{condition}.csv").write_text("\n".join(rows) + "\n")


def _write_multilabel(store: Store, root: Path) -> None:
    """``scenes-multilabel-{train,val}.csv``: each scenes image with the object classes it shows
    (``box``, ``sphere``) and ``crowded`` when it holds more than two objects."""
    for split in ("train", "val"):
        view = load_manifest(store, SCENES, split=split, target="boxes")
        rows = []
        for i, name in enumerate(view.names):
            image = Path(view.image_path(i))
            boxes = json.loads((image.parent.parent / "boxes" / f"{image.stem}.json").read_text())
            objects = boxes["objects"]
            labels = sorted({o["class"] for o in objects}) + (["crowded"] if len(objects) > 2
                                                              else [])
            copy = root / "scenes-multilabel" / split / Path(name).name
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(image, copy)
            rows.append([f"scenes-multilabel/{split}/{copy.name}", ";".join(labels)])
        with open(root / f"scenes-multilabel-{split}.csv", "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["image", "labels"])
            writer.writerows(rows)


def _write_spair(store: Store, root: Path, per_pair: int = 16) -> None:
    """``scenes-spair``: the scenes val pairs in SPair's layout, ``per_pair`` keypoints on a
    grid of the first view carried to the second by the exact flow (visible ones only)."""
    view = load_manifest(store, SCENES, split="val", target="masks")  # any target: the images
    tree = root / "scenes-spair"
    (tree / "PairAnnotation" / "test").mkdir(parents=True, exist_ok=True)
    (tree / "JPEGImages" / "scene").mkdir(parents=True, exist_ok=True)
    for i in range(len(view.names)):
        image = Path(view.image_path(i))
        split_dir = image.parent.parent
        second = split_dir / "views" / image.name
        flow = np.load(split_dir / "flow" / f"{image.stem}.npy")
        h, w = flow.shape[:2]
        src, trg = [], []
        for y in np.linspace(4, h - 5, 8):
            for x in np.linspace(4, w - 5, 8):
                fx, fy = flow[int(y), int(x)]
                if np.isfinite(fx) and np.isfinite(fy) and 0 <= fx < w and 0 <= fy < h:
                    src.append([float(x) + 0.5, float(y) + 0.5])
                    trg.append([round(float(fx), 3), round(float(fy), 3)])
        pick = np.random.default_rng([0, i]).permutation(len(src))[:per_pair]
        a, b = f"{image.stem}a.png", f"{image.stem}b.png"
        shutil.copyfile(image, tree / "JPEGImages" / "scene" / a)
        shutil.copyfile(second, tree / "JPEGImages" / "scene" / b)
        doc = {"src_imname": a, "trg_imname": b, "category": "scene",
               "src_kps": [src[k] for k in sorted(pick)], "trg_kps": [trg[k] for k in sorted(pick)],
               "trg_bndbox": [0, 0, w, h]}
        (tree / "PairAnnotation" / "test" / f"{image.stem}-{a}-{b}:scene.json").write_text(
            json.dumps(doc, sort_keys=True))


def _write_captions(store: Store, root: Path) -> None:
    """``captions.jsonl``: scikit-image's captioned photos as caption-selection instances, the
    next photo's caption (in name order, wrapping) the negative. SugarCrepe's layout, one photo
    per instance with its caption first; then Winoground's, consecutive photos paired, both
    with the pair's two captions."""
    view = load_manifest(store, "skimage:samples")
    photos = [(Path(view.image_path(i)), caps[0]) for i, caps in enumerate(view.captions())]
    rows = []  # (copy's name, source image, captions)
    for i, (image, caption) in enumerate(photos):
        negative = photos[(i + 1) % len(photos)][1]
        rows.append((f"sugarcrepe/{i:03d}{image.suffix}", image, [caption, negative]))
    for k in range(len(photos) // 2):
        pair = photos[2 * k:2 * k + 2]
        rows += [(f"winoground/{k:03d}_{j}{image.suffix}", image, [c for _, c in pair])
                 for j, (image, _) in enumerate(pair)]
    lines = []
    for name, image, captions in rows:
        copy = root / "captions" / name
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(image, copy)
        lines.append(json.dumps({"image": f"captions/{name}", "captions": captions},
                                sort_keys=True) + "\n")
    (root / "captions.jsonl").write_text("".join(lines), encoding="utf-8")
