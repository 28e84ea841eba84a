"""Linear classification probe: a linear softmax classifier on frozen pooled features.

The standard measure of what a backbone encodes linearly (linear evaluation as in SimCLR,
DINO/DINOv2 and the CLIP paper's linear probes). The recipe is in :mod:`._linear`: AdamW with
cosine decay, seeded init and shuffling; features standardised with train statistics kept in the
head only when ``standardize`` is on. It runs in numpy (op_version 3), so the engine hands the
task the stored rows as numpy arrays (``array = "numpy"``) and a new head loads no torch.
``train_top1`` is reported with the head: a low one means the probe underfit, so a low eval
``top1`` says little about the backbone.

VisBench's defaults (op_version 2; before: 100 epochs, weight decay 0.01, always standardised,
top5 on any class count): 200 epochs, ``lr`` 1e-2, weight decay 1e-4, batch 256, no
standardisation; ``top5`` only over more than 5 classes (over 5 or fewer it is 1.0 by
construction, so it is left out, as VisBench leaves it out).

Head state: ``weight`` (K, C), ``bias`` (K,), ``mean`` (C,), ``std`` (C,), float32 (mean 0 and
std 1 without standardisation).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ._base import HeadState, Metric, Param
from ._errors import TaskInputError
from ._registry import register_task
from ._shape_pooled import PooledTask

if TYPE_CHECKING:
    import numpy as np

# Local imports: numpy and the helpers built on it (_linear, _arrays) load inside the functions
# that compute; importing a task only declares it, and a cached result reads nothing more.

# The multi-label probe's schedule (a project extra, not VisBench's: its defaults stay).
LINEAR_PARAMS = MappingProxyType(
    {
        "epochs": Param(100, "passes over the train split", minimum=1),
        "lr": Param(1e-2, "peak AdamW learning rate (cosine-decayed to 0)", above=0.0),
        "weight_decay": Param(1e-2, "decoupled AdamW weight decay on the weights", minimum=0.0),
        "batch_size": Param(256, "minibatch size; >= the train size means full-batch", minimum=1),
    }
)

# VisBench's linear-probe defaults (upstream tasks/high_level/classification.py).
CLASSIFICATION_PARAMS = MappingProxyType(
    {
        **LINEAR_PARAMS,
        "epochs": Param(200, "passes over the train split", minimum=1),
        "weight_decay": Param(1e-4, "decoupled AdamW weight decay on the weights", minimum=0.0),
        "standardize": Param(False, "standardise each feature with the train split's mean and "
                             "std (kept in the head) before the linear map"),
    }
)
TOPK = 5


@register_task(name="classification")
class LinearClassification(PooledTask):
    """Linear probe for single-label classification; metrics top1, top5."""

    level = "high"
    # 2: VisBench's defaults (200 epochs, wd 1e-4, standardize off), no top5 <= 5; 3: the
    # recipe in numpy (._linear: its own draws and float32 arithmetic)
    op_version = 3
    array = "numpy"  # trained and scored on the stored rows without torch
    target_kind = "class_index"
    shape = "pooled"
    stochastic = True
    params = CLASSIFICATION_PARAMS
    metrics = (
        Metric("top1", "higher", "fraction of eval images whose best-scored class is right"),
        Metric("top5", "higher", "fraction whose class is among the top 5 (reported over more "
               "than 5 classes)", min_classes=TOPK + 1),
    )
    train_metrics = (
        Metric("train_top1", "higher", "top1 on the train split; low means the probe underfit"),
        Metric("train_loss", "lower", "mean cross-entropy on the train split after training"),
    )
    headline = "top1"
    finetune_loss = "cross_entropy"

    def _fit(
        self,
        feats: Any,
        targets: np.ndarray,
        params: dict[str, Any],
        seed: int,
        class_names: list[str] | None,
    ) -> tuple[HeadState, dict[str, float]]:
        from . import _arrays, _linear

        # Without class names the class count comes from the labels seen in training.
        n_classes = len(class_names) if class_names is not None else int(targets.max()) + 1
        head, loss = _linear.train(
            feats,
            targets,
            n_out=n_classes,
            loss="cross_entropy",
            seed=seed,
            task=self.name,
            **params,
        )
        (hits,) = _arrays.topk_hits(_linear.logits(head, feats), targets, (1,))
        return head, {"train_top1": float(hits.mean()), "train_loss": loss}

    def _evaluate(
        self, head: HeadState, feats: Any, targets: np.ndarray, params: dict[str, Any]
    ) -> dict[str, float]:
        return {name: float(v.mean()) for name, v in self._hits(head, feats, targets).items()}

    def _per_sample(
        self, head: HeadState, feats: Any, targets: np.ndarray, params: dict[str, Any]
    ) -> dict[str, np.ndarray]:
        return {name: v.astype("float64") for name, v in self._hits(head, feats, targets).items()}

    def _hits(self, head: HeadState, feats: Any, targets: np.ndarray) -> dict[str, np.ndarray]:
        """(N,) bool top-1 hits, and top-5 hits over more than 5 classes."""
        from . import _arrays, _linear

        head = _linear.check_head(head, self.name, feats.shape[1])
        n_classes = head["weight"].shape[0]
        if int(targets.max()) >= n_classes:
            raise TaskInputError(
                f"eval targets hold class {int(targets.max())}; the head has {n_classes} classes",
                hint="evaluate on data labelled with the head's class names",
            )
        if n_classes <= TOPK:
            (top1,) = _arrays.topk_hits(_linear.logits(head, feats), targets, (1,))
            return {"top1": top1}
        top1, top5 = _arrays.topk_hits(_linear.logits(head, feats), targets, (1, TOPK))
        return {"top1": top1, "top5": top5}
