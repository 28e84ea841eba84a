"""Multi-seed aggregation against numpy and the statistics it claims."""

from __future__ import annotations

import numpy as np
import pytest

from vbstore.errors import UsageError
from vbstore.tasks import aggregate_seeds

RUNS = [
    {"top1": 0.70, "top5": 0.90},
    {"top1": 0.74, "top5": 0.91},
    {"top1": 0.71, "top5": 0.93},
    {"top1": 0.69, "top5": 0.92},
]


def test_mean_and_sample_std_match_numpy():
    out = aggregate_seeds(RUNS)
    for name in ("top1", "top5"):
        values = np.array([r[name] for r in RUNS])
        assert out[name]["mean"] == pytest.approx(values.mean())
        assert out[name]["std"] == pytest.approx(values.std(ddof=1))
        assert out[name]["n"] == 4
        assert values.min() <= out[name]["ci_low"] <= out[name]["mean"]
        assert out[name]["mean"] <= out[name]["ci_high"] <= values.max()


def test_bootstrap_ci_is_the_percentile_interval_of_resampled_means():
    out = aggregate_seeds(RUNS, n_boot=500, seed=3)
    values = np.array([[r["top1"], r["top5"]] for r in RUNS])
    picks = np.random.default_rng(3).integers(0, 4, size=(500, 4))
    means = values[picks].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5], axis=0)
    assert out["top1"]["ci_low"] == pytest.approx(low[0])
    assert out["top5"]["ci_high"] == pytest.approx(high[1])


def test_ci_covers_like_a_normal_interval_for_many_seeds():
    values = np.random.default_rng(0).normal(0.8, 0.02, size=40)
    out = aggregate_seeds([{"m": float(v)} for v in values], n_boot=4000)["m"]
    half = 1.96 * values.std(ddof=1) / np.sqrt(len(values))
    assert out["ci_high"] - out["ci_low"] == pytest.approx(2 * half, rel=0.15)
    assert (out["ci_low"] + out["ci_high"]) / 2 == pytest.approx(values.mean(), abs=half * 0.2)


def test_single_run_has_zero_spread():
    assert aggregate_seeds([{"top1": 0.5}]) == {
        "top1": {"mean": 0.5, "std": 0.0, "ci_low": 0.5, "ci_high": 0.5, "n": 1}
    }


def test_deterministic_per_seed():
    assert aggregate_seeds(RUNS, seed=1) == aggregate_seeds(RUNS, seed=1)
    assert aggregate_seeds(RUNS, seed=1) != aggregate_seeds(RUNS, seed=2)


@pytest.mark.parametrize(
    ("runs", "kwargs", "message"),
    [
        ([], {}, "at least one run"),
        ([{"a": 1.0}, {"b": 1.0}], {}, "run 1 has metrics"),
        ([{"a": float("nan")}], {}, "not finite"),
        ([{"a": True}], {}, "not a number"),
        ([{"a": 1.0}], {"n_boot": 0}, "n_boot"),
        ([{"a": 1.0}], {"seed": -1}, "seed"),
    ],
)
def test_refusals(runs, kwargs, message):
    with pytest.raises(UsageError, match=message):
        aggregate_seeds(runs, **kwargs)
