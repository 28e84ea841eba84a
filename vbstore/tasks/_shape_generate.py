"""The base of the ``generate`` shape: the model writes a caption per image (CoCa's
``generate``), and the task scores them against the references.

The engine calls ``task.decoding(params, seed)`` (the generated captions' key) and
``task.evaluate_captions(generated, references, params)``; a task implements
``_evaluate_captions`` (and ``decoding`` where its parameters decode).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._base import Task, unimplemented
from ._errors import TaskInputError

# Local imports: _checks (torch) loads inside the call; importing a task only declares it.


class GenerateTask(Task):
    """Base of a task that scores the captions the model generates (shape ``generate``)."""

    shape = "generate"

    def evaluate_captions(self, generated: Sequence[str], references: Sequence[Sequence[str]],
                          params: Mapping[str, Any] | None = None) -> dict[str, float]:
        """Score the caption the model generated for each image against its references.

        Returns:
            The metrics :meth:`metrics_for` names, as finite floats, in declared order.

        Raises:
            UsageError: a bad param.
            TaskInputError: not one caption and at least one reference per image.
            UndefinedMetric: a metric would be NaN (the message names why).
        """
        from . import _checks

        params = self.resolve_params(params)
        if len(generated) != len(references) or not generated:
            raise TaskInputError(f"{len(generated)} generated captions for {len(references)} "
                                 "images: one each, at least one image")
        empty = next((i for i, refs in enumerate(references) if not list(refs)), None)
        if empty is not None:
            raise TaskInputError(f"image {empty} has no reference caption",
                                 hint="give every image at least one caption")
        metrics = self._evaluate_captions([str(g) for g in generated],
                                          [[str(r) for r in refs] for refs in references], params)
        return _checks.metrics_out(self, metrics, self.metrics_for(params))

    def decoding(self, params: Mapping[str, Any], seed: int = 0) -> dict[str, Any]:
        """The keyword arguments passed to the model's ``generate`` (the generated captions'
        key), and ``seed`` when the decoding samples; none by default."""
        return {}

    @unimplemented
    def _evaluate_captions(self, generated: list[str], references: list[list[str]],
                           params: dict[str, Any]) -> dict[str, float]:
        raise NotImplementedError(f"task {self.name!r} scores no generated captions")
