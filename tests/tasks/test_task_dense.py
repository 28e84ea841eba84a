"""Dense probes end to end on TensorSplits: they learn a learnable signal, beat the trivial
predictor, repeat per seed, and refuse bad input with one line."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from vbstore.errors import UsageError
from vbstore.tasks import (
    BOX_TARGETS,
    DenseTask,
    TaskInputError,
    TensorSplit,
    TrainingDiverged,
    get_task,
    list_tasks,
)
from vbstore.tasks._dense_ops import gradient_orientation, shi_tomasi
from vbstore.tasks._dense_train import build_head, lr_factor

N, GRID, UP = 16, 8, 4  # 16 images, an 8x8 patch grid, targets at 32x32
FAST = {"epochs": 25, "lr": 0.05}
DENSE = ["corner", "depth", "edge", "generic_segmentation", "keypoints2d", "occlusion_edge",
         "orientation", "semantic_segmentation", "surface_normal"]
# VisBench's named questions on a dense probe: the parent's probe under another name, whose
# numbers equal the parent's (tests/tasks/test_visbench_questions.py)
QUESTIONS = {"scene_parsing": "semantic_segmentation"}


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def _up(x):
    return F.interpolate(x, scale_factor=UP, mode="bilinear", align_corners=False)


def _nearest(x):
    return x.repeat_interleave(UP, -2).repeat_interleave(UP, -1)


def _noise(*shape, seed=1):
    return torch.randn(*shape, generator=_gen(seed)) * 0.1


def semantic_split(seed=0, k=3):
    labels = torch.randint(0, k, (N, GRID, GRID), generator=_gen(seed))
    feats = F.one_hot(labels, k).permute(0, 3, 1, 2).float() * 2 + _noise(N, k, GRID, GRID)
    return TensorSplit([feats], _nearest(labels), target_kind="label_map")


def depth_split(seed=0):
    depth = torch.rand(N, 1, GRID, GRID, generator=_gen(seed)) * 5 + 0.5
    feats = torch.cat([depth, depth.log(), _noise(N, 2, GRID, GRID)], 1)
    return TensorSplit([feats], _up(depth), target_kind="depth_map")


def normal_split(seed=0):
    normals = F.normalize(torch.randn(N, 3, GRID, GRID, generator=_gen(seed)), dim=1)
    return TensorSplit([normals + _noise(N, 3, GRID, GRID)], _up(normals),
                       target_kind="normal_map")


def binary_split(seed=0):
    mask = (torch.rand(N, GRID, GRID, generator=_gen(seed)) < 0.4).long()
    feats = (mask[:, None].float() * 2 - 1) + _noise(N, 2, GRID, GRID)
    return TensorSplit([feats], _nearest(mask), target_kind="label_map")


def map_split(seed=0):
    values = torch.rand(N, 1, GRID, GRID, generator=_gen(seed)) * 3
    return TensorSplit([torch.cat([values, _noise(N, 3, GRID, GRID)], 1)], _up(values),
                       target_kind="scalar_map")


def corner_split(seed=0):
    blocks = torch.rand(N, 3, GRID // 2, GRID // 2, generator=_gen(seed))
    image = blocks.repeat_interleave(2 * UP, -2).repeat_interleave(2 * UP, -1)
    response = F.avg_pool2d(shi_tomasi(image, 1.0), UP)
    return TensorSplit([torch.cat([response, _noise(N, 3, GRID, GRID)], 1)], image,
                       target_kind="image")


def orientation_split(seed=0):
    """Stripes of a random direction per image: the pooled doubled-angle target is a feature."""
    g = _gen(seed)
    theta = torch.rand(N, 1, 1, 1, generator=g) * math.pi
    size = GRID * UP
    yy, xx = torch.meshgrid(torch.arange(size, dtype=torch.float32),
                            torch.arange(size, dtype=torch.float32), indexing="ij")
    wave = torch.sin((xx * torch.cos(theta) + yy * torch.sin(theta)) * 0.9)
    image = (0.5 + 0.4 * wave).expand(N, 3, size, size).contiguous()
    doubled = F.avg_pool2d(gradient_orientation(image, 1.0, 8.0), UP)
    return TensorSplit([torch.cat([doubled, _noise(N, 2, GRID, GRID)], 1)], image,
                       target_kind="image")


SPLITS = {
    "semantic_segmentation": (semantic_split, {"num_classes": 3}),
    "generic_segmentation": (binary_split, {}),
    "depth": (depth_split, {}),
    "surface_normal": (normal_split, {}),
    "edge": (map_split, {}),
    "occlusion_edge": (map_split, {}),
    "keypoints2d": (map_split, {}),
    "corner": (corner_split, {}),
    "orientation": (orientation_split, {}),
}


def test_every_dense_task_is_declared_with_its_protocol():
    # the trained per-pixel probes (the pair probes read dense maps too, with their own
    # protocols; the box probes train on the dense recipe and have their own tests)
    assert sorted(n for n in list_tasks() if isinstance(get_task(n), DenseTask)
                  and get_task(n).target_kind not in BOX_TARGETS) == sorted([*DENSE, *QUESTIONS])
    for name, parent in QUESTIONS.items():
        assert isinstance(get_task(name), type(get_task(parent))), name
    for name in DENSE:
        task = get_task(name)
        assert task.protocol, name
        assert task.resolve_params()["epochs"] == 10
        assert task.resolve_params()["lr"] == 5e-4
        assert task.resolve_params()["batch_size"] == 8
        assert task.resolve_params()["warmup_epochs"] == 1.5
    assert get_task("depth").protocol == get_task("surface_normal").protocol == "probe3d"


def _trivial(name, split, params):
    """The metrics of the best constant prediction: majority class, mean depth, mean normal,
    zero map (scored by the task's own scorer on the split's own targets)."""
    task = get_task(name)
    params = task.resolve_params(params)
    scorer = task._scorer(params)
    for batch in split.batches(8):
        target = task._prepare(batch.target, params, "eval")
        if name == "semantic_segmentation":
            pred = torch.zeros(len(target), 3, *target.shape[-2:])
            pred[:, int(torch.mode(split._target.flatten()).values)] = 1
        elif name == "generic_segmentation":
            pred = torch.full((len(target), 1, *target.shape[-2:]), -1.0)  # all background
        elif name == "depth":
            pred = torch.full_like(target, float(split._target[split._target > 0].mean()))
        elif name == "surface_normal":
            pred = split._target.mean(dim=(0, 2, 3)).reshape(1, 3, 1, 1).expand_as(target)
        elif name == "orientation":  # the axial mean of every scored pixel's angle, in numpy
            every = task._prepare(split._target, params, "eval").numpy()
            scored = np.abs(every).sum(1) > 0
            angle = np.arctan2(every[:, 1], every[:, 0])[scored]
            mean = np.arctan2(np.sin(angle).sum(), np.cos(angle).sum()) / 2
            pred = torch.tensor([math.cos(2 * mean), math.sin(2 * mean)]).reshape(1, 2, 1, 1)
            pred = pred.expand_as(target)
        else:
            pred = torch.zeros_like(target) + torch.rand(1, generator=_gen(3)) * 1e-9
        scorer.update(pred, target)
    try:
        return scorer.result()
    except Exception:  # a constant map has no correlation: the trivial score is 0
        return {task.headline: 0.0}


@pytest.mark.parametrize("name", DENSE)
def test_probe_learns_a_learnable_signal_and_beats_the_trivial_predictor(name):
    make, params = SPLITS[name]
    task = get_task(name)
    train, held_out = make(0), make(1)
    head, train_metrics = task.fit_split(train, {**params, **FAST}, seed=0)
    metrics = task.evaluate_split(head, held_out, params)
    assert set(metrics) == {m.name for m in task.metrics}
    assert math.isfinite(train_metrics["train_loss"])
    good = {"semantic_segmentation": ("miou", 0.9), "generic_segmentation": ("iou", 0.9),
            "depth": ("d1", 0.9), "surface_normal": ("d1", 0.9),
            # the features hold a 4x4-pooled response: its fine peaks cannot be recovered
            "corner": (task.headline, 0.7)}.get(name, (task.headline, 0.9))
    trivial = _trivial(name, held_out, params)
    if name == "orientation":  # an error in degrees: lower is better
        assert metrics["orientation_error"] < 10, metrics
        assert metrics["orientation_error"] < trivial["orientation_error"] - 20, (metrics, trivial)
        return
    assert metrics[good[0]] > good[1], metrics
    assert metrics[task.headline] > trivial[task.headline] + 0.2, (metrics, trivial)


@pytest.mark.parametrize("name", DENSE)
def test_baseline_split_is_the_trivial_predictor(name):
    """The library's trivial baseline equals an independent computation of the best constant."""
    make, params = SPLITS[name]
    split = make(1)
    task = get_task(name)
    got = task.baseline_split(split, params)
    assert set(got) == {m.name for m in task.metrics}
    assert task.trivial
    expected = _trivial(name, split, params)
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, abs=1e-6), (key, got, expected)


