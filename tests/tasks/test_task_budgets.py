"""Class counts and head values are checked before they become allocations or numbers
(issue 21: a head full of NaN gave a number; labels or a class count of 1e9, or
``num_classes=100000``, tried to allocate gigabytes and died with a raw RuntimeError)."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
import torch

from vbstore.errors import BadHead, OverBudget, UsageError
from vbstore.heads import load_head, save_head
from vbstore.tasks import KeypointPairs, TaskInputError, TensorSplit, get_task

COMPAT = {"backbone": "b" * 64, "weights": "a" * 64, "extractor_key": "e" * 64,
          "pooling": "cls", "layers": [-1], "feature_mode": "pooled", "embed_dim": 4,
          "task": "classification", "task_op_version": 1}


def _knn_head(labels, n_classes):
    bank = torch.nn.functional.normalize(torch.randn(4, 8, generator=torch.Generator()
                                                     .manual_seed(0)), dim=1)
    return {"bank": bank, "labels": torch.tensor(labels, dtype=torch.int64),
            "n_classes": torch.tensor(n_classes, dtype=torch.int64)}


def test_a_knn_head_with_labels_outside_its_classes_is_refused():
    feats, targets = torch.randn(3, 8), torch.tensor([0, 1, 0])
    with pytest.raises(TaskInputError, match=r"head labels run from 0 to 1000000000, outside"):
        get_task("knn").evaluate(_knn_head([0, 1, 0, 10**9], 2), feats, targets)


@pytest.fixture(autouse=True)
def _limit(monkeypatch):
    """A fixed limit, so no test here depends on (or tries to allocate) this machine's memory."""
    monkeypatch.setenv("VBSTORE_MAX_MEMORY", "2G")


def test_a_knn_head_claiming_1e9_classes_is_over_the_memory_limit_in_one_line():
    feats, targets = torch.randn(3, 8), torch.tensor([0, 1, 0])
    with pytest.raises(OverBudget, match=r"votes over 1000000000 classes .* over the limit of "
                                         r"2 GiB; .*VBSTORE_MAX_MEMORY=SIZE") as caught:
        get_task("knn").evaluate(_knn_head([0, 1, 0, 1], 10**9), feats, targets)
    assert caught.value.exit_code == 2


