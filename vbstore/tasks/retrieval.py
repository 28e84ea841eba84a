"""Class-level image retrieval on frozen features, with no training (zero-shot).

Every eval image is a query; the gallery is every *other* eval image, ranked by cosine
similarity; a gallery image is relevant when it has the query's class label. This is the
in-shop / CUB / Stanford-Online-Products style evaluation used in metric learning.

- ``recall@k``: fraction of queries with at least one relevant image among the k most similar
  (k is capped at the gallery size). Ties in similarity keep gallery order.
- ``mAP`` (VisBench's name; ``mean_average_precision`` in records written before, read as
  ``mAP``): mean over queries of the (non-interpolated) average precision of the whole ranked
  gallery, tied similarities forming one threshold.

A query whose class has no other image has nothing to retrieve: it is left out of every metric,
as in those benchmarks. If no query has a relevant image, the metrics are undefined and the
task says so.

VisBench's options (``--metric``, ``--topk``), added after results were stored, so at their
defaults they are in no key: ``metric="l2"`` ranks by Euclidean distance between the raw
(unnormalised) features instead of cosine similarity; ``topk`` (``"1,5,10"``; ascending,
distinct, each >= 1) names the ``recall@k`` metrics reported, the headline being the smallest.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..errors import UsageError, field_ref
from ._base import Metric, Param
from ._errors import UndefinedMetric
from ._registry import register_task
from ._shape_zero_shot import ZeroShotTask

if TYPE_CHECKING:
    import numpy as np

# Local imports: numpy and the helpers built on it (_rows, _metrics_np) load inside the function
# that computes; importing a task only declares it, and a cached result reads nothing more.

RECALL_KS = (1, 5, 10)
# Elements of a block of similarities ranked at once: its sort, order, gathers and float64
# precision take ~40 bytes each (40 MiB), beside the block's own float32 similarities
RANK_ELEMENTS = 1 << 20

SIMILARITIES = ("cosine", "l2")  # VisBench's --metric choices


def parse_topk(value: Any) -> str:
    """A ``topk`` value (``"1,5,10"``, ``"1 5 10"``, an int or a list of ints) in canonical
    form: ascending, distinct, comma separated.

    Raises:
        UsageError: none given, or a k that is not an integer >= 1.
    """
    parts = (value.replace(",", " ").split() if isinstance(value, str)
             else list(value) if isinstance(value, (list, tuple)) else [value])
    ks = set()
    for part in parts:
        try:
            k = int(part) if not isinstance(part, (bool, float)) else int(str(part))
        except (TypeError, ValueError):
            k = 0
        if k < 1:
            raise UsageError(f"retrieval topk {part!r} is not an integer >= 1",
                             hint="give k values as integers >= 1, e.g. "
                                  f"{field_ref('param:topk', '1,5,10')}")
        ks.add(k)
    if not ks:
        raise UsageError(f"retrieval topk {value!r} names no k",
                         hint=f"give at least one, e.g. {field_ref('param:topk', '1,5,10')}, "
                              "or leave it out")
    return ",".join(str(k) for k in sorted(ks))


def topk_of(params: Mapping[str, Any]) -> tuple[int, ...]:
    """The k values of resolved params or a record's (where ``topk`` at its default is absent)."""
    return tuple(int(k) for k in str(params.get("topk") or "1,5,10").split(","))


def retrieval_metrics(ks: tuple[int, ...]) -> tuple[Metric, ...]:
    """``recall@k`` for each k, then ``mAP``."""
    return (
        *(Metric(f"recall@{k}", "higher", f"share of queries with a same-class image in the "
                 f"top {k}") for k in ks),
        Metric("mAP", "higher", "mean over queries of the ranking's AP"),
    )


