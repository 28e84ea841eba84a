"""The base of the shapes that train a head on rows of features: ``pooled`` (one (N, C) vector
per image), ``embedding`` (a CLIP model's image embeddings) and ``pairs`` (grid-pooled dense
maps whose rows the targets index).

The engine calls, with features already loaded:

```python
head_state, train_metrics = task.fit(train_feats, train_targets, params, seed, class_names)
metrics = task.evaluate(head_state, eval_feats, eval_targets, params)
values = task.per_sample(head_state, eval_feats, eval_targets, params)  # optional: or None
```

A task implements ``_fit`` and ``_evaluate`` (``_per_sample`` where its metrics are means).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._base import HeadState, Task, unimplemented
from ._errors import TaskInputError

if TYPE_CHECKING:
    import torch

# Local imports: _checks (torch) loads inside the calls; importing a task only declares it.


class PooledTask(Task):
    """Base of a task that fits a head on (N, C) features (shape ``pooled``)."""

    shape = "pooled"

    def fit(
        self,
        train_feats: torch.Tensor,
        train_targets: torch.Tensor,
        params: Mapping[str, Any] | None = None,
        seed: int = 0,
        class_names: Sequence[str] | None = None,
        val: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[HeadState, dict[str, float]]:
        """Fit the task's head on train features.

        Args:
            train_feats: (N, C) floating features.
            train_targets: Targets of ``target_kind``.
            params: Task params; resolved again here, so partial params are fine.
            seed: Seeds every random draw (a local generator; global RNG state is untouched).
            class_names: The manifest's class names; they fix the class count, so a class
                missing from the train split still gets an output. ``None``: inferred.
            val: A validation split's ``(features, targets)``, targets indexed as the train
                split's (only a task that :attr:`takes_val_split`).

        Returns:
            ``(head_state, train_metrics)``: CPU tensors for safetensors, and finite floats.

        Raises:
            UsageError: a bad param/seed.
            TaskInputError: features or targets of the wrong shape, dtype or value.
            TrainingDiverged: the head's weights became NaN or infinite.
            UndefinedMetric: a train metric would be NaN.
        """
        from . import _checks

        params = self.resolve_params(params)
        seed = _checks.seed(seed)
        feats = _checks.features(train_feats, "train")
        names = None if class_names is None else _checks.class_names(class_names)
        targets = _checks.targets(
            self.target_kind,
            train_targets,
            len(feats),
            "train",
            None if names is None else len(names),
        )
        if val is None:
            head, train_metrics = self._fit(feats, targets, params, seed, names)
        else:
            if not self.takes_val_split:
                raise TaskInputError(f"task {self.name!r} takes no validation split",
                                     hint="fit it without val")
            val_feats = _checks.features(val[0], "val")
            val_targets = _checks.targets(self.target_kind, val[1], len(val_feats), "val",
                                          None if names is None else len(names))
            if val_feats.shape[1:] != feats.shape[1:]:
                raise TaskInputError(
                    f"the val features are {tuple(val_feats.shape[1:])} wide, the train "
                    f"features {tuple(feats.shape[1:])}",
                    hint="extract both splits with the same backbone settings")
            head, train_metrics = self._fit_val(feats, targets, params, seed, names,
                                                (val_feats, val_targets))
        return _checks.head_out(head), _checks.metrics_out(self, train_metrics, self.train_metrics)

    def evaluate(
        self,
        head_state: Mapping[str, torch.Tensor],
        eval_feats: torch.Tensor,
        eval_targets: torch.Tensor,
        params: Mapping[str, Any] | None = None,
    ) -> dict[str, float]:
        """Score a fitted head on eval features.

        Returns:
            Every declared metric, as a finite float, in declaration order.

        Raises:
            UsageError: a bad param.
            TaskInputError: inputs, or a head, that do not fit (shape, dtype, class count).
            UndefinedMetric: a metric would be NaN (the message names why).
        """
        from . import _checks

        params = self.resolve_params(params)
        feats = _checks.features(eval_feats, "eval")
        targets = _checks.targets(self.target_kind, eval_targets, len(feats), "eval", None)
        head = _checks.head_in(head_state)
        return _checks.metrics_out(self, self._evaluate(head, feats, targets, params),
                                   self.metrics_for(params))

    def per_sample(
        self,
        head_state: Mapping[str, torch.Tensor],
        eval_feats: torch.Tensor,
        eval_targets: torch.Tensor,
        params: Mapping[str, Any] | None = None,
    ) -> dict[str, torch.Tensor] | None:
        """Each metric's value per eval row, for a task whose metrics are means of them.

        ``evaluate`` equals the mean of these values; the engine's bootstrap over eval samples
        (:mod:`.bootstrap`) then costs one weighted mean per draw instead of an evaluation.

        Returns:
            ``{metric: (N,) float64}`` for every declared metric, or None when the task has no
            per-sample form (the bootstrap then calls ``evaluate`` on each draw).

        Raises:
            TaskInputError: inputs, or a head, that do not fit; or a hook that returned other
                metrics or shapes.
        """
        from . import _checks

        params = self.resolve_params(params)
        feats = _checks.features(eval_feats, "eval")
        targets = _checks.targets(self.target_kind, eval_targets, len(feats), "eval", None)
        values = self._per_sample(_checks.head_in(head_state), feats, targets, params)
        if values is None:
            return None
        names = [m.name for m in self.metrics_for(params) if m.name in values or not m.min_classes]
        if sorted(values) != sorted(names):
            raise TaskInputError(f"task {self.display_name!r} gave per-sample values for "
                                 f"{sorted(values)}, not its metrics {sorted(names)}")
        for name, v in values.items():
            if tuple(v.shape) != (len(feats),):
                raise TaskInputError(f"task {self.display_name!r}: per-sample {name!r} has shape "
                                     f"{tuple(v.shape)}, not ({len(feats)},)")
        return {name: values[name].detach().to("cpu").double() for name in names}

    @unimplemented
    def _fit(
        self,
        feats: torch.Tensor,
        targets: Any,
        params: dict[str, Any],
        seed: int,
        class_names: list[str] | None,
    ) -> tuple[HeadState, dict[str, float]]:
        raise NotImplementedError(f"task {self.name!r} does not train a head")

    def _fit_val(
        self,
        feats: torch.Tensor,
        targets: Any,
        params: dict[str, Any],
        seed: int,
        class_names: list[str] | None,
        val: tuple[torch.Tensor, Any],
    ) -> tuple[HeadState, dict[str, float]]:
        """``_fit`` with a validation split's checked ``(features, targets)``: the hook of a task
        that :attr:`takes_val_split`."""
        raise TaskInputError(f"task {self.name!r} takes no validation split")

    @unimplemented
    def _evaluate(
        self, head: HeadState, feats: torch.Tensor, targets: Any, params: dict[str, Any]
    ) -> dict[str, float]:
        raise NotImplementedError(f"task {self.name!r} does not evaluate a head")

    def _per_sample(
        self, head: HeadState, feats: torch.Tensor, targets: Any, params: dict[str, Any]
    ) -> dict[str, torch.Tensor] | None:
        return None  # no per-sample form: the bootstrap re-evaluates each draw


class EmbeddingTask(PooledTask):
    """Base of a task that fits a head on a CLIP model's image embeddings (shape
    ``embedding``)."""

    shape = "embedding"


class PairsTask(PooledTask):
    """Base of a task that fits a head on grid-pooled dense maps, its targets' rows indexing
    the features (shape ``pairs``)."""

    shape = "pairs"