def test_depth_abs_rel_falls_well_below_the_mean_predictor():
    task = get_task("depth")
    head, _ = task.fit_split(depth_split(0), FAST, seed=0)
    metrics = task.evaluate_split(head, depth_split(1), {})
    assert metrics["abs_rel"] < 0.5 * _trivial("depth", depth_split(1), {})["abs_rel"]


def test_dpt_head_fuses_several_layers_and_learns():
    base = semantic_split(0)
    labels = base._target[:, ::UP, ::UP]
    deep = F.one_hot(labels, 3).permute(0, 3, 1, 2).float() * 2
    split = TensorSplit([_noise(N, 5, GRID, GRID), deep], base._target, target_kind="label_map")
    task = get_task("semantic_segmentation")
    params = {"num_classes": 3, "head": "dpt", "hidden_dim": 16, **FAST, "lr": 5e-3}
    head, _ = task.fit_split(split, params, seed=0)
    assert any(key.startswith("project.1") for key in head)
    assert task.evaluate_split(head, split, params)["miou"] > 0.8
    with pytest.raises(UsageError, match="several --layers") as info:
        task.fit_split(semantic_split(0), params, seed=0)
    assert "\n" not in str(info.value)
    four = build_head(task.resolve_params(params), (5, 5, 5, 5), 3, 0, task.name)
    out = four([torch.zeros(1, 5, GRID, GRID)] * 4)
    assert out.shape == (1, 3, 4 * GRID, 4 * GRID)  # 2x per fusion, at most 4x the grid


