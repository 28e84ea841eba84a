"""The demo's setup: which data, folder and parameters each probe reads in ``vbstore demo``.

``scenes`` (see ``vbstore.data``) carries a target folder per dense probe; a task whose target
comes from the pixels (``corner``, ``orientation``) reads the images alone. No torch here: the
demo plans with it before anything is computed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..data import SCENE_CLASSES
from ..errors import UsageError
from ..tasks import as_dense, get_task, list_tasks

# the scenes folder of each dense task with a stored target; the rest derive theirs from pixels
SCENES_FOLDERS = {
    "semantic_segmentation": "labels", "generic_segmentation": "masks", "depth": "depth",
    "surface_normal": "normals", "edge": "edges", "occlusion_edge": "occlusion_edges",
    "keypoints2d": "keypoints", "detection": "boxes", "instance_segmentation": "boxes",
}


# how long a trained dense head learns on the demo's scenes, as the reference board's does
# (suites/_corpus.py): probe3d's 10 epochs at lr 5e-4 are 40 steps on 32 train images, too few
# for a head to leave its initialisation, and random weights then look as good as pretrained
# ones (docs/tasks.md); 200 steps let the features decide
DENSE_TRAINING: dict[str, Any] = {"epochs": 50, "lr": 5e-3}


def dense_tasks() -> list[str]:
    """The registered trained dense tasks, by name."""
    return list_tasks(shapes=("dense", "boxes"))


def scenes_setup(task: str, per_split: int, size: int, seed: int
                 ) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(data, data options, task params) to run dense ``task`` on a generated ``scenes`` set.

    Raises:
        UsageError: ``task`` is not a dense task.
    """
    if task not in dense_tasks():
        raise UsageError(f"task {task!r} is not a dense probe",
                         hint=f"dense tasks: {', '.join(dense_tasks())}")
    data = f"scenes:per_split={per_split},size={size},seed={seed}"
    options = {"target": SCENES_FOLDERS[task]} if task in SCENES_FOLDERS else {}
    # scenes state their depth unit (targets.json); the class count is the task's own setting
    params: dict[str, Any] = {}
    if task == "semantic_segmentation":
        params["num_classes"] = len(SCENE_CLASSES)
    return data, options, params


# the default demo and its data: faces vs non-faces (scikit-image's lfw_subset), where ImageNet
# features find a face's fellow faces and random ones mostly do not (docs/benchmarks.md, "Demo")
DEFAULT_TASK = "retrieval"
FACES = "skimage:lfw_subset"
# VisBench's demo: four shapes, 20 per class per split, 224 px, pixel noise 45 grey levels over
# a shape 30 grey levels off its background
SHAPES_NOISE, SHAPES_IMAGES, SHAPES_SIZE, SHAPES_CONTRAST = 45.0, 20, 224, 30.0
POOLED = ("retrieval", "classification", "knn")
PAIRS = ("relative_pose", "correspondence", "similarity")
# what the demo reads off a result: the headline, except where a finer figure shows the gap
# (retrieval's recall@1 is near 1 for most features on 25 px crops; its mAP is not)
METRIC = {"retrieval": "mAP"}


@dataclass(frozen=True)
class ShapesDemo:
    """VisBench's demo data: ``images`` per class per split of its four shapes (circle, square,
    triangle, cross), buried in ``noise`` grey levels of pixel noise (28 to 90 in its table)."""

    noise: float = SHAPES_NOISE
    images: int = SHAPES_IMAGES

    def data(self, seed: int) -> str:
        return (f"shapes:classes=4,contrast={SHAPES_CONTRAST:g},grain={self.noise:g},"
                f"per_class={self.images},seed={seed},size={SHAPES_SIZE}")


@dataclass(frozen=True)
class DemoSetup:
    """What ``vbstore demo --task T`` runs: the data, its splits and options, the figure shown.

    Attributes:
        task: the probe.
        data: a packaged source (``skimage:lfw_subset``, ``scenes:...``, ``triplets:...``).
        split: the scored split; ``train_split`` the probe's training split (None: zero-shot).
        options: data options (a scenes target folder); ``params`` the task's parameters.
        metric: the figure printed, ``direction`` which way is better.
        about: what the data is, in a few words.
    """

    task: str
    data: str
    split: str | None
    train_split: str | None
    options: dict[str, Any]
    params: dict[str, Any]
    metric: str
    direction: str
    about: str


