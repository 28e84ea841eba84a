"""The demo's setup: which data, folder and parameters each probe reads in ``vbstore demo``.

``scenes`` (see ``vbstore.data``) carries a target folder per dense probe; a task whose target
comes from the pixels (``corner``, ``orientation``) reads the images alone. No torch here: the
demo plans with it before anything is computed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
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


def demo_shapes(data: str | None, noise: float | None, images: int | None) -> ShapesDemo | None:
    """VisBench's shapes demo as ``--data``, ``--noise`` and ``--images`` ask (None: faces).

    Raises:
        UsageError: ``--noise`` or ``--images`` with ``data="faces"``.
    """
    given = noise is not None or images is not None
    if data == "faces" and given:
        raise UsageError("--noise and --images set the shapes demo, not faces",
                         hint="drop them, or use --data shapes")
    if data != "shapes" and not given:
        return None
    shapes = ShapesDemo()  # VisBench's defaults, then what was given
    if noise is not None:
        shapes = replace(shapes, noise=noise)
    if images is not None:
        shapes = replace(shapes, images=images)
    return shapes


@dataclass(frozen=True)
class DemoRun:
    """What :func:`run_demo` ran: the chosen weights' result (and the same question asked
    again), random weights' result, the trivial predictor's figure, and the times.

    Attributes:
        setup: The demo's data and settings.
        backbone: The backbone spec probed.
        first: The result with the chosen weights (random ones when the default's pretrained
            weights could not be had: ``note`` then says why).
        again: The same question asked again (answered from the store).
        random: The result with random weights (``first`` itself when it used them).
        trivial: (name, figure) of the predictor that reads no image; None where the task has
            none.
        again_seconds: How long asking again took; ``wall_seconds`` the whole demo's wall time.
    """

    setup: DemoSetup
    backbone: str
    first: Any
    again: Any
    random: Any
    trivial: tuple[str, float] | None
    note: str | None
    again_seconds: float
    wall_seconds: float

    @property
    def compared(self) -> bool:
        """Whether random weights ran beside the chosen ones."""
        return self.random is not self.first

    def gain(self, over: float) -> float:
        """How much the chosen weights' figure beats ``over``, in the metric's direction."""
        value = self.first.metrics[self.setup.metric]
        return value - over if self.setup.direction == "higher" else over - value

    def summary(self) -> dict[str, Any]:
        """The demo as JSON (``vbstore demo --json``)."""
        setup, first, random, base = self.setup, self.first, self.random, self.trivial
        random_value = random.metrics[setup.metric]
        return {
            "result": first.id, "task": setup.task, "backbone": self.backbone,
            "data": setup.data, "weights": first.record.weights_kind, "note": self.note,
            "metric": setup.metric, "direction": setup.direction,
            "value": first.metrics[setup.metric], "metrics": first.metrics,
            "random_result": random.id, "random_value": random_value,
            "trivial": base[0] if base else None, "trivial_value": base[1] if base else None,
            "over_random": self.gain(random_value),
            "over_trivial": self.gain(base[1]) if base else None,
            "train_metrics": first.record.train_metrics or {},
            "first_seconds": first.seconds, "first_from_cache": first.from_cache,
            "cached_seconds": self.again_seconds, "cached": self.again.from_cache,
            "wall_seconds": self.wall_seconds,
        }


def run_demo(store, task: str, backbone: str = "efficientnet_lite0", weights: str = "default",
             *, per_split: int = 32, size: int = 64, seed: int = 0,
             input_size: int | None = None, shapes: ShapesDemo | None = None,
             progress: bool = True) -> DemoRun:
    """Run ``task``'s demo: the chosen weights, the same question again, random weights, and
    the trivial predictor, on data any machine has (``vbstore demo``).

    The default weights fall back to random ones when their pretrained weights (or the extra
    that ships them) cannot be had, and ``note`` says so; other weights never fall back.

    Raises:
        UsageError: a task the demo does not run.
        WeightsUnavailable, MissingExtra: weights other than the default cannot be had.
    """
    begun = time.perf_counter()  # the demo's wall time: every run it makes, imports too
    # the engine's compute path and the backbones' errors: only when a demo runs
    from ..backbones import MissingExtra, WeightsUnavailable
    from ._results import get_result

    setup = demo_setup(task, per_split, size, seed, shapes)
    note = None

    def run(chosen: str) -> Any:
        return get_result(backbone, task, setup.data, setup.data if setup.train_split else None,
                          store=store, split=setup.split, train_split=setup.train_split,
                          weights=chosen, input_size=input_size, params=setup.params,
                          data_options=setup.options, progress=progress)

    try:
        first = run(weights)
    except (WeightsUnavailable, MissingExtra) as exc:
        if weights != "default":  # only the default is allowed to fall back, and it says so
            raise
        # a missing extra names its install line; a backbone without pretrained weights does not
        fix = f"; {exc.hint}" if isinstance(exc, MissingExtra) else ""
        note = f"pretrained weights unavailable ({exc.args[0]}{fix}); using random weights instead"
        weights = "random"
        first = run(weights)
    start = time.perf_counter()
    again = run(weights)
    again_seconds = time.perf_counter() - start
    random = first if first.record.weights_kind == "random" else run("random")
    trivial = demo_trivial(store, setup, first.id)
    return DemoRun(setup, backbone, first, again, random, trivial, note, again_seconds,
                   time.perf_counter() - begun)
