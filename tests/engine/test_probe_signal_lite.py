"""Every trained probe learns from real pretrained features: efficientnet_lite0's ImageNet
weights beat both the task's trivial predictor and the same architecture with random weights.

Each probe runs on the reference corpus's data (``vbstore.suites._corpus``: faces vs non-faces
for the pooled probes, generated scenes for the dense, box and pair probes), through the real
engine, with the corpus's parameters except where :data:`SMALLER` runs it cheaper: a smaller
input (the corpus runs at 224 px; a dense probe's targets are resized to the input, so its cost
grows with the input's area) or fewer epochs than the corpus's 50, for lite0 and its random
twin alike, and only where the measured gain stayed clear. The trivial predictor is scored on
the same split; the random baseline is EfficientNet-Lite0's architecture at seed 0.
``MARGINS`` holds the least margin over the better of the two, in the headline's units: about
half of what was measured so (the figures in the comments), so that only a probe that learned
nothing from the pretrained features fails.

The cases are spread over two files, each with its own store, so that pytest-xdist (``make
test``, ``--dist loadfile``) runs them side by side: this one (the probes at 128 px: the faces
and the cheaper scenes probes) and tests/engine/test_probe_signal_lite_224.py (the probes whose
margin needs the corpus's 224 px); :func:`test_every_trained_probe_is_checked` holds the two to
every trained probe, each once.
"""

from __future__ import annotations

import pytest
import torch

from vbstore import Store
from vbstore.data import load_manifest
from vbstore.engine import baseline_metrics, open_dense_result
from vbstore.suites import _corpus, reference
from vbstore.tasks import get_task
from vbstore.tasks.relative_pose import trivial_metrics

# the probes the Lites rank on (a CLIP-only probe, linear_probe, runs on its own suite)
TRAINED = {p["task"]: p for p in _corpus.PROBES if p["train"] and p["backbones"] == "vision"}

# task -> (input size, epochs) where a case runs cheaper than the corpus (None: the corpus's)
SMALLER: dict[str, tuple[int | None, int | None]] = {
    "classification": (128, None),
    "knn": (128, None),
    "multilabel": (128, None),
    "semantic_segmentation": (128, 25),
    "generic_segmentation": (128, 25),
    "occlusion_edge": (128, None),
    "keypoints2d": (128, None),
    "corner": (128, 25),
    "relative_pose": (128, None),
    "surface_normal": (None, 12),
    "orientation": (None, 12),
    "depth": (None, 12),
    "edge": (None, 25),
}

# task -> least margin over max(trivial, random) on the headline, measured as the case runs
# (lite0, random lite0, trivial; SMALLER's size and epochs)
MARGINS = {
    "classification": 0.06,  # top1 1.000, 0.880, 0.500 (at 224 px: 1.000, 0.960)
    "knn": 0.07,  # top1 on clean faces 1.000, 0.860, 0.500
    "multilabel": 0.06,  # mAP 0.879, 0.751, 0.708 (each label's prevalence)
    "semantic_segmentation": 0.1,  # miou 0.602, 0.400, 0.117
    "detection": 0.003,  # map_50 0.023, 0.002, 0.017: weak at a 7x7 grid, but above both
    "instance_segmentation": 0.025,  # mask_map_50 0.070, 0.000, 0.016
    "depth": 0.05,  # d1 0.809, 0.700, 0.205
    "surface_normal": 0.19,  # d1 0.405, 0.027, 0.004
    "generic_segmentation": 0.11,  # iou 0.343, 0.116, 0.000
    "occlusion_edge": 0.035,  # occlusion_edge_correlation 0.084, 0.010, 0
    "edge": 0.04,  # edge_correlation 0.300, 0.218, 0
    "keypoints2d": 0.03,  # keypoint_correlation 0.098, 0.035, 0
    "corner": 0.03,  # corner_correlation 0.212, 0.149, 0
    "orientation": 1.6,  # orientation_error 30.7, 34.0, 43.1 degrees
}
# Strict: the day it passes, its mark must go. 32 training pairs are too few for the pose head:
# rotation_error 13.95 degrees against 18.6 with random weights but 13.79 for the mean train
# pose (at 224 px 17.7, 20.4, 13.8; test_pixels beats the mean pose with 128 pairs per split:
# tests/engine/test_probe_signal.py)
SHORT = {"relative_pose": 1.0}


