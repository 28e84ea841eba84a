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

Its hooks compute with torch tensors, unless it declares ``array = "numpy"`` (the linear probes):
then the engine hands it the stored rows as numpy arrays, read without torch, and its hooks get
numpy features, targets and heads (:attr:`PooledTask.array`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._base import HeadState, Task, unimplemented
from ._declare import metrics_out
from ._errors import TaskInputError

if TYPE_CHECKING:
    import torch

# Local imports: _checks (torch) or _rows and _arrays (numpy) load inside the calls; importing a
# task only declares it.


def on_accelerator(x: Any) -> bool:
    """Whether ``x`` is a tensor on a device other than the CPU (``cuda``, ``mps``)."""
    return getattr(getattr(x, "device", None), "type", "cpu") != "cpu"


def _is_torch(x: Any) -> bool:
    return type(x).__module__.partition(".")[0] == "torch"


def _torch_state(state: dict[str, Any]) -> dict[str, Any]:
    """numpy arrays as CPU torch tensors, for a caller that gave torch tensors."""
    import torch  # the caller gave torch tensors: torch is loaded already

    return {k: torch.from_numpy(v) for k, v in state.items()}


class PooledTask(Task):
    """Base of a task that fits a head on (N, C) features (shape ``pooled``).

    Attributes:
        array: What the hooks compute with: ``"torch"`` tensors (the default), or ``"numpy"``
            arrays, for a task whose head trains and scores in numpy (the linear probes): the
            engine then reads the stored rows without torch, targets are checked by their
            kind's numpy check (``TargetKind.check_array``), and a head arrives as numpy arrays
            whatever wrote it. Features given as torch tensors on an accelerator stay there
            (the hooks get them as they are, to train on that device); on the CPU they become
            numpy. The head state and per-sample values come back as numpy arrays, or as CPU
            torch tensors to a caller who gave torch features.
    """

    shape = "pooled"

    def _features(self, x: Any, split: str) -> Any:
        if self.array == "numpy" and not on_accelerator(x):
            from . import _rows  # numpy: a new head on stored rows loads no torch

            return _rows.features(x, split)
        from . import _checks  # torch

        return _checks.features(x, split)

    def _targets(self, y: Any, n: int, split: str, n_classes: int | None) -> Any:
        if self.array == "numpy":
            from . import _rows  # numpy

            return _rows.targets(self.target_kind, y, n, split, n_classes)
        from . import _checks  # torch

        return _checks.targets(self.target_kind, y, n, split, n_classes)

    def _head_in(self, head: Any) -> HeadState:
        if self.array == "numpy":
            from . import _arrays  # numpy

            return _arrays.head_in(head)
        from . import _checks  # torch

        return _checks.head_in(head)

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
            ``(head_state, train_metrics)``: CPU tensors for safetensors (numpy arrays from a
            task that computes in numpy, given numpy features), and finite floats.

        Raises:
            UsageError: a bad param/seed.
            TaskInputError: features or targets of the wrong shape, dtype or value.
            TrainingDiverged: the head's weights became NaN or infinite.
            UndefinedMetric: a train metric would be NaN.
        """
        from . import _arrays  # the plain checks (numpy only: no torch)

        params = self.resolve_params(params)
        seed = _arrays.seed(seed)
        feats = self._features(train_feats, "train")
        names = None if class_names is None else _arrays.class_names(class_names)
        targets = self._targets(train_targets, len(feats), "train",
                                None if names is None else len(names))
        if val is None:
            head, train_metrics = self._fit(feats, targets, params, seed, names)
        else:
            if not self.takes_val_split:
                raise TaskInputError(f"task {self.name!r} takes no validation split",
                                     hint="fit it without val")
            val_feats = self._features(val[0], "val")
            val_targets = self._targets(val[1], len(val_feats), "val",
                                        None if names is None else len(names))
            if val_feats.shape[1:] != feats.shape[1:]:
                raise TaskInputError(
                    f"the val features are {tuple(val_feats.shape[1:])} wide, the train "
                    f"features {tuple(feats.shape[1:])}",
                    hint="extract both splits with the same backbone settings")
            head, train_metrics = self._fit_val(feats, targets, params, seed, names,
                                                (val_feats, val_targets))
        return (self._head_out(head, train_feats),
                metrics_out(self, train_metrics, self.train_metrics))

    def _head_out(self, head: Any, given: Any) -> HeadState:
        """The fitted head as it is stored: contiguous CPU arrays by name (numpy arrays for a
        numpy task, as CPU torch tensors when the caller gave torch features)."""
        if self.array == "numpy":
            from . import _arrays  # numpy

            state = _arrays.head_out(head)
            return _torch_state(state) if _is_torch(given) else state
        from . import _checks  # torch

        return _checks.head_out(head)

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
        params = self.resolve_params(params)
        feats = self._features(eval_feats, "eval")
        targets = self._targets(eval_targets, len(feats), "eval", None)
        head = self._head_in(head_state)
        return metrics_out(self, self._evaluate(head, feats, targets, params),
                           self.metrics_for(params))

    def per_sample(
        self,
        head_state: Mapping[str, torch.Tensor],
        eval_feats: torch.Tensor,
        eval_targets: torch.Tensor,
        params: Mapping[str, Any] | None = None,
    ) -> dict[str, Any] | None:
        """Each metric's value per eval row, for a task whose metrics are means of them.

        ``evaluate`` equals the mean of these values; the engine's bootstrap over eval samples
        (:mod:`.bootstrap`) then costs one weighted mean per draw instead of an evaluation.

        Returns:
            ``{metric: (N,) float64}`` for every declared metric (CPU torch tensors; numpy
            arrays from a numpy task, unless the caller gave torch features), or None when the
            task has no per-sample form (the bootstrap then calls ``evaluate`` on each draw).

        Raises:
            TaskInputError: inputs, or a head, that do not fit; or a hook that returned other
                metrics or shapes.
        """
        params = self.resolve_params(params)
        feats = self._features(eval_feats, "eval")
        targets = self._targets(eval_targets, len(feats), "eval", None)
        values = self._per_sample(self._head_in(head_state), feats, targets, params)
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
        if self.array == "numpy":
            import numpy as np  # what a numpy task computes with

            out = {name: np.asarray(values[name], dtype=np.float64) for name in names}
            return _torch_state(out) if _is_torch(eval_feats) else out
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
    ) -> dict[str, Any] | None:
        return None  # no per-sample form: the bootstrap re-evaluates each draw


class EmbeddingTask(PooledTask):
    """Base of a task that fits a head on a CLIP model's image embeddings (shape
    ``embedding``)."""

    shape = "embedding"


class PairsTask(PooledTask):
    """Base of a task that fits a head on grid-pooled dense maps, its targets' rows indexing
    the features (shape ``pairs``)."""

    shape = "pairs"
