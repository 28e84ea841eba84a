"""CLIP_benchmark's linear probe: a linear layer on a CLIP model's image embeddings.

The protocol of ``clip_benchmark eval --task linear_probe`` (CLIP_benchmark 1.6.2, MIT), draw for
draw (:mod:`._cb_linear`): the image embeddings (``encode_image``) L2-normalised; an optional
``fewshot_k`` samples per class; AdamW at ``lr`` 0.1 with a cosine schedule for ``epochs`` 10
in minibatches of ``batch_size`` 64; the weight decay searched on a held-out ``val_proportion``
of the training data (CLIP_benchmark's ``--val_proportion``; 0, its default, trains with weight
decay 0), or on a named validation split (``val_split``, its ``--val_split``: the fit's ``val``).
With ``fewshot_k = -1`` the final layer trains on the train and validation samples together; a
few-shot layer trains on its shots alone.

Metrics as CLIP_benchmark names them: ``lp_acc1``, ``lp_acc5`` and ``lp_mean_per_class_recall``
(balanced accuracy over the classes present in the eval split). CLIP_benchmark writes ``lp_acc5``
as NaN when the eval labels stop below 5 (top-5 over 5 classes or fewer is 1.0 by construction);
vbstore never writes NaN, so there ``lp_acc5`` is absent (``Metric.min_classes``, the rule
classification's ``top5`` follows).
``weight_decay`` (the one chosen) comes with the head.

Head state: ``weight`` (K, C), ``bias`` (K,) float32, applied to normalised embeddings; K is the
largest train label + 1, as CLIP_benchmark sizes it.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ._base import HeadState, Metric, Param
from ._registry import register_task
from ._shape_pooled import EmbeddingTask
from .classification import TOPK

if TYPE_CHECKING:
    import torch

# Local imports: torch and the helpers built on it (_cb_linear, _checks) load inside the
# functions that compute; importing a task only declares it, and a cached result reads nothing
# more.


@register_task(name="linear_probe")
class LinearProbe(EmbeddingTask):
    """CLIP_benchmark's linear probe on CLIP image embeddings; metrics lp_acc1, lp_acc5."""

    level = "high"
    op_version = 1
    target_kind = "class_index"
    shape = "embedding"
    stochastic = True
    takes_val_split = True
    protocol = "clip_benchmark_linear_probe"
    params = MappingProxyType({
        "fewshot_k": Param(-1, "training samples per class (-1: every sample)", minimum=-1),
        "epochs": Param(10, "passes over the training samples", minimum=1),
        "lr": Param(0.1, "peak AdamW learning rate (cosine-decayed, no warmup)", above=0.0),
        "batch_size": Param(64, "minibatch size", minimum=1),
        "val_proportion": Param(0.0, "share of the train split held out to search the weight "
                                "decay (0: no search, weight decay 0)", minimum=0.0, maximum=0.9),
    })
    metrics = (
        Metric("lp_acc1", "higher", "fraction of eval images whose best-scored class is right"),
        Metric("lp_acc5", "higher", "fraction whose class is among the top 5 (absent when the "
               "eval labels stop below 5, where CLIP_benchmark writes NaN)", min_classes=TOPK + 1),
        Metric("lp_mean_per_class_recall", "higher",
               "top-1 recall averaged over the classes present in the eval split"),
    )
    train_metrics = (
        Metric("weight_decay", "lower", "the weight decay the search chose (0 without one)"),
    )
    headline = "lp_acc1"

    def _fit(self, feats: torch.Tensor, targets: torch.Tensor, params: dict[str, Any],
             seed: int, class_names: list[str] | None) -> tuple[HeadState, dict[str, float]]:
        return self._fit_val(feats, targets, params, seed, class_names, None)

    def _fit_val(self, feats: torch.Tensor, targets: torch.Tensor, params: dict[str, Any],
                 seed: int, class_names: list[str] | None,
                 val: tuple[torch.Tensor, torch.Tensor] | None
                 ) -> tuple[HeadState, dict[str, float]]:
        import torch

        from . import _cb_linear as cb
        from ._errors import TaskInputError

        if params["fewshot_k"] == 0:
            raise TaskInputError("fewshot_k=0 trains on nothing",
                                 hint="a positive number of shots, or -1 for every sample")
        if val is not None and params["val_proportion"] > 0:
            raise TaskInputError(
                f"a validation split and val_proportion {params['val_proportion']:g} both name "
                "the samples that search the weight decay",
                hint="give one: the val split, or val_proportion with none")
        recipe = cb.Recipe(params["epochs"], params["lr"], params["batch_size"], seed)
        generator = torch.Generator().manual_seed(seed)
        x = cb.normalise(feats)
        train_rows, val_rows = cb.split_rows(len(x), params["val_proportion"], generator)
        x_train, y_train = x[train_rows], targets[train_rows]
        n_out = int(y_train.max()) + 1
        if val is not None:  # CLIP_benchmark's --val_split: its own samples, none held out
            x_val, y_val = cb.normalise(val[0]), val[1]
            if len(y_val) and int(y_val.max()) >= n_out:
                    raise TaskInputError(
                    f"the validation split has label {int(y_val.max())}, but the train split's "
                    f"labels stop at {n_out - 1}",
                    hint="a validation split whose classes are among the train split's")
        shots = cb.fewshot_rows(y_train, params["fewshot_k"], generator)
        x_train, y_train = x_train[shots], y_train[shots]

        def fit(weight_decay: float, xs: torch.Tensor = x_train, ys: torch.Tensor = y_train
                ) -> HeadState:
            return cb.train(xs, ys, n_out, weight_decay, recipe, self.name)

        if val is None:
            if not val_rows:
                return fit(0.0), {"weight_decay": 0.0}
            x_val, y_val = x[val_rows], targets[val_rows]
        elif not len(y_val):
            raise TaskInputError("the validation split has no samples",
                                 hint="name a split with samples, or none")
        weight_decay = cb.search_weight_decay(fit, x_val, y_val)
        if params["fewshot_k"] < 0:  # the full probe trains on the held-out part too
            head = fit(weight_decay, torch.cat([x_train, x_val]), torch.cat([y_train, y_val]))
        else:
            head = fit(weight_decay)
        return head, {"weight_decay": weight_decay}

    def _evaluate(self, head: HeadState, feats: torch.Tensor, targets: torch.Tensor,
                  params: dict[str, Any]) -> dict[str, float]:
        from . import _cb_linear as cb
        from . import _checks

        weight = _checks.head_tensor(head, "weight", self.name, 2, (1, feats.shape[1]))
        bias = _checks.head_tensor(head, "bias", self.name, 1)
        head = {"weight": weight.to(feats.device), "bias": bias.to(feats.device)}
        scores = cb.logits(head, feats)
        k = min(TOPK, scores.shape[1])
        top = scores.topk(k, 1, True, True)[1].t()
        hits = top.eq(targets.view(1, -1))
        out = {"lp_acc1": float(hits[:1].reshape(-1).float().sum()) / len(targets),
               "lp_mean_per_class_recall": cb.balanced_accuracy(scores.argmax(dim=1), targets)}
        if int(targets.max()) >= TOPK:  # CLIP_benchmark's condition for a number, not NaN
            out["lp_acc5"] = float(hits[:k].reshape(-1).float().sum()) / len(targets)
        return out
