"""The bootstrap over evaluation samples, checked against independent computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn.metrics import average_precision_score

from vbstore.tasks import get_task
from vbstore.tasks.bootstrap import (
    N_BOOT,
    bootstrap_evaluate,
    bootstrap_per_sample,
    resamples,
    sample_ci,
)


def test_bootstrap_of_a_proportion_matches_its_standard_error():
    # 300 of 400 hits: the bootstrap std of the mean is the binomial sqrt(p(1-p)/n).
    hits = torch.zeros(400, dtype=torch.float64)
    hits[:300] = 1.0
    ci = sample_ci(bootstrap_per_sample({"top1": hits}))["top1"]
    se = math.sqrt(0.75 * 0.25 / 400)
    assert ci["std"] == pytest.approx(se, rel=0.1)
    assert ci["ci_low"] == pytest.approx(0.75 - 1.96 * se, abs=0.006)
    assert ci["ci_high"] == pytest.approx(0.75 + 1.96 * se, abs=0.006)
    assert (ci["n_boot"], ci["over"], ci["method"]) == (N_BOOT, "eval samples", "percentile")


def test_draws_are_seeded_locally_and_cover_the_rows():
    torch.manual_seed(123)
    state = torch.random.get_rng_state()
    np.random.seed(123)
    numpy_state = np.random.get_state()[1].copy()
    first = np.concatenate(list(resamples(50, 30)))  # numpy arrays: drawn without torch
    assert torch.equal(torch.random.get_rng_state(), state)  # global RNGs untouched
    assert np.array_equal(np.random.get_state()[1], numpy_state)
    assert np.array_equal(first, np.concatenate(list(resamples(50, 30))))
    assert first.shape == (30, 50)
    assert int(first.min()) >= 0
    assert int(first.max()) < 50


def test_percentiles_are_numpys_of_the_draws():
    draws = {"a": np.linspace(0.0, 1.0, 101), "b": np.linspace(1.0, 3.0, 101)}
    ci = sample_ci(draws)
    assert ci["a"]["ci_low"] == pytest.approx(np.percentile(draws["a"], 2.5))
    assert ci["b"]["ci_high"] == pytest.approx(np.percentile(draws["b"], 97.5))


def test_undefined_draws_are_left_out_of_every_metric_and_counted():
    draws = {"a": np.array([0.1, np.nan, 0.3]), "b": np.array([1.0, 2.0, 3.0])}
    ci = sample_ci(draws)
    assert ci["b"]["n_boot"] == 2
    assert ci["b"]["n_undefined"] == 1
    assert ci["b"]["ci_high"] <= 3.0


@pytest.mark.parametrize("name", ["classification", "knn"])
def test_per_sample_values_average_to_evaluate(name):
    task = get_task(name)
    gen = torch.Generator().manual_seed(0)
    train, labels = torch.randn(60, 8, generator=gen), torch.arange(60) % 6
    test, targets = torch.randn(30, 8, generator=gen), torch.arange(30) % 6
    params = {"epochs": 5} if name == "classification" else {"k": 5}
    head, _ = task.fit(train, labels, params, seed=0)
    metrics = task.evaluate(head, test, targets, params)
    values = task.per_sample(head, test, targets, params)
    assert set(values) == {"top1", "top5"}
    for metric, per in values.items():
        assert per.shape == (30,)
        assert set(per.tolist()) <= {0.0, 1.0}
        assert float(per.mean()) == pytest.approx(metrics[metric])


def test_multilabel_draws_are_sklearns_macro_ap_on_the_drawn_rows():
    task = get_task("multilabel")
    gen = torch.Generator().manual_seed(1)
    feats = torch.randn(40, 6, generator=gen)
    labels = (torch.rand(40, 3, generator=gen) < 0.4).float()
    labels[0] = 1.0  # every label has a positive
    head, _ = task.fit(feats, labels, {"epochs": 3}, seed=0)
    assert task.per_sample(head, feats, labels, {"epochs": 3}) is None  # macro AP: re-evaluated
    draws = bootstrap_evaluate(lambda rows: task.evaluate(head, feats[rows], labels[rows]),
                               len(feats), n_boot=5)
    for i, rows in enumerate(next(resamples(len(feats), 5))):
        y = labels[rows].numpy()
        logits = task_logits(head, feats[rows])
        present = y.sum(axis=0) > 0
        expected = np.mean([average_precision_score(y[:, j], logits[:, j])
                            for j in np.flatnonzero(present)])
        assert draws["mean_average_precision"][i] == pytest.approx(expected, abs=1e-9)


def task_logits(head, feats):
    z = (feats - head["mean"]) / head["std"]
    return (z @ head["weight"].T + head["bias"]).numpy()
