"""Aggregating one task's metrics over several seeds: mean, std, min, max and a t-interval.

Multi-seed runs reuse one set of features and one evaluation sample, so their spread measures
the probe's own randomness (init, minibatch order) and nothing else: it says nothing about how
the numbers would move on another evaluation sample. That is what the record says (``over:
"seeds"``). The interval is Student's t interval of the mean over the seeds, the textbook
interval for a handful of values; a percentile bootstrap of three values can never leave their
range and is narrower than the truth.

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
_Z = 1.959963984540054  # the normal 0.975 quantile
# Student's t 0.975 quantiles for 1..30 degrees of freedom
_T975 = (12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
         2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
         2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423)


def t975(df: int) -> float:
    """Student's t 0.975 quantile: a table up to 30 degrees of freedom, then the Cornish-Fisher
    expansion (within 1e-4 of the exact value beyond 30)."""
    if df < 1:
        raise UsageError(f"degrees of freedom must be at least 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def aggregate_seeds(runs: Sequence[Mapping[str, float]]) -> dict[str, dict[str, Any]]:
    """Per metric over the seeds: ``mean``, ``std`` (ddof=1; 0.0 for one run), ``min``, ``max``,
    ``ci_low``/``ci_high`` (the 95% Student-t interval of the mean; both the mean for one run),
    ``n`` and ``over: "seeds"``.

    Args:
        runs: One metric dict per seed; every dict must have the same metric names.

    Returns:
        ``{metric: {"mean", "std", "min", "max", "ci_low", "ci_high", "n", "over"}}``, metrics
        sorted by name.

    Raises:
        UsageError: no runs, runs with different metric names, or a non-finite value.
    """
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
    n = len(runs)
    out = {}
    for name in names:
        values = [float(run[name]) for run in runs]
        mean = math.fsum(values) / n
        std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
        half = t975(n - 1) * std / math.sqrt(n) if n > 1 else 0.0
        out[name] = {"mean": mean, "std": std, "min": min(values), "max": max(values),
                     "ci_low": mean - half, "ci_high": mean + half, "n": n, "over": "seeds"}
    return out
