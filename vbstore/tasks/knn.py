"""k-nearest-neighbour classification, the weighted-vote protocol of DINO and DINOv2.

Features are L2-normalised, so similarity is cosine. Each eval image takes its ``k`` most
similar train images; neighbour ``j`` with similarity ``s_j`` votes for its class with weight
``softmax(s / T)_j`` over the ``k`` neighbours (proportional to ``exp(s_j / T)``). Class scores
are the summed votes; top1 and top5 (top-min(5, C)) rank them, tied votes going to the lower
class index. A ``k`` the user sets above the train split's size is refused before anything is
stored; the default ``k`` over a smaller train split uses every train image, and the record
says so.

Modelled as a task that trains a head: the "head" is the L2-normalised train bank and its
labels. That keeps one engine path (train featureset -> head -> result), makes a kNN probe
shareable like any head, and lets the train split of a result be traced like a linear
probe's. Its cost is storage: the head is as large as the train features (N x C x 4 bytes).
Nothing is random, so the seed does not change the numbers (``stochastic = False``).

Head state: ``bank`` (N, C) float32 unit rows, ``labels`` (N,) int64, ``n_classes`` () int64.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from .._budget import check_memory
from ..errors import UsageError
from ._base import HeadState, Metric, Param
from ._errors import TaskInputError
from ._registry import register_task
from ._shape_pooled import PooledTask

if TYPE_CHECKING:
    import torch

# Local imports: torch and the helpers built on it (_metrics, _linear, _checks, _dense_ops, _text)
# load inside the functions that compute; importing a task only declares it, and a cached result
# reads nothing more.


@register_task(name="knn")
class KnnClassification(PooledTask):
    """Weighted k-NN classifier on cosine similarity (k=20, T=0.07); metrics top1, top5."""

    level = "high"
    op_version = 1
    target_kind = "class_index"
    shape = "pooled"
    stochastic = False
    params = MappingProxyType(
        {
            "k": Param(20, "neighbours that vote", minimum=1),
            "temperature": Param(0.07, "T in the vote weight exp(similarity / T)", above=0.0),
        }
    )
    metrics = (
        Metric("top1", "higher", "fraction of eval images whose top-voted class is right"),
        Metric("top5", "higher", "fraction whose class is among the top min(5, classes) votes"),
    )
    headline = "top1"

    def check_data(self, params: dict[str, Any], given: dict[str, Any], data: Any) -> list[str]:
        """Refuse a ``k`` set above the train split's size (vbstore.engine._datachecks); warn
        when the default ``k`` is."""
        train = data.train
        if train is None or params["k"] <= train.samples:
            return []
        if "k" in given:
            raise UsageError(
                f"k={params['k']} neighbours, but the train split has {train.samples} samples",
                hint=f"give k at most {train.samples}, or more training data")
        return [f"k={params['k']} (the default) is more than the {train.samples} train samples: "
                "every train image votes"]

    def _fit(
        self,
        feats: torch.Tensor,
        targets: torch.Tensor,
        params: dict[str, Any],
        seed: int,
        class_names: list[str] | None,
    ) -> tuple[HeadState, dict[str, float]]:
        import torch

        from ._metrics import l2_normalise

        n_classes = len(class_names) if class_names is not None else int(targets.max()) + 1
        head = {
            "bank": l2_normalise(feats),
            "labels": targets,
            "n_classes": torch.tensor(n_classes, dtype=torch.int64),
        }
        # Train accuracy of a kNN is meaningless (each point is its own neighbour): none.
        return head, {}

    def _evaluate(
        self, head: HeadState, feats: torch.Tensor, targets: torch.Tensor, params: dict[str, Any]
    ) -> dict[str, float]:
        hits1, hits5 = self._hits(head, feats, targets, params)
        return {"top1": int(hits1.sum()) / len(feats), "top5": int(hits5.sum()) / len(feats)}

    def check_head(self, head: HeadState) -> None:
        """A bank row per label, every label one of the head's ``n_classes``.

        Raises:
            TaskInputError: a tensor missing or of the wrong rank, or labels outside the classes.
        """
        from . import _checks  # with the head's tensors: torch is loaded

        bank = _checks.head_tensor(head, "bank", self.name, 2)
        labels = _checks.head_tensor(head, "labels", self.name, 1)
        n_classes = int(_checks.head_tensor(head, "n_classes", self.name, 0))
        if labels.is_floating_point() or labels.is_complex():
            raise TaskInputError(f"head labels are {labels.dtype}, not integers",
                                 hint="use a head trained by vbstore's knn task")
        if len(labels) != len(bank):
            raise TaskInputError(f"head has {len(bank)} bank rows but {len(labels)} labels")
        if len(labels) and (int(labels.min()) < 0 or int(labels.max()) >= n_classes):
            raise TaskInputError(
                f"head labels run from {int(labels.min())} to {int(labels.max())}, outside its "
                f"{n_classes} classes", hint="use a head trained by vbstore's knn task")

    def _per_sample(
        self, head: HeadState, feats: torch.Tensor, targets: torch.Tensor, params: dict[str, Any]
    ) -> dict[str, torch.Tensor]:
        hits1, hits5 = self._hits(head, feats, targets, params)
        return {"top1": hits1.double(), "top5": hits5.double()}

    def _hits(
        self, head: HeadState, feats: torch.Tensor, targets: torch.Tensor, params: dict[str, Any]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(N,) bool top-1 and top-min(5, C) hits of each eval row."""
        import torch

        from . import _checks
        from ._metrics import l2_normalise, ranking, row_blocks

        self.check_head(head)
        bank = _checks.head_tensor(head, "bank", self.name, 2, (1, feats.shape[1]))
        bank = bank.to(device=feats.device, dtype=torch.float32)
        labels = head["labels"].to(device=feats.device, dtype=torch.int64)
        n_classes = int(head["n_classes"])
        if int(targets.max()) >= n_classes:
            raise TaskInputError(
                f"eval targets hold class {int(targets.max())}; the head has {n_classes} classes",
                hint="evaluate on data labelled with the head's class names",
            )
        k = min(params["k"], len(bank))
        top = min(5, n_classes)
        queries = l2_normalise(feats)
        hits1, hits5 = [], []
        for rows in row_blocks(len(queries), len(bank)):
            sims = queries[rows] @ bank.T
            # topk, not a full sort: a bank can hold a million rows. Exact ties between
            # neighbours are broken by torch (deterministically on CPU).
            sim_k, nearest = torch.topk(sims, k, dim=1, largest=True, sorted=True)
            weights = torch.softmax(sim_k / params["temperature"], dim=1)
            check_memory(f"task {self.name!r}: votes over {n_classes} classes for "
                         f"{len(nearest)} queries", 4 * len(nearest) * n_classes)
            votes = torch.zeros(len(nearest), n_classes, dtype=torch.float32, device=sims.device)
            votes.scatter_add_(1, labels[nearest], weights)
            best = ranking(votes)[:, :top] == targets[rows, None]
            hits1.append(best[:, 0].cpu())
            hits5.append(best.any(dim=1).cpu())
        return torch.cat(hits1), torch.cat(hits5)