def test_the_default_limit_is_at_most_half_the_machine(monkeypatch):
    from vbstore._budget import DEFAULT_MEMORY, memory_limit

    monkeypatch.delenv("VBSTORE_MAX_MEMORY")
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert memory_limit() == min(DEFAULT_MEMORY, physical // 2)


def test_the_memory_limit_is_read_from_the_environment(monkeypatch):
    feats, targets = torch.randn(3, 8), torch.tensor([0, 1, 0])
    monkeypatch.setenv("VBSTORE_MAX_MEMORY", "10")
    with pytest.raises(OverBudget, match="over the limit"):
        get_task("knn").evaluate(_knn_head([0, 1, 0, 1], 2), feats, targets)
    monkeypatch.setenv("VBSTORE_MAX_MEMORY", "lots")
    with pytest.raises(UsageError, match="VBSTORE_MAX_MEMORY='lots' is not a positive size"):
        get_task("knn").evaluate(_knn_head([0, 1, 0, 1], 2), feats, targets)
    monkeypatch.setenv("VBSTORE_MAX_MEMORY", "1G")
    assert set(get_task("knn").evaluate(_knn_head([0, 1, 0, 1], 2), feats, targets)) == {
        "top1", "top5"}


def _label_split(k=3):
    labels = torch.randint(0, k, (4, 8, 8), generator=torch.Generator().manual_seed(0))
    feats = torch.nn.functional.one_hot(labels, k).permute(0, 3, 1, 2).float()
    return TensorSplit([feats], labels.repeat_interleave(4, -2).repeat_interleave(4, -1),
                       target_kind="label_map")


@pytest.mark.parametrize("k", [100_000, 40_000])
def test_num_classes_past_the_memory_limit_is_refused_before_anything_is_built(k):
    """--num-classes 100000: a (k x k) confusion matrix and (8, k, 32, 32) logits."""
    task = get_task("semantic_segmentation")
    with pytest.raises(OverBudget, match=rf"a head of {k} outputs on 32x32 targets"):
        task.fit_split(_label_split(), {"num_classes": k, "epochs": 1}, 0, None)


def test_evaluating_a_head_with_another_class_count_is_refused_before_it_is_built():
    task = get_task("semantic_segmentation")
    state, _ = task.fit_split(_label_split(), {"num_classes": 3, "epochs": 1}, 0, None)
    with pytest.raises(TaskInputError, match=r"does not fit: it has 3 outputs, .* needs 1000000"):
        task.evaluate_split(state, _label_split(), {"num_classes": 10**6})
    with pytest.raises(OverBudget):
        task.baseline_split(_label_split(), {"num_classes": 10**6})


def _stored_head(store, weight, **extra):
    state = {"weight": weight, "bias": np.zeros(len(weight), np.float32),
             "mean": np.zeros(4, np.float32), "std": np.ones(4, np.float32)}
    return save_head(store, state, {**COMPAT, **extra})


def test_a_head_full_of_nan_is_refused_where_it_is_loaded(store):
    head = _stored_head(store, np.full((3, 4), np.nan, np.float32))
    with pytest.raises(BadHead, match=r"tensor 'weight' holds NaN or infinite values") as caught:
        load_head(store, head)
    assert caught.value.exit_code == 2
    fine = _stored_head(store, np.ones((3, 4), np.float32))
    assert load_head(store, fine)[2] is True


def test_a_head_whose_record_claims_more_classes_than_it_has_outputs_is_refused(store):
    head = _stored_head(store, np.ones((3, 4), np.float32), params={"num_classes": 10**9})
    with pytest.raises(BadHead, match=r"num_classes 1000000000 but its largest output has 4"):
        load_head(store, head)


def test_a_spair_box_larger_than_its_image_is_refused_where_pck_is_scored():
    """The PoC: a box of [-5, -5, 1e300, 1e300] makes every transfer correct (pck 1.0)."""
    split = TensorSplit([torch.randn(2, 16, 4, 4)], torch.zeros(2, 3, 32, 32),
                        target_kind="image")
    pairs = [[0, 1, [[5.0, 5.0]], [[30.0, 30.0]], [-5.0, -5.0, 1e300, 1e300]]]

    def geometry(width, height):
        return (width, height), None

    with pytest.raises(TaskInputError, match=r"box .* lies outside its 32x32 target image"):
        get_task("keypoint_correspondence").evaluate_views(
            KeypointPairs(split, pairs, np.array([[32, 32]] * 2), geometry, 32))


def test_a_linear_probe_over_a_million_classes_is_refused_before_it_trains():
    feats, targets = torch.randn(8, 768), torch.arange(8) % 2  # 12 GB of head and Adam state
    names = [f"c{i}" for i in range(10**6)]
    with pytest.raises(OverBudget, match=r"a linear head of 1000000 outputs on 8 samples"):
        get_task("classification").fit(feats, targets, {"epochs": 1}, 0, names)


@pytest.mark.parametrize(("weight", "extra", "why"), [
    (np.full((3, 4), np.nan, np.float32), {}, r"tensor 'weight' holds NaN"),
    (np.ones((3, 4), np.float32), {"params": {"num_classes": 10**9}},
     r"num_classes 1000000000 but its largest output has 4"),
    ("knn", {"task": "knn"}, r"head labels run from 0 to 1000000000, outside its 2 classes"),
])
def test_a_head_that_cannot_be_right_is_refused_at_import(store, tmp_path, weight, extra, why):
    """Issue 32: such a head was imported, and refused only when first applied."""
    from click.testing import CliRunner

    from vbstore import Store
    from vbstore.cli import cli
    from vbstore.heads import export_head

    path = tmp_path / "bad.safetensors"
    if isinstance(weight, str):  # a kNN head whose labels lie outside its classes
        head = save_head(store, _knn_head([0, 1, 0, 10**9], 2), {**COMPAT, **extra})
    else:
        head = _stored_head(store, weight, **extra)
    export_head(store, head, path)
    other = tmp_path / "other"
    out = CliRunner().invoke(cli, ["--store", str(other), "import", "head", str(path)])
    assert out.exit_code == BadHead.exit_code == 2, out.output
    assert len(out.output.strip().splitlines()) == 1
    assert re.search(why, out.output)
    assert "nothing was imported" in out.output
    with Store(other) as s:
        assert s.ls() == []
        assert s.refs() == {}