def test_same_seed_same_head_other_seed_other_head_global_rng_untouched():
    task = get_task("depth")
    params = {"epochs": 2}
    state = torch.get_rng_state()
    a, ma = task.fit_split(depth_split(), params, seed=5)
    assert torch.equal(torch.get_rng_state(), state)
    b, mb = task.fit_split(depth_split(), params, seed=5)
    c, _ = task.fit_split(depth_split(), params, seed=6)
    assert ma == mb
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)
    assert task.evaluate_split(a, depth_split(1), {}) == task.evaluate_split(b, depth_split(1), {})


def test_schedule_is_linear_warmup_then_cosine_to_zero():
    # 10 steps, 2 of warm-up
    assert lr_factor(0, 10, 2) == pytest.approx(0.5)
    assert lr_factor(1, 10, 2) == pytest.approx(1.0)
    assert lr_factor(2, 10, 2) == pytest.approx(1.0)
    assert lr_factor(6, 10, 2) == pytest.approx(0.5)
    assert lr_factor(10, 10, 2) == pytest.approx(0.0)
    # probe3d's 1.5 epochs of 4 steps: 6 steps of warm-up
    assert [lr_factor(s, 40, 6) for s in range(3)] == pytest.approx([1 / 6, 2 / 6, 0.5])


def _one_line(info):
    assert "\n" not in str(info.value)
    return str(info.value)