def demo_tasks() -> list[str]:
    """The tasks ``vbstore demo --task`` runs: the pooled probes, every dense probe, the pairs."""
    return [*POOLED, *dense_tasks(), *PAIRS]


def demo_setup(task: str, per_split: int, size: int, seed: int,
               shapes: ShapesDemo | None = None) -> DemoSetup:
    """The demo of ``task``: faces (or VisBench's ``shapes``) for the pooled probes, scenes for
    the dense and pair probes, generated triplets for similarity.

    Raises:
        UsageError: a task the demo does not run; shapes for a task that is not pooled.
    """
    if task not in demo_tasks():
        raise UsageError(f"the demo runs a pooled, dense or pair probe, not {task!r}",
                         hint=f"choose one of: {', '.join(demo_tasks())}")
    if shapes is not None and task not in POOLED:
        raise UsageError(f"the shapes demo runs {', '.join(POOLED)}, not {task!r}",
                         hint="drop --data shapes (and --noise, --images) for this task")
    spec = get_task(task)
    scenes = f"scenes:per_split={per_split},size={size},seed={seed}"
    split: str | None = "val"
    train: str | None = "train"
    options: dict[str, Any] = {}
    params: dict[str, Any] = {}
    if task in POOLED and shapes is not None:
        data = shapes.data(seed)
        about = (f"4 shapes, {shapes.images} per class per split, pixel noise "
                 f"{shapes.noise:g} (VisBench's demo)")
        train = None if task == "retrieval" else "train"
    elif task in POOLED:
        data, about = FACES, "faces vs non-faces, scikit-image lfw_subset (25 px crops)"
        train = None if task == "retrieval" else "train"
    elif task == "similarity":
        data, about = f"triplets:count={2 * per_split},seed={seed},size={size}", \
            "2AFC triplets: a photo or digit, a mild and a strong distortion of it"
        split, train = "test", None
    elif task in ("relative_pose", "correspondence"):
        data, about = scenes, f"scenes: {per_split} rooms of {size} px per split, two views each"
        train = "train" if task == "relative_pose" else None
    else:
        data, options, params = scenes_setup(task, per_split, size, seed)
        params = {**DENSE_TRAINING, **params}
        about = f"scenes: {per_split} train / {per_split} val rooms of {size} px"
    metric = METRIC.get(task, spec.headline)
    direction = next(m.direction for m in spec.metrics if m.name == metric)
    return DemoSetup(task, data, split, train, options, params, metric, direction, about)


def demo_trivial(store, setup: DemoSetup, result: str) -> tuple[str, float] | None:
    """What a predictor that reads no image scores on the demo's eval split, and its name; None
    where the probe defines none (correspondence)."""
    from ..data import load_manifest  # reads the split's labels or pairs: only when the demo runs

    if setup.task in POOLED:
        labels = load_manifest(store, setup.data, split=setup.split).labels()
        counts = [labels.count(c) for c in sorted(set(labels))]
        if setup.task == "retrieval":  # a random ranking: the share of same-class images
            n = len(labels)
            return ("chance (a random ranking)",
                    sum(c * (c - 1) / (n - 1) for c in counts) / n)
        return "the majority class", max(counts) / len(labels)
    if setup.task == "similarity":
        return "a coin flip", 0.5
    if setup.task == "relative_pose":
        import torch  # the pose metrics are torch functions

        from ..tasks.relative_pose import trivial_metrics  # torch at its top

        def pairs(split: str) -> Any:
            view = load_manifest(store, setup.data, split=split, layout="pairs")
            return torch.tensor(view.doc["pairs"], dtype=torch.float64)

        return "the mean train pose", trivial_metrics(pairs("train"), pairs("val"))[setup.metric]
    if setup.task == "correspondence":
        return None
    from ._inspect import baseline_metrics, open_dense_result  # torch: scores the dense split

    spec = as_dense(get_task(setup.task), result)  # demo_setup refused any other task
    view = open_dense_result(store, result, setup.data, split=setup.split,
                             data_options=setup.options)
    return spec.trivial, baseline_metrics(view)[setup.metric]
