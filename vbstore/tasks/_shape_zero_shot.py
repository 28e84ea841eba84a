"""The base of the shapes scored on pooled (N, C) vectors with no training: ``zero_shot``
(the features alone) and ``text`` (against a CLIP text tower).

The engine calls ``task.evaluate_zero_shot(eval_feats, eval_targets, params, context)``; a task
implements ``_evaluate_zero_shot``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypedDict

from ..errors import UsageError
from ._base import Task, unimplemented
from ._declare import metrics_out

if TYPE_CHECKING:
    import torch

# Local imports: _checks (torch) or _rows (numpy) loads inside the calls; importing a task only
# declares it.


class ZeroShotContext(TypedDict, total=False):
    """What a zero-shot task may need beside the image features.

    Attributes:
        text_encoder: A CLIP text tower: list of N strings -> tensor (N, D) in the image
            embedding space. Called with at most 1024 strings at a time.
        class_names: Class names, indexed by the class-index targets.
        captions: For image-caption data: captions[i] are the captions of image row i.
        files: The entries of each file parameter (:class:`FileParam`), by parameter name.
        dataset_templates: The prompt templates the data names itself (a ``cb:`` source's),
            used by ``templates="dataset"``.
        dataset_prompts: Class-specific prompts the data names instead (CLIP_benchmark's CuPL
            file), one list per class, used by ``templates="dataset"``.
    """

    text_encoder: Callable[[list[str]], torch.Tensor]
    class_names: Sequence[str]
    captions: Sequence[Sequence[str]]
    files: Mapping[str, Sequence[str]]
    dataset_templates: Sequence[str] | None
    dataset_prompts: Sequence[Sequence[str]] | None


class ZeroShotTask(Task):
    """Base of a task that scores pooled features with no training (shape ``zero_shot``).

    Attributes:
        array: What ``_evaluate_zero_shot`` computes with: ``"torch"`` tensors, or ``"numpy"``
            arrays, for a task that scores the stored rows alone (no text tower, no bootstrap
            draws: those come from torch's generator) and then loads no torch
            (``tasks._rows``: its checks and library-independent similarities). Its class-index
            targets are checked in numpy; torch tensors from a Python caller are converted.
    """

    shape = "zero_shot"
    array: ClassVar[Literal["torch", "numpy"]] = "torch"

    def evaluate_zero_shot(
        self,
        eval_feats: torch.Tensor,
        eval_targets: torch.Tensor | None,
        params: Mapping[str, Any] | None = None,
        context: ZeroShotContext | Mapping[str, Any] | None = None,
    ) -> dict[str, float]:
        """Score eval features with no training data.

        Raises:
            UsageError: the task needs a text encoder the context lacks, or a bad param.
            TaskInputError: inputs or context that do not fit.
            UndefinedMetric: a metric would be NaN (the message names why).
        """
        context = dict(context or {})
        if self.needs_text and not callable(context.get("text_encoder")):
            raise UsageError(
                f"task {self.name!r} needs a text encoder",
                hint="use a CLIP backbone (one with a text tower), e.g. an open_clip model",
            )
        params = self.resolve_params(params)
        feats: Any
        if self.array == "numpy":
            from . import _rows  # numpy: a task that scores stored rows loads no torch

            feats = _rows.features(eval_feats, "eval")
            targets = _rows.targets(self.target_kind, eval_targets, len(feats), "eval")
        else:
            from . import _checks  # torch

            feats = _checks.features(eval_feats, "eval")
            targets = _checks.targets(self.target_kind, eval_targets, len(feats), "eval", None)
        metrics = self._evaluate_zero_shot(feats, targets, params, context)
        return metrics_out(self, metrics, self.metrics_for(params))

    @unimplemented
    def _evaluate_zero_shot(
        self, feats: Any, targets: Any, params: dict[str, Any], context: dict[str, Any]
    ) -> dict[str, float]:
        """The metrics of checked (N, C) float32 features: a ``torch.Tensor``, or a numpy array
        where the task declares ``array = "numpy"``."""
        raise NotImplementedError(f"task {self.name!r} is not zero-shot")


class TextTask(ZeroShotTask):
    """Base of a task scored against a CLIP text tower (shape ``text``): the context carries
    ``text_encoder``."""

    shape = "text"
