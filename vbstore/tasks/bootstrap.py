"""A bootstrap over evaluation samples: how much a metric would move on another eval sample.

The spread over seeds (:mod:`.aggregate`) measures the probe's own randomness on one fixed
evaluation sample. To compare two backbones a reader needs the other uncertainty: the eval rows
are a sample, and another sample of the same size would give other numbers. The percentile
bootstrap estimates it: draw the ``n`` eval rows with replacement ``n_boot`` times, score the
fitted head on each draw, and take the 2.5th and 97.5th percentiles of the scores.

Two ways to score a draw:

- a task whose metrics are means of per-sample values (top1: a hit per image) returns those
  values once (``Task.per_sample``); a draw is then a weighted mean, so ``N_BOOT`` draws cost
  almost nothing;
- any other task (macro AP, F1) is evaluated again on each draw (``N_BOOT_REEVALUATE`` draws,
  fewer, because each is a whole evaluation).

The draws come from a local generator seeded with ``BOOT_SEED``, never the global RNG. Every
result on ``n`` eval rows sees the same draws, so two backbones scored on one eval split are
resampled alike (a paired comparison is possible from the stored records alone).

```python
>>> import torch
>>> hits = {"top1": torch.tensor([1.0, 0.0, 1.0, 1.0])}
>>> ci = sample_ci(bootstrap_per_sample(hits, n_boot=200))["top1"]
>>> 0.0 <= ci["ci_low"] <= 0.75 <= ci["ci_high"] <= 1.0
True
```
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ._errors import UndefinedMetric
from .aggregate import CONFIDENCE

if TYPE_CHECKING:
    import numpy as np
    import torch

# Local imports: numpy (and torch, for a task that computes with it) load when a confidence
# interval is computed; the engine imports this module on its compute path only.

N_BOOT = 1000  # draws when the task gives per-sample values (each draw is one weighted mean)
N_BOOT_REEVALUATE = 200  # draws when each draw re-runs the task's evaluate
BOOT_SEED = 0  # the draws depend on the row count only: every backbone is resampled alike
_BLOCK_ELEMENTS = 1 << 22  # indices drawn at once (32 MiB of int64)


def resamples(n_rows: int, n_boot: int, seed: int = BOOT_SEED) -> Iterator[np.ndarray]:
    """``(b, n_rows)`` int64 blocks of row indices drawn with replacement, ``n_boot`` rows in all.

    The same ``(n_rows, n_boot, seed)`` always gives the same draws (a local generator): those
    of ``torch.randint(n_rows, ..., generator=torch.Generator().manual_seed(seed))``, drawn
    without torch. torch's CPU generator is the MT19937 that numpy's ``RandomState`` seeds
    alike, and ``randint`` takes one 32-bit draw per index, modulo ``n_rows``.
    """
    import numpy as np  # only when a result is computed

    if n_rows >= 1 << 32:  # torch draws 64 bits per index there; no eval split is that large
        raise ValueError(f"cannot resample {n_rows} rows")
    generator = np.random.RandomState(seed)
    step = max(1, _BLOCK_ELEMENTS // max(1, n_rows))
    for start in range(0, n_boot, step):
        raw = generator.randint(0, 1 << 32, size=(min(step, n_boot - start), n_rows),
                                dtype=np.uint32)
        yield (raw % np.uint32(n_rows)).astype(np.int64)


def bootstrap_per_sample(per_sample: Mapping[str, Any], n_boot: int = N_BOOT,
                         seed: int = BOOT_SEED) -> dict[str, np.ndarray]:
    """Each metric's mean over ``n_boot`` resamples of its per-sample values ``(N,)``: numpy
    arrays (a task that computes in numpy), or torch tensors, averaged by torch as before."""
    import numpy as np

    if any(hasattr(v, "detach") for v in per_sample.values()):
        return _torch_per_sample(per_sample, n_boot, seed)
    values = {k: np.asarray(v, dtype=np.float64) for k, v in per_sample.items()}
    n_rows = len(next(iter(values.values())))
    draws: dict[str, list[np.ndarray]] = {k: [] for k in values}
    for rows in resamples(n_rows, n_boot, seed):
        for name, v in values.items():
            draws[name].append(v[rows].mean(axis=1))
    return {k: np.concatenate(d) for k, d in draws.items()}


def _torch_per_sample(per_sample: Mapping[str, torch.Tensor], n_boot: int, seed: int
                      ) -> dict[str, np.ndarray]:
    import numpy as np
    import torch  # the values are torch tensors: torch is loaded

    values = {k: v.detach().to("cpu", torch.float64) for k, v in per_sample.items()}
    n_rows = len(next(iter(values.values())))
    draws: dict[str, list[np.ndarray]] = {k: [] for k in values}
    for rows in resamples(n_rows, n_boot, seed):
        picked = torch.from_numpy(rows)
        for name, v in values.items():
            draws[name].append(v[picked].mean(dim=1).numpy())
    return {k: np.concatenate(d) for k, d in draws.items()}


def bootstrap_evaluate(evaluate: Callable[[Any], Mapping[str, float]], n_rows: int,
                       n_boot: int = N_BOOT_REEVALUATE, seed: int = BOOT_SEED,
                       array: str = "torch") -> dict[str, np.ndarray]:
    """Each metric of ``evaluate(rows)`` on ``n_boot`` resamples of ``n_rows`` row indices
    (``rows``: an int64 torch tensor, or a numpy array with ``array="numpy"``).

    A draw on which a metric is undefined (``UndefinedMetric``: say no positive label drawn)
    gives NaN for every metric of that draw; :func:`sample_ci` leaves such draws out and counts
    them.
    """
    import numpy as np

    scored: list[Mapping[str, float] | None] = []
    for drawn in resamples(n_rows, n_boot, seed):
        block: Any = drawn
        if array != "numpy":
            import torch  # a task that computes with torch: torch is loaded

            block = torch.from_numpy(drawn)
        for rows in block:
            try:
                scored.append(evaluate(rows))
            except UndefinedMetric:
                scored.append(None)
    names = sorted({name for metrics in scored if metrics for name in metrics})
    return {name: np.array([float(m[name]) if m else np.nan for m in scored], dtype=np.float64)
            for name in names}


def sample_ci(draws: Mapping[str, np.ndarray], confidence: float = CONFIDENCE
              ) -> dict[str, dict[str, Any]]:
    """The percentile interval of each metric's bootstrap draws.

    Draws where any metric is NaN (undefined) are left out of every metric, so all metrics rest
    on the same draws.

    Returns:
        ``{metric: {"ci_low", "ci_high", "std", "n_boot", "confidence", "method":
        "percentile", "over": "eval samples"}}`` plus ``n_undefined`` when draws were left out;
        empty when no draw is defined.
    """
    import numpy as np

    if not draws:
        return {}
    table = np.stack([np.asarray(draws[k], dtype=np.float64) for k in sorted(draws)])
    defined = ~np.isnan(table).any(axis=0)
    kept = table[:, defined]
    if kept.shape[1] == 0:
        return {}
    tail = (1.0 - confidence) / 2 * 100
    low, high = np.percentile(kept, [tail, 100 - tail], axis=1)
    std = kept.std(axis=1, ddof=1) if kept.shape[1] > 1 else np.zeros(len(kept))
    out = {}
    for i, name in enumerate(sorted(draws)):
        entry: dict[str, Any] = {"ci_low": float(low[i]), "ci_high": float(high[i]),
                                 "std": float(std[i]), "n_boot": int(kept.shape[1]),
                                 "confidence": confidence, "method": "percentile",
                                 "over": "eval samples"}
        if not defined.all():
            entry["n_undefined"] = int((~defined).sum())
        out[name] = entry
    return out
