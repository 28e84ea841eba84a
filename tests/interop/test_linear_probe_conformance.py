"""``linear_probe`` equals CLIP_benchmark 1.6.2's own ``linear_probe.evaluate`` on one set of
features.

CLIP_benchmark asserts CUDA; on a CPU machine its ``.cuda()`` calls are made no-ops and its
``.to("cuda")`` lands on the CPU, nothing else of it is touched. Its features are cached in its
own feature folder beforehand (what it reads when its cache exists), so it draws from the
global generator exactly what vbstore draws from its seeded one: the held-out split, then the
few-shot permutation.

Its ``accuracy`` converts a one-element array with ``float()``, which numpy 2 refuses; the test
gives it the same sum read with ``.item()``.
"""

from __future__ import annotations

import importlib

import pytest
import torch
import torch.nn.functional as F
from cb_support import accuracy as _accuracy
from cb_support import on_cpu as _on_cpu

from vbstore.tasks import get_task

pytestmark = pytest.mark.slow


def _features(seed: int, n: int, classes: int = 7, dim: int = 12) -> list[torch.Tensor]:
    """Train and test embeddings (not unit-norm: both tools normalise) and their labels."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(classes, dim, generator=g)
    out = []
    for size in (n, n // 2):
        y = torch.arange(size) % classes
        out += [(centres[y] + 1.5 * torch.randn(size, dim, generator=g)) * 3.0, y]
    return out


def _clip_benchmark(tmp_path, monkeypatch, x, y, x_test, y_test, *, k, p, seed):
    linear_probe = importlib.import_module("clip_benchmark.metrics.linear_probe")
    _on_cpu(monkeypatch)
    monkeypatch.setattr(linear_probe, "accuracy", _accuracy)
    torch.manual_seed(seed)  # its run(): the seed, then (with --val_proportion) random_split
    x = F.normalize(x, dim=-1)
    folder = tmp_path / "features" / "model"
    folder.mkdir(parents=True)
    rows, val_rows = list(range(len(x))), None
    if p:
        train, val = torch.utils.data.random_split(range(len(x)), [1 - p, p])
        rows, val_rows = list(train.indices), list(val.indices)
        torch.save(x[val_rows], folder / "features_val.pt")
        torch.save(y[val_rows], folder / "targets_val.pt")
    torch.save(x[rows], folder / "features_train.pt")
    torch.save(y[rows], folder / "targets_train.pt")
    torch.save(F.normalize(x_test, dim=-1), folder / "features_test.pt")
    torch.save(y_test, folder / "targets_test.pt")
    return linear_probe.evaluate(
        None, None, None, k, 16, 0, 0.1, 10, "model", seed, str(tmp_path / "features"),
        "cuda", val_dataloader=object() if p else None, amp=False)


@pytest.mark.parametrize(("k", "p", "seed"), [(-1, 0.0, 0), (4, 0.0, 3), (-1, 0.25, 1),
                                              (3, 0.3, 2)])
def test_linear_probe_equals_clip_benchmark(clip_benchmark, tmp_path, monkeypatch, k, p, seed):
    x, y, x_test, y_test = _features(10 + seed, 84)
    task = get_task("linear_probe")
    params = {"fewshot_k": k, "val_proportion": p, "batch_size": 16}
    head, train_metrics = task.fit(x, y, params, seed=seed)
    ours = task.evaluate(head, x_test, y_test, params)
    theirs = _clip_benchmark(tmp_path, monkeypatch, x, y, x_test, y_test, k=k, p=p, seed=seed)
    assert ours == {key: theirs[key] for key in ours}
    assert train_metrics["weight_decay"] == theirs["weight_decay"]
    if p:  # the search ran and picked from the grid
        assert theirs["weight_decay"] > 0


def _clip_benchmark_val_split(tmp_path, monkeypatch, x, y, x_val, y_val, x_test, y_test, *, k,
                              seed):
    """CLIP_benchmark's run with ``--val_split``: its val split's features cached beside the
    train split's, nothing held out of the train split."""
    linear_probe = importlib.import_module("clip_benchmark.metrics.linear_probe")
    _on_cpu(monkeypatch)
    monkeypatch.setattr(linear_probe, "accuracy", _accuracy)
    torch.manual_seed(seed)  # its run(): the seed; a named val split draws nothing
    folder = tmp_path / "features" / "model"
    folder.mkdir(parents=True)
    for name, feats, labels in (("train", x, y), ("val", x_val, y_val), ("test", x_test, y_test)):
        torch.save(F.normalize(feats, dim=-1), folder / f"features_{name}.pt")
        torch.save(labels, folder / f"targets_{name}.pt")
    return linear_probe.evaluate(
        None, None, None, k, 16, 0, 0.1, 10, "model", seed, str(tmp_path / "features"),
        "cuda", val_dataloader=object(), amp=False)


@pytest.mark.parametrize(("k", "seed"), [(-1, 0), (3, 2)])
def test_linear_probe_with_a_val_split_equals_clip_benchmark(clip_benchmark, tmp_path,
                                                             monkeypatch, k, seed):
    x, y, x_test, y_test = _features(20 + seed, 84)
    x_val, y_val = _features(40 + seed, 42)[:2]
    task = get_task("linear_probe")
    params = {"fewshot_k": k, "batch_size": 16}
    head, train_metrics = task.fit(x, y, params, seed=seed, val=(x_val, y_val))
    ours = task.evaluate(head, x_test, y_test, params)
    theirs = _clip_benchmark_val_split(tmp_path, monkeypatch, x, y, x_val, y_val, x_test, y_test,
                                       k=k, seed=seed)
    assert ours == {key: theirs[key] for key in ours}
    assert train_metrics["weight_decay"] == theirs["weight_decay"] > 0
    # the val split made a difference: without it the weight decay is 0 and the head another
    alone, _ = task.fit(x, y, params, seed=seed)
    assert not torch.equal(alone["weight"], head["weight"])
