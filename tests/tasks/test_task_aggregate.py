"""Multi-seed aggregation against numpy/scipy and the statistics it claims."""

from __future__ import annotations

import numpy as np
import pytest

from vbstore.errors import UsageError
from vbstore.tasks import aggregate_seeds
from vbstore.tasks.aggregate import t975

RUNS = [
    {"top1": 0.70, "top5": 0.90},
    {"top1": 0.74, "top5": 0.91},
    {"top1": 0.71, "top5": 0.93},
    {"top1": 0.69, "top5": 0.92},
]


def test_mean_std_and_range_match_numpy():
    out = aggregate_seeds(RUNS)
    for name in ("top1", "top5"):
        values = np.array([r[name] for r in RUNS])
        assert out[name]["mean"] == pytest.approx(values.mean())
        assert out[name]["std"] == pytest.approx(values.std(ddof=1))
        assert (out[name]["min"], out[name]["max"]) == (values.min(), values.max())
        assert out[name]["n"] == 4
        assert out[name]["over"] == "seeds"


def test_interval_is_students_t_over_the_seeds():
    stats = pytest.importorskip("scipy.stats")
    out = aggregate_seeds(RUNS)["top1"]
    values = np.array([r["top1"] for r in RUNS])
    low, high = stats.t.interval(0.95, df=3, loc=values.mean(), scale=stats.sem(values))
    assert out["ci_low"] == pytest.approx(low, abs=1e-5)
    assert out["ci_high"] == pytest.approx(high, abs=1e-5)
    # three seeds: the interval is wider than their range (a bootstrap of them never is)
    three = aggregate_seeds(RUNS[:3])["top1"]
    assert three["ci_low"] < three["min"]
    assert three["ci_high"] > three["max"]


@pytest.mark.parametrize("df", [1, 2, 5, 29, 30, 31, 45, 100, 1000])
def test_t_quantile_matches_scipy(df):
    stats = pytest.importorskip("scipy.stats")
    assert t975(df) == pytest.approx(stats.t.ppf(0.975, df), abs=2e-4)


def test_interval_covers_like_a_t_interval_for_many_seeds():
    rng = np.random.default_rng(0)
    covered = 0
    for _ in range(400):
        values = rng.normal(0.8, 0.02, size=5)
        out = aggregate_seeds([{"m": float(v)} for v in values])["m"]
        covered += out["ci_low"] <= 0.8 <= out["ci_high"]
    assert 0.92 <= covered / 400 <= 0.98


def test_single_run_has_zero_spread():
    assert aggregate_seeds([{"top1": 0.5}]) == {
        "top1": {"mean": 0.5, "std": 0.0, "min": 0.5, "max": 0.5, "ci_low": 0.5, "ci_high": 0.5,
                 "n": 1, "over": "seeds"}
    }


@pytest.mark.parametrize(
    ("runs", "message"),
    [
        ([], "at least one run"),
        ([{"a": 1.0}, {"b": 1.0}], "run 1 has metrics"),
        ([{"a": float("nan")}], "not finite"),
        ([{"a": True}], "not a number"),
    ],
)
def test_refusals(runs, message):
    with pytest.raises(UsageError, match=message):
        aggregate_seeds(runs)