def corpus_store(tmp_path_factory):
    """A store and the corpus inputs (each file of these cases builds its own)."""
    root = tmp_path_factory.mktemp("lite_signal")
    with Store(root / "store") as store:
        _corpus.write_inputs(store, root / "inputs")
        yield store, root / "inputs"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """One store and the corpus inputs for every case: each image is extracted once."""
    yield from corpus_store(tmp_path_factory)


def _trivial(store, spec: dict, inputs, result: str, headline: str) -> float:
    """The headline of the probe's trivial predictor on its eval split (first condition)."""
    task = spec["task"]
    plan = reference._plan(spec, inputs)
    source = next(iter(plan["where"].values()))
    if task in ("classification", "knn"):
        labels = load_manifest(store, source if source.endswith(".csv") else plan["data"],
                               split=None if source.endswith(".csv") else plan["split"]).labels()
        return max(labels.count(c) for c in set(labels)) / len(labels)
    if task == "multilabel":  # a constant score ranks at random: AP = each label's prevalence
        view = load_manifest(store, plan["data"])
        rows = [set(s["labels"]) for s in view.doc["samples"]]
        names = sorted(set().union(*rows))
        return sum(sum(n in r for r in rows) / len(rows) for n in names) / len(names)
    if task == "relative_pose":
        def pairs(split: str) -> torch.Tensor:
            view = load_manifest(store, plan["data"], split=split, layout="pairs")
            return torch.tensor(view.doc["pairs"], dtype=torch.float64)

        return trivial_metrics(pairs("train"), pairs("val"))[headline]
    view = open_dense_result(store, result, plan["data"], split=plan["split"],
                             data_options=spec.get("data_options"))
    return baseline_metrics(view)[headline]


def _gain(task: str, value: float, other: float) -> float:
    spec = get_task(task)
    direction = next(m.direction for m in spec.metrics if m.name == spec.headline)
    return value - other if direction == "higher" else other - value


def as_run(task: str) -> tuple[dict, int | None]:
    """The corpus probe of ``task`` as its case runs it: its first condition only (the one
    checked: clean faces for knn), :data:`SMALLER`'s epochs; and the input size."""
    spec = dict(TRAINED[task])
    if spec["conditions"]:
        spec["conditions"] = dict(list(spec["conditions"].items())[:1])
    size, epochs = SMALLER.get(task, (None, None))
    if epochs is not None:
        spec["params"] = {**spec["params"], "epochs": epochs}
    return spec, size


def check_probe(corpus, task: str) -> None:
    """Lite0's headline beats both its trivial predictor and random weights by ``task``'s
    margin."""
    store, inputs = corpus
    (spec, size), headline = as_run(task), get_task(task).headline
    ours = reference.probe_results(store, spec, inputs, ("efficientnet_lite0", "default", None,
                                                         size))
    theirs = reference.probe_results(store, spec, inputs, ("efficientnet_lite0", "random", 0,
                                                           size))
    (condition,) = ours
    value = store.read_json(ours[condition])["metrics"][headline]
    random = store.read_json(theirs[condition])["metrics"][headline]
    trivial = _trivial(store, spec, inputs, ours[condition], headline)
    assert store.read_json(ours[condition])["weights_kind"] == "pretrained"
    assert store.read_json(theirs[condition])["weights_kind"] == "random"
    least = MARGINS.get(task) or SHORT[task]
    assert _gain(task, value, trivial) >= least, (task, value, trivial)
    assert _gain(task, value, random) >= least, (task, value, random)


# slow(cost=N): a case costs about N ordinary slow cases (tests/conftest.py hands the costliest
# files out first)
CHECKED = ("classification", "knn", "multilabel", "semantic_segmentation",
           "generic_segmentation", "occlusion_edge", "keypoints2d", "corner")


@pytest.mark.slow(cost=2)
@pytest.mark.parametrize("task", [
    *CHECKED,
    *(pytest.param(t, marks=pytest.mark.xfail(strict=True, reason="32 pairs: see SHORT"))
      for t in SHORT)])
def test_lite0_beats_its_trivial_predictor_and_random_weights(corpus, task):
    check_probe(corpus, task)


def test_every_trained_probe_is_checked():
    from test_probe_signal_lite_224 import CHECKED as AT_224

    assert set(MARGINS) | set(SHORT) == set(TRAINED)
    checked = [*CHECKED, *AT_224]
    assert sorted(checked) == sorted(MARGINS)  # each probe with a margin once, in one file
    assert set(SMALLER) <= set(TRAINED)