@register_task(name="retrieval")
class Retrieval(ZeroShotTask):
    """Leave-one-out image retrieval by class label; recall@1/5/10 and mAP."""

    level = "high"
    op_version = 1
    target_kind = "class_index"
    shape = "zero_shot"
    array = "numpy"  # the stored rows, scored without torch (tasks._rows)
    stochastic = False
    params = MappingProxyType({
        "metric": Param("cosine", "ranking: cosine similarity, or l2 (Euclidean distance between "
                        "the raw features)", choices=SIMILARITIES, added=True),
        "topk": Param("1,5,10", "the k of the recall@k metrics reported, e.g. 1,5,10",
                      added=True),
    })
    metrics = retrieval_metrics(RECALL_KS)
    headline = "recall@1"
    # Resampling the eval rows resamples the gallery too: a drawn-twice image finds its own copy.
    sample_ci_skip = ("the eval images are also the gallery: a draw with repeats lets an image "
                      "retrieve its own copy, so a bootstrap would overstate the metrics")

    def resolve_params(self, user_params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """See :meth:`Task.resolve_params`; ``topk`` in canonical form (``1 5 10`` and
        ``10,5,1`` are the default, the same id as leaving it out).

        Raises:
            UsageError: also a k that is not an integer >= 1.
        """
        given = dict(user_params or {})
        if "topk" in given:
            given["topk"] = parse_topk(given["topk"])
        return super().resolve_params(given)

    def metrics_for(self, params: Mapping[str, Any] | None = None) -> tuple[Metric, ...]:
        """The ``recall@k`` of ``topk`` and ``mAP`` (the defaults: :attr:`metrics`)."""
        return retrieval_metrics(topk_of(params or {}))

    def headline_for(self, params: Mapping[str, Any] | None = None) -> str:
        """The recall at the smallest k (the defaults: ``recall@1``)."""
        return f"recall@{min(topk_of(params or {}))}"

    def _evaluate_zero_shot(
        self,
        feats: np.ndarray,
        targets: np.ndarray,
        params: dict[str, Any],
        context: dict[str, Any],
    ) -> dict[str, float]:
        import numpy as np

        from . import _blocks
        from ._rows import (
            average_precisions_ranked,
            cosine,
            cosine_grid,
            descending_order,
            l2_grid,
            negative_squared_distance,
            row_blocks,
        )

        n = len(feats)
        ks = topk_of(params)
        headline = f"recall@{min(ks)}"  # the metric reported first (topk may leave out 1)
        if n < 2:
            raise UndefinedMetric(self.name, headline, "retrieval needs at least 2 eval images")
        if params.get("metric", "cosine") == "cosine":
            grid, norms = cosine_grid(feats)

            def similarities(rows: slice) -> np.ndarray:
                return cosine(grid, norms, rows)
        else:  # a distance negated, so higher is better for both (VisBench's ranking)
            grid, squares = l2_grid(feats)

            def similarities(rows: slice) -> np.ndarray:
                return negative_squared_distance(grid, squares, rows)
        hits = dict.fromkeys(ks, 0)
        aps: list[float] = []
        # half a block of float32 similarities: each is first a float64 dot product
        for rows in row_blocks(n, n, _blocks.BLOCK_ELEMENTS // 2):
            sims = similarities(rows)
            sims[np.arange(len(sims)), np.arange(rows.start, rows.stop)] = -np.inf
            # ranked a few rows at a time, so that the sort and its int64 order, the gathers and
            # the float64 precisions take a bounded slice of memory, not ~15 times the block
            # (rows are ranked independently: the numbers are the same)
            for part in row_blocks(len(sims), n, RANK_ELEMENTS):
                index = np.arange(rows.start + part.start, rows.start + part.stop)
                relevant = targets[index, None] == targets[None, :]
                # The query itself is not in its gallery: last in the ranking, never relevant.
                relevant[np.arange(len(index)), index] = False
                # descending and stable: equal similarities keep gallery order
                order = descending_order(sims[part])
                sorted_relevant = np.take_along_axis(relevant, order, axis=1)
                keep = sorted_relevant.any(axis=1)
                if not keep.any():
                    continue
                sorted_sims = np.take_along_axis(sims[part], order, axis=1)[keep]
                sorted_relevant = sorted_relevant[keep]
                del order, relevant
                for k in ks:
                    hits[k] += int(sorted_relevant[:, : min(k, n - 1)].any(axis=1).sum())
                aps.extend(average_precisions_ranked(sorted_sims, sorted_relevant))
        used = len(aps)
        if used == 0:
            raise UndefinedMetric(
                self.name,
                headline,
                "no eval image shares its class with another, so no query has anything to find",
            )
        metrics = {f"recall@{k}": hits[k] / used for k in ks}
        # correctly rounded (math.fsum): the same bits whatever the blocks or the machine
        metrics["mAP"] = math.fsum(aps) / used
        return metrics
