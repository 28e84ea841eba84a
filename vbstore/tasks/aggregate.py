"""Aggregating one task's metrics over several seeds: mean, std and a bootstrap CI.

Multi-seed runs reuse one set of features, so the spread measures the probe's own randomness
(init, minibatch order), not the data's. The confidence interval is the percentile bootstrap
of the mean: resample the per-seed values with replacement ``n_boot`` times, take the 2.5th
and 97.5th percentiles of the resampled means. It is seeded, so a record's CI is reproducible.

```python
>>> aggregate_seeds([{"top1": 0.70}, {"top1": 0.72}, {"top1": 0.71}])["top1"]["mean"]
0.71
```
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import UsageError

CONFIDENCE = 0.95


def aggregate_seeds(
    runs: Sequence[Mapping[str, float]], n_boot: int = 1000, seed: int = 0
) -> dict[str, dict[str, Any]]:
    """Per metric: ``mean``, ``std`` (ddof=1; 0.0 for one run), ``ci_low``, ``ci_high``
    (bootstrap 95% CI of the mean; both equal the mean for one run) and ``n``.

    Args:
        runs: One metric dict per seed; every dict must have the same metric names.
        n_boot: Bootstrap resamples.
        seed: Seeds the resampling (a local generator).

    Returns:
        ``{metric: {"mean", "std", "ci_low", "ci_high", "n"}}``, metrics sorted by name.

    Raises:
        UsageError: no runs, runs with different metric names, a non-finite value, or a bad
            ``n_boot``/``seed``.
    """
    import numpy as np

    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 1:
        raise UsageError(f"n_boot must be a positive integer, got {n_boot!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise UsageError(f"seed must be a non-negative integer, got {seed!r}")
    if not runs:
        raise UsageError("aggregate_seeds needs at least one run")
    names = sorted(runs[0])
    for i, run in enumerate(runs):
        if sorted(run) != names:
            raise UsageError(
                f"run {i} has metrics {sorted(run)} but run 0 has {names}",
                hint="aggregate runs of one task with the same params",
            )
        for name, value in run.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise UsageError(f"run {i}: metric {name!r} is {value!r}, not a number")
            if not math.isfinite(value):
                raise UsageError(f"run {i}: metric {name!r} is {value}, not finite")

    values = np.array([[float(run[name]) for name in names] for run in runs], dtype=np.float64)
    n = len(runs)
    means = values.mean(axis=0)
    stds = values.std(axis=0, ddof=1) if n > 1 else np.zeros(len(names))
    if n > 1:
        # One set of resampled seed indices for all metrics: their CIs are paired.
        rng = np.random.default_rng(seed)
        picks = rng.integers(0, n, size=(n_boot, n))
        boot_means = values[picks].mean(axis=1)  # (n_boot, metrics)
        tail = (1.0 - CONFIDENCE) / 2 * 100
        low, high = np.percentile(boot_means, [tail, 100 - tail], axis=0)
    else:
        low = high = means
    return {
        name: {
            "mean": float(means[j]),
            "std": float(stds[j]),
            "ci_low": float(low[j]),
            "ci_high": float(high[j]),
            "n": n,
        }
        for j, name in enumerate(names)
    }