def test_bad_inputs_are_refused_with_one_line():
    sem = get_task("semantic_segmentation")
    with pytest.raises(UsageError, match="num_classes >= 2") as info:
        sem.fit_split(semantic_split(), {}, seed=0)
    _one_line(info)
    with pytest.raises(TaskInputError, match=r"labels hold 2, outside 0\.\.1") as info:
        sem.fit_split(semantic_split(), {"num_classes": 2}, seed=0)
    assert "palette" in _one_line(info)
    split = semantic_split()
    floats = TensorSplit([split._feats[0]], split._target.float(), target_kind="label_map")
    with pytest.raises(TaskInputError, match="must be integers"):
        sem.fit_split(floats, {"num_classes": 3}, seed=0)
    with pytest.raises(TaskInputError, match="targets are depth_map"):
        sem.fit_split(depth_split(), {"num_classes": 3}, seed=0)

    depth = get_task("depth")
    d = depth_split()
    bad = d._target.clone()
    bad[0, 0, 0, 0] = math.nan
    with pytest.raises(TaskInputError, match="NaN or Inf") as info:
        depth.fit_split(TensorSplit(d._feats, bad, target_kind="depth_map"), {}, seed=0)
    _one_line(info)
    with pytest.raises(TaskInputError, match="every pixel of the train split is invalid"):
        depth.fit_split(TensorSplit(d._feats, torch.zeros_like(d._target),
                                    target_kind="depth_map"), {"epochs": 1}, seed=0)
    wide = TensorSplit(d._feats, torch.ones(N, 1, 32, 48), target_kind="depth_map")
    with pytest.raises(TaskInputError, match="another aspect") as info:
        depth.fit_split(wide, {}, seed=0)
    _one_line(info)
    with pytest.raises(UsageError, match="max_depth must exceed min_depth"):
        depth.fit_split(d, {"min_depth": 5.0, "max_depth": 1.0}, seed=0)


def test_a_head_that_does_not_fit_is_refused():
    sem = get_task("semantic_segmentation")
    head, _ = sem.fit_split(semantic_split(), {"num_classes": 3, "epochs": 1}, seed=0)
    with pytest.raises(TaskInputError, match="does not fit") as info:
        sem.evaluate_split(head, semantic_split(), {"num_classes": 4})
    _one_line(info)
    with pytest.raises(TaskInputError, match="does not fit"):
        get_task("depth").evaluate_split(head, depth_split(), {})


def test_divergence_is_refused():
    task = get_task("edge")
    with pytest.raises(TrainingDiverged, match="lower lr"):
        task.fit_split(map_split(), {"lr": 1e38, "epochs": 3}, seed=0)


def test_surface_normal_plain_angular_loss_has_three_channels_and_learns():
    task = get_task("surface_normal")
    params = {"uncertainty_aware": False, **FAST}
    head, _ = task.fit_split(normal_split(0), params, seed=0)
    assert head["conv.weight"].shape[0] == 3
    assert task.evaluate_split(head, normal_split(1), params)["d1"] > 0.9


def test_occlusion_edges_are_regressed_in_log_space():
    task = get_task("occlusion_edge")
    t = torch.tensor([[[[0.0, math.e - 1]]]])
    params = task.resolve_params()
    assert task._prepare(t, params, "eval").flatten().tolist() == pytest.approx([0.0, 1.0])
    assert task._prepare(t, {**params, "target_transform": "none"}, "eval").equal(t)
    with pytest.raises(TaskInputError, match="target_transform=none"):
        task._prepare(-t - 1, params, "train")


def test_n_bins_sets_the_depth_heads_width():
    """VisBench's --n-bins: the depth head predicts over that many bins (default 256)."""
    task = get_task("depth")
    quick = {"epochs": 2, "lr": 0.05}
    default, _ = task.fit_split(depth_split(0), quick, seed=0)
    fewer, _ = task.fit_split(depth_split(0), {**quick, "n_bins": 16}, seed=0)
    assert default["conv.weight"].shape[0] == 256
    assert fewer["conv.weight"].shape[0] == 16
    assert set(task.evaluate_split(fewer, depth_split(1), {"n_bins": 16})) >= {"d1", "abs_rel"}
