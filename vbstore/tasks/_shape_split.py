"""The base of the shapes that read dense (N, C, H, W) maps streamed in a :class:`DenseSplit`:
``dense`` and ``boxes`` (a head trained on the split) and ``dense_zero_shot`` (no training).

The engine calls ``task.fit_split(train, params, seed, class_names)`` then
``task.evaluate_split(head_state, split, params)`` (``None`` for the head of a zero-shot dense
task); a task implements ``_fit_split`` (a trained one) and ``_evaluate_split``. The trained
dense probes share one recipe on top of this base, :class:`vbstore.tasks.DenseTask`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ._base import HeadState, Task, unimplemented
from ._errors import TaskInputError
from ._split import DenseSplit

if TYPE_CHECKING:
    import torch

# Local imports: _checks (torch) loads inside the calls; importing a task only declares it.


class SplitTask(Task):
    """Base of a task that trains a head on a dense split (shape ``dense``)."""

    shape = "dense"

    def fit_split(
        self,
        train: DenseSplit,
        params: Mapping[str, Any] | None = None,
        seed: int = 0,
        class_names: Sequence[str] | None = None,
    ) -> tuple[HeadState, dict[str, float]]:
        """Fit a dense task's head on a split streamed in batches.

        Returns:
            ``(head_state, train_metrics)``: CPU tensors for safetensors, and finite floats.

        Raises:
            UsageError: the task is zero-shot, or a bad param/seed.
            TaskInputError: a split whose targets are not the task's ``target_kind``.
            TrainingDiverged: the head's weights became NaN or infinite.
        """
        from . import _checks

        self._check_split(train, "train", trained=True)
        params = self.resolve_params(params)
        seed = _checks.seed(seed)
        names = None if class_names is None else _checks.class_names(class_names)
        head, train_metrics = self._fit_split(train, params, seed, names)
        return _checks.head_out(head), _checks.metrics_out(self, train_metrics, self.train_metrics)

    def evaluate_split(
        self,
        head_state: Mapping[str, torch.Tensor] | None,
        split: DenseSplit,
        params: Mapping[str, Any] | None = None,
    ) -> dict[str, float]:
        """Score a dense split: with a fitted head, or ``None`` for a zero-shot dense task.

        Raises:
            UsageError: a bad param.
            TaskInputError: a split or head that does not fit.
            UndefinedMetric: a metric would be NaN (the message names why).
        """
        from . import _checks

        self._check_split(split, "eval", trained=self.trains_head)
        params = self.resolve_params(params)
        head = _checks.head_in(head_state) if self.trains_head else None
        return _checks.metrics_out(self, self._evaluate_split(head, split, params),
                                   self.metrics_for(params))

    def _check_split(self, split: Any, role: str, *, trained: bool) -> None:
        if trained != self.trains_head:
            raise UsageError(f"task {self.display_name!r} is zero-shot and takes no training data",
                             hint="call evaluate_split(None, split)")
        if not isinstance(split, DenseSplit):
            raise TaskInputError(f"{role} data must be a DenseSplit, got {type(split).__name__}")
        if split.target_kind != self.target_kind:
            raise TaskInputError(f"{role} targets are {split.target_kind}, task "
                                 f"{self.display_name!r} needs {self.target_kind}")
        if len(split) == 0:
            raise TaskInputError(f"{role} split is empty")

    @unimplemented
    def _fit_split(
        self, train: DenseSplit, params: dict[str, Any], seed: int, class_names: list[str] | None
    ) -> tuple[HeadState, dict[str, float]]:
        raise NotImplementedError(f"task {self.name!r} does not train on a dense split")

    @unimplemented
    def _evaluate_split(
        self, head: HeadState | None, split: DenseSplit, params: dict[str, Any]
    ) -> dict[str, float]:
        raise NotImplementedError(f"task {self.name!r} does not score a dense split")


class BoxesTask(SplitTask):
    """Base of a task that trains a head on dense maps to predict boxes (shape ``boxes``)."""

    shape = "boxes"


class DenseZeroShotTask(SplitTask):
    """Base of a task that scores a dense split with no training (shape ``dense_zero_shot``):
    ``evaluate_split(None, split)``."""

    shape = "dense_zero_shot"
